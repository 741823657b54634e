"""Retention: `permanent` keeps the archive, `run` deletes the session when the run ends (also on failure or
cancellation), `none` never opens the configured store. Proved on a real SQLite file (SQL) and on the shared Neo4j
server (Cypher through the driver), both read behind the store's back."""

from __future__ import annotations

import asyncio
import sqlite3
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage

from mementograph import DEFAULT_NAMESPACE, MementoCompaction, MementoWarning, open_store, redact_secrets
from mementograph.knowledge_graph.store import GraphStore
from mementograph.knowledge_graph.store._neo4j import Neo4jStore
from tests.capabilities.probe import ProbeModel, own_pointer, probe_agent, tool_returns
from tests.conftest import neo4j_uri_with_auth


def sqlite_rows(path: Path) -> dict[str, int]:
    """Rows of every mementograph table of a SQLite file (FTS shadow tables and `meta` aside)."""
    conn = sqlite3.connect(path)
    try:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                "AND name NOT LIKE 'text_fts_%' AND name != 'meta'"
            )
        ]
        return {table: conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] for table in tables}
    finally:
        conn.close()


def neo4j_nodes(store: GraphStore, namespace: str) -> int:
    """Nodes of a namespace, counted with the driver behind the store's back (the proof must not trust it)."""
    records, _, _ = store._driver.execute_query(  # type: ignore[attr-defined]
        'MATCH (n) WHERE n.namespace = $namespace RETURN count(n) AS n',
        namespace=namespace,
        database_=store._database,  # type: ignore[attr-defined]
    )
    return int(records[0]['n'])


_TABLES = {
    'Session': 'sessions',
    'EvictedBlock': 'blocks',
    'Memento': 'mementos',
    'Event': 'events',
    'Page': 'pages',
    'Entity': 'entities',
}
"""The SQLite table that holds what a Neo4j label does."""


def neo4j_rows(store: GraphStore, namespace: str) -> dict[str, int]:
    """Nodes of a namespace per label, named as the SQLite tables are (any other label under its own name); counted
    with the driver behind the store's back."""
    records, _, _ = store._driver.execute_query(  # type: ignore[attr-defined]
        'MATCH (n) WHERE n.namespace = $namespace UNWIND labels(n) AS label RETURN label, count(*) AS n',
        namespace=namespace,
        database_=store._database,  # type: ignore[attr-defined]
    )
    rows = dict.fromkeys(_TABLES.values(), 0)
    for record in records:
        name = _TABLES.get(record['label'], record['label'])
        rows[name] = rows.get(name, 0) + int(record['n'])
    return rows


@dataclass(frozen=True)
class Archive:
    """A real store for one test: the URI a capability opens, the namespace it archives in, and what that holds
    (SQLite: rows per table of the file; Neo4j: nodes of the namespace per label), read behind the store's back."""

    uri: str
    namespace: str
    rows: Callable[[], dict[str, int]]

    def total(self) -> int:
        return sum(self.rows().values())

    def assert_empty(self) -> None:
        rows = self.rows()
        assert set(rows) >= {'sessions', 'blocks', 'mementos', 'events', 'pages', 'entities'}, rows
        assert rows == dict.fromkeys(rows, 0)


@pytest.fixture(params=['sqlite', pytest.param('neo4j', marks=pytest.mark.neo4j)])
def archive(request: pytest.FixtureRequest, db: Path, unique_namespace: str) -> Iterator[Archive]:
    """A SQLite file (the default namespace), or a fresh namespace of the shared Neo4j server (removed after)."""
    if request.param == 'sqlite':
        yield Archive(f'sqlite://{db}', DEFAULT_NAMESPACE, lambda: sqlite_rows(db))
        return
    uri = neo4j_uri_with_auth(request.getfixturevalue('neo4j_server'))
    observer: Neo4jStore = request.getfixturevalue('neo4j_store')
    try:
        yield Archive(uri, unique_namespace, lambda: neo4j_rows(observer, unique_namespace))
    finally:
        for session in observer.list_sessions(namespace=unique_namespace):
            observer.delete_session(session.id, namespace=unique_namespace)


class Recorder:
    """A probe argument that first notes what the store holds mid-run, then recovers the first stub."""

    def __init__(self, count: Any) -> None:
        self.count = count
        self.during: list[int] = []

    def __call__(self, messages: list[ModelMessage]) -> dict[str, Any]:
        self.during.append(self.count())
        return own_pointer(messages)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / 'memory.db'


async def test_run_retention_deletes_the_session_when_the_run_ends_sqlite(db: Path) -> None:
    recorder = Recorder(lambda: sum(sqlite_rows(db).values()))
    model = ProbeModel('RUNSCOPED', probes=[('recover_block', recorder)])
    capability = MementoCompaction(f'sqlite://{db}', max_tokens=2_500, session_id='scratch', retention='run')
    result = await probe_agent(model, [capability]).run('Read every module.')

    [recovered] = tool_returns(model, 'recover_block')
    assert 'sha256 verified' in recovered and 'RUNSCOPED' in recovered  # the archive worked during the run
    assert recorder.during[0] > 0
    assert result.output == 'RUNSCOPED: all 8 modules read.'
    rows = sqlite_rows(db)
    assert set(rows) >= {'sessions', 'blocks', 'mementos', 'events', 'pages', 'mentions', 'entities'}
    assert rows == dict.fromkeys(rows, 0)
    # and nothing readable is left behind in the file's free pages or WAL either
    capability.graph_store.close()
    raw = b''.join(p.read_bytes() for p in db.parent.glob(db.name + '*'))
    assert len(raw) > 50_000 and b'runscoped' not in raw.lower()


@pytest.mark.neo4j
async def test_run_retention_deletes_the_session_when_the_run_ends_neo4j(
    neo4j_store: Neo4jStore, unique_namespace: str
) -> None:
    store = neo4j_store
    try:
        recorder = Recorder(lambda: neo4j_nodes(store, unique_namespace))
        model = ProbeModel('RUNSCOPED', probes=[('recover_block', recorder)])
        capability = MementoCompaction(
            store, max_tokens=2_500, namespace=unique_namespace, session_id='scratch', retention='run'
        )
        await probe_agent(model, [capability]).run('Read every module.')

        [recovered] = tool_returns(model, 'recover_block')
        assert 'sha256 verified' in recovered
        assert recorder.during[0] > 0
        assert neo4j_nodes(store, unique_namespace) == 0
        records, _, _ = store._driver.execute_query(
            'MATCH (s:Session) WHERE s.id = $id AND s.namespace = $namespace RETURN count(s) AS n',
            id='scratch',
            namespace=unique_namespace,
            database_=store._database,
        )
        assert records[0]['n'] == 0
    finally:
        store.delete_session('scratch', namespace=unique_namespace)


async def test_run_retention_deletes_also_when_the_run_fails(archive: Archive) -> None:
    model = ProbeModel('FAILING', fail_at=8)  # after 8 reads: blocks were archived by then
    capability = MementoCompaction(
        archive.uri, max_tokens=2_500, namespace=archive.namespace, session_id='scratch', retention='run'
    )
    try:
        with pytest.raises(RuntimeError, match='model provider down'):
            await probe_agent(model, [capability]).run('Read every module.')
        assert any('recover_block("blk_' in str(m) for m in model.seen[-1])  # evictions did happen
        archive.assert_empty()
    finally:
        capability.graph_store.close()


async def test_run_retention_deletes_also_when_the_run_is_cancelled(archive: Archive) -> None:
    model = ProbeModel('CANCELLED', hang_at=8)
    capability = MementoCompaction(
        archive.uri, max_tokens=2_500, namespace=archive.namespace, session_id='scratch', retention='run'
    )
    try:
        task = asyncio.create_task(probe_agent(model, [capability]).run('Read every module.'))
        await asyncio.wait_for(model.hanging.wait(), timeout=120)
        during = archive.rows()
        assert during['blocks'] > 0 and during['sessions'] == 1  # the run was archiving
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        archive.assert_empty()
    finally:
        capability.graph_store.close()


async def test_a_session_continued_with_run_retention_starts_fresh(archive: Archive) -> None:
    capability = MementoCompaction(
        archive.uri, max_tokens=2_500, namespace=archive.namespace, session_id='again', retention='run'
    )
    try:
        first = await probe_agent(ProbeModel('FIRSTRUN'), [capability]).run('Read every module.')
        assert any('recover_block("blk_' in str(m) for m in first.all_messages())

        model = ProbeModel('SECONDRUN', probes=[('recover_block', own_pointer)])
        second = await probe_agent(model, [capability]).run('And again.', message_history=first.all_messages())
    finally:
        capability.graph_store.close()

    [old] = tool_returns(model, 'recover_block')  # the first stub in context is the first run's
    assert old.startswith('No archived block')
    assert second.output == 'SECONDRUN: all 8 modules read.'
    archive.assert_empty()


async def test_none_retention_never_creates_the_configured_store(tmp_path: Path) -> None:
    path = tmp_path / 'never' / 'memory.db'
    model = ProbeModel('NOWHERE', probes=[('recover_block', own_pointer)])
    capability = MementoCompaction(f'sqlite://{path}', max_tokens=2_500, session_id='s', retention='none')
    agent = probe_agent(model, [capability])
    result = await agent.run('Read every module.')

    [recovered] = tool_returns(model, 'recover_block')
    assert 'sha256 verified' in recovered and 'NOWHERE' in recovered  # lossless within the run
    assert result.output == 'NOWHERE: all 8 modules read.'
    assert not path.exists() and not path.parent.exists()

    # the private archive went with the run: a continued run cannot reach it, and still the file is not made
    again = ProbeModel('NOWHERE2', probes=[('recover_block', own_pointer)])
    await probe_agent(again, [capability]).run('Again.', message_history=result.all_messages())
    assert tool_returns(again, 'recover_block')[0].startswith('No archived block')
    assert not path.parent.exists()


async def test_none_retention_writes_nothing_to_an_open_store(archive: Archive) -> None:
    store = open_store(archive.uri)
    recorder = Recorder(archive.total)
    model = ProbeModel('UNWRITTEN', probes=[('recover_block', recorder)])
    capability = MementoCompaction(
        store, max_tokens=2_500, namespace=archive.namespace, session_id='s', retention='none', redact=redact_secrets
    )
    try:
        await probe_agent(model, [capability]).run('Read every module.')
    finally:
        store.close()

    assert 'sha256 verified' in tool_returns(model, 'recover_block')[0]
    assert recorder.during == [0]
    archive.assert_empty()


async def test_permanent_retention_keeps_the_session(archive: Archive) -> None:
    capability = MementoCompaction(archive.uri, max_tokens=2_500, namespace=archive.namespace, session_id='kept')
    try:
        await probe_agent(ProbeModel('KEPT'), [capability]).run('Read every module.')
    finally:
        capability.graph_store.close()
    rows = archive.rows()
    assert rows['blocks'] > 0 and rows['events'] > 0 and rows['sessions'] == 1
    assert rows['mementos'] > 0 and rows['pages'] > 0


async def test_run_retention_refuses_to_archive_as_a_harness_tier(db: Path) -> None:
    from pydantic_ai_harness.compaction import TieredCompaction

    memento = MementoCompaction(f'sqlite://{db}', max_tokens=10**6, session_id='tier', retention='run')
    tiered = TieredCompaction(tiers=[memento], target_tokens=900)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = await probe_agent(ProbeModel('TIER', steps=4), [tiered]).run('Read every module.')
    assert any("retention='run' needs" in str(w.message) for w in caught if issubclass(w.category, MementoWarning))
    assert result.output == 'TIER: all 4 modules read.'
    assert not db.exists() or sum(sqlite_rows(db).values()) == 0


def test_settings_are_validated_and_load_from_a_spec(db: Path) -> None:
    with pytest.raises(ValueError, match='retention must be one of'):
        MementoCompaction(f'sqlite://{db}', retention='forever')  # type: ignore[arg-type]
    spec = {'store': f'sqlite://{db}', 'retention': 'run', 'redact': 'secrets'}
    agent = Agent.from_spec(
        {'model': 'test', 'capabilities': [{'MementoCompaction': spec}]}, custom_capability_types=[MementoCompaction]
    )
    found: list[MementoCompaction[Any]] = []
    agent.root_capability.apply(lambda c: found.append(c) if isinstance(c, MementoCompaction) else None)
    assert found and found[0].retention == 'run' and found[0].redact is redact_secrets
    with pytest.raises(ValueError, match="must be 'secrets'"):
        MementoCompaction.from_spec(store=f'sqlite://{db}', redact='mine')
    # a spec's strings are not numbers or booleans: said at load, not a comparison failing, not 'false' taken as on
    for setting, value in (('max_fraction', '0.5'), ('low_water', '0.4'), ('store_timeout', '30'), ('page_index', 'false')):  # fmt: skip
        with pytest.raises(ValueError, match=f'{setting} must be (a number|true or false), not .{value}.'):
            Agent.from_spec(
                {'model': 'test', 'capabilities': [{'MementoCompaction': {'store': f'sqlite://{db}', setting: value}}]},
                custom_capability_types=[MementoCompaction],
            )


@pytest.fixture(autouse=True)
def _no_default_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    # a test that fell back to the default store would write to the user's data directory
    monkeypatch.setenv('MEMENTOGRAPH_STORE', f'sqlite://{tmp_path / "default-fallback.db"}')
    yield
    assert not (tmp_path / 'default-fallback.db').exists()
