"""The `store` fixture: every backend runs the same contract suite against a real database."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from mementograph.knowledge_graph.store import GraphStore, SqliteStore, missing_members, open_store
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


CONTRACT_STORE_ENV = 'MEMENTOGRAPH_CONTRACT_STORE'
"""`module:function` of the `custom` backend: a store of your own, run through the contract suite beside the shipped
ones (docs/custom-stores.md). The function takes a fresh directory (`pathlib.Path`) and returns an open store."""
DEFAULT_CONTRACT_STORE = 'tests.store.custom:open_custom_store'
"""Without the variable: the store docs/custom-stores.md writes, over SQLite, so the recipe stays true."""


def _custom_store(directory: Path) -> GraphStore:
    spec = os.environ.get(CONTRACT_STORE_ENV) or DEFAULT_CONTRACT_STORE
    module, _, name = spec.partition(':')
    if not name:
        raise pytest.UsageError(f'{CONTRACT_STORE_ENV}={spec!r}: write it as module:function')
    store = getattr(importlib.import_module(module), name)(directory)
    missing = missing_members(store)
    assert not missing, f'{spec} returned {type(store).__name__}, which lacks {", ".join(missing)}'
    return store  # type: ignore[no-any-return]


def _no_tamper(block_id: str) -> None:
    pytest.skip('corrupting a block reaches into the database: a store of your own is tested without it')


BACKENDS = ['memory', 'sqlite', 'neo4j']
"""The shipped backends: what `backend` runs a test on."""
CONTRACT_BACKENDS = [*BACKENDS, 'custom']
"""What the contract suite runs on: the shipped backends and a store of one's own (`CONTRACT_STORE_ENV`)."""


@contextmanager
def opened_backend(request: pytest.FixtureRequest, tmp_path: Path, namespace: str) -> Iterator[Backend]:
    """The backend `request.param` names, under `namespace`, closed afterwards."""
    kind = request.param
    if kind == 'custom':
        store = _custom_store(tmp_path)
        inner = getattr(store, 'inner', None)  # the default custom store delegates to SQLite: corrupt that
        tamper = _sqlite_tamper(inner) if isinstance(inner, SqliteStore) else _no_tamper
    elif kind == 'neo4j':
        server = request.getfixturevalue('neo4j_server')
        store = open_neo4j(server)
        tamper = _neo4j_tamper(store)
    else:
        store = open_store('memory://' if kind == 'memory' else f'sqlite://{tmp_path / "memory.db"}')
        tamper = _sqlite_tamper(store)
    try:
        yield Backend(store=store, namespace=namespace, tamper=tamper)
    finally:
        store.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[Backend]:
    with opened_backend(request, tmp_path, unique_namespace) as opened:
        yield opened
