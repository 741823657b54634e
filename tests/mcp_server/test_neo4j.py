"""The MCP tools over the real Neo4j backend: full read Cypher in `query_memory`, the same refusals and scoping."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from mementograph.eval import DialogueIngestor, IngestedDialogue
from mementograph.knowledge_graph.store import open_store
from tests.conftest import neo4j_uri_with_auth
from tests.recall.conftest import small_dialogue

from ._client import TOOLS, error, in_process, ok, texts
from .conftest import PAGES, MemoryFile

pytestmark = pytest.mark.neo4j

# Neo4j runs this; the embedded store's Cypher subset has no WITH and says so.
GROUPED = (
    'MATCH (m:Memento {namespace: $namespace}) WITH m.session_id AS session, count(*) AS mementos '
    'RETURN session, mementos ORDER BY session'
)


@dataclass(frozen=True)
class Neo4jMemory:
    uri: str
    mine: str
    theirs: str
    ingested: IngestedDialogue
    foreign: IngestedDialogue


@pytest.fixture(scope='module')
def neo4j_memory(neo4j_server: dict[str, str]) -> Iterator[Neo4jMemory]:
    """Session `conv-1` archived in two fresh namespaces of the shared server (removed afterwards)."""
    uri = neo4j_uri_with_auth(neo4j_server)
    mine, theirs = (f'test-mcp-{uuid.uuid4().hex[:10]}' for _ in range(2))
    store = open_store(uri)
    try:
        ingested, foreign = (
            asyncio.run(
                DialogueIngestor(min_tokens=40, namespace=namespace, page_policy=PAGES).ingest(
                    store, small_dialogue('conv-1')
                )
            )
            for namespace in (mine, theirs)
        )
        yield Neo4jMemory(uri, mine, theirs, ingested, foreign)
    finally:
        for namespace in (mine, theirs):
            store.delete_session('conv-1', namespace=namespace)
        store.close()


async def test_every_tool_on_neo4j(neo4j_memory: Neo4jMemory) -> None:
    block = neo4j_memory.ingested.evictions[0].blocks[0]
    foreign = neo4j_memory.foreign.evictions[0].blocks[0]
    async with in_process(neo4j_memory.uri, namespace=neo4j_memory.mine) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
        assert 'agencies' in ok(await client.call_tool('recall', {'query': 'adoption agencies'}))
        header, body = texts(await client.call_tool('recover_block', {'block_id': block.id}))
        assert 'sha256 verified' in header
        assert json.loads(body)['blocks'][0]['messages'] == json.loads(block.messages_json)
        assert 'No archived block' in error(await client.call_tool('recover_block', {'block_id': foreign.id}))
        listing = ok(await client.call_tool('list_pages', {}))
        assert 'session conv-1 (3 pages)' in listing
        assert ok(await client.call_tool('retrieve_page', {'page_id': '3'})).startswith('[page 3 pg_')
        stats = json.loads(ok(await client.call_tool('stats', {})))
        assert (stats['backend'], stats['blocks'], stats['newest_sessions']) == ('neo4j', 6, ['conv-1'])


async def test_query_memory_on_neo4j(neo4j_memory: Neo4jMemory) -> None:
    store = open_store(neo4j_memory.uri)
    expected = store.query(GROUPED, namespace=neo4j_memory.mine)
    store.close()
    assert expected == [{'session': 'conv-1', 'mementos': 6}]
    async with in_process(neo4j_memory.uri, namespace=neo4j_memory.mine) as client:
        answer = json.loads(ok(await client.call_tool('query_memory', {'cypher': GROUPED})))
        assert answer == {'row_count': 1, 'rows': expected}
        blob = json.loads(
            ok(
                await client.call_tool(
                    'query_memory',
                    {
                        'cypher': 'MATCH (b:EvictedBlock {namespace: $namespace, id: $id}) RETURN b.messages_json AS m',
                        'params': {'id': neo4j_memory.ingested.evictions[0].blocks[0].id},
                    },
                )
            )
        )
        assert blob['rows'][0]['m'] == neo4j_memory.ingested.evictions[0].blocks[0].messages_json.decode()
        for write in (
            'CREATE (n:Memento {id: "x"}) RETURN n',
            'MATCH (b:EvictedBlock {namespace: $namespace}) DETACH DELETE b',
            'LOAD CSV FROM "file:///etc/passwd" AS row RETURN row',
            'CALL dbms.security.listUsers()',
        ):
            assert 'read-only' in error(await client.call_tool('query_memory', {'cypher': write})), write
        syntax = error(await client.call_tool('query_memory', {'cypher': 'MATCH (b RETURN b'}))
        assert 'Query failed' in syntax and 'line' in syntax
    store = open_store(neo4j_memory.uri)
    assert store.stats(namespace=neo4j_memory.mine).blocks == 6  # nothing was written
    store.close()


async def test_the_embedded_subset_says_when_neo4j_is_needed(memory_file: MemoryFile) -> None:
    async with in_process(memory_file.uri) as client:
        message = error(await client.call_tool('query_memory', {'cypher': GROUPED}))
    assert 'Query failed' in message and 'Neo4j' in message
