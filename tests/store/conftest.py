"""The `store` fixture: every backend runs the same contract suite against a real database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mementograph.knowledge_graph.store import GraphStore, SqliteStore, open_store
from tests.conftest import open_neo4j


@dataclass
class Backend:
    """A store under test plus a way to corrupt a block behind its back (to prove integrity checks)."""

    store: GraphStore
    namespace: str
    tamper: Callable[[str], None]


def _sqlite_tamper(store: GraphStore) -> Callable[[str], None]:
    assert isinstance(store, SqliteStore)

    def tamper(block_id: str) -> None:
        conn = store._conn  # the test reaches past the API on purpose: it plays a corrupted disk
        conn.execute(
            "UPDATE blocks SET messages_json = CAST(replace(CAST(messages_json AS TEXT), 'a', 'b') AS BLOB) WHERE id = ?",
            (block_id,),
        )

    return tamper


def _neo4j_tamper(store: GraphStore) -> Callable[[str], None]:
    from mementograph.knowledge_graph.store._neo4j import Neo4jStore

    assert isinstance(store, Neo4jStore)

    def tamper(block_id: str) -> None:
        # The test reaches past the API on purpose: it plays someone editing the database behind the store's back.
        driver = store._driver
        records, _, _ = driver.execute_query(
            'MATCH (b:EvictedBlock {id: $id}) RETURN b.messages_json AS data', id=block_id, database_=store._database
        )
        assert records, f'no block {block_id} to tamper with'
        altered = bytes(records[0]['data']).replace(b'a', b'b')
        driver.execute_query(
            'MATCH (b:EvictedBlock {id: $id}) SET b.messages_json = $data', id=block_id, data=altered,
            database_=store._database,
        )  # fmt: skip

    return tamper


@pytest.fixture(params=['memory', 'sqlite', 'neo4j'])
def backend(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[Backend]:
    kind = request.param
    if kind == 'neo4j':
        server = request.getfixturevalue('neo4j_server')
        store = open_neo4j(server)
        tamper = _neo4j_tamper(store)
    else:
        store = open_store('memory://' if kind == 'memory' else f'sqlite://{tmp_path / "memory.db"}')
        tamper = _sqlite_tamper(store)
    try:
        yield Backend(store=store, namespace=unique_namespace, tamper=tamper)
    finally:
        store.close()
