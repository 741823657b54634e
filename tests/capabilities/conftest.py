"""The backends the capability's tests run on: a real store each, cleaned of what a test wrote."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from mementograph.knowledge_graph.store import GraphStore, open_store
from tests.conftest import open_neo4j

ALL_BACKENDS = ['memory', 'sqlite', pytest.param('neo4j', marks=pytest.mark.neo4j)]
"""Parameters of a `backend` fixture that runs a test on every backend."""
FILE_BACKENDS = ['sqlite', pytest.param('neo4j', marks=pytest.mark.neo4j)]
"""Parameters of a `backend` fixture for tests that need a store outliving its connection."""


@dataclass
class Backend:
    store: GraphStore
    namespace: str


@contextmanager
def opened_backend(request: pytest.FixtureRequest, tmp_path: Path, namespace: str) -> Iterator[Backend]:
    """The store `request.param` names (`memory`, `sqlite`: a file under `tmp_path`, `neo4j`: the shared server),
    under `namespace`; on the shared server, the sessions the test wrote are deleted afterwards."""
    if request.param == 'neo4j':
        store = open_neo4j(request.getfixturevalue('neo4j_server'))
    else:
        store = open_store('memory://' if request.param == 'memory' else f'sqlite://{tmp_path / "memory.db"}')
    try:
        yield Backend(store, namespace)
    finally:
        for session in store.list_sessions(namespace=namespace):  # the shared server keeps what a test wrote
            store.delete_session(session.id, namespace=namespace)
        store.close()
