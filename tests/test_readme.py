"""Every code block in README.md runs: a README that lies is a bug.

How each fenced block is executed:
- ``python``: in a fresh interpreter, in a temporary directory, with a temporary HOME and store.
- ``bash``: as one `bash -euo pipefail` script in a temporary directory, with `./scripts/...` meaning the
  repository's scripts. Upper-case placeholders a reader replaces by hand (``BLOCK_ID``, ``SESSION_ID``,
  ``MEMENTO_ID``, ``TRAJECTORY.json``) are replaced by real values from the store the earlier blocks wrote.
  Two lines are not run as written, because running them inside the test suite would be wrong: ``./scripts/test``
  (the suite would run itself; the test runs ``./scripts/test --collect-only -q`` instead, which proves the
  command sets up and finds the tests) and ``eval "$(scripts/neo4j-server start)"`` when a Neo4j server is already
  given to the tests (starting a second one would collide with it on the same port; the line's effect -
  ``NEO4J_URI`` and credentials in the environment - is provided from that server instead).
- ``cypher``: must be one of the queries tests/store/test_cypher_examples.py runs on every backend against known
  data.
- ``json``: parsed; an MCP client configuration is started exactly as the client would start it and must list the
  memory tools.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, SHARED_DATA, neo4j_uri_with_auth

README = REPO / 'README.md'
_FENCE = re.compile(r'^```([\w+-]*)[^\n]*\n(.*?)^```\s*$', re.MULTILINE | re.DOTALL)
_NEO4J_START = 'eval "$(scripts/neo4j-server start)"'


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int

    @property
    def name(self) -> str:
        return f'README.md:{self.line}:{self.language}'


def readme_blocks() -> list[Block]:
    text = README.read_text(encoding='utf-8')
    return [
        Block(match.group(1) or 'text', match.group(2), text.count('\n', 0, match.start()) + 1)
        for match in _FENCE.finditer(text)
    ]


BLOCKS = readme_blocks()


def _blocks(language: str) -> list[Block]:
    return [block for block in BLOCKS if block.language == language]


def test_every_block_has_a_runner() -> None:
    """A block in a language this test does not run would be a README claim nobody checks."""
    assert BLOCKS, 'README.md has no code blocks'
    runners = {'python', 'bash', 'cypher', 'json'}
    assert {block.language for block in BLOCKS} <= runners, [b.name for b in BLOCKS if b.language not in runners]


@pytest.fixture(scope='module')
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A fresh HOME, working directory and embedded store shared by the README's blocks, in README order."""
    home = tmp_path_factory.mktemp('readme-home')
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(('MEMENTOGRAPH_', 'XDG_')) and key not in ('NEO4J_URI',)
    }
    env.update(
        HOME=str(home),
        PATH=f'{Path(sys.executable).parent}{os.pathsep}{env.get("PATH", "")}',
        MEMENTOGRAPH_VENV=str(Path(sys.executable).parent.parent),
        PYTHONUNBUFFERED='1',
    )
    if 'TIKTOKEN_CACHE_DIR' in os.environ:
        env['TIKTOKEN_CACHE_DIR'] = os.environ['TIKTOKEN_CACHE_DIR']
    # downloads (Neo4j jars, embedding models) are not what a fresh HOME tests: share the user's cache
    env['MEMENTOGRAPH_CACHE'] = os.environ.get('MEMENTOGRAPH_CACHE') or str(Path.home() / '.cache' / 'mementograph')
    yield env


def _run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _first_block_id(env: dict[str, str], cwd: Path) -> dict[str, str]:
    """Real values for the README's placeholders, from the store the earlier blocks wrote."""
    out = _run(['mementograph', 'export', '--jsonl'], env, cwd)
    assert out.returncode == 0, out.stderr
    first = json.loads(out.stdout.splitlines()[0])
    trajectories = sorted((SHARED_DATA / 'agent_trajectories').glob('*.traj.json'))
    assert trajectories, f'no *.traj.json in {SHARED_DATA / "agent_trajectories"} for the README tour'
    return {
        'BLOCK_ID': first['block_id'],
        'SESSION_ID': first['session_id'],
        'MEMENTO_ID': first['memento']['id'],
        'TRAJECTORY.json': str(min(trajectories, key=lambda p: p.stat().st_size)),
    }


def _bash_script(block: Block, values: dict[str, str], neo4j_given: bool) -> str:
    lines = []
    for line in block.code.splitlines():
        command = line.split('#', 1)[0].strip()
        if command == './scripts/test':
            line = f'{REPO}/scripts/test --collect-only -q'
        elif command == _NEO4J_START and neo4j_given:
            continue
        lines.append(line.replace('./scripts/', f'{REPO}/scripts/').replace(' scripts/', f' {REPO}/scripts/'))
    script = '\n'.join(lines)
    for placeholder, value in values.items():
        script = script.replace(placeholder, value)
    return script


def test_bash_blocks(
    sandbox: dict[str, str], tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    """The shell blocks, top to bottom, in one working directory (later blocks use what earlier ones wrote)."""
    blocks = _blocks('bash')
    assert blocks
    cwd = tmp_path_factory.mktemp('readme-cwd')
    env = dict(sandbox)
    neo4j_given = False
    if any('neo4j' in block.code for block in blocks):
        server = request.getfixturevalue('neo4j_server')
        env.update(
            NEO4J_URI=neo4j_uri_with_auth(server), NEO4J_USERNAME=server['user'], NEO4J_PASSWORD=server['password']
        )
        neo4j_given = True
    values: dict[str, str] = {}
    for block in blocks:
        if not values and any(p in block.code for p in ('BLOCK_ID', 'SESSION_ID', 'MEMENTO_ID', 'TRAJECTORY.json')):
            values = _first_block_id(env, cwd)
        script = _bash_script(block, values, neo4j_given)
        out = _run(['bash', '-euo', 'pipefail', '-c', script], env, cwd, timeout=600)
        assert out.returncode == 0, (
            f'{block.name} failed ({out.returncode}):\n{script}\n--- stdout\n{out.stdout[-3000:]}\n--- stderr\n{out.stderr[-3000:]}'
        )
        assert 'Traceback' not in out.stderr, f'{block.name}:\n{out.stderr[-3000:]}'


@pytest.mark.parametrize('block', _blocks('python'), ids=lambda b: b.name)
def test_python_blocks(block: Block, sandbox: dict[str, str], tmp_path: Path) -> None:
    env = dict(sandbox, MEMENTOGRAPH_STORE=f'sqlite://{tmp_path / "memory.db"}')
    out = _run([sys.executable, '-c', block.code], env, tmp_path)
    assert out.returncode == 0, f'{block.name} failed:\n{block.code}\n--- stderr\n{out.stderr[-3000:]}'


@pytest.mark.parametrize('block', _blocks('json'), ids=lambda b: b.name)
def test_json_blocks(block: Block, sandbox: dict[str, str], tmp_path: Path) -> None:
    config = json.loads(block.code)
    servers = config.get('mcpServers') or config.get('servers') or {}
    for name, server in servers.items():
        if 'command' not in server:
            continue  # an HTTP server entry: its URL is checked by the MCP tests
        command = shutil.which(server['command'], path=sandbox['PATH'])
        assert command, f'{block.name}: {name}: command {server["command"]!r} not found'
        _assert_mcp_server_lists_tools(
            [command, *server.get('args', [])], dict(sandbox, **server.get('env', {})), tmp_path
        )


def _assert_mcp_server_lists_tools(argv: list[str], env: dict[str, str], cwd: Path) -> None:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def tools() -> set[str]:
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(cwd))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return {tool.name for tool in (await session.list_tools()).tools}

    names = anyio.run(tools)
    assert {'recall', 'recover_block', 'list_pages', 'retrieve_page', 'query_memory', 'stats'} <= names


def test_cypher_blocks_are_the_tested_queries() -> None:
    """Each README query is one of `EXAMPLE_QUERIES`, which tests/store/test_cypher_examples.py runs on every backend
    (Neo4j included) against known data and compares with rows worked out by hand."""
    from mementograph.knowledge_graph.store._cypher import EXAMPLE_QUERIES

    blocks = _blocks('cypher')
    assert len(blocks) >= 8
    tested = {example.cypher.strip() for example in EXAMPLE_QUERIES}
    untested = [block.name for block in blocks if block.code.strip() not in tested]
    assert not untested, f'README queries no test runs: {untested}'
