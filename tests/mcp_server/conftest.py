"""A real SQLite memory file for the MCP tests: the small dialogue archived through the engine three times --
sessions `conv-1` and `conv-2` of the default namespace, and `conv-1` again in namespace `other` (same session id,
different namespace) -- with two blocks per page so pages close."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from dataclasses import dataclass

import pytest

from mementograph.eval import DialogueIngestor, IngestedDialogue
from mementograph.knowledge_graph.recall import PagePolicy
from mementograph.knowledge_graph.store import open_store
from tests.recall.conftest import small_dialogue

PAGES = PagePolicy(blocks_per_page=2)
CLI = 'import sys; from mementograph.cli import main; sys.exit(main())'
"""Run as `python -c CLI mcp ...`: the command line exactly as the console script runs it, from this interpreter."""


@dataclass(frozen=True)
class MemoryFile:
    uri: str
    default: dict[str, IngestedDialogue]
    """Session id -> what was archived in the default namespace."""
    other: IngestedDialogue
    """Session `conv-1` of namespace `other`."""


async def ingest_all(uri: str) -> MemoryFile:
    store = open_store(uri)
    try:
        default = {
            sid: await DialogueIngestor(min_tokens=40, page_policy=PAGES).ingest(store, small_dialogue(sid))
            for sid in ('conv-1', 'conv-2')
        }
        other = await DialogueIngestor(min_tokens=40, namespace='other', page_policy=PAGES).ingest(
            store, small_dialogue('conv-1')
        )
    finally:
        store.close()
    return MemoryFile(uri, default, other)


@pytest.fixture(scope='session')
def memory_file(tmp_path_factory: pytest.TempPathFactory) -> MemoryFile:
    """Read-only for every test (the MCP tools never write)."""
    path = tmp_path_factory.mktemp('mcp') / 'memory.db'
    return asyncio.run(ingest_all(f'sqlite://{path}'))


def cli_command(*args: str) -> list[str]:
    return [sys.executable, '-c', CLI, 'mcp', *args]


def child_env(**extra: str) -> dict[str, str]:
    """What a spawned server needs: the offline tokenizer cache (and, for Neo4j, its credentials)."""
    env = {key: value for key, value in os.environ.items() if key.startswith(('TIKTOKEN_', 'NEO4J_'))}
    env.pop('MEMENTOGRAPH_MCP_TOKEN', None)
    return env | extra


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port: int = sock.getsockname()[1]
        return port
