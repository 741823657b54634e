"""Real stores for the fault tests: a SQLite file, and the shared Neo4j server under a namespace of the test's own."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mementograph.knowledge_graph.store import GraphStore, open_store
from tests.conftest import neo4j_uri_with_auth, require_neo4j
from tests.reliability._server import SCRIPT, PrivateNeo4j, shared_lib_dir


@dataclass
class RealStore:
    kind: str
    store: GraphStore
    uri: str
    """What another process opens to reach the same data (credentials come from the environment)."""
    namespace: str


@pytest.fixture(params=['sqlite', pytest.param('neo4j', marks=pytest.mark.neo4j)])
def real_store(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[RealStore]:
    """A SQLite file, or the shared Neo4j server emptied of the test's namespace afterwards."""
    if request.param == 'neo4j':
        uri = neo4j_uri_with_auth(request.getfixturevalue('neo4j_server'))
    else:
        uri = f'sqlite://{tmp_path / "memory.db"}'
    store = open_store(uri)
    try:
        yield RealStore(request.param, store, uri, unique_namespace)
    finally:
        for session in store.list_sessions(namespace=unique_namespace):  # the shared server keeps what a test wrote
            store.delete_session(session.id, namespace=unique_namespace)
        store.close()


# -- a private Neo4j server, for the test that stops and restarts its server ------------------------------------

_private: list[PrivateNeo4j] = []


def _can_run_neo4j() -> str | None:
    """Why a private server cannot run here, or `None`."""
    if not SCRIPT.exists():
        return f'{SCRIPT} is missing'
    if shutil.which('java') is None and not os.environ.get('JAVA_HOME'):
        return 'no Java to run a private Neo4j server (Java 17 or 21; see scripts/neo4j-server)'
    if not shared_lib_dir().is_dir() and shutil.which('mvn') is None:
        return 'no Neo4j jars (run `scripts/neo4j-server start` once) and no mvn to fetch them'
    return None


@pytest.hookimpl(trylast=True)  # after `-k`/`-m` deselected what will not run
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the private server as soon as a test that needs it is selected: it boots (about 20 s) while the
    tests before it run."""
    if _private or config.option.collectonly:
        return
    if any('private_neo4j' in getattr(item, 'fixturenames', ()) for item in items) and _can_run_neo4j() is None:
        server = PrivateNeo4j()
        server.start_in_background()
        _private.append(server)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    while _private:
        _private.pop().destroy()


@pytest.fixture(scope='session')
def private_neo4j() -> PrivateNeo4j:
    """A Neo4j server of this test session's own, which a test may stop and start (never the shared one)."""
    reason = _can_run_neo4j()
    if reason is not None:
        if require_neo4j():
            pytest.fail(f'MEMENTOGRAPH_REQUIRE_NEO4J=1 but {reason}')
        pytest.skip(reason)
    if not _private:  # collected without the hook (e.g. another rootdir)
        server = PrivateNeo4j()
        server.start_in_background()
        _private.append(server)
    server = _private[0]
    server.wait_started()
    return server
