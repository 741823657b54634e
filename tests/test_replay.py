"""`replay`: recorded transcripts through a real Agent, with and without MementoCompaction, measured."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)

from mementograph import open_store
from mementograph._messages import serialize_messages
from mementograph._replay import ReplayReport, ReplayTrace, replay_messages, replay_report, summarize_reports
from mementograph._tokens import TokenCounter
from mementograph._transcripts import load_transcript, parse_transcript
from mementograph.capabilities import MementoCompaction
from mementograph.capabilities._layout import stub_info
from mementograph.cli import main
from tests.conftest import shared_data

CONTRACT_FIELDS = (
    'peak_tokens_baseline',
    'peak_tokens',
    'reduction',
    'blocks_evicted',
    'blocks_recovered_exact',
    'fact_retention',
    'facts_in_context',
    'facts_available',
    'memento_acceptance',
    'cache_prefix_stability',
)


def _module_body(step: int) -> str:
    lines = [f'def handler_{step}_{i}(value):  # src/app/module_{step}.py:{i + 1}' for i in range(30)]
    return '\n'.join(lines) + f'\n<returncode>0</returncode> checked module_{step} in {step + 10}.5 ms'


def chat_transcript(steps: int = 20) -> list[dict[str, Any]]:
    """An OpenAI-chat transcript: a task, `steps` tool calls with ~400-token outputs, a final answer."""
    chat: list[dict[str, Any]] = [
        {'role': 'system', 'content': 'You are a careful coding agent. Use the bash tool.'},
        {'role': 'user', 'content': 'Find why tests/test_core.py::test_handlers fails and fix src/app/core.py.'},
    ]
    for step in range(steps):
        call = {'command': f'cat src/app/module_{step}.py && pytest -q tests/test_module_{step}.py'}
        chat.append(
            {
                'role': 'assistant',
                'content': f'Step {step}: checking `module_{step}` (handler_{step}_0 looked suspicious).',
                'tool_calls': [
                    {
                        'id': f'call_{step}',
                        'type': 'function',
                        'function': {'name': 'bash', 'arguments': json.dumps(call)},
                    }
                ],
            }
        )
        chat.append({'role': 'tool', 'tool_call_id': f'call_{step}', 'content': _module_body(step)})
    chat.append({'role': 'assistant', 'content': f'All {steps} modules pass; the fix is in src/app/core.py.'})
    return chat


@pytest.fixture
def chat_file(tmp_path: Path) -> Path:
    path = tmp_path / 'session.json'
    path.write_text(json.dumps(chat_transcript()), encoding='utf-8')
    return path


def _assert_exact(report: ReplayReport) -> None:
    """Every archived block and part recovered byte-exact, and the session log equals the run's history."""
    assert report.problems == ()
    assert report.log_matches_history
    assert report.blocks_recovered_exact == report.blocks_evicted
    assert report.parts_recovered_exact == report.parts_stubbed
    assert report.facts_available == 1.0


def _assert_within_budget(report: ReplayReport) -> None:
    if report.max_message_tokens <= report.budget:
        assert report.peak_tokens <= report.budget * 1.1, (report.peak_tokens, report.max_message_tokens)


# -------------------------------------------------------------------------------------------- the measurement


async def test_replay_of_a_real_trajectory() -> None:
    path = shared_data('agent_trajectories', 'sympy__sympy-15345.traj.json')
    store = open_store('memory://')
    report = await replay_report(path, store=store, budget=8_000)

    assert report.session_id == 'sympy__sympy-15345'
    assert report.peak_tokens_baseline > 8_000
    assert report.reduction > 0
    assert report.blocks_evicted > 0
    assert 0 < report.facts_in_context <= report.facts_available <= 1.0
    assert report.fact_retention >= 0.9
    assert 0 < report.cache_prefix_stability <= 1.0
    assert report.instruction_breaks == 0  # the page index changes only where a compaction broke the prefix
    _assert_within_budget(report)
    data = report.to_dict()
    assert list(data)[1 : len(CONTRACT_FIELDS) + 1] == list(CONTRACT_FIELDS)
    _assert_exact(report)


async def test_replay_of_a_chat_transcript_evicts_and_recovers(chat_file: Path) -> None:
    store = open_store('memory://')
    report = await replay_report(chat_file, store=store, budget=2_500)
    assert report.reduction > 0.3
    assert report.blocks_evicted >= 3
    assert report.mementos >= report.blocks_evicted and report.memento_acceptance > 0
    assert report.facts_total > 50
    assert report.facts_in_context < 1.0  # evicted facts left the context...
    _assert_within_budget(report)
    _assert_exact(report)  # ...and every one of them is recoverable


async def test_same_file_twice_gets_fresh_sessions(chat_file: Path, tmp_path: Path) -> None:
    store = open_store(f'sqlite://{tmp_path / "replay.db"}')
    first = await replay_report(chat_file, store=store, budget=2_500)
    second = await replay_report(chat_file, store=store, budget=2_500)
    assert (first.session_id, second.session_id) == ('session', 'session.2')
    assert first.blocks_evicted == second.blocks_evicted
    assert sum(first.to_dict()[f] != second.to_dict()[f] for f in ('peak_tokens_baseline', 'requests')) == 0
    store.close()


async def test_replay_does_not_touch_the_transcript(chat_file: Path) -> None:
    messages = load_transcript(chat_file)
    before = serialize_messages(messages)
    counter = TokenCounter()
    first = await replay_messages(messages, counter=counter)
    second = await replay_messages(messages, counter=counter)
    assert serialize_messages(messages) == before
    assert first.tokens == second.tokens
    # every reply reports the usage of the request it answered (what a provider would report)
    replies = [m for m in second.final_history if m.kind == 'response']
    assert [r.usage.input_tokens for r in replies] == second.tokens


async def test_replay_is_reproducible(chat_file: Path, tmp_path: Path) -> None:
    """Two replays of one file give the same report and archive the same blocks under the same ids: pydantic-ai's
    wall-clock stamps and fresh run ids would otherwise be hashed into the block ids the context shows."""
    runs = []
    for name in ('first', 'second'):
        store = open_store(f'sqlite://{tmp_path / name}.db')
        report = await replay_report(chat_file, store=store, budget=2_500)
        blocks = store.list_blocks(namespace='replay', session_id=report.session_id, kind=None)
        runs.append(({k: v for k, v in report.to_dict().items() if k != 'seconds'}, [(b.id, b.sha256) for b in blocks]))
        store.close()
    assert runs[0][0]['blocks_evicted'] >= 3
    assert runs[0] == runs[1]


def _times(messages: list[ModelMessage]) -> list[list[datetime | None]]:
    """Each message's time, then each of its parts' that has one."""
    return [[m.timestamp, *(getattr(p, 'timestamp', None) for p in m.parts)] for m in messages]


async def test_replay_stamps_the_recorded_times(chat_file: Path) -> None:
    """The replayed history carries the transcript's times, message by message and part by part, and so does every
    request the model received (stubs carry their content's), never the time of the replay."""
    messages = load_transcript(chat_file)
    recorded = {t for times in _times(messages) for t in times}
    store = open_store('memory://')
    capability = MementoCompaction(store, max_tokens=2_500, session_id='s', archive_at_run_end=False)
    trace = await replay_messages(messages, capabilities=[capability], record_history=True)
    store.close()
    assert _times(trace.history) == _times(messages)
    sent = [m for request in trace.requests for m in request]
    assert any(stub_info(m) for m in sent)
    assert {t for times in _times(sent) for t in times} <= recorded
    assert {m.run_id for m in trace.history} == {'replay-1'}
    # a conversation: each user turn starts a run, which sends a new request with the recorded one's parts
    chat = [{'role': 'system', 'content': 'You are helpful.'}]
    for turn in range(4):
        chat += [{'role': 'user', 'content': f'question {turn}'}, {'role': 'assistant', 'content': f'answer {turn}'}]
    conversation = parse_transcript(json.dumps(chat).encode())
    trace = await replay_messages(conversation, record_history=True)
    assert _times(trace.history) == _times(conversation)
    assert [m.run_id for m in trace.history[1::2]] == ['replay-1', 'replay-2', 'replay-3', 'replay-4']


def report(
    facts: int = 10, in_context: int = 5, blocks: int = 1, *, budget: int = 100, peak: int = 100, largest: int = 50
) -> ReplayReport:
    return ReplayReport(
        source='x', session_id='x', budget=budget, messages=10, requests=5, peak_tokens_baseline=200,
        peak_tokens=peak, mean_tokens_baseline=150, mean_tokens=80, max_message_tokens=largest, blocks_evicted=blocks,
        blocks_recovered_exact=blocks, parts_stubbed=0, parts_recovered_exact=0, retention_blocks=blocks,
        retention_sum=float(blocks), facts_total=facts, facts_in_context_count=in_context,
        facts_available_count=facts, mementos=blocks, mementos_verified=blocks, stable_transitions=3,
        transitions=4, log_matches_history=True,
    )  # fmt: skip


def test_summary_pools_shares() -> None:
    total = summarize_reports([report(10, 5, 1), report(30, 30, 3)])
    assert total['facts_in_context'] == round(35 / 40, 4)
    assert total['reduction'] == 0.5 and total['peak_tokens'] == 100
    assert total['blocks_evicted'] == total['blocks_recovered_exact'] == 4
    assert total['cache_prefix_stability'] == 0.75


def test_a_change_of_the_instructions_breaks_the_cached_prefix() -> None:
    """The instructions come before the messages: a request sent the earlier messages unchanged but other
    instructions keeps no cached prefix, and `instruction_breaks` counts it apart."""
    task, reply = ModelRequest(parts=[UserPromptPart('task')]), ModelResponse(parts=[TextPart('ok')])
    more = ModelRequest(parts=[UserPromptPart('more')])
    requests: list[list[ModelMessage]] = [[task], [task, reply, more], [task, reply, more, reply, more]]
    counter = TokenCounter()
    same = ReplayTrace(requests=requests, instructions=['index 1', 'index 1', 'index 1'])
    changed = ReplayTrace(requests=requests, instructions=['index 1', 'index 1', 'index 2'])
    assert same.stable_transitions() == (2, 2) and same.instruction_breaks() == 0
    assert changed.stable_transitions() == (1, 2) and changed.instruction_breaks() == 1
    assert changed.cache_prefix_stability() == 0.5
    assert changed.compaction_requests() == []  # no message was rewritten
    assert changed.cached_prefix_tokens(counter) == (
        counter.count_message(task),
        counter.count_messages(requests[1] + requests[2]),
    )
    assert same.cached_prefix_tokens(counter)[0] == counter.count_messages([task, task, reply, more])


def test_within_budget_allows_only_a_message_that_alone_is_over_the_mark() -> None:
    assert report(peak=110).within_budget and not report(peak=111).within_budget
    # a 500-token message alone over a 100-token mark: the context may hold it, not much more
    assert report(peak=550, largest=500).within_budget
    assert not report(peak=551, largest=500).within_budget
    # a mark below every message (replay --budget 10) is not met by a context of many of them
    assert not report(budget=10, peak=2_000, largest=300).within_budget


# -------------------------------------------------------------------------------------------- the command


def test_cli_replay_json_parses(chat_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the same transcript as pydantic-ai JSON replays to the same numbers
    as_pydantic_ai = tmp_path / 'session-pai.json'
    as_pydantic_ai.write_bytes(ModelMessagesTypeAdapter.dump_json(parse_transcript(chat_file.read_bytes())))
    code = main(['replay', str(chat_file), str(as_pydantic_ai), '--budget', '2500', '--json'])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    assert data['store'] == 'memory://' and data['budget'] == 2_500
    files, total = data['files'], data['total']
    assert [Path(f['path']).name for f in files] == ['session.json', 'session-pai.json']
    for entry in (*files, total):
        for name in CONTRACT_FIELDS:
            assert isinstance(entry[name], int | float), name
    assert files[0]['peak_tokens_baseline'] == files[1]['peak_tokens_baseline']
    assert total['blocks_evicted'] == files[0]['blocks_evicted'] + files[1]['blocks_evicted'] > 0
    assert '[1/2]' in captured.err and '[2/2]' in captured.err  # progress for many files


def test_cli_replay_real_trajectory_json(capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_data('agent_trajectories', 'sympy__sympy-15345.traj.json')
    assert main(['replay', str(path), '--json']) == 0
    data = json.loads(capsys.readouterr().out)
    assert data['budget'] == 8_000
    assert data['files'][0]['reduction'] > 0 and data['total']['reduction'] == data['files'][0]['reduction']


def test_cli_replay_text(chat_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(['replay', str(chat_file), '--budget', '2500']) == 0
    out = capsys.readouterr().out
    assert 'session.json' in out and "budget 2500 tokens, store memory://, namespace 'replay'" in out


def test_cli_replay_says_where_its_sessions_are(
    chat_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Replays land in a namespace of their own, which `stats` does not read unless told: the summary says how."""
    store = f'sqlite://{tmp_path / "replayed.db"}'
    assert main(['replay', str(chat_file), '--budget', '2500', '--store', store]) == 0
    hint = capsys.readouterr().out.splitlines()[-1]
    assert hint == f'read the sessions with: mementograph stats --store {store} --namespace replay'
    assert main([*hint.split(': mementograph ', 1)[1].split(), '--json']) == 0
    assert json.loads(capsys.readouterr().out)['sessions'] == 1


def test_cli_malformed_file_names_file_and_position(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / 'broken.json'
    bad.write_text('[\n  {"role": "user", "content": "hi"},\n  {"role": \n', encoding='utf-8')
    code = main(['replay', str(bad)])
    err = capsys.readouterr().err
    assert code != 0
    assert str(bad) in err and 'line 4' in err and 'column' in err
    assert 'Traceback' not in err and len(err.strip().splitlines()) == 1


def test_cli_bad_message_names_its_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / 'roles.json'
    bad.write_text(json.dumps([{'role': 'user', 'content': 'task'}, {'role': 'robot', 'content': 'x'}]))
    assert main(['replay', str(bad)]) != 0
    err = capsys.readouterr().err
    assert str(bad) in err and 'message 1' in err and "'robot'" in err


def test_cli_missing_file_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], chat_file: Path
) -> None:
    missing = tmp_path / 'nope.traj.json'
    code = main(['replay', str(chat_file), str(missing), '--json'])
    captured = capsys.readouterr()
    assert code != 0
    error = json.loads(captured.out)['error']  # nothing was replayed (every file is checked first): the error alone
    assert error['exit_code'] == code and str(missing) in error['message']
    assert str(missing) in captured.err and 'No such file' in captured.err
    assert 'Traceback' not in captured.err and len(captured.err.strip().splitlines()) == 1


def test_cli_rejects_a_non_positive_budget(chat_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(['replay', str(chat_file), '--budget', '0']) == 2
    assert '--budget' in capsys.readouterr().err


def test_cli_replay_with_mementos_by_a_model(chat_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # pydantic-ai's `test` model stands for any model name; its tokens are counted
    args = ['replay', str(chat_file), '--budget', '2500', '--json']
    assert main([*args, '--compressor', 'test', '--judge', 'test']) == 0
    total = json.loads(capsys.readouterr().out)['total']
    assert total['llm_tokens'] > 0 and total['blocks_evicted'] > 0
    assert total['blocks_recovered_exact'] == total['blocks_evicted']  # whatever writes the mementos
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)['total']['llm_tokens'] == 0
    assert main([*args, '--compressor', 'nosuchprovider:model']) == 2
    err = capsys.readouterr().err
    assert '--compressor nosuchprovider:model' in err and 'Traceback' not in err


def test_cli_replay_takes_compaction_settings(chat_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ['replay', str(chat_file), '--budget', '2500', '--json']
    assert main(args) == 0
    (default,) = json.loads(capsys.readouterr().out)['files']
    assert main([*args, '--memento-share', '0.9', '--low-water', '0.2']) == 0
    (roomier,) = json.loads(capsys.readouterr().out)['files']
    # more room for mementos keeps more of them (fewer merges): a larger context on average (~1,530 -> ~1,770 tokens;
    # the low-water mark changes little here, as each compaction evicts every completed block either way)
    assert roomier['mean_tokens'] > default['mean_tokens'] * 1.05
    with pytest.raises(ValueError, match='low_water must be in'):  # the settings reach the capability
        asyncio.run(replay_report(chat_file, store=open_store('memory://'), budget=2500, settings={'low_water': 2}))
    for option, value in (('--low-water', '1'), ('--memento-share', '0'), ('--conversation-memento-share', '1.5')):
        assert main([*args, option, value]) == 2
        assert f'{option} must be in' in capsys.readouterr().err


def test_cli_replays_files_in_worker_processes_in_input_order(
    chat_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--jobs 2` replays two files at once, each worker on its own connection to the one SQLite file; the report
    keeps the order of the command line. Two files of one name (which would race for one fresh session id) are
    replayed in turn, into `session` and `session.2`."""
    other = tmp_path / 'other.json'
    other.write_bytes(chat_file.read_bytes())
    uri = f'sqlite://{tmp_path / "replay.db"}'
    args = ['replay', '--budget', '2500', '--json', '--check', '--store', uri, '--jobs', '2']
    assert main([*args, str(other), str(chat_file)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [Path(f['path']).name for f in data['files']] == ['other.json', 'session.json']
    assert data['total']['blocks_recovered_exact'] == data['total']['blocks_evicted'] > 0
    assert main([*args, str(chat_file), str(chat_file)]) == 0
    assert json.loads(capsys.readouterr().out)['total']['problems'] == 0
    with open_store(uri) as store:
        sessions = {s.id for s in store.list_sessions(namespace='replay')}
    assert sessions == {'other', 'session', 'session.2', 'session.3'}
    assert main([*args[:-1], '0', str(chat_file)]) == 2
    assert '--jobs must be at least 1' in capsys.readouterr().err


def test_cli_replay_figures_of_a_file_are_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    """Into `memory://` each file gets a store of its own, with `--jobs 1` as in worker processes: the sessions of
    one store share its entities (the topics of their pages), so the files before it would move its figures."""
    before = shared_data('agent_trajectories', 'django__django-11087.traj.json')
    path = shared_data('agent_trajectories', 'django__django-14500.traj.json')
    runs = []
    for paths in ([path], [before, path]):
        assert main(['replay', *map(str, paths), '--json', '--jobs', '1']) == 0
        report = json.loads(capsys.readouterr().out)['files'][-1]
        runs.append({k: v for k, v in report.items() if k != 'seconds'})
    assert runs[0]['blocks_evicted'] > 0
    assert runs[0] == runs[1]
