"""`mementograph mcp --http`: the real command serving streamable HTTP in a subprocess, with and without a token."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mementograph.cli import main
from mementograph.knowledge_graph.store import open_store
from mementograph.mcp import create_server, http_app, is_loopback

from ._client import TOOLS, error, ok, texts
from .conftest import MemoryFile, child_env, cli_command, free_port

TOKEN = 'test-token-5f1c9a'


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """Run `mementograph mcp --http` on a free port until it answers HTTP; yield its URL; stop it."""
    port = free_port()
    process = subprocess.Popen(
        cli_command('--http', '--port', str(port), *args),
        env=child_env(**(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f'http://127.0.0.1:{port}/mcp'
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f'the server exited with {process.returncode}: {process.communicate()[1][-2000:]}')
            try:
                httpx2.get(url, timeout=2)
                break
            except httpx2.TransportError:
                if time.monotonic() > deadline:
                    pytest.fail('the server did not answer within 120 s')
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture(scope='module')
def token_server(memory_file: MemoryFile) -> Iterator[str]:
    """Bound to every interface, which is allowed because a token is set (`--token`)."""
    with serving('--store', memory_file.uri, '--host', '0.0.0.0', '--token', TOKEN) as url:
        yield url


def _initialize() -> dict[str, object]:
    return {
        'jsonrpc': '2.0',
        'id': 1,
        'method': 'initialize',
        'params': {
            'protocolVersion': '2025-06-18',
            'capabilities': {},
            'clientInfo': {'name': 'raw', 'version': '0'},
        },
    }


def _post(url: str, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.post(
        url,
        json=_initialize(),
        headers={'accept': 'application/json, text/event-stream', **(headers or {})},
        timeout=30,
    )


def test_requests_without_the_token_get_401(token_server: str) -> None:
    for headers in (None, {'authorization': 'Bearer wrong'}, {'authorization': f'Basic {TOKEN}'}, {'x': TOKEN}):
        response = _post(token_server, headers)
        assert response.status_code == 401, headers
        assert response.headers['www-authenticate'].startswith('Bearer')
        assert response.json()['error'] == 'unauthorized'
    assert _post(token_server, {'authorization': f'Bearer {TOKEN}'}).status_code == 200


async def test_sdk_client_with_the_token(token_server: str, memory_file: MemoryFile) -> None:
    block = memory_file.default['conv-1'].evictions[1].blocks[0]
    other = memory_file.other.evictions[1].blocks[0]
    async with (
        httpx2.AsyncClient(headers={'Authorization': f'Bearer {TOKEN}'}) as http,
        Client(streamable_http_client(token_server, http_client=http)) as client,
    ):
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
        assert 'agencies' in ok(await client.call_tool('recall', {'query': 'adoption agencies'}))
        header, body = texts(await client.call_tool('recover_block', {'block_id': block.id}))
        assert 'sha256 verified' in header
        assert json.loads(body)['blocks'][0]['messages'] == json.loads(block.messages_json)
        assert 'No archived block' in error(await client.call_tool('recover_block', {'block_id': other.id}))
        listing = ok(await client.call_tool('list_pages', {'session_id': 'conv-1'}))
        page_id = listing.split('page 1 ', 1)[1].split(' ', 1)[0]
        assert ok(await client.call_tool('retrieve_page', {'page_id': page_id})).startswith(f'[page 1 {page_id}')
        rows = json.loads(
            ok(await client.call_tool('query_memory', {'cypher': 'MATCH (p:Page) RETURN count(p) AS pages'}))
        )
        assert rows['rows'] == [{'pages': 6}]
        assert 'read-only' in error(await client.call_tool('query_memory', {'cypher': 'MERGE (n:X) RETURN n'}))
        assert json.loads(ok(await client.call_tool('stats', {})))['pages'] == 6


async def test_sdk_client_without_the_token_is_refused(token_server: str) -> None:
    with pytest.raises(BaseExceptionGroup) as raised:
        async with Client(token_server) as client:
            await client.call_tool('stats', {})
    assert raised.group_contains(MCPError, depth=None)


async def test_loopback_without_a_token(memory_file: MemoryFile) -> None:
    with serving('--store', memory_file.uri, '--namespace', 'other') as url:
        async with Client(url) as client:
            data = json.loads(ok(await client.call_tool('stats', {})))
            assert (data['namespace'], data['blocks']) == ('other', 6)
        # the SDK's DNS-rebinding check on a loopback bind: a foreign Host header is turned away
        assert _post(url, {'host': 'evil.example:80'}).status_code == 421


async def test_token_from_the_environment(memory_file: MemoryFile) -> None:
    with serving('--store', memory_file.uri, env={'MEMENTOGRAPH_MCP_TOKEN': TOKEN}) as url:
        assert _post(url).status_code == 401
        async with (
            httpx2.AsyncClient(headers={'Authorization': f'Bearer {TOKEN}'}) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            assert json.loads(ok(await client.call_tool('stats', {})))['blocks'] == 12


@pytest.mark.parametrize('host', ['0.0.0.0', '::', '192.168.1.20', 'example.com'])
def test_non_loopback_without_a_token_is_refused(
    host: str, memory_file: MemoryFile, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv('MEMENTOGRAPH_MCP_TOKEN', raising=False)
    assert main(['mcp', '--store', memory_file.uri, '--http', '--host', host]) == 2
    err = capsys.readouterr().err
    assert 'token' in err and 'Traceback' not in err
    store = open_store(memory_file.uri)
    try:
        with pytest.raises(ValueError, match='without a bearer token'):
            http_app(create_server(store), host=host)
    finally:
        store.close()


@pytest.mark.parametrize(
    'argv',
    [
        ['--token', 'x'],
        ['--host', '127.0.0.1'],
        ['--port', '9000'],
        ['--http', '--port', '70000'],
    ],
)
def test_flag_errors(argv: list[str], memory_file: MemoryFile, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(['mcp', '--store', memory_file.uri, *argv]) == 2
    assert capsys.readouterr().err.startswith('mementograph: error: ')


def test_loopback_addresses() -> None:
    assert all(is_loopback(host) for host in ('127.0.0.1', '127.8.9.1', 'localhost', 'LOCALHOST', '::1', '[::1]'))
    assert not any(is_loopback(host) for host in ('0.0.0.0', '::', '10.0.0.1', 'example.com', ''))


def test_a_port_in_use_is_one_line_before_anything_is_served(
    memory_file: MemoryFile, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(['mcp', '--http', '--port', str(port), '--store', memory_file.uri]) == 1
    err = capsys.readouterr().err
    assert (
        err
        == f'mementograph: error: cannot listen on 127.0.0.1:{port}: Address already in use; choose another --port\n'
    )
