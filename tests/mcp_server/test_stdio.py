"""`mementograph mcp` over stdio: the SDK's client spawns the real command and calls every tool."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from mementograph.cli import main
from mementograph.knowledge_graph.dense import DenseIndex, embedding_model
from mementograph.knowledge_graph.store import open_store

from ._client import TOOLS, error, ok, texts
from .conftest import MemoryFile, child_env, cli_command


def _server(*args: str) -> StdioServerParameters:
    command, *rest = cli_command(*args)
    return StdioServerParameters(command=command, args=rest, env=child_env())


async def test_every_tool_over_stdio(memory_file: MemoryFile) -> None:
    store = open_store(memory_file.uri)
    stats = store.stats(session_id=None)
    page = store.list_pages(session_id='conv-1')[1]
    store.close()
    block = memory_file.default['conv-2'].evictions[-1].blocks[-1]
    async with Client(_server('--store', memory_file.uri)) as client:
        assert client.server_info is not None and client.server_info.name == 'mementograph'
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
        assert 'adoption' in ok(await client.call_tool('recall', {'query': 'adoption agencies', 'k': 2}))
        header, body = texts(await client.call_tool('recover_block', {'block_id': block.id}))
        assert 'sha256 verified' in header
        assert json.loads(body)['blocks'][0]['messages'] == json.loads(block.messages_json)
        assert page.id in ok(await client.call_tool('list_pages', {}))
        assert ok(await client.call_tool('retrieve_page', {'page_id': page.id})).startswith(f'[page 2 {page.id}')
        rows = json.loads(ok(await client.call_tool('query_memory', {'cypher': 'MATCH (s:Session) RETURN s.id AS id'})))
        assert sorted(row['id'] for row in rows['rows']) == ['conv-1', 'conv-2']
        assert 'read-only' in error(await client.call_tool('query_memory', {'cypher': 'CREATE (n) RETURN n'}))
        assert 'No archived block' in error(await client.call_tool('recover_block', {'block_id': 'blk_0'}))
        # arguments out of their range are errors, not quietly clamped
        # in a sentence naming each argument, not pydantic's report (its model name, error types, a URL)
        assert error(await client.call_tool('recall', {'query': 'adoption', 'k': 0})) == (
            'recall was called with wrong arguments: k should be greater than or equal to 1, not 0.'
        )
        assert error(await client.call_tool('recall', {'k': 'five'})) == (
            'recall was called with wrong arguments: query is required; k should be a valid integer, unable to parse '
            "string as an integer, not 'five'."
        )
        too_many = {'cypher': 'MATCH (s:Session) RETURN s.id AS id', 'limit': 5000}
        assert error(await client.call_tool('query_memory', too_many)) == (
            'query_memory was called with wrong arguments: limit should be less than or equal to 1000, not 5000.'
        )
        assert 'There is 1 part, not 9.' in error(
            await client.call_tool('recover_block', {'block_id': block.id, 'part': 9})
        )
        assert error(await client.call_tool('retrieve_page', {'page_id': page.id, 'part': 99})).endswith(
            f': There is 1 part, not 99 (page 2, {page.id}).'  # an error here too, not the last part instead
        )
        # an argument pasted whole is quoted in part, and an id typed with its call around it is taken
        long = error(await client.call_tool('recover_block', {'block_id': 'blk_' + 'f' * 100_000}))
        assert "No archived block 'blk_fff" in long and len(long) < 300
        assert len(error(await client.call_tool('recall', {'query': 'adoption', 'k': 'y' * 200_000}))) < 300
        assert len(error(await client.call_tool('retrieve_page', {'page_id': 'pg_' + 'x' * 200_000}))) < 300
        wrapped = await client.call_tool('recover_block', {'block_id': f' recover_block("{block.id}") '})
        assert json.loads(texts(wrapped)[1])['blocks'][0]['block_id'] == block.id
        # the server is still there after the errors
        assert json.loads(ok(await client.call_tool('stats', {})))['blocks'] == stats.blocks


async def test_namespace_and_session_flags(memory_file: MemoryFile) -> None:
    mine = memory_file.other.evictions[0].blocks[0]
    same_session_other_namespace = memory_file.default['conv-1'].evictions[0].blocks[0]
    args = ('--store', memory_file.uri, '--namespace', 'other', '--session', 'conv-1')
    async with Client(_server(*args)) as client:
        assert 'other' in (client.instructions or '')
        body = texts(await client.call_tool('recover_block', {'block_id': mine.id}))[1]
        assert json.loads(body)['blocks'][0]['sha256'] == mine.sha256
        missing = error(await client.call_tool('recover_block', {'block_id': same_session_other_namespace.id}))
        assert "namespace 'other', session 'conv-1'" in missing
        data = json.loads(ok(await client.call_tool('stats', {})))
        assert (data['namespace'], data['session_id'], data['blocks']) == ('other', 'conv-1', 6)


async def test_recall_by_meaning_with_an_embedding_model(
    memory_file: MemoryFile, onnx_model_path: Path, tmp_path: Path
) -> None:
    uri = _copy(memory_file.uri, tmp_path / 'memory.db')  # the server stores its vectors: the shared file stays
    model = f'onnx:{onnx_model_path}'
    store = open_store(uri)
    conv2 = {m.id for m in store.list_mementos(session_id='conv-2')}
    store.close()
    async with Client(_server('--store', uri, '--embedding', model)) as client:
        query = {'query': 'Which pastime does she find calming?', 'k': 2, 'session_id': 'conv-2'}
        text = ok(await client.call_tool('recall', query))  # no word of "painting relaxes me"
        assert 'dense rank 1' in text and set(re.findall(r'mem_[0-9a-f]+', text)) <= conv2
        assert 'painting' in ok(await client.call_tool('recover_block', {'block_id': _first_id(text)})).lower()
    store = open_store(uri)
    try:  # for the next server: the session's blocks with their vectors
        stored = store.read_vectors(DenseIndex(embedding_model(model)).model_key, session_id='conv-2')
        assert len(stored) == store.count_blocks(session_id='conv-2') > 0
    finally:
        store.close()


def _copy(uri: str, target: Path) -> str:
    source = sqlite3.connect(uri.removeprefix('sqlite://'))
    copy = sqlite3.connect(target)
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()
    return f'sqlite://{target}'


def _first_id(recalled: str) -> str:
    match = re.search(r'recover_block\("(mem_[0-9a-f]+)"\)', recalled)
    assert match is not None, recalled
    return match.group(1)


def test_a_missing_embedding_model_is_a_user_error(memory_file: MemoryFile, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(['mcp', '--store', memory_file.uri, '--embedding', 'onnx:/no/such/model']) == 2
    err = capsys.readouterr().err
    assert err.startswith('mementograph: error: ') and '/no/such/model: no such embedding model' in err


def test_a_server_without_an_embedding_model_never_loads_the_agent_framework(memory_file: MemoryFile) -> None:
    """An MCP client starts the server and waits for it: without `--embedding` nothing of pydantic-ai is needed
    (its import was half of the 2.2 s before `initialize` was answered). The full-text index is made current first:
    catching up decodes the new blocks' messages, which does need it."""
    store = open_store(memory_file.uri)
    store.search_text('adoption')
    store.close()
    program = (
        'import sys\n'
        'from mementograph.knowledge_graph.store import open_store\n'
        'from mementograph.mcp import MemoryTools, create_server\n'
        'store = open_store(sys.argv[1])\n'
        'create_server(store)\n'
        "print(MemoryTools(store).recall('adoption agencies', k=2))\n"
        "print(sorted({name.split('.')[0] for name in sys.modules} & {'pydantic_ai'}), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, '-c', program, memory_file.uri], env=child_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert 'adoption' in done.stdout
    assert done.stderr.splitlines()[-1] == '[]'


def test_one_ctrl_c_stops_the_server(memory_file: MemoryFile) -> None:
    server = subprocess.Popen(
        cli_command('--store', memory_file.uri),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
    )
    assert server.stdin is not None and server.stdout is not None
    hello = {
        'jsonrpc': '2.0',
        'id': 1,
        'method': 'initialize',
        'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 't', 'version': '1'}},
    }
    server.stdin.write(json.dumps(hello).encode() + b'\n')
    server.stdin.flush()
    assert json.loads(server.stdout.readline())['id'] == 1  # serving, its stdin still open
    server.send_signal(signal.SIGINT)
    try:
        code = server.wait(timeout=10)  # it stayed up, deaf, until its next line of input
    finally:
        server.kill()
    assert code == 130
    assert 'mementograph: interrupted' in server.communicate()[1].decode()
