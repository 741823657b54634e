"""A store that stops answering in the middle of an agent run, then answers again: a Neo4j server frozen with
SIGSTOP (a private server of this test's own, never the shared one), and a SQLite file whose write lock another
connection holds (the store itself would wait a minute for it).

Neither may hang the run or lose anything. The capability waits for the store at most `store_timeout`: the
request then goes to the model with its whole context and a warning, and while the call it gave up on has not
returned, the requests after it go on at once. Once the store answers, the log catches up and compaction brings
the context back down. Then every original message is live or recoverable byte for byte and the store verifies.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import Client
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mementograph import MementoCompaction, MementoWarning, open_store
from mementograph.eval import DialogueIngestor
from mementograph.knowledge_graph.store import GraphStore
from mementograph.mcp import create_server
from tests.mcp_server._client import error, ok, texts
from tests.recall.conftest import small_dialogue
from tests.reliability._checks import outage_problems, session_problems, verify_problems
from tests.reliability._server import PrivateNeo4j
from tests.reliability._session import Recorder, StepModel, final_text, run_session

MAX_TOKENS = 1_500
FREEZE_AT, THAW_AT = 5, 9
"""Requests (1-based) during which the store stops answering, and answers again."""
STORE_TIMEOUT = 5.0
RUN_BOUND = 120.0
"""Far above what the run takes (seconds); a hung run fails the test instead of hanging it."""


def _wait_for_log(store: GraphStore, session: str, namespace: str, messages: int) -> None:
    """Until the session log holds `messages` messages: the store answers again and the calls the capability gave
    up on have returned (as they would while a real model thinks about its next step)."""
    deadline = time.monotonic() + RUN_BOUND / 2
    while store.last_message_index(session, namespace=namespace) < messages - 1:
        assert time.monotonic() < deadline, 'the session log did not catch up once the store answered again'
        time.sleep(0.05)


@dataclass
class LockedSqlite:
    path: Path
    store: GraphStore
    """The run's store; it would wait a minute for the write lock (`busy_timeout=60`)."""
    holder: sqlite3.Connection
    """Another writer: `BEGIN IMMEDIATE` on it takes the file's write lock and keeps it."""

    def freeze(self) -> None:
        self.holder.execute('BEGIN IMMEDIATE')  # another writer takes the lock and keeps it

    def thaw(self) -> None:
        self.holder.execute('ROLLBACK')


@pytest.fixture
def locked_sqlite(tmp_path: Path) -> Iterator[LockedSqlite]:
    path = tmp_path / 'memory.db'
    store = open_store(f'sqlite://{path}?busy_timeout=60')
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        yield LockedSqlite(path, store, holder)
    finally:
        if holder.in_transaction:
            holder.execute('ROLLBACK')
        holder.close()
        store.close()


async def _run_through_a_hang(
    store: GraphStore,
    namespace: str,
    freeze: Callable[[], None],
    thaw: Callable[[], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = 'hung'
    recorder = Recorder()
    originals_at: dict[int, int] = {}
    started_at: dict[int, float] = {}

    def during(request: int) -> None:
        originals_at[request] = len(recorder.originals)
        started_at[request] = time.monotonic()
        if request == FREEZE_AT:
            freeze()
        elif request == THAW_AT:
            thaw()
            _wait_for_log(store, session, namespace, originals_at[request])

    model = StepModel(steps=6, on_request=during)
    caplog.set_level(logging.INFO, logger='mementograph')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        live, _ = await asyncio.wait_for(
            run_session(
                store, session, namespace, tasks=1, max_tokens=MAX_TOKENS, recorder=recorder, model=model,
                settings={'store_timeout': STORE_TIMEOUT},
            ),
            RUN_BOUND,
        )  # fmt: skip
    assert live[-1].parts[0].content == final_text(1)  # type: ignore[union-attr]
    said = [str(w.message) for w in caught if issubclass(w.category, MementoWarning)]
    # warned once when the wait ran out and once when the store answered again; the requests in between did not
    # wait again, and said so in the log without a warning each
    assert len([s for s in said if 'did not answer' in s and 'store_timeout' in s]) == 1, said
    assert not [s for s in said if 'has not answered' in s], said
    logged = [r.getMessage() for r in caplog.records]
    assert len([m for m in logged if 'has not answered' in m]) >= THAW_AT - FREEZE_AT - 1, logged
    assert any('answered' in m and 'again after' in m for m in logged), logged

    # the requests whose hooks ran while the store was stuck sent everything; once thawed, compaction caught up
    frozen = range(FREEZE_AT + 1, THAW_AT + 1)
    assert outage_problems(model.seen, originals_at, down=frozen, max_tokens=MAX_TOKENS) == []
    # one bounded wait, not one per request: the hooks of the frozen requests together took about one timeout
    frozen_for = started_at[THAW_AT] - started_at[FREEZE_AT]
    assert frozen_for < RUN_BOUND / 4, f'the frozen requests took {frozen_for:.1f} s'

    assert session_problems(store, session, namespace=namespace, originals=recorder.originals, live=live) == []
    assert verify_problems(store, namespace=namespace, session_id=session) == []


async def test_a_sqlite_write_lock_never_released_then_released(
    locked_sqlite: LockedSqlite, unique_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    await _run_through_a_hang(locked_sqlite.store, unique_namespace, locked_sqlite.freeze, locked_sqlite.thaw, caplog)


@dataclass
class FrozenNeo4j:
    store: GraphStore
    """On a private server (never the shared one), emptied of the test's namespace afterwards."""
    pid: int

    def freeze(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)  # the process stays, its sockets accept, nothing answers

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)


@pytest.fixture
def frozen_neo4j(private_neo4j: PrivateNeo4j, unique_namespace: str) -> Iterator[FrozenNeo4j]:
    frozen = FrozenNeo4j(open_store(private_neo4j.uri), private_neo4j.pid())
    try:
        yield frozen
    finally:
        frozen.thaw()  # harmless when it runs already
        for session in frozen.store.list_sessions(namespace=unique_namespace):
            frozen.store.delete_session(session.id, namespace=unique_namespace)
        frozen.store.close()


@pytest.mark.neo4j
async def test_a_neo4j_server_frozen_then_resumed(
    frozen_neo4j: FrozenNeo4j, unique_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    await _run_through_a_hang(frozen_neo4j.store, unique_namespace, frozen_neo4j.freeze, frozen_neo4j.thaw, caplog)


async def test_a_run_ending_while_the_store_is_stuck_returns_and_its_log_completes_later(
    locked_sqlite: LockedSqlite, unique_namespace: str
) -> None:
    """The lock is held from the middle of the run to after its end: the run still returns (its end waits for
    the log at most `store_timeout`), says the log is incomplete, and the log completes once the lock goes."""
    path, store, holder = locked_sqlite.path, locked_sqlite.store, locked_sqlite.holder
    recorder = Recorder()

    def during(request: int) -> None:
        if request == FREEZE_AT:
            holder.execute('BEGIN IMMEDIATE')

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        live, _ = await asyncio.wait_for(
            run_session(
                store, 'ending', unique_namespace, tasks=1, max_tokens=MAX_TOKENS, recorder=recorder,
                model=StepModel(steps=6, on_request=during), settings={'store_timeout': STORE_TIMEOUT},
            ),
            RUN_BOUND,
        )  # fmt: skip
    said = [str(w.message) for w in caught if issubclass(w.category, MementoWarning)]
    assert any('could not complete the session log' in s for s in said), said
    reader = open_store(f'sqlite://{path}')  # its own connection: the run's store waits on the lock in a thread
    try:
        logged = reader.last_message_index('ending', namespace=unique_namespace) + 1
    finally:
        reader.close()
    assert logged < len(recorder.originals), 'the log was complete while the lock was held'
    [ending] = [s for s in said if 'could not complete the session log' in s]
    assert f': {len(recorder.originals) - logged} messages not in it yet (StoreTimeoutError: ' in ending, ending

    holder.execute('ROLLBACK')
    _wait_for_log(store, 'ending', unique_namespace, len(recorder.originals))
    problems = session_problems(store, 'ending', namespace=unique_namespace, originals=recorder.originals, live=live)
    assert problems == []
    assert verify_problems(store, namespace=unique_namespace, session_id='ending') == []


async def test_a_run_to_be_forgotten_ending_while_the_store_is_stuck_returns_and_is_deleted_later(
    locked_sqlite: LockedSqlite, unique_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`retention='run'`: the lock is taken during the last model call and held past the run's end. The run returns
    after one `store_timeout`, says the session is not deleted yet, and once the lock goes the delete happens, says
    so, and nothing writes the session back (the log append still waiting goes first, and what was only queued is
    dropped)."""
    store, holder = locked_sqlite.store, locked_sqlite.holder
    reader = open_store(f'sqlite://{locked_sqlite.path}')  # its own connection: the run's store waits on the lock
    try:

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            if len(messages) == 1:
                return ModelResponse(parts=[ToolCallPart('note', {'text': 'x' * 400})])
            _wait_for_log(reader, 'forgotten', unique_namespace, 1)  # something of the session is in the store
            holder.execute('BEGIN IMMEDIATE')
            return ModelResponse(parts=[TextPart('done')])

        capability = MementoCompaction(
            store, session_id='forgotten', namespace=unique_namespace, retention='run', store_timeout=STORE_TIMEOUT
        )
        agent = Agent(FunctionModel(model), capabilities=[capability])

        @agent.tool_plain
        def note(text: str) -> str:
            return f'noted {len(text)} characters'

        started = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            await asyncio.wait_for(agent.run('Take a note.'), RUN_BOUND)
        assert time.monotonic() - started < STORE_TIMEOUT + 10
        said = [str(w.message) for w in caught if issubclass(w.category, MementoWarning)]
        assert any("could not delete session 'forgotten'" in s and 'did not answer delete_session' in s for s in said)
        assert [s.id for s in reader.list_sessions(namespace=unique_namespace)] == ['forgotten']
        with caplog.at_level(logging.WARNING, logger='mementograph'):
            holder.execute('ROLLBACK')
            deadline = time.monotonic() + RUN_BOUND / 2
            while reader.list_sessions(namespace=unique_namespace):
                assert time.monotonic() < deadline, 'the session was not deleted once the store answered again'
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # nothing writes it back
        assert reader.list_sessions(namespace=unique_namespace) == []
        assert reader.last_message_index('forgotten', namespace=unique_namespace) == -1
    finally:
        reader.close()
    assert any("session 'forgotten' is deleted" in r.getMessage() for r in caplog.records)


async def _serve_through_a_hang(
    store: GraphStore, namespace: str, freeze: Callable[[], None], thaw: Callable[[], None],
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """An MCP client's calls while the store stops answering, then answers again: the call that meets the hang
    fails after `store_timeout` and says why, the next fails at once, and once the store answers they work."""
    await DialogueIngestor(min_tokens=40, namespace=namespace).ingest(store, small_dialogue('served'))
    server = create_server(store, namespace=namespace, store_timeout=STORE_TIMEOUT)
    caplog.set_level(logging.INFO, logger='mementograph')
    async with Client(server) as client:
        assert 'served' in ok(await client.call_tool('stats', {}))
        freeze()
        try:
            started = time.monotonic()
            said = error(await asyncio.wait_for(client.call_tool('recall', {'query': 'adoption agencies'}), RUN_BOUND))
            waited = time.monotonic() - started
            assert 'did not answer recall within 5 s' in said, said
            assert STORE_TIMEOUT * 0.9 <= waited < STORE_TIMEOUT + 10, waited
            started = time.monotonic()
            said = error(await client.call_tool('stats', {}))
            assert 'has not answered recall for' in said and time.monotonic() - started < 2.0, said
        finally:
            thaw()
        deadline = time.monotonic() + RUN_BOUND / 2
        while (answer := await client.call_tool('recall', {'query': 'adoption agencies'})).is_error:
            assert time.monotonic() < deadline, texts(answer)
            await asyncio.sleep(0.2)
    assert 'adoption' in ok(answer)
    assert any('the store answered recall again' in r.getMessage() for r in caplog.records)


async def test_an_mcp_server_through_a_sqlite_lock_held_then_released(
    locked_sqlite: LockedSqlite, unique_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A read needs the write lock when its index has writes to catch up on (the store indexes on first read)."""
    await _serve_through_a_hang(locked_sqlite.store, unique_namespace, locked_sqlite.freeze, locked_sqlite.thaw, caplog)


@pytest.mark.neo4j
async def test_an_mcp_server_through_a_frozen_neo4j_server(
    frozen_neo4j: FrozenNeo4j, unique_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    await _serve_through_a_hang(frozen_neo4j.store, unique_namespace, frozen_neo4j.freeze, frozen_neo4j.thaw, caplog)


def test_store_timeout_must_be_positive_or_none() -> None:
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match='store_timeout'):
            MementoCompaction('memory://', store_timeout=bad)
        with pytest.raises(ValueError, match='store_timeout'):
            create_server(open_store('memory://'), store_timeout=bad)
    assert MementoCompaction('memory://', store_timeout=None).store_timeout is None
