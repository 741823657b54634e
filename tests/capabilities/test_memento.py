"""MementoCompaction end to end: a real Agent (FunctionModel), real tools, a real SQLite store."""

from __future__ import annotations

import logging
import re
import sqlite3
import warnings
from collections import Counter
from collections.abc import AsyncIterable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from mementograph import MementoCompaction, MementoWarning, create_agent, open_store
from mementograph._messages import deserialize_messages, message_text, serialize_messages
from mementograph._tokens import TokenCounter
from mementograph.capabilities._compactor import COMPRESS_ATTEMPTS
from mementograph.capabilities._layout import layout, stub_info
from mementograph.capabilities._toolset import paginate
from mementograph.knowledge_graph.memory import BlockInput, render_block
from mementograph.knowledge_graph.recall import EMPTY_QUERY
from mementograph.knowledge_graph.store import GraphStore, recover_chain, verify_store
from tests.scripted import ScriptedModel, is_original, scripted_agent, stub_texts

TOOLS = ['compact_context', 'read_file', 'recall', 'recover_block', 'retrieve_page', 'run_tests']


@pytest.fixture
def store(tmp_path: Path) -> GraphStore:
    return open_store(f'sqlite://{tmp_path / "m.db"}')


def _log_messages(store: GraphStore, session: str) -> list[object]:
    out: list[object] = []
    for event in store.read_events(session):
        if event.kind == 'message':
            out.extend(deserialize_messages(event.payload))
    return out


async def test_evicts_past_high_water_and_everything_stays_recoverable(store: GraphStore) -> None:
    model = ScriptedModel(steps=12)
    capability = MementoCompaction(store, max_tokens=3_000, session_id='s1')
    result = await scripted_agent(model, [capability]).run('Fix every module under src/app.')
    history = result.all_messages()
    counter = TokenCounter()

    stubs = stub_texts(history)
    assert stubs, 'nothing was evicted'
    pointers = [t for t in stubs if 'recover_block("blk_' in t or 'recover_block("mem_' in t]
    assert pointers and all(t in pointers or re.fullmatch(r'\[messages \d+-\d+ archived\]', t) for t in stubs)
    # every request after the first eviction stayed near the budget
    sizes = [counter.count_messages(seen) for seen in model.seen]
    assert max(sizes[5:]) <= 3_000 * 1.25
    # the tool list never changed
    assert all(names == TOOLS for names in model.tool_names)

    # lossless: the log holds every original message in order; live originals equal their log entries,
    # and every evicted block recovers exactly the logged messages it replaced
    log = _log_messages(store, 's1')
    blocks = store.list_blocks(session_id='s1')
    assert blocks
    for block in blocks:
        recovered = store.recover_block(block.id, session_id='s1')
        assert list(recovered.messages) == log[block.first_message : block.last_message + 1]
    # blocks archived at the run's end (`archive_at_run_end`) stay in the context too
    at_end = {block_id for e in store.read_events('s1') if e.kind == 'archive' for block_id in e.block_ids}
    covered = {i for b in blocks if b.id not in at_end for i in range(b.first_message, b.last_message + 1)}
    live_originals = [m for m in history if is_original(m)]
    assert len(covered) + len(live_originals) == len(log)
    for message in live_originals:
        assert serialize_messages([message]) in {serialize_messages([m]) for m in log}  # type: ignore[list-item]
    # mementos are linked and judged
    for block in blocks:
        memento = store.memento_of(block.id, session_id='s1')
        assert memento is not None and memento.text and memento.compressor
    # the run worked on a copy; the capability as configured shows that run's compaction passes
    evicted = [r for r in capability.reports if r.block_ids]
    auto_events = [e for e in store.read_events('s1') if e.kind == 'auto' and e.block_ids[0].startswith('blk_')]
    assert [r.block_ids for r in evicted] == [e.block_ids for e in auto_events]


async def test_model_can_recover_an_evicted_block(store: GraphStore) -> None:
    model = ScriptedModel(steps=10)
    capability = MementoCompaction(store, max_tokens=2_500, session_id='s2')
    agent = scripted_agent(model, [capability])
    first = await agent.run('Fix every module.')
    block = store.list_blocks(session_id='s2')[0]
    model.extra_calls = [ToolCallPart('recover_block', {'block_id': block.id}, tool_call_id='rec_1')]
    model.steps, model.made = 0, 0  # the continued run goes straight to the recovery call

    second = await agent.run('Show me the first thing you archived.', message_history=first.all_messages())

    returns = [p for m in second.new_messages() for p in getattr(m, 'parts', []) if isinstance(p, ToolReturnPart)]
    recovered = next(p for p in returns if p.tool_name == 'recover_block')
    assert 'sha256 verified' in str(recovered.content)
    original_text = render_block(store.recover_block(block.id, session_id='s2').messages)
    assert original_text.splitlines()[1] in str(recovered.content)


async def test_a_memento_in_context_is_recoverable_under_another_session_id(store: GraphStore) -> None:
    model = ScriptedModel(steps=10)
    first = await scripted_agent(model, [MementoCompaction(store, max_tokens=2_500, session_id='first')]).run(
        'Fix every module.'
    )
    in_context = re.findall(r'recover_block\("(\w+)"\)', '\n'.join(stub_texts(first.all_messages())))
    assert in_context, 'the first run should leave mementos in its history'
    named = in_context[0]
    unseen = await scripted_agent(ScriptedModel(steps=10), [MementoCompaction(store, max_tokens=2_500, session_id='other')]).run('Fix every module.')  # fmt: skip
    foreign = store.list_blocks(session_id='other')[0].id
    model.extra_calls = [
        ToolCallPart('recover_block', {'block_id': f' recover_block("{named}") '}, tool_call_id='named'),
        ToolCallPart('recover_block', {'block_id': foreign}, tool_call_id='foreign'),
        ToolCallPart('recover_block', {'block_id': 'blk_' + 'f' * 100_000}, tool_call_id='long'),
    ]
    model.steps, model.made = 0, 0
    # the history continued under a new session id (a new conversation id, or a history kept without ids)
    await scripted_agent(model, [MementoCompaction(store, max_tokens=2_500, session_id='second')]).run(
        'Show me what that memento holds.', message_history=first.all_messages()
    )

    answers = {  # from the session's log: the answers, long ones evicted since, as they arrived
        p.tool_call_id: str(p.content)
        for m in _log_messages(store, 'second')
        for p in getattr(m, 'parts', [])
        if isinstance(p, ToolReturnPart) and p.tool_name == 'recover_block'
    }
    under = [block.record.id for block in recover_chain(store, named)]
    assert f'[block {under[0]}: messages ' in answers['named']
    assert answers['foreign'].startswith('No archived block') and unseen.output  # not in this context: not the agent's
    assert answers['long'].startswith("No archived block 'blk_fff") and len(answers['long']) < 200


async def test_recovering_a_memento_over_an_altered_block_shows_the_others(tmp_path: Path) -> None:
    path = tmp_path / 'm.db'
    store = open_store(f'sqlite://{path}')
    model = ScriptedModel(steps=20)
    agent = scripted_agent(model, [MementoCompaction(store, max_tokens=2_000, session_id='s')])
    first = await agent.run('Fix every module.')
    merged = max(store.list_mementos(session_id='s'), key=lambda memento: memento.level)
    under = [block.record.id for block in recover_chain(store, merged.id)]
    assert merged.level >= 2 and len(under) >= 3
    altered = under[1]
    with sqlite3.connect(path) as conn:  # a disk that changed the block's bytes behind the store's back
        conn.execute("UPDATE blocks SET messages_json = replace(messages_json, 'a', 'e') WHERE id = ?", (altered,))
    model.extra_calls = [ToolCallPart('recover_block', {'block_id': merged.id}, tool_call_id='rec_1')]
    model.steps, model.made = 0, 0

    second = await agent.run('Show me what that memento holds.', message_history=first.all_messages())

    returns = [p for m in second.new_messages() for p in getattr(m, 'parts', []) if isinstance(p, ToolReturnPart)]
    content = str(next(p for p in returns if p.tool_name == 'recover_block').content)
    assert content.startswith(f'[1 block under {merged.id} failed the integrity check and is not shown: {altered}]')
    assert f'[block {under[0]}: messages ' in content and f'[block {altered}: messages' not in content


async def test_continued_conversation_does_not_rearchive(store: GraphStore) -> None:
    model = ScriptedModel(steps=8)
    capability = MementoCompaction(store, max_tokens=2_500)
    agent = scripted_agent(model, [capability])
    first = await agent.run('Fix every module.')
    session = first.all_messages()[-1].conversation_id if hasattr(first.all_messages()[-1], 'conversation_id') else None
    sessions = store.list_sessions()
    assert len(sessions) == 1 and (session is None or sessions[0].id == session)
    blocks_before = len(store.list_blocks())
    log_before = len(_log_messages(store, sessions[0].id))

    model.steps, model.made = 0, 0
    second = await agent.run('Anything else?', message_history=first.all_messages())

    assert [s.id for s in store.list_sessions()] == [sessions[0].id]
    log = _log_messages(store, sessions[0].id)
    assert len(log) == log_before + len(second.new_messages())
    assert len(store.list_blocks()) >= blocks_before
    indices = [e.message_index for e in store.read_events(sessions[0].id) if e.kind == 'message']
    assert indices == list(range(len(indices)))  # no duplicates, no gaps


async def test_new_conversations_under_one_session_id_are_logged_one_after_another(store: GraphStore) -> None:
    capability = MementoCompaction(store, max_tokens=2_500, session_id='shared')
    first = await scripted_agent(ScriptedModel(steps=6), [capability]).run('First task.')
    second = await scripted_agent(ScriptedModel(steps=6), [capability]).run('Second task.')  # a new conversation
    # and the first conversation continued after the second one began: a branch, logged after the log's end
    third = await scripted_agent(ScriptedModel(steps=2), [capability]).run(
        'Back to the first.', message_history=first.all_messages()
    )

    log = _log_messages(store, 'shared')
    indices = [e.message_index for e in store.read_events('shared') if e.kind == 'message']
    assert indices == list(range(len(indices)))  # one log, no position used twice, no gap
    # positions: the first conversation from 0, the second after it, the branch after both (stubs carry theirs)
    first_end, second_end = layout(first.all_messages())[1], layout(second.all_messages())[1]
    assert log[0] == first.all_messages()[0] and log[first_end] == second.all_messages()[0]
    assert log[second_end] == third.all_messages()[0]  # the first task again, now opening the branch
    assert len(log) == layout(third.all_messages(), position=second_end)[1]
    assert 'Second task.' in message_text(log[first_end])
    assert any('Back to the first.' in message_text(m) for m in log[second_end:])
    blocks = store.list_blocks(session_id='shared')
    assert len({b.seq for b in blocks}) == len(blocks) >= 3
    report = verify_store(store, session_id='shared')
    assert report.ok, report.problems
    for block in blocks:  # every block is the logged messages at its positions
        assert list(store.recover_block(block.id).messages) == log[block.first_message : block.last_message + 1]


async def test_store_failure_means_no_eviction_and_a_warning(tmp_path: Path) -> None:
    store = open_store(f'sqlite://{tmp_path / "m.db"}')
    store.close()  # a real store whose every operation now fails
    model = ScriptedModel(steps=6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = await scripted_agent(model, [MementoCompaction(store, max_tokens=1_500)]).run('Go.')
    assert any(issubclass(w.category, MementoWarning) for w in caught)
    assert stub_texts(result.all_messages()) == []
    assert result.output.startswith('All 6 modules pass')
    # the model saw the full, growing context
    assert len(model.seen[-1]) == len(result.all_messages()) - 1


async def test_a_store_file_deleted_while_open_is_not_written_to(tmp_path: Path) -> None:
    """SQLite keeps writing to an unlinked file through its open connection: evictions would vanish with it."""
    path = tmp_path / 'm.db'
    store = open_store(f'sqlite://{path}')
    for suffix in ('', '-wal', '-shm'):  # a user resetting memory by hand
        Path(f'{path}{suffix}').unlink(missing_ok=True)
    model = ScriptedModel(steps=6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = await scripted_agent(model, [MementoCompaction(store, max_tokens=1_500)]).run('Go.')
    assert any('was deleted or replaced' in str(w.message) for w in caught if issubclass(w.category, MementoWarning))
    assert stub_texts(result.all_messages()) == []  # nothing evicted: the model saw every message
    assert len(model.seen[-1]) == len(result.all_messages()) - 1
    store.close()
    reopened = open_store(f'sqlite://{path}')  # the file now at that path takes the next run's evictions
    again = ScriptedModel(steps=6)
    await scripted_agent(again, [MementoCompaction(reopened, max_tokens=1_500)]).run('Go.')
    assert reopened.stats().blocks > 0


async def test_a_capability_given_a_uri_opens_a_replaced_file_again_at_the_next_run(tmp_path: Path) -> None:
    """The warning says to open the store again; a capability that opened the URI itself now does, at the next run
    (every later run of the agent archived nothing before)."""
    path = tmp_path / 'm.db'
    capability = MementoCompaction(f'sqlite://{path}', max_tokens=1_500)
    await scripted_agent(ScriptedModel(steps=6), [capability]).run('Go.')
    assert capability.graph_store.stats().blocks > 0
    for suffix in ('', '-wal', '-shm'):  # a user resetting memory by hand between runs
        Path(f'{path}{suffix}').unlink(missing_ok=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = await scripted_agent(ScriptedModel(steps=6), [capability]).run('Go.')
    assert not [w for w in caught if issubclass(w.category, MementoWarning)]
    assert stub_texts(result.all_messages())  # compacted into the new file
    with open_store(f'sqlite://{path}') as reopened:
        assert reopened.stats().blocks > 0 and reopened.stats().sessions == 1


async def test_memory_tools_answer_instead_of_raising_when_the_store_fails(tmp_path: Path) -> None:
    store = open_store(f'sqlite://{tmp_path / "m.db"}')
    store.close()
    calls = [
        ToolCallPart('recover_block', {'block_id': 'blk_x'}, tool_call_id='t1'),
        ToolCallPart('recall', {'query': 'module_1.py'}, tool_call_id='t2'),
        ToolCallPart('retrieve_page', {'page_id': '1', 'part': 2}, tool_call_id='t3'),
    ]
    model = ScriptedModel(steps=2, extra_calls=calls)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = await scripted_agent(model, [MementoCompaction(store, max_tokens=100_000)]).run('Go.')
    assert result.output.startswith('All 2 modules pass')  # the run went on
    replies = {
        p.tool_name: str(p.content)
        for m in result.all_messages() for p in getattr(m, 'parts', []) if isinstance(p, ToolReturnPart)
    }  # fmt: skip
    for tool in ('recover_block', 'recall', 'retrieve_page'):
        assert replies[tool].startswith(f'{tool} failed: the memory store is unavailable (StoreUnavailableError')
        assert any(f'mementograph: {tool} failed' in str(w.message) for w in caught if w.category is MementoWarning)


async def test_memory_tools_say_what_was_wrong_with_a_call(store: GraphStore) -> None:
    calls = [
        ToolCallPart('recall', {'query': '   '}, tool_call_id='t1'),
        ToolCallPart('retrieve_page', {'page_id': '7'}, tool_call_id='t2'),
    ]
    model = ScriptedModel(steps=2, extra_calls=calls)
    result = await scripted_agent(model, [MementoCompaction(store, max_tokens=100_000)]).run('Go.')
    replies = {
        p.tool_name: str(p.content)
        for m in result.all_messages() for p in getattr(m, 'parts', []) if isinstance(p, ToolReturnPart)
    }  # fmt: skip
    assert replies['recall'] == EMPTY_QUERY  # as the MCP tool answers, not "Nothing archived matches '   '"
    assert replies['retrieve_page'].startswith("No page '7'")


def test_a_page_past_the_last_is_said_not_replaced_by_the_last() -> None:
    text = 'x' * 2_500
    assert paginate(text, 3, what='blk_1', more='recover_block("blk_1", page={page})', chars=1_000).endswith(
        '[blk_1: page 3 of 3]'
    )
    for wrong in (0, 4):
        assert paginate(text, wrong, what='blk_1', more='', chars=1_000) == f'There are 3 pages, not {wrong} of blk_1.'
    assert paginate('short', 2, what='blk_2', more='') == 'There is 1 page, not 2 of blk_2.'


class ExplodingCompressor:
    name = 'exploding'
    target_ratio = 0.2

    async def compress(self, block: BlockInput, *, feedback: str | None = None, previous: str | None = None) -> str:
        raise RuntimeError('compressor down')


async def test_compressor_failure_means_no_eviction_until_the_extractive_one_takes_over(
    store: GraphStore, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel(steps=6)
    capability = MementoCompaction(store, max_tokens=1_500, compressor=ExplodingCompressor(), micro_min_tokens=10**9)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO, logger='mementograph'):
        warnings.simplefilter('always')
        result = await scripted_agent(model, [capability]).run('Go.')
    warned = [str(w.message) for w in caught if w.category is MementoWarning]
    assert sum(m.startswith('mementograph: compaction failed: ') and 'compressor down' in m for m in warned) == 1
    assert sum('the extractive compressor writes the mementos of such blocks' in m for m in warned) == 1
    # each failed compaction evicted nothing: the first block stayed until its third failure
    failed = [r for r in caplog.records if 'compressor down' in r.getMessage()]
    assert len(failed) >= COMPRESS_ATTEMPTS
    first_stub = next(i for i, seen in enumerate(model.seen) if stub_texts(seen))
    assert first_stub >= COMPRESS_ATTEMPTS and not any(stub_texts(seen) for seen in model.seen[:first_stub])
    mementos = store.list_mementos()
    assert mementos and {m.compressor for m in mementos} == {'extractive'} and stub_texts(result.all_messages())
    assert verify_store(store).ok


async def test_a_lasting_failure_is_warned_about_once_a_run(
    store: GraphStore, caplog: pytest.LogCaptureFixture
) -> None:
    capability = MementoCompaction(store, max_tokens=1_500, compressor=ExplodingCompressor(), micro_min_tokens=10**9)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO, logger='mementograph'):
        warnings.simplefilter('always')
        await scripted_agent(ScriptedModel(steps=6), [capability]).run('Go.')
    warned = [str(w.message) for w in caught if w.category is MementoWarning and 'compaction failed' in str(w.message)]
    assert len(warned) == 1 and 'compressor down' in warned[0]
    skips = [record.levelno for record in caplog.records if 'compressor down' in record.getMessage()]
    assert len(skips) >= 2 and skips.count(logging.WARNING) == 1  # every later skip is still logged, at INFO
    with warnings.catch_warnings(record=True) as again:  # a new run warns again
        warnings.simplefilter('always')
        await scripted_agent(ScriptedModel(steps=6), [capability]).run('Go.')
    assert len([w for w in again if w.category is MementoWarning and 'compaction failed' in str(w.message)]) == 1


async def test_a_tiny_block_between_runs_does_not_stop_compaction(store: GraphStore) -> None:
    # Run 1 ends on a short answer; continued, that answer is a complete block of a few tokens, which no memento
    # can undercut. It stays in context and the blocks after it are evicted.
    capability = MementoCompaction(store, max_tokens=2_500, session_id='tiny')
    first = await scripted_agent(ScriptedModel(steps=1), [capability]).run('Go.')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        second = await scripted_agent(ScriptedModel(steps=8), [capability]).run(
            'Next.', message_history=first.all_messages()
        )
    assert [str(w.message) for w in caught if w.category is MementoWarning] == []
    assert store.list_blocks(session_id='tiny')
    assert 'All 1 modules pass' in message_text(second.all_messages()[len(first.all_messages()) - 1])
    counter = TokenCounter()
    assert counter.count_messages(second.all_messages()) <= 2_500 * 1.1


class FailsOnModule:
    """A compressor that fails on blocks naming one module (a model erroring on one request) and works otherwise."""

    name = 'fails-on-module'
    target_ratio = 0.2

    def __init__(self, module: str) -> None:
        self.module = module

    async def compress(self, block: BlockInput, *, feedback: str | None = None, previous: str | None = None) -> str:
        if self.module in block.text:
            raise RuntimeError(f'cannot compress {self.module}')
        return 'RESULT: ' + block.text[: len(block.text) // 8]


async def test_a_block_the_compressor_fails_on_stops_the_eviction_there(store: GraphStore) -> None:
    capability = MementoCompaction(
        store,
        max_tokens=6_000,
        session_id='partial',
        compressor=FailsOnModule('src/app/module_1.py'),
        micro_min_tokens=10**9,
        low_water=0.0,  # one compaction takes every complete block: the failing one comes after others
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = await scripted_agent(ScriptedModel(steps=8), [capability]).run('Go.')
    messages = [str(w.message) for w in caught if w.category is MementoWarning]
    stopped = [m for m in messages if re.search(r'compaction stopped at block [2-9] of \d+: ', m)]
    assert stopped and all('cannot compress src/app/module_1.py' in m for m in stopped)
    archived = store.list_blocks(session_id='partial')
    written_by = {
        'src/app/module_1.py' in render_block(store.recover_block(b.id, session_id='partial').messages): str(
            getattr(store.memento_of(b.id, session_id='partial'), 'compressor', '')
        )
        for b in archived
    }
    # the blocks before it were archived by the compressor; the one it fails on stayed in the context (whole)
    # until its third failure, and then the extractive compressor wrote its memento: the archive keeps session
    # order, nothing is skipped
    assert written_by == {False: 'fails-on-module', True: 'extractive'}
    assert verify_store(store, session_id='partial').ok
    assert result.output


class OneLineCompressor:
    """Mementos far smaller than the compressor's planned ratio (0.2): the plan over-estimates what stays."""

    name = 'one-line'
    target_ratio = 0.2

    async def compress(self, block: BlockInput, *, feedback: str | None = None, previous: str | None = None) -> str:
        return 'RESULT: ' + block.text.splitlines()[1][:40]


async def test_eviction_stops_once_the_low_water_mark_is_reached(store: GraphStore) -> None:
    capability = MementoCompaction(
        store, max_tokens=6_000, low_water=0.5, session_id='lw', compressor=OneLineCompressor(), judge=None,
        micro_min_tokens=10**9, page_index=False,
    )  # fmt: skip
    await scripted_agent(ScriptedModel(steps=14), [capability]).run('Go.')
    evictions = [r for r in capability.reports if r.block_ids and r.block_ids[0].startswith('blk_')]
    assert evictions
    counter = TokenCounter()
    for report in evictions:
        if len(report.block_ids) < 2:
            continue
        # without its newest block the pass would not have reached 3,000 tokens: no block was evicted needlessly
        last = report.block_ids[-1]
        live = counter.count_messages(store.recover_block(last, session_id='lw').messages)
        memento = store.memento_of(last, session_id='lw')
        assert memento is not None
        assert report.tokens_after + live - memento.tokens - 100 > 3_000


async def test_manual_compaction_tool_reports_what_it_did(store: GraphStore) -> None:
    model = ScriptedModel(steps=5, extra_calls=[ToolCallPart('compact_context', {}, tool_call_id='cc')])
    capability = MementoCompaction(store, max_tokens=100_000, session_id='m')
    result = await scripted_agent(model, [capability]).run('Go.')
    reply = next(
        p for m in result.all_messages() for p in getattr(m, 'parts', [])
        if isinstance(p, ToolReturnPart) and p.tool_name == 'compact_context'
    )  # fmt: skip
    assert str(reply.content).startswith('Compacted ')
    assert store.stats(session_id='m').blocks >= 1
    assert any(e.kind == 'manual' for e in store.read_events('m'))
    assert stub_texts(result.all_messages())


async def test_old_large_tool_results_are_stubbed_first(store: GraphStore) -> None:
    model = ScriptedModel(steps=8)
    capability = MementoCompaction(store, max_tokens=6_000, low_water=0.9, micro_min_tokens=300, session_id='u')
    result = await scripted_agent(model, [capability]).run('Go.')
    parts = store.list_blocks(session_id='u', kind='part')
    assert parts, 'no tool result was micro-compacted'
    stubbed = [
        p for m in result.all_messages() for p in getattr(m, 'parts', [])
        if isinstance(p, ToolReturnPart) and isinstance(p.metadata, dict) and 'mementograph.micro.v1' in p.metadata
    ]  # fmt: skip
    assert stubbed
    original = store.recover_block(stubbed[0].metadata['mementograph.micro.v1'], session_id='u').messages[0]
    assert 'def handler_' in str(original.parts[0].content) and len(str(original.parts[0].content)) > len(
        str(stubbed[0].content)
    )


def test_create_agent_has_memento_on_by_default(store: GraphStore) -> None:
    def names(agent: Agent[object, object]) -> list[str]:
        found: list[str] = []
        agent.root_capability.apply(lambda c: found.append(type(c).__name__))
        return found

    assert 'MementoCompaction' in names(create_agent('test', store=store))
    assert 'MementoCompaction' not in names(create_agent('test', memento=False))
    typed = create_agent('test', store=store, output_type=int)  # typed Agent[None, int] for a type checker
    assert isinstance(typed.run_sync('A number.').output, int)
    custom = MementoCompaction(store, max_tokens=1234)
    assert 'MementoCompaction' in names(create_agent('test', memento=custom))
    with pytest.raises(ValueError, match=r'pass yours as memento=MementoCompaction\(\.\.\.\), not in capabilities'):
        create_agent('test', store=store, capabilities=[custom])
    assert 'MementoCompaction' in names(create_agent('test', memento=False, capabilities=[custom]))
    with pytest.raises(ValueError, match='memento=False turns off'):
        create_agent('test', memento=False, store=store)  # the store was silently dropped
    with pytest.raises(ValueError):
        MementoCompaction(store, max_tokens=10, max_fraction=0.5)
    # a share outside (0, 1] is refused at once, not by every compaction of the run
    for share in (0.0, 1.5):
        with pytest.raises(ValueError, match=r'^memento_share must be in'):
            MementoCompaction(store, max_tokens=1000, memento_share=share)
        with pytest.raises(ValueError, match=r'^conversation_memento_share must be in'):
            MementoCompaction(store, max_tokens=1000, conversation_memento_share=share)
    # a misspelt store URI too: it would otherwise warn at every request and archive nothing
    with pytest.raises(ValueError, match="unknown store URI 'postgres://db'"):
        MementoCompaction('postgres://db', max_tokens=1000)
    with pytest.raises(ValueError, match='names no file'):
        MementoCompaction('sqlite://', max_tokens=1000)
    with pytest.raises(ValueError, match='unknown store URI option busy_timout'):
        MementoCompaction('sqlite:///tmp/m.db?busy_timout=5', max_tokens=1000)

    class SyncCompressor:
        name = 'sync'
        target_ratio = 0.2

        def compress(self, block: BlockInput, *, feedback: str | None = None, previous: str | None = None) -> str:
            return 'RESULT: x'

    with pytest.raises(TypeError, match=r'compressor must have an `async def compress\(...\)` method \(SyncCompressor'):
        MementoCompaction(store, compressor=SyncCompressor())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ('setting', 'message'),
    [
        ({'encoding': 'o200k'}, "unknown tiktoken encoding 'o200k': use one of .*o200k_base"),
        ({'context_window': -1}, '^context_window must be a positive number of tokens, not -1'),
        ({'fallback_context_window': 0}, '^fallback_context_window must be a positive'),
        ({'max_tokens': '5000'}, "^max_tokens must be a positive number of tokens, not '5000'"),
        ({'keep_recent_messages': -1}, '^keep_recent_messages must be a whole number, 0 or more'),
        ({'min_saving_tokens': -1}, '^min_saving_tokens must be'),
        ({'micro_min_tokens': 2.5}, '^micro_min_tokens must be'),
        ({'hard_limit_fraction': 2}, r'^hard_limit_fraction must be in \(0, 1\]'),
        ({'compress_timeout': 0}, '^compress_timeout must be a positive number of seconds or None, not 0'),
        ({'compress_timeout': '60'}, "^compress_timeout must be a number, not '60'"),
        ({'compress_cooldown': -1}, '^compress_cooldown must be 0 or more seconds, not -1'),
        ({'compress_cooldown': '300'}, "^compress_cooldown must be a number, not '300'"),
        ({'session_id': 123}, '^session_id must be a non-empty str, not 123'),
        ({'session_id': ' '}, '^session_id must be a non-empty str'),
        ({'namespace': ''}, '^namespace must be a non-empty str'),
        ({'store': 123}, '^store must be a GraphStore, a store URI or None, not int'),
        ({'context_window': 1}, r'^a high-water mark of 1 \* 0\.\d+ tokens is under 1 token'),
        ({'context_window': 100_000, 'max_fraction': 1e-9}, r'^a high-water mark of 100000 \* 1e-09 tokens'),
    ],
)
def test_a_setting_that_would_switch_compaction_off_is_refused_when_made(
    setting: dict[str, object], message: str
) -> None:
    """Each of these used to be accepted, then failed every request of every run with a warning only."""
    settings: dict[str, Any] = {'store': 'memory://', **setting}
    with pytest.raises((ValueError, TypeError), match=message):
        MementoCompaction(**settings)


def test_a_misspelt_environment_setting_is_refused_when_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('MEMENTOGRAPH_STORE', 'postgres://db')
    with pytest.raises(ValueError, match=r"unknown store URI 'postgres://db'.*\(from \$MEMENTOGRAPH_STORE\)"):
        create_agent('test')
    assert create_agent('test', store='memory://') is not None  # an explicit store does not read it
    monkeypatch.setenv('MEMENTOGRAPH_STORE', '')  # empty: unset, as for any other variable
    monkeypatch.setenv('MEMENTOGRAPH_ENCODING', 'o200k')
    with pytest.raises(ValueError, match=r"unknown tiktoken encoding 'o200k'.*\(from \$MEMENTOGRAPH_ENCODING\)"):
        MementoCompaction('memory://')
    assert MementoCompaction('memory://', encoding='estimate').encoding == 'estimate'  # the explicit one wins


def test_loads_from_an_agent_spec(tmp_path: Path) -> None:
    uri = f'sqlite://{tmp_path / "spec.db"}'
    agent = Agent.from_spec(
        {
            'model': 'test',
            'capabilities': [{'MementoCompaction': {'store': uri, 'max_tokens': 5000, 'timezone': 'Europe/Paris'}}],
        },
        custom_capability_types=[MementoCompaction],
    )
    found: list[MementoCompaction[object]] = []
    agent.root_capability.apply(lambda c: found.append(c) if isinstance(c, MementoCompaction) else None)
    assert found and found[0].max_tokens == 5000 and found[0].graph_store.uri == uri
    assert found[0].timezone == 'Europe/Paris'


def test_stubs_are_deterministic_and_keep_alternation() -> None:
    from pydantic_ai.messages import ModelRequest, ModelResponse

    from mementograph.capabilities._layout import StubInfo, make_stub

    info = StubInfo(
        target_id='blk_1', memento_id='mem_1', first_message=3, last_message=9, level=1, archived_tokens=900
    )
    for shape, kinds in [
        ('request', [ModelRequest]),
        ('response', [ModelResponse]),
        ('request-response', [ModelRequest, ModelResponse]),
        ('response-request', [ModelResponse, ModelRequest]),
    ]:
        first = make_stub(info, 'text', None, shape)  # type: ignore[arg-type]
        again = make_stub(info, 'text', None, shape)  # type: ignore[arg-type]
        assert [type(m) for m in first] == kinds
        assert [message_text(m) for m in first] == [message_text(m) for m in again]
        assert all(stub_info(m) == info for m in first)
        assert 'recover_block("blk_1")' in ' '.join(message_text(m) for m in first)


def test_a_stub_faces_each_neighbour_with_the_other_kind() -> None:
    """pydantic-ai merges consecutive requests, and a history holds some (a structured-output run's closing request,
    then the next run's prompt): a stub's end beside a request is a response, beside a response a request, so no
    stub is ever merged into an original; at the history's ends a stub mirrors what it replaces."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    from mementograph.capabilities._layout import stub_shape

    q, r = ModelRequest(parts=[UserPromptPart('q')]), ModelResponse(parts=[TextPart('r')])
    history = [q, r, q, q, r, q, q, r]  # two runs' closing requests, each followed by the next run's prompt
    assert stub_shape(history, 3, 6) == 'response'  # from a prompt to a closing request: requests either side
    assert stub_shape(history, 1, 3) == 'response'
    assert stub_shape(history, 4, 7) == 'response-request'
    assert stub_shape(history, 0, 2) == 'request-response'  # the first message: mirrored
    assert stub_shape(history, 6, 8) == 'response'  # the last: mirrored, the request before it faced
    assert stub_shape([r, q, r, q], 1, 3) == 'request-response'  # alternating: the shape of what it replaces


async def test_composes_as_a_harness_tier_and_keeps_pinned_parts(store: GraphStore) -> None:
    from pydantic_ai.messages import ModelRequest
    from pydantic_ai_harness.compaction import ClearToolResults, TieredCompaction, pin

    memento = MementoCompaction(store, max_tokens=1_000_000, session_id='tier', micro_min_tokens=10**9)
    tiered = TieredCompaction(tiers=[ClearToolResults(max_tokens=1, keep_pairs=20), memento], target_tokens=900)
    model = ScriptedModel(steps=8)
    agent = scripted_agent(model, [tiered])
    pinned = ModelRequest(parts=[pin('Always answer in English. PINNED-RULE-42')])
    result = await agent.run('Fix every module.', message_history=[pinned])

    history = result.all_messages()
    assert store.list_blocks(session_id='tier'), 'the memento tier never ran'
    # a tier's tools are not the agent's unless added (`toolsets=[memento.get_toolset()]`, as the README says)
    assert all('recover_block' not in names for names in model.tool_names)
    assert any('PINNED-RULE-42' in message_text(m) for m in history)
    assert all(
        'PINNED-RULE-42' in message_text(seen[0]) or any('PINNED-RULE-42' in message_text(m) for m in seen)
        for seen in model.seen
    )


async def test_a_harness_tier_with_its_tools_added_can_be_recovered_from(store: GraphStore) -> None:
    from pydantic_ai_harness.compaction import TieredCompaction

    memento = MementoCompaction(store, max_tokens=1_000_000, session_id='tier-tools', micro_min_tokens=10**9)
    model = ScriptedModel(steps=8)
    agent = scripted_agent(
        model, [TieredCompaction(tiers=[memento], target_tokens=2_500)], toolsets=[memento.get_toolset()]
    )
    first = await agent.run('Fix every module.')
    block = store.list_blocks(session_id='tier-tools')[0]
    model.extra_calls = [ToolCallPart('recover_block', {'block_id': block.id}, tool_call_id='rec')]
    model.steps, model.made = 0, 0
    second = await agent.run('Show the first archived block.', message_history=first.all_messages())

    assert all(names == TOOLS for names in model.tool_names)
    reply = next(
        p for m in second.new_messages() for p in getattr(m, 'parts', [])
        if isinstance(p, ToolReturnPart) and p.tool_name == 'recover_block'
    )  # fmt: skip
    assert f'[block {block.id}: messages ' in str(reply.content) and 'sha256 verified' in str(reply.content)


async def test_spans_events_and_usage_are_observable(store: GraphStore) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from mementograph import MementoEvictedEvent

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel(steps=8)
    capability = MementoCompaction(store, max_tokens=2_500, session_id='obs')
    instrumentation = Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))
    agent = scripted_agent(model, [instrumentation, capability])
    events: list[MementoEvictedEvent] = []

    async def collect(ctx: object, stream: AsyncIterable[object]) -> None:
        async for event in stream:
            if isinstance(event, MementoEvictedEvent):
                events.append(event)

    await agent.run('Go.', event_stream_handler=collect)  # type: ignore[arg-type]

    spans = [s for s in exporter.get_finished_spans() if s.name == 'memento_compaction']
    assert spans and spans[0].attributes is not None
    assert spans[0].attributes['mementograph.session_id'] == 'obs'
    assert int(spans[0].attributes['mementograph.blocks_evicted']) >= 1  # type: ignore[arg-type]
    assert events and events[0].block_ids and events[0].tokens_after < events[0].tokens_before
    assert all(e.usage_tokens == 0 for e in events)  # extractive compressor + rubric judge spend no LLM tokens


async def test_model_is_told_when_context_stays_near_the_hard_limit(store: GraphStore) -> None:
    # Nothing can be evicted (a broken compressor, then no eviction saves enough), so the context grows past 95% of
    # a tiny window.
    model = ScriptedModel(steps=4)
    capability = MementoCompaction(
        store,
        max_tokens=500,
        context_window=900,
        compressor=ExplodingCompressor(),
        micro_min_tokens=10**9,
        min_saving_tokens=10**9,
    )
    with pytest.warns(MementoWarning):
        result = await scripted_agent(model, [capability]).run('Go.')
    notices = [m for m in result.all_messages() if 'could not be compacted further' in message_text(m)]
    assert len(notices) == 1


async def test_every_evicted_block_is_on_a_page_and_pages_close(store: GraphStore) -> None:
    model = ScriptedModel(steps=30)
    capability = MementoCompaction(store, max_tokens=2_500, session_id='pages')
    result = await scripted_agent(model, [capability]).run(
        'Fix every module.', usage_limits=UsageLimits(request_limit=None)
    )

    pages = store.list_pages(session_id='pages')
    blocks = {b.id for b in store.list_blocks(session_id='pages')}
    assert pages and {b for p in pages for b in p.block_ids} == blocks  # every evicted block is on a page
    closed = [p for p in pages if p.summary]
    assert closed, 'no page closed in a 30-step session'
    assert all(p.topics for p in closed)
    assert result.output.startswith('All 30 modules pass')


async def test_a_tool_result_larger_than_the_mark_is_stubbed_before_the_model_reads_it(store: GraphStore) -> None:
    """A fresh tool result that alone outgrows the mark would overflow the model's window: the model gets its head
    and tail with a pointer, and pages through the archived original."""
    log = '\n'.join(f'2026-11-21T10:{i % 60:02d} worker-{i % 7} batch {i} took {i * 7 % 900} ms' for i in range(6_000))
    seen: list[list[ModelMessage]] = []
    part_ids: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        last = messages[-1].parts[-1]
        if len(seen) == 1:
            return ModelResponse(parts=[ToolCallPart('dump_log', {}, tool_call_id='dump')])
        if len(seen) == 2:
            assert isinstance(last, ToolReturnPart)
            part_ids.append(last.metadata['mementograph.micro.v1'])
            return ModelResponse(parts=[ToolCallPart('recover_block', {'block_id': part_ids[0], 'page': 2}, 'rec')])
        return ModelResponse(parts=[TextPart('Read it.')])

    agent = Agent(FunctionModel(model), capabilities=[MementoCompaction(store, max_tokens=3_000, session_id='big')])

    @agent.tool_plain
    def dump_log() -> str:
        return log

    result = await agent.run('Show me the worker log.')
    counter = TokenCounter()
    assert counter.count_text(log) > 10 * 3_000
    sizes = [counter.count_messages(messages) for messages in seen]
    assert max(sizes) <= 3_000, sizes
    stub = str(seen[1][-1].parts[-1].content)
    assert stub.startswith(log[:1000]) and stub.endswith(log[-1000:]), 'head and tail use the room the mark leaves'
    assert f'recover_block("{part_ids[0]}")' in stub
    original = store.recover_block(part_ids[0], session_id='big').messages[0]
    assert original.parts[-1].content == log  # archived whole, byte for byte
    page_two = next(
        p for m in result.all_messages() for p in getattr(m, 'parts', [])
        if isinstance(p, ToolReturnPart) and p.tool_name == 'recover_block'
    )  # fmt: skip
    # pages are sized to the mark (3,000 characters under a 3,000-token mark), so a page fits beside the rest
    rendered = render_block([original])
    assert rendered[3_100:5_900] in str(page_two.content)  # (the page's text starts with a one-line header)
    body, footer = str(page_two.content).split(f'\n[{part_ids[0]}: page 2 of ')
    assert len(body) == 3_000 and f'next: recover_block("{part_ids[0]}", page=3)' in footer


async def test_dialogue_dates_are_anchored_on_the_configured_clock(store: GraphStore) -> None:
    """pydantic-ai stamps messages in UTC; `timezone` says whose calendar "yesterday" was said on."""
    said = datetime(2023, 5, 8, 22, 0, tzinfo=UTC)  # 09:00 on 9 May at UTC+11
    history: list[ModelMessage] = []
    for i in range(16):
        ann = f'Ann: Yesterday I saw museum {i} with my sister; we loved its paintings.'
        history.append(ModelRequest(parts=[UserPromptPart(ann, timestamp=said)]))
        history.append(
            ModelResponse(
                parts=[TextPart(f'Bob: Museum {i} has a famous collection of modern sculpture.')], timestamp=said
            )
        )
    capability = MementoCompaction(store, max_tokens=600, session_id='chat', timezone=timezone(timedelta(hours=11)))
    agent = Agent(FunctionModel(lambda _m, _i: ModelResponse(parts=[TextPart('Noted.')])), capabilities=[capability])
    await agent.run('Ann: What did we talk about?', message_history=history)
    texts = [memento.text for memento in store.list_mementos(session_id='chat')]
    assert any('Yesterday (8 May 2023)' in text for text in texts), texts
    assert not any('7 May' in text for text in texts)
    with pytest.raises(ValueError, match='unknown time zone'):
        MementoCompaction(store, timezone='Atlantis/Capital')


def test_mementos_of_mementos_leave_out_the_outlines_line_numbers(store: GraphStore) -> None:
    """A file read's memento says where each definition is (`10: def handler_3_1`). Merged, those numbers would be
    values without their definitions (`VALUES: 10, 30`), so a memento of mementos is made without the outlines."""

    def listing(step: int) -> str:
        code = [f'def handler_{step}_{i // 20}(x):' if i % 20 == 10 else f'    value_{i} = x + {i}' for i in range(80)]
        return '\n'.join(f'{number:6d}\t{line}' for number, line in enumerate(code, start=1))

    calls: list[int] = []  # its own count: evicted tool returns leave `messages`

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = len(calls)
        calls.append(step)
        if step < 14:
            call = ToolCallPart('read_file', {'path': f'src/app/module_{step}.py'}, tool_call_id=f'read_{step}')
            return ModelResponse(parts=[TextPart(f'Reading module {step}.'), call])
        return ModelResponse(parts=[TextPart('Read them all.')])

    capability: MementoCompaction[None] = MementoCompaction(
        store, max_tokens=5_000, low_water=0.9, session_id='s-outline', memento_share=0.05
    )
    agent: Agent[None, str] = Agent(FunctionModel(scripted), capabilities=[capability])

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file with line numbers."""
        return listing(int(path.rsplit('_', 1)[1].split('.')[0]))

    agent.run_sync('Read every module.')
    mementos = store.list_mementos(session_id='s-outline')
    first = [m.text for m in mementos if m.level == 1]
    merged = [m.text for m in mementos if m.level > 1]
    assert merged and any('  11: def handler_' in text for text in first)
    assert all(not re.search(r'\b(?:11|31|51|71)\b', text) for text in merged)
    assert all('src/app/module_' in text for text in merged)  # what they read is still named


def test_a_memento_of_mementos_keeps_its_childrens_commands(store: GraphStore) -> None:
    """A memento lists its block's commands as `$ cmd -> exit N` lines. Merged as if it were a block's text, no
    such line is a tool call, so the memento of mementos kept none of them; pooled, each child's command stays,
    with the failing test under it, and the merge passes the judge."""
    calls: list[int] = []

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = len(calls)
        calls.append(step)
        if step < 14:
            call = ToolCallPart(
                'bash', {'command': f'pytest tests/test_module_{step}.py -q'}, tool_call_id=f'run_{step}'
            )
            return ModelResponse(parts=[TextPart(f'Running the tests of module {step}.'), call])
        return ModelResponse(parts=[TextPart('All ran.')])

    capability: MementoCompaction[None] = MementoCompaction(
        store, max_tokens=3_000, session_id='s-merge', memento_share=0.2
    )
    agent: Agent[None, str] = Agent(FunctionModel(scripted), capabilities=[capability])

    @agent.tool_plain
    def bash(command: str) -> str:
        """Run a shell command."""
        step = command.split('_')[-1].split('.')[0]
        passed = '\n'.join(f'tests/test_module_{step}.py::test_case_{i} PASSED' for i in range(30))
        return (
            f'<returncode>1</returncode>\n<output>{passed}\nFAILED tests/test_module_{step}.py::test_edge - '
            f'AssertionError: expected {step}\n1 failed, 30 passed in 0.{step}s</output>'
        )

    agent.run_sync('Run every module test.')
    mementos = {m.id: m for m in store.list_mementos(session_id='s-merge')}
    first = next(m for m in mementos.values() if m.level == 2)
    children = [mementos[child_id] for child_id in first.summarizes]
    commands = [line for child in children for line in child.text.splitlines() if line.startswith('$ pytest')]
    assert len(commands) == len(children) >= 2
    lines = first.text.splitlines()
    for command in commands:
        step = command.split('_module_')[1].split('.')[0]
        assert lines[lines.index(command) + 1] == f'  FAILED tests/test_module_{step}.py::test_edge', first.text
    assert first.verified and first.text.startswith(children[-1].text.splitlines()[0])


def _chat(store: GraphStore, session: str, turns: int = 60, **settings: float | bool) -> list[ModelMessage]:
    """Ann books a flight a turn, Bob answers with pleasantries; the history of the last run."""
    places = ['Lisbon', 'Oslo', 'Kyoto', 'Quito', 'Hanoi', 'Nairobi', 'Lima', 'Tallinn', 'Perth', 'Dakar']
    start = datetime(2023, 5, 1, 9, tzinfo=UTC)

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked = sum(isinstance(m, ModelRequest) for m in messages)
        reply = (
            'Bob: Noted, see you then! I will tell the others tonight when we meet for dinner.'
            if asked % 2
            else 'Bob: Great, I will pack tonight. Thanks so much for organising all of this, it is wonderful.'
        )
        return ModelResponse(parts=[TextPart(reply)], timestamp=start + timedelta(minutes=asked))

    capability: MementoCompaction[None] = MementoCompaction(store, max_tokens=2_500, session_id=session, **settings)
    agent: Agent[None, str] = Agent(FunctionModel(scripted), capabilities=[capability])
    history: list[ModelMessage] = []
    for turn in range(turns):
        plan = (
            f'Ann: We fly to {places[turn % 10]} on flight {4400 + turn} on {turn % 28 + 1} June 2023. The hotel '
            f'there is booked for {turn % 5 + 2} nights, and the museum tour starts at 10am.'
        )
        history = agent.run_sync(plan, message_history=history).all_messages()
    return history


def test_a_long_chat_keeps_its_speakers_facts_through_merges(store: GraphStore) -> None:
    """Two people chatting, a flight booked every turn: their mementos are merged again and again. Merged as one
    block's text, each merge kept about a fifth of its children (after four merges of a 600-turn conversation, 291
    messages were two lines: a sentence and `VALUES:` with bare numbers); pooled sentence by sentence, a merge keeps
    its children's lines as each speaker said them, up to the room the other mementos leave."""
    # archived at each run's end, a turn of 80-200 tokens would be a block of its own, and a merge pools fewer
    _chat(store, 's-chat', conversation_memento_share=0.3, archive_at_run_end=False)
    mementos = store.list_mementos(session_id='s-chat')
    merged = [m for m in mementos if m.level > 1]
    assert merged, 'no memento of mementos was made'
    for memento in merged:
        assert all(re.match(r'(Ann|Bob): \S', line) for line in memento.text.splitlines()), memento.text
    widest = max(merged, key=lambda m: len(re.findall(r'flight 44\d\d', m.text)))
    assert len(set(re.findall(r'flight 44\d\d', widest.text))) >= 4, widest.text
    assert verify_store(store).ok


def test_a_conversations_mementos_take_their_own_share(store: GraphStore) -> None:
    """`conversation_memento_share` sizes the mementos of a chat, `memento_share` those of an agent's work."""

    def flights_in_context(history: list[ModelMessage]) -> int:
        return len(set(re.findall(r'flight 44\d\d', '\n'.join(stub_texts(history)))))

    narrow = flights_in_context(_chat(store, 's-narrow', conversation_memento_share=0.3, memento_share=0.6))
    wide = flights_in_context(_chat(store, 's-wide', conversation_memento_share=0.6, memento_share=0.3))
    assert wide > narrow * 1.3, (narrow, wide)
    histories = []
    for share in (0.3, 0.9):  # an agent's work: its mementos are sections, not speakers' lines
        model = ScriptedModel(steps=16)
        capability = MementoCompaction(
            store, max_tokens=3_000, session_id=f's-tools-{share}', conversation_memento_share=share
        )
        history = scripted_agent(model, [capability]).run_sync('Fix every module.').all_messages()
        histories.append([re.sub(r'(blk|mem)_[0-9a-f]+', 'ID', text) for text in stub_texts(history)])  # per session
    assert histories[0] == histories[1] and histories[0]


async def test_a_window_too_small_for_a_mark_compacts_at_one_token(store: GraphStore) -> None:
    """A model's window (here the fallback) that gives a mark under 1 token used to fail every request with
    `high_water_tokens must be positive`; the mark is 1 token, and compaction does all it can."""
    model = ScriptedModel(steps=6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = await scripted_agent(model, [MementoCompaction(store, fallback_context_window=1)]).run('Go.')
    assert not [w for w in caught if issubclass(w.category, MementoWarning) and 'must be positive' in str(w.message)]
    assert stub_texts(result.all_messages())  # blocks were evicted


async def test_a_compaction_reads_back_neither_its_blocks_nor_an_unchanged_page_index(store: GraphStore) -> None:
    """Each read is a round trip on a server: sizing the open page read its blocks back whole, and the page index
    was read after every compaction though only a closed page changes it."""
    calls: Counter[str] = Counter()

    class Counted:  # the real store, its calls counted
        def __getattr__(self, name: str) -> Any:
            attr = getattr(store, name)
            if not callable(attr):
                return attr

            def counted(*args: Any, **kwargs: Any) -> Any:
                calls[name] += 1
                return attr(*args, **kwargs)

            return counted

    capability = MementoCompaction(Counted(), max_tokens=2_500, session_id='s')  # type: ignore[arg-type]
    await scripted_agent(ScriptedModel(steps=20), [capability]).run('Fix every module.')

    compactions = sum(1 for report in capability.reports if report.block_ids)
    closed = sum(1 for page in store.list_pages(session_id='s') if page.summary)
    assert compactions >= 10 and closed >= 2
    assert calls['get_block'] == 0
    assert calls['list_pages'] == compactions + 1 + closed  # each eviction's paging; the index at first, at closes
