"""Helpers shared by the MCP tests: connect the SDK's client in-process, read a tool answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp import Client
from mcp.types import CallToolResult, TextContent

from mementograph.knowledge_graph.store import open_store
from mementograph.mcp import create_server

TOOLS = {'recall', 'recover_block', 'list_pages', 'retrieve_page', 'query_memory', 'stats'}


@asynccontextmanager
async def in_process(uri: str, *, namespace: str = 'default', session_id: str | None = None) -> AsyncIterator[Client]:
    """The SDK client connected to a server over a store opened on `uri` (closed afterwards)."""
    store = open_store(uri)
    try:
        async with Client(create_server(store, namespace=namespace, session_id=session_id)) as client:
            yield client
    finally:
        store.close()


def texts(result: CallToolResult) -> list[str]:
    out = []
    for block in result.content:
        assert isinstance(block, TextContent)
        out.append(block.text)
    return out


def ok(result: CallToolResult) -> str:
    """The text of a successful answer (all its content blocks, joined)."""
    assert not result.is_error, texts(result)
    return '\n'.join(texts(result))


def error(result: CallToolResult) -> str:
    assert result.is_error, texts(result)
    return '\n'.join(texts(result))
