"""Concurrency: many agent sessions at once on one SQLite file and on the shared Neo4j server.

Each session is a real pydantic-ai `Agent` with `MementoCompaction` at a small budget (so blocks are evicted every
few requests), driven by a `FunctionModel` that calls tools -- files, tests, and the memory tools themselves:
`recall` over words every session's blocks share, `recover_block` of its own archived blocks, and `recover_block`
of ids another session archived moments ago. Sessions run as asyncio tasks sharing one `Agent` (the session is the
run's `conversation_id`), as threads each with their own event loop, and as separate processes writing the same
SQLite file (how several agents share the embedded store).

Afterwards, per session, against the real store: the log holds exactly the messages the session produced, in
order (`Recorder` is the ground truth, outside the capability): none lost, none twice; every block and stubbed part
recovers byte for byte; the blocks in the store are exactly the ones the run's `MementoEvictedEvent`s announced
and the log's archives at runs' ends name, each once; `verify_store` passes; and no memory tool ever answered with another session's data.
On Neo4j, a session one of whose runs warned that it could not complete its session log (a store call outlasted
`store_timeout`; the messages are in the run's result) is first continued as the warning says, with `log_history`;
every other session is checked as its runs left it.

CI (`MEMENTOGRAPH_FULL_CONCURRENCY=1`, set by `.ci/run`) runs the issue's full 50 sessions x 200 requests at once
on SQLite (4 processes on one file); Neo4j runs 50 sessions at once at 12 requests each. `scripts/bench/concurrency.py`
runs every mode at any size, the full one on Neo4j included, with the same code and prints the figures.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import AsyncIterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Final

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.usage import UsageLimits

from mementograph import MementoCompaction, MementoEvictedEvent, MementoSkippedEvent, MementoWarning, open_store
from mementograph._messages import deserialize_messages, serialize_messages
from mementograph.capabilities._layout import stub_info
from mementograph.knowledge_graph.store import GraphStore, StoreError
from tests.conftest import REPO
from tests.reliability._checks import session_problems, verify_problems
from tests.reliability._session import Recorder
from tests.scripted import streaming_model

UNLIMITED = UsageLimits(request_limit=None, tool_calls_limit=None)
_TAG = re.compile(r'SESSIONTAG_(s\d+)_')
_POINTER = re.compile(r'recover_block\("((?:blk|mem|prt)_[0-9a-f]+)"')


@dataclass(frozen=True)
class Workload:
    """How much each session does."""

    sessions: int
    requests: int
    """Model requests per session (each a tool call or a final answer)."""
    runs: int = 4
    """`agent.run` calls per session, each continuing the last with `message_history`."""
    max_tokens: int = 2_000
    """The high-water mark: small, so blocks are evicted every few requests."""
    lines: int = 10
    """Lines of each file `read_file` returns (about 30 tokens each)."""

    @property
    def per_run(self) -> int:
        return max(2, self.requests // self.runs)


@dataclass
class SessionRun:
    """What one session did, seen from its runs (the expectation the store is checked against)."""

    sid: str
    originals: list[bytes] = field(default_factory=list[bytes])
    """Every message the session produced, exact bytes, in order (recorded outside the capability)."""
    live: list[ModelMessage] = field(default_factory=list[ModelMessage])
    """The context the last run ended with."""
    requests: int = 0
    tool_steps: int = 0
    own_due: bool = False
    evicted: list[str] = field(default_factory=list[str])
    """Block ids the runs' `MementoEvictedEvent`s announced, in order (an id twice would be a duplicate write)."""
    micro: list[str] = field(default_factory=list[str])
    merged: list[str] = field(default_factory=list[str])
    recalled: list[str] = field(default_factory=list[str])
    """Ids the `recall` tool pointed at."""
    recalls: int = 0
    own_recoveries: int = 0
    foreign_probes: int = 0
    violations: list[str] = field(default_factory=list[str])
    """Cross-session reads, split tool pairs, events of another session."""
    failures: list[str] = field(default_factory=list[str])
    """Compactions the store refused (the run went on with its full context: no eviction, nothing lost)."""

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data['originals'] = [base64.b64encode(o).decode() for o in self.originals]
        data['live'] = base64.b64encode(serialize_messages(self.live)).decode()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionRun:
        data = dict(data)
        data['originals'] = [base64.b64decode(o) for o in data['originals']]
        data['live'] = deserialize_messages(base64.b64decode(data['live']))
        return cls(**data)


def file_body(sid: str, step: int, lines: int) -> str:
    # every session's files share the words recall looks for; only the tag says whose they are
    return '\n'.join(
        f'def handler_{step}_{i}(x):  # SESSIONTAG_{sid}_ src/app/module_{step}.py value_{step}_{i} = {i * step}'
        for i in range(lines)
    )


def _tags(text: str) -> set[str]:
    return set(_TAG.findall(text))


@dataclass
class SessionModel:
    """The model of every session in one process: each reply follows from the session's own request count.

    It checks what each request carries: tool calls and their returns adjacent, and the memory tools' answers
    holding the caller's session only (`SessionRun.violations`).
    """

    workload: Workload
    runs: dict[str, SessionRun]
    archived: dict[str, list[str]]
    """Block and memento ids each session archived so far (from its events): the ids other sessions probe."""

    def sid_of(self, messages: Sequence[ModelMessage]) -> str:
        sid = messages[-1].conversation_id if isinstance(messages[-1], ModelRequest) else None
        assert sid in self.runs, f'a request of an unknown conversation {sid!r}'
        return sid

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sid = self.sid_of(messages)
        run = self.runs[sid]
        self._check_request(run, messages)
        step = run.requests
        run.requests += 1
        if (step + 1) % self.workload.per_run == 0:
            return ModelResponse(parts=[TextPart(f'[{sid}] step {step}: every module passes; exit code 0.')])
        kind = run.tool_steps % 10  # final answers aside, so every kind comes up whatever the run length
        run.tool_steps += 1
        call = f'{sid}-{step}'
        if kind == 1:  # two calls in one response: their returns travel together
            return ModelResponse(
                parts=[
                    TextPart(f'Reading and testing module {step}.'),
                    ToolCallPart('read_file', {'path': f'src/app/module_{step}.py'}, tool_call_id=f'{call}-a'),
                    ToolCallPart('run_tests', {'target': f'tests/test_{step}.py'}, tool_call_id=f'{call}-b'),
                ]
            )
        if kind == 3:
            return ModelResponse(
                parts=[ToolCallPart('run_tests', {'target': f'tests/test_{step}.py'}, tool_call_id=call)]
            )
        if kind == 5:
            query = 'handler module value src/app exit code'
            return ModelResponse(
                parts=[ToolCallPart('recall', {'query': query, 'k': 8}, tool_call_id=f'{call}-recall')]
            )
        run.own_due = run.own_due or kind == 7  # due from now on, once something was evicted
        own = [stub.target_id for m in messages if (stub := stub_info(m)) is not None]
        if run.own_due and own:
            run.own_due = False
            return ModelResponse(
                parts=[ToolCallPart('recover_block', {'block_id': own[-1]}, tool_call_id=f'{call}-own')]
            )
        if kind == 9:
            foreign = self._foreign_id(sid, step)
            if foreign is not None:
                args = {'block_id': foreign}
                return ModelResponse(parts=[ToolCallPart('recover_block', args, tool_call_id=f'{call}-foreign')])
        return ModelResponse(
            parts=[
                TextPart(f'Reading module {step}.'),
                ToolCallPart('read_file', {'path': f'src/app/module_{step}.py'}, tool_call_id=call),
            ]
        )

    def _foreign_id(self, sid: str, step: int) -> str | None:
        others = sorted(s for s, ids in self.archived.items() if s != sid and ids)
        if not others:
            return None
        ids = self.archived[others[step % len(others)]]
        return ids[-1 - (step // 10) % len(ids)]  # blocks and mementos, recent and older

    def _check_request(self, run: SessionRun, messages: Sequence[ModelMessage]) -> None:
        for index, message in enumerate(messages):
            if not isinstance(message, ModelResponse):
                continue
            calls = {p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)}
            if not calls:
                continue
            after = messages[index + 1] if index + 1 < len(messages) else None
            answered = (
                {p.tool_call_id for p in after.parts if isinstance(p, ToolReturnPart | RetryPromptPart)}
                if isinstance(after, ModelRequest)
                else set()
            )
            if calls - answered:
                run.violations.append(
                    f'request {run.requests}: tool calls {sorted(calls - answered)} not answered next'
                )
        last = messages[-1]
        for part in last.parts if isinstance(last, ModelRequest) else []:
            if not isinstance(part, ToolReturnPart):
                continue
            text = str(part.content)
            tags = _tags(text)
            if tags - {run.sid}:
                run.violations.append(f'{part.tool_name} returned data of {sorted(tags - {run.sid})}')
            if part.tool_name == 'recall':
                run.recalls += 1
                run.recalled += _POINTER.findall(text)
            elif part.tool_call_id.endswith('-own'):
                run.own_recoveries += 1
                if 'sha256 verified' not in text:
                    run.violations.append(f'own block did not recover: {text[:200]}')
            elif part.tool_call_id.endswith('-foreign'):
                run.foreign_probes += 1
                if text.startswith(_STORE_UNAVAILABLE):  # refused, not answered: counted as a store failure
                    run.failures.append(text[:200])
                elif not text.startswith('No archived block'):
                    run.violations.append(f'another session answered recover_block: {text[:200]}')


def build_agent(model: SessionModel, capability: MementoCompaction[Any]) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(streaming_model(model), capabilities=[capability])

    @agent.tool
    def read_file(ctx: RunContext[None], path: str) -> str:
        """Read a file."""
        step = int(path.rsplit('_', 1)[1].split('.')[0])
        return file_body(str(ctx.conversation_id), step, model.workload.lines)

    @agent.tool_plain
    def run_tests(target: str) -> str:
        """Run a test file."""
        return f'$ pytest {target} -q\n3 passed in 0.21s\nexit code 0'

    return agent


async def drive(agent: Agent[None, str], model: SessionModel, sid: str) -> None:
    """One session: `runs` runs, each continuing the last one's history."""
    run = model.runs[sid]
    recorder = Recorder()

    async def events(ctx: RunContext[None], stream: AsyncIterable[Any]) -> None:
        async for event in stream:
            if isinstance(event, MementoEvictedEvent):
                if event.session_id != sid:
                    run.violations.append(f'an eviction event of session {event.session_id!r} reached {sid!r}')
                run.evicted += event.block_ids
                run.micro += event.micro_part_ids
                run.merged += event.merged_memento_ids
                model.archived[sid] += [*event.block_ids, *event.memento_ids]
            elif isinstance(event, MementoSkippedEvent) and event.error is not None:
                run.failures.append(event.error)

    history: list[ModelMessage] | None = None
    for number in range(model.workload.runs):
        result = await agent.run(
            f'[{sid}] run {number}: fix every module under src/app.',
            message_history=history,
            conversation_id=sid,
            usage_limits=UNLIMITED,
            capabilities=[recorder],
            event_stream_handler=events,
        )
        history = result.all_messages()
        recorder.observe(history)
    run.originals = list(recorder.originals)
    run.live = history or []


def _capability(store: GraphStore, namespace: str, workload: Workload, sid: str | None) -> MementoCompaction[Any]:
    return MementoCompaction(
        store, namespace=namespace, session_id=sid, max_tokens=workload.max_tokens, micro_min_tokens=250
    )


def _sids(workload: Workload) -> list[str]:
    return [f's{i:03d}' for i in range(workload.sessions)]


async def run_tasks(
    store: GraphStore, namespace: str, workload: Workload, sids: Sequence[str], *, shared_agent: bool
) -> list[SessionRun]:
    """The sessions as asyncio tasks of one event loop: one `Agent` for all (session = conversation), or one each."""
    runs = {sid: SessionRun(sid) for sid in sids}
    model = SessionModel(workload, runs, {sid: [] for sid in sids})
    if shared_agent:
        agent = build_agent(model, _capability(store, namespace, workload, None))
        agents = dict.fromkeys(sids, agent)
    else:
        agents = {sid: build_agent(model, _capability(store, namespace, workload, sid)) for sid in sids}
    await asyncio.gather(*(drive(agents[sid], model, sid) for sid in sids))
    return list(runs.values())


def run_threads(store: GraphStore, namespace: str, workload: Workload, threads: int) -> list[SessionRun]:
    """The sessions spread over threads, each running its own event loop; one `Agent` per session, one store."""
    sids = _sids(workload)
    groups = [sids[i::threads] for i in range(threads)]
    results: list[list[SessionRun]] = [[] for _ in groups]
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            results[index] = asyncio.run(run_tasks(store, namespace, workload, groups[index], shared_agent=False))
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if errors:
        raise errors[0]
    return [run for group in results for run in group]


_LOG_INCOMPLETE: Final = re.compile(r"could not complete the session log of session '([^']+)'")
CATCH_UP_BOUND: Final = 300.0
"""Seconds a session's log may take to be completed once its sessions ended (a loaded machine's store answers)."""


def run_threads_warned(
    store: GraphStore, namespace: str, workload: Workload, threads: int
) -> tuple[list[SessionRun], set[str]]:
    """`run_threads`, and the sessions a run of which warned that it could not complete the session log.

    A run whose store call outlasts `store_timeout` says so, with the messages missing: they are in the run's
    result, and a run that continues the session logs them. On a loaded machine (load 30-58 on 2 cores) the whole
    process, and one beside it that only slept, went unscheduled for 13-32 s at a time, so a run's first read of
    the log timed out, though the server had its result within 70 ms. Warnings are process-wide, so the sessions'
    threads are all heard."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always', MementoWarning)
        runs = run_threads(store, namespace, workload, threads)
    return runs, {match.group(1) for w in caught if (match := _LOG_INCOMPLETE.search(str(w.message)))}


def complete_logs(store: GraphStore, namespace: str, workload: Workload, runs: Sequence[SessionRun]) -> int:
    """What the warning tells a user to do, for each of `runs` (the sessions that warned): continue the session
    from its last run's result -- `log_history(result.all_messages())`, retried while the store does not answer.
    Returns how many messages were appended. The checks then hold these sessions to the same whole log as the rest:
    a message the capability lost, rather than left unlogged in the result, is still missing."""
    appended, deadline = 0, time.monotonic() + CATCH_UP_BOUND
    for run in runs:
        capability = _capability(store, namespace, workload, run.sid)
        while True:
            try:
                appended += asyncio.run(capability.log_history(run.live))
                break
            except StoreError as exc:  # the store still too slow (or a lock wait stopped): try again
                assert time.monotonic() < deadline, f'{run.sid}: the log was not completed: {exc}'
                time.sleep(1)
    return appended


def run_processes(uri: str, namespace: str, workload: Workload, processes: int, workdir: Path) -> list[SessionRun]:
    """The sessions spread over processes that all open the same store (one `Agent` per session)."""
    sids = _sids(workload)
    groups = [sids[i::processes] for i in range(processes)]
    children = []
    for index, group in enumerate(groups):
        spec = {'uri': uri, 'namespace': namespace, 'workload': asdict(workload), 'sids': group}
        out = workdir / f'worker-{index}.json'
        command = [sys.executable, '-m', 'tests.reliability.test_concurrency', json.dumps(spec), str(out)]
        children.append((subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE, text=True), out))
    runs: list[SessionRun] = []
    for child, out in children:
        _, stderr = child.communicate(timeout=1_800)
        assert child.returncode == 0, f'worker failed:\n{stderr[-3000:]}'
        runs += [SessionRun.from_json(item) for item in json.loads(out.read_text())]
    return runs


def _worker(argv: Sequence[str]) -> int:
    spec, out = json.loads(argv[0]), Path(argv[1])
    store = open_store(spec['uri'])
    try:
        workload = Workload(**spec['workload'])
        runs = asyncio.run(run_tasks(store, spec['namespace'], workload, spec['sids'], shared_agent=False))
    finally:
        store.close()
    out.write_text(json.dumps([run.to_json() for run in runs]))
    return 0


@dataclass
class Figures:
    """What a concurrent run did and what the checks found (zero problems is the pass)."""

    sessions: int
    requests: int
    messages: int
    """Messages the sessions produced (and the logs must hold)."""
    blocks: int
    parts: int
    mementos: int
    writes: int
    """Store writes: logged messages + archived blocks and parts + mementos."""
    lost: int
    duplicated: int
    cross_session_reads: int
    recalls: int
    own_recoveries: int
    foreign_probes: int
    store_failures: int
    """Compactions skipped because the store refused the write (retried at a later request; nothing lost)."""
    seconds: float
    problems: list[str]

    def line(self) -> str:
        return (
            f'{self.sessions} sessions, {self.requests} requests, {self.messages} messages, {self.blocks} blocks, '
            f'{self.parts} parts, {self.mementos} mementos, {self.writes} writes: lost {self.lost}, duplicated '
            f'{self.duplicated}, cross-session reads {self.cross_session_reads} ({self.recalls} recalls, '
            f'{self.foreign_probes} foreign probes, {self.own_recoveries} own recoveries), {self.store_failures} '
            f'compactions refused by the store, {self.seconds:.1f} s'
        )


@dataclass
class _SessionCheck:
    problems: list[str] = field(default_factory=list[str])
    lost: int = 0
    duplicated: int = 0
    cross: int = 0
    blocks: int = 0
    parts: int = 0
    mementos: int = 0


_STORE_UNAVAILABLE: Final = 'recover_block failed: the memory store is unavailable'
"""How a memory tool answers when the store refused or did not answer (`_toolset`): no data, nothing lost."""


def check_session(store: GraphStore, namespace: str, run: SessionRun) -> _SessionCheck:
    """One session against the store: whole log, exact blocks, counts as announced, no cross-session data."""
    sid, found = run.sid, _SessionCheck()
    # every message the session produced is logged once, in order, and is live or recoverable byte for byte
    found.problems += session_problems(store, sid, namespace=namespace, originals=run.originals, live=run.live)
    found.problems += verify_problems(store, namespace=namespace, session_id=sid)
    if len(run.originals) != 2 * run.requests:  # each request: the message sent, the response
        found.problems.append(f'{len(run.originals)} messages recorded for {run.requests} requests')
    logged = [e for e in store.read_events(sid, namespace=namespace) if e.kind == 'message']
    payload = {e.message_index: e.payload for e in logged}
    found.lost = sum(1 for i, data in enumerate(run.originals) if payload.get(i) != data)
    found.duplicated = sum(n - 1 for n in Counter(e.message_index for e in logged).values())
    # the blocks in the store are exactly those the runs announced, and those archived at a run's end, each once
    blocks = store.list_blocks(namespace=namespace, session_id=sid)
    parts = store.list_blocks(namespace=namespace, session_id=sid, kind='part')
    at_end = [b for e in store.read_events(sid, namespace=namespace) if e.kind == 'archive' for b in e.block_ids]
    found.duplicated += sum(n - 1 for n in Counter([*run.evicted, *run.micro]).values())
    found.duplicated += sum(n - 1 for n in Counter(at_end).values())
    for kind, announced, stored in (('blocks', [*run.evicted, *at_end], blocks), ('parts', run.micro, parts)):
        announced = sorted(set(announced))  # a block archived at a run's end, evicted later, is announced again
        ids = sorted(record.id for record in stored)
        # a write the store did not finish within `store_timeout` is left to finish on its own: its compaction was
        # skipped (the context stayed whole), yet its records may land, exact (`verify_problems` above), unannounced
        landed_late = bool(run.failures) and set(announced) <= set(ids)
        if sorted(announced) != ids and not landed_late:
            found.problems.append(f'{len(announced)} {kind} announced, {len(ids)} in the store')
    mementos = store.list_mementos(namespace=namespace, session_id=sid)
    memento_ids = {m.id for m in mementos}
    if missing := set(run.merged) - memento_ids:
        found.problems.append(f'merged mementos not in the store: {sorted(missing)}')
    # recall pointed only at this session's archive; no tool answered with another session's data
    foreign = set(run.recalled) - memento_ids - {b.id for b in blocks} - {p.id for p in parts}
    if foreign:
        found.problems.append(f'recall pointed at ids outside the session: {sorted(foreign)[:5]}')
    found.cross = len(foreign) + sum('data of' in v or 'another session' in v for v in run.violations)
    found.problems += run.violations
    found.blocks, found.parts, found.mementos = len(blocks), len(parts), len(mementos)
    return found


def check(store: GraphStore, namespace: str, runs: Sequence[SessionRun], seconds: float) -> Figures:
    """Every session against the store, and the namespace holding those sessions and no other."""
    checks = [(run, check_session(store, namespace, run)) for run in runs]
    problems = [f'{run.sid}: {problem}' for run, found in checks for problem in found.problems]
    sessions = {s.id for s in store.list_sessions(namespace=namespace)}
    if sessions != {run.sid for run in runs}:
        problems.append(f'the namespace holds sessions {sorted(sessions ^ {r.sid for r in runs})} it should not')
    total = lambda name: sum(getattr(found, name) for _, found in checks)  # noqa: E731
    messages = sum(len(run.originals) for run in runs)
    return Figures(
        sessions=len(runs),
        requests=sum(r.requests for r in runs),
        messages=messages,
        blocks=total('blocks'),
        parts=total('parts'),
        mementos=total('mementos'),
        writes=messages + total('blocks') + total('parts') + total('mementos'),
        lost=total('lost'),
        duplicated=total('duplicated'),
        cross_session_reads=total('cross'),
        recalls=sum(r.recalls for r in runs),
        own_recoveries=sum(r.own_recoveries for r in runs),
        foreign_probes=sum(r.foreign_probes for r in runs),
        store_failures=sum(len(r.failures) for r in runs),
        seconds=seconds,
        problems=problems,
    )


def _assert_clean(figures: Figures, workload: Workload, *, refusals_allowed: bool = False) -> None:
    """All checks passed. `refusals_allowed`: on the shared Neo4j server a write can be aborted under contention
    (deadlock victim, lock wait stopped); that is a skipped compaction -- the context stays whole and the next
    request retries -- so it is counted and printed, not failed; nothing may be lost all the same."""
    assert figures.problems == [], '\n'.join(figures.problems[:40])
    assert refusals_allowed or figures.store_failures == 0
    assert (figures.lost, figures.duplicated, figures.cross_session_reads) == (0, 0, 0)
    assert figures.requests == workload.sessions * workload.per_run * workload.runs
    # the workload exercised what it is meant to: evictions in every session, cross-session probes, recalls
    assert figures.blocks >= workload.sessions and figures.parts > 0
    assert figures.foreign_probes > 0 and figures.recalls > 0 and figures.own_recoveries > 0
    print(figures.line())


def _delete_namespace(store: GraphStore, namespace: str) -> None:
    for session in store.list_sessions(namespace=namespace):
        with contextlib.suppress(StoreError):  # cleanup of a shared server only; the checks ran already
            store.delete_session(session.id, namespace=namespace)


# -- the tests --------------------------------------------------------------------------------------------------

FULL_SIZE = os.environ.get('MEMENTOGRAPH_FULL_CONCURRENCY') == '1'
"""The issue's 50 sessions x 200 requests at once on SQLite (4 processes on one file): set by `.ci/run`; a
developer's run uses a smaller size of the same workload and checks (the full size takes about 5 minutes)."""
SQLITE_TASKS = Workload(sessions=50, requests=24, runs=3)
SQLITE_PROCESSES = (
    Workload(sessions=50, requests=200, runs=4) if FULL_SIZE else Workload(sessions=48, requests=16, runs=2)
)
NEO4J_THREADS = Workload(sessions=50, requests=12, runs=2)
"""50 sessions at once on Neo4j; the full 200 requests each is `scripts/bench/concurrency.py` (12 minutes, and once
the neo4j driver spun forever acquiring a connection near the end of it; see RELIABILITY.md)."""


async def test_sqlite_sessions_as_tasks_sharing_one_agent(tmp_path: Path, unique_namespace: str) -> None:
    store = open_store(f'sqlite://{tmp_path / "memory.db"}')
    try:
        started = time.perf_counter()
        runs = await run_tasks(store, unique_namespace, SQLITE_TASKS, _sids(SQLITE_TASKS), shared_agent=True)
        figures = check(store, unique_namespace, runs, time.perf_counter() - started)
    finally:
        store.close()
    _assert_clean(figures, SQLITE_TASKS)


def test_sqlite_sessions_in_four_processes_on_one_file(tmp_path: Path, unique_namespace: str) -> None:
    uri = f'sqlite://{tmp_path / "memory.db"}'
    started = time.perf_counter()
    runs = run_processes(uri, unique_namespace, SQLITE_PROCESSES, 4, tmp_path)
    seconds = time.perf_counter() - started
    store = open_store(uri)
    try:
        figures = check(store, unique_namespace, runs, seconds)
    finally:
        store.close()
    _assert_clean(figures, SQLITE_PROCESSES)


@pytest.mark.neo4j
def test_neo4j_sessions_in_threads(neo4j_store: GraphStore, unique_namespace: str) -> None:
    started = time.perf_counter()
    runs, warned = run_threads_warned(neo4j_store, unique_namespace, NEO4J_THREADS, threads=10)
    # a session that did not warn must have logged everything on its own; one that did is continued as it says
    appended = complete_logs(neo4j_store, unique_namespace, NEO4J_THREADS, [r for r in runs if r.sid in warned])
    figures = check(neo4j_store, unique_namespace, runs, time.perf_counter() - started)
    print(f'{len(warned)} sessions warned that their log was incomplete; continuing them logged {appended} messages')
    _delete_namespace(neo4j_store, unique_namespace)
    _assert_clean(figures, NEO4J_THREADS, refusals_allowed=True)


async def test_the_checks_see_a_lost_message_a_duplicate_and_a_foreign_read(
    tmp_path: Path, unique_namespace: str
) -> None:
    """The checker itself: a message deleted from a log, a block announced twice and a recall that pointed into
    another session are each counted."""
    workload = Workload(sessions=2, requests=12, runs=2)
    store = open_store(f'sqlite://{tmp_path / "memory.db"}')
    try:
        runs = await run_tasks(store, unique_namespace, workload, _sids(workload), shared_agent=True)
        assert check(store, unique_namespace, runs, 0.0).problems == []
        first, second = runs
        assert first.evicted and second.evicted
        conn = store._conn  # type: ignore[attr-defined]  # plays a write that never landed
        conn.execute(
            'DELETE FROM events WHERE namespace = ? AND session_id = ? AND message_index = 3',
            (unique_namespace, first.sid),
        )
        second.evicted.append(second.evicted[0])
        second.recalled.append(first.evicted[0])
        figures = check(store, unique_namespace, runs, 0.0)
    finally:
        store.close()
    assert (figures.lost, figures.duplicated, figures.cross_session_reads) == (1, 1, 1)
    assert any('log' in p for p in figures.problems) and any('outside the session' in p for p in figures.problems)


if __name__ == '__main__':  # a worker process of `run_processes`
    sys.exit(_worker(sys.argv[1:]))
