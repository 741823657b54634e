"""Where a run's history goes in its session's log: a continuation goes on from the log's last message, anything
else (a branch, a retry after a failed request) after it, so no original message is left out or logged in a
position another one holds."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, UsageLimits, capture_run_messages
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.messages import BinaryContent, ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mementograph import MementoCompaction, open_store
from mementograph._messages import deserialize_messages, message_text
from mementograph.knowledge_graph.store import GraphStore, verify_store
from tests.conftest import neo4j_uri_with_auth
from tests.scripted import ScriptedModel, is_original, scripted_agent


@pytest.fixture
def store() -> GraphStore:
    return open_store('memory://')


def logged(store: GraphStore) -> list[ModelMessage]:
    events = [e for e in store.read_events('s') if e.kind == 'message']
    assert [e.message_index for e in events] == list(range(len(events)))  # no gap, no position twice
    return [deserialize_messages(e.payload)[0] for e in events]


async def test_continuing_a_branch_logs_only_its_new_messages(store: GraphStore) -> None:
    capability = MementoCompaction(store, max_tokens=100_000, session_id='s')
    a = await scripted_agent(ScriptedModel(steps=1), [capability]).run('Task A.')
    await scripted_agent(ScriptedModel(steps=1), [capability]).run('Task B.')
    c = await scripted_agent(ScriptedModel(steps=0), [capability]).run('Branch C.', message_history=a.all_messages())
    before = len(logged(store))
    d = await scripted_agent(ScriptedModel(steps=0), [capability]).run('Go on.', message_history=c.all_messages())
    log = logged(store)
    assert log[before:] == d.all_messages()[len(c.all_messages()) :]  # C's opening is not logged a second time


async def test_a_retried_request_is_logged_after_the_one_that_failed(store: GraphStore) -> None:
    class Down(ScriptedModel):
        def __call__(self, messages: list[ModelMessage], info: object) -> object:  # type: ignore[override]
            raise RuntimeError('model down')

    capability = MementoCompaction(store, max_tokens=100_000, session_id='s')
    a = await scripted_agent(ScriptedModel(steps=1), [capability]).run('Task A.')
    with pytest.raises(RuntimeError, match='model down'):
        await scripted_agent(Down(), [capability]).run('Attempt 1.', message_history=a.all_messages())
    await scripted_agent(ScriptedModel(steps=1), [capability]).run('Attempt 2.', message_history=a.all_messages())
    texts = [message_text(m) for m in logged(store)]
    assert sum('Attempt 1.' in t for t in texts) == 1 and sum('Attempt 2.' in t for t in texts) == 1
    assert verify_store(store, session_id='s').ok


@pytest.mark.parametrize(
    ('ending', 'error'),
    [('a tool raises', RuntimeError), ('the request limit', UsageLimitExceeded), ('a timeout', TimeoutError)],
)
async def test_what_a_failed_run_did_after_its_last_request_is_logged(
    store: GraphStore, ending: str, error: type[Exception]
) -> None:
    def read(day: int) -> str:
        """Read one day of the build log."""
        if day == 4 and ending == 'a tool raises':
            raise RuntimeError('disk error on day 4')
        return f'day {day}: 112 passed, {day} failed'

    async def wait() -> str:
        """Never returns in time."""
        await asyncio.sleep(30)
        return 'late'

    def policy(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(isinstance(m, ModelResponse) for m in messages)
        if done < 3:
            return ModelResponse(parts=[ToolCallPart('read', {'day': done + 1}, tool_call_id=f'read_{done + 1}')])
        if ending == 'a timeout':
            return ModelResponse(parts=[ToolCallPart('wait', {}, tool_call_id='wait')])
        return ModelResponse(parts=[ToolCallPart('read', {'day': 4}, tool_call_id='read_4'), ToolCallPart('read', {'day': 5}, tool_call_id='read_5')])  # fmt: skip

    capability = MementoCompaction(store, max_tokens=100_000, session_id='s')
    agent = Agent(FunctionModel(policy), tools=[read, wait], capabilities=[capability])
    with capture_run_messages() as produced, pytest.raises(error):
        if ending == 'the request limit':
            await agent.run('Read the build log.', usage_limits=UsageLimits(request_limit=4))
        else:
            await asyncio.wait_for(agent.run('Read the build log.'), timeout=None if ending == 'a tool raises' else 2)
    log = logged(store)
    assert any(isinstance(m, ModelResponse) and len(m.parts) == (1 if ending == 'a timeout' else 2) for m in log[-2:])
    if ending == 'the request limit':  # both tool results ran: they are in the log
        assert log == produced and 'day 5: 112 passed' in message_text(log[-1])
    else:
        assert log == produced[: len(log)] and len(log) >= len(produced) - 1


async def test_a_micro_compacted_opening_still_marks_a_continuation(store: GraphStore) -> None:
    capability = MementoCompaction(store, max_tokens=6_000, session_id='s', micro_min_tokens=200)
    prompt = [
        'Review this spec and the diagram.\n' + 'The service must retry idempotent calls. ' * 150,
        BinaryContent(b'\x89PNG' + b'\0' * 50_000, media_type='image/png'),
    ]
    a = await scripted_agent(ScriptedModel(steps=6), [capability]).run(prompt)
    assert 'archived' in message_text(a.all_messages()[0])  # the opening went to the archive, a stub stayed
    before = len(logged(store))
    b = await scripted_agent(ScriptedModel(steps=0), [capability]).run(
        'One more thing.', message_history=a.all_messages()
    )
    assert len(logged(store)) - before == len(b.all_messages()) - len(a.all_messages())
    assert verify_store(store, session_id='s').ok


async def test_a_harness_tier_logs_each_run_of_its_session(store: GraphStore) -> None:
    from pydantic_ai_harness.compaction import TieredCompaction

    memento = MementoCompaction(store, max_tokens=1_000_000, session_id='s', micro_min_tokens=10**9)

    def agent() -> object:
        return scripted_agent(ScriptedModel(steps=8), [TieredCompaction(tiers=[memento], target_tokens=2_500)])

    await agent().run('Conversation one.')  # type: ignore[attr-defined]
    await agent().run('Conversation two.')  # type: ignore[attr-defined]  # the tier is not copied per run
    assert any('Conversation two.' in message_text(m) for m in logged(store))
    blocks = store.list_blocks(session_id='s')
    assert blocks and len({b.first_message for b in blocks}) == len(blocks)
    assert verify_store(store, session_id='s').ok


async def test_a_harness_tiers_final_answer_is_logged_at_its_next_compaction(store: GraphStore) -> None:
    from pydantic_ai_harness.compaction import TieredCompaction

    memento = MementoCompaction(store, max_tokens=1_000_000, session_id='s', micro_min_tokens=10**9)

    def agent(steps: int) -> Any:
        return scripted_agent(ScriptedModel(steps=steps), [TieredCompaction(tiers=[memento], target_tokens=2_500)])

    first = await agent(3).run('Fix three modules.')
    answer = first.all_messages()[-1]
    assert not any(m == answer for m in logged(store))  # a tier sees the history only when called to compact
    await agent(3).run('Thanks. Now three more.', message_history=first.all_messages())
    texts = [message_text(m) for m in logged(store)]
    assert (
        texts.count(message_text(answer)) == 1
        and texts.index(message_text(answer)) == texts.index('Thanks. Now three more.') - 1
    )  # in its place, before the new turn


async def _resume_after_a_crash_on_the_first_request(store: GraphStore, max_tokens: int) -> list[ModelMessage]:
    """The model fails on the run's first request (the log holds only it); a run resumes from the log, another
    goes on from that. Returns the last run's whole history."""

    class Down(ScriptedModel):
        def __call__(self, messages: list[ModelMessage], info: object) -> object:  # type: ignore[override]
            raise RuntimeError('model down')

    capability = MementoCompaction(store, max_tokens=max_tokens, session_id='s')
    with pytest.raises(RuntimeError, match='model down'):
        await scripted_agent(Down(), [capability]).run('Task A.')
    assert [message_text(m) for m in logged(store)] == ['Task A.']
    resumed = await scripted_agent(ScriptedModel(steps=6), [capability]).run(None, message_history=logged(store))
    more = await scripted_agent(ScriptedModel(steps=6), [capability]).run(
        'Go on.', message_history=resumed.all_messages()
    )
    assert verify_store(store, session_id='s').ok
    return more.all_messages()


async def test_a_run_resumed_from_its_only_logged_request_goes_on_in_place(store: GraphStore) -> None:
    """A crash right after the first request was logged leaves the log holding only it; the run resumed from it
    sends a re-created copy (a new timestamp), which later runs carry on: each continues the log in place."""
    history = await _resume_after_a_crash_on_the_first_request(store, 100_000)
    texts = [message_text(m) for m in logged(store)]
    assert texts == [message_text(m) for m in history]  # nothing logged twice: the copy took the logged place
    compacted = open_store('memory://')
    await _resume_after_a_crash_on_the_first_request(compacted, 1_500)  # later histories open with stubs
    assert compacted.list_blocks(session_id='s') and [message_text(m) for m in logged(compacted)] == texts


@pytest.fixture(params=['sqlite', 'neo4j'])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[tuple[str, str]]:
    """A store URI two agents open each for themselves (as two workers would), and the namespace to use."""
    if request.param == 'sqlite':
        yield f'sqlite://{tmp_path / "shared.db"}', 'default'
    else:
        server = request.getfixturevalue('neo4j_server')
        yield neo4j_uri_with_auth(server), unique_namespace


async def test_two_runs_writing_one_session_at_once_both_reach_the_log(
    shared_store: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    uri, namespace = shared_store
    models = [ScriptedModel(steps=6), ScriptedModel(steps=6)]

    def agent(model: ScriptedModel, prompt: str) -> Awaitable[Any]:
        capability = MementoCompaction(uri, namespace=namespace, max_tokens=5_000, session_id='s')
        run = scripted_agent(model, [capability])

        async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            await asyncio.sleep(0.01)  # the two runs take turns at the store
            return model(messages, info)

        with run.override(model=FunctionModel(slow)):
            return run.run(prompt)

    results = await asyncio.gather(agent(models[0], 'Task A: check modules.'), agent(models[1], 'Task B: test.'))

    store = open_store(uri)
    try:
        events = [e for e in store.read_events('s', namespace=namespace) if e.kind == 'message']
        assert sorted(e.message_index for e in events) == list(range(len(events)))  # each position once
        logged = {message_text(deserialize_messages(e.payload)[0]) for e in events}
        for model, result in zip(models, results, strict=True):
            originals = [m for seen in model.seen for m in seen if is_original(m)] + [
                m for m in result.all_messages() if is_original(m)
            ]
            assert {message_text(m) for m in originals} <= logged  # every message either run sent or got
        report = verify_store(store, namespace=namespace, session_id='s')
        assert report.ok and report.blocks_checked >= 4  # both runs evicted, into one page index
    finally:
        store.close()
    assert 'another run is writing session' in caplog.text


async def test_two_continuations_of_one_conversation_at_once_log_as_two_branches(
    shared_store: tuple[str, str],
) -> None:
    uri, namespace = shared_store

    def agent(tag: str) -> Agent[None, str]:
        async def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            await asyncio.sleep(0.02)  # both runs are past their first append before either answers
            return ModelResponse(parts=[TextPart(f'{tag} answers after {len(messages)} messages')])

        return Agent(FunctionModel(reply), capabilities=[MementoCompaction(uri, namespace=namespace)])

    first = await agent('A').run('Hello.')
    history = first.all_messages()
    one, two = await asyncio.gather(
        agent('B1').run('Continue one.', message_history=history),
        agent('B2').run('Continue two.', message_history=history),
    )

    session = history[-1].conversation_id
    assert session is not None
    store = open_store(uri)
    try:
        events = [e for e in store.read_events(session, namespace=namespace) if e.kind == 'message']
    finally:
        store.close()
    assert [e.message_index for e in events] == list(range(len(events)))
    texts = [message_text(deserialize_messages(e.payload)[0]) for e in events]
    for run in (one, two):  # each branch whole and in order, in one piece, as a branch run after the other logs
        own = [message_text(m) for m in run.all_messages()]
        assert any(texts[start : start + len(own)] == own for start in range(len(texts)))
    assert len(texts) >= 8  # the opening of the branch that met the other is logged again before it


@pytest.mark.parametrize('redact', [None, lambda text: text.replace('line', 'line+')], ids=['plain', 'redacted'])
async def test_a_branch_logs_micro_compacted_tool_results_as_they_arrived(
    store: GraphStore, redact: Callable[[str], str] | None
) -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls = sum(1 for m in messages if isinstance(m, ModelResponse))
        if calls < 3:
            return ModelResponse(parts=[ToolCallPart('dump', {'i': calls}, tool_call_id=f'dump_{calls}')])
        return ModelResponse(parts=[TextPart('Done.')])

    capability = MementoCompaction(
        store, max_tokens=9_000, session_id='s', micro_min_tokens=200, keep_recent_messages=2, redact=redact
    )
    agent = Agent(FunctionModel(model), capabilities=[capability])

    @agent.tool_plain
    def dump(i: int) -> str:
        """Dump a table."""
        return '\n'.join(f'line {j} of dump {i}: value={j * i}' for j in range(300))

    history = (await agent.run('Task A.')).all_messages()
    assert sum('of this tool result archived' in message_text(m) for m in history) == 2  # stubbed in the history
    await agent.run('Another task.')  # the log moves on: a run from `history` is a branch of it
    before = len(logged(store))
    await agent.run('Branch.', message_history=history)
    log = logged(store)
    # the tool results whole, as first logged (and redacted once: the hook is not idempotent)
    assert log[before : before + len(history)] == log[: len(history)]
    assert ('line+ 7 of dump 1' in ' '.join(message_text(m) for m in log[before:])) == (redact is not None)


async def test_recall_shows_a_block_a_branch_archived_again_once(tmp_path: Path) -> None:
    from mementograph.knowledge_graph.recall import recall

    store = open_store(f'sqlite:///{tmp_path / "memory.db"}')
    try:
        opening = await scripted_agent(ScriptedModel(steps=1), [MementoCompaction(store, max_tokens=100_000)]).run(
            'Task A.', conversation_id='s'
        )
        for prompt in ('Go on.', 'Go on differently.'):  # the second is a branch: the same opening, logged again
            capability = MementoCompaction(store, max_tokens=3_000)
            await scripted_agent(ScriptedModel(steps=6), [capability]).run(
                prompt, message_history=opening.all_messages(), conversation_id='s'
            )
        blocks = store.list_blocks(session_id='s')
        copied = {b.sha256 for b in blocks if sum(other.sha256 == b.sha256 for other in blocks) > 1}
        assert copied, 'both branches should have archived the opening they share'

        hits = recall(store, 'src/app/module_0.py', k=10, session_id='s')
        shas = [store.get_block(hit.block_id).sha256 for hit in hits]
        assert len(shas) == len(set(shas)) and copied & set(shas)  # each copy once, and the opening is found
        assert len(recall(store, 'src/app/module_0.py', k=2, session_id='s')) == 2  # copies do not take places
    finally:
        store.close()


async def test_the_transcript_marks_where_a_branch_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mementograph.cli import main

    uri = f'sqlite:///{tmp_path / "memory.db"}'
    with open_store(uri) as store:
        capability = MementoCompaction(store, max_tokens=100_000, session_id='s')
        a = await scripted_agent(ScriptedModel(steps=1), [capability]).run('Task A.')
        b = await scripted_agent(ScriptedModel(steps=0), [capability]).run('Go on.', message_history=a.all_messages())
        await scripted_agent(ScriptedModel(steps=0), [capability]).run('Branch C.', message_history=a.all_messages())
        await scripted_agent(ScriptedModel(steps=0), [capability]).run('Then D.', message_history=b.all_messages())
    assert main(['transcript', '--session', 's', '--store', uri]) == 0
    lines = capsys.readouterr().out.splitlines()
    markers = [i for i, line in enumerate(lines) if line.startswith('=== a branch: ')]
    # C repeats A's history after B's messages; D continues B, which is no longer the log's tail, so it repeats
    # B's history after C's: two branches, each marked once where it starts
    starts = [len(b.all_messages()), len(b.all_messages()) + len(a.all_messages()) + 2]
    assert [lines[i + 1] for i in markers] == [f'--- message {start} ---' for start in starts]
    assert all(lines[i].startswith('=== a branch: message 0 and those after it') for i in markers)


async def test_a_session_continued_from_its_own_log_archives_nothing_twice(tmp_path: Path) -> None:
    """After a crash an application may have only the log (`mementograph transcript --json`). Continued from it,
    the history holds raw again what the first run had archived, and micro-compaction had cut the first run's
    blocks elsewhere: new blocks overlapped the archived ones and `verify` failed (broken_next_chain)."""
    uri = f'sqlite:///{tmp_path / "memory.db"}'
    with open_store(uri) as store:
        capability = MementoCompaction(store, max_tokens=2_500, session_id='s', micro_min_tokens=500)
        await scripted_agent(ScriptedModel(steps=6), [capability]).run('Fix modules.')
        assert store.list_blocks(session_id='s', kind='part'), 'the first run should have stubbed tool results'
        history = logged(store)  # what `transcript --json` gives: every message, raw
        again = MementoCompaction(store, max_tokens=2_500, session_id='s', micro_min_tokens=500)
        await scripted_agent(ScriptedModel(steps=6), [again]).run('Go on.', message_history=history)
        assert verify_store(store, session_id='s').ok
        blocks = sorted(store.list_blocks(session_id='s'), key=lambda b: b.first_message)
        assert all(b.last_message < after.first_message for b, after in itertools.pairwise(blocks))
