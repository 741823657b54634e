"""The six MCP tools through the SDK's own client (in-process), checked against a real SQLite memory file; the
namespace and session scope also against the shared Neo4j server."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from pydantic_ai.embeddings import EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.messages import ModelMessagesTypeAdapter

from mementograph.eval import Dialogue, DialogueIngestor, IngestedDialogue, Segment, Turn
from mementograph.knowledge_graph import Eviction, MementoRecord, memento_id_for
from mementograph.knowledge_graph.dense import BackgroundSync, DenseIndex
from mementograph.knowledge_graph.store import GraphStore, open_store
from mementograph.mcp import MemoryTools, _server, create_server
from tests.builders import HashedWords
from tests.conftest import neo4j_uri_with_auth
from tests.recall.conftest import small_dialogue

from ._client import TOOLS, error, in_process, ok, texts
from .conftest import PAGES, MemoryFile


def _block_ids(text: str) -> set[str]:
    return set(re.findall(r'blk_[0-9a-f]+', text))


def _memento_ids(text: str) -> set[str]:
    return set(re.findall(r'mem_[0-9a-f]+', text))


MARKER = 'wobbegong'
"""A word only session `marked` of the other namespace says: recall in any other scope must never answer it."""


def marked_dialogue(session_id: str) -> Dialogue:
    """A short chat that keeps naming `MARKER` (and nothing of the small dialogue's topics)."""
    start = datetime(2023, 7, 3, 18, 0, tzinfo=UTC)
    lines = [
        ('user', f'Dana: The aquarium in Monterey got a {MARKER} shark, it hides flat on the sand all day.'),
        ('assistant', f'Eli: A {MARKER}? Those carpet sharks have tassels around the mouth, right?'),
        ('user', f'Dana: Yes, the {MARKER} uses them as camouflage and waits for fish to swim past.'),
        ('assistant', f'Eli: I would love to sketch the {MARKER} before the tank gets crowded on weekends.'),
        ('user', f'Dana: The keeper said the {MARKER} eats twice a week, on Tuesdays and Fridays.'),
        ('assistant', f'Eli: Then Friday it is: we watch the {MARKER} feeding and sketch it afterwards.'),
    ]
    turns = tuple(
        Turn(f'M:{i}', role, text, start + timedelta(minutes=i))  # type: ignore[arg-type]
        for i, (role, text) in enumerate(lines)
    )
    return Dialogue(session_id, (Segment('M', turns),))


@dataclass(frozen=True)
class ScopedMemory:
    """The small dialogue archived as sessions `conv-1` and `conv-2` of `namespace`, again as `conv-1` of
    `other_namespace` (same session id, another namespace), which also holds session `marked` (`MARKER`)."""

    backend: str
    uri: str
    namespace: str
    other_namespace: str
    empty_namespace: str
    """Holds nothing."""
    default: dict[str, IngestedDialogue]
    other: IngestedDialogue
    marked: IngestedDialogue

    @property
    def anchor(self) -> str:
        """What a query pattern needs to stay in its namespace: nothing on the embedded store (its view holds one
        namespace); on Neo4j, whose database holds them all, `{namespace: $namespace}` or the query is refused."""
        return '' if self.backend == 'sqlite' else ' {namespace: $namespace}'


async def _ingest_scoped(
    uri: str, backend: str, namespace: str, other_namespace: str, empty_namespace: str
) -> ScopedMemory:
    store = open_store(uri)
    try:
        default = {
            sid: await DialogueIngestor(min_tokens=40, namespace=namespace, page_policy=PAGES).ingest(
                store, small_dialogue(sid)
            )
            for sid in ('conv-1', 'conv-2')
        }
        ingestor = DialogueIngestor(min_tokens=40, namespace=other_namespace, page_policy=PAGES)
        other = await ingestor.ingest(store, small_dialogue('conv-1'))
        marked = await ingestor.ingest(store, marked_dialogue('marked'))
    finally:
        store.close()
    return ScopedMemory(backend, uri, namespace, other_namespace, empty_namespace, default, other, marked)


@pytest.fixture(scope='module', params=['sqlite', pytest.param('neo4j', marks=pytest.mark.neo4j)])
def scoped(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScopedMemory]:
    """Read-only for every test: on a SQLite file (namespaces `default`, `other`, `empty`), or in three fresh
    namespaces of the shared Neo4j server (removed afterwards)."""
    if request.param == 'sqlite':
        uri = f'sqlite://{tmp_path_factory.mktemp("mcp-scope") / "memory.db"}'
        namespaces = ('default', 'other', 'empty')
    else:
        uri = neo4j_uri_with_auth(request.getfixturevalue('neo4j_server'))
        prefix = f'test-{uuid.uuid4().hex[:12]}'
        namespaces = (prefix, f'{prefix}-other', f'{prefix}-empty')
    try:
        yield asyncio.run(_ingest_scoped(uri, request.param, *namespaces))
    finally:
        if request.param == 'neo4j':
            store = open_store(uri)
            try:
                for namespace in namespaces:
                    for session in store.list_sessions(namespace=namespace):
                        store.delete_session(session.id, namespace=namespace)
            finally:
                store.close()


def _scope_ids(store: GraphStore, namespace: str, session_id: str | None = None) -> set[str]:
    """The ids of every block and memento archived in a scope (what `recall` may name)."""
    blocks = {b.id for b in store.list_blocks(namespace=namespace, session_id=session_id)}
    return blocks | {m.id for m in store.list_mementos(namespace=namespace, session_id=session_id)}


async def test_six_read_only_tools(memory_file: MemoryFile) -> None:
    async with in_process(memory_file.uri) as client:
        listed = (await client.list_tools()).tools
    assert {tool.name for tool in listed} == TOOLS
    for tool in listed:
        assert tool.annotations is not None and tool.annotations.read_only_hint is True, tool.name
        assert tool.description and len(tool.description) > 40, tool.name


async def test_recall_finds_blocks_of_its_scope(memory_file: MemoryFile) -> None:
    store = open_store(memory_file.uri)
    conv2 = {m.id for m in store.list_mementos(session_id='conv-2')}
    default = {m.id for m in store.list_mementos(session_id=None)}
    store.close()
    async with in_process(memory_file.uri) as client:
        text = ok(await client.call_tool('recall', {'query': 'adoption agencies', 'k': 3}))
        assert text.startswith('1. recover_block("mem_') and 'adoption' in text
        assert _memento_ids(text) and _memento_ids(text) <= default
        narrowed = ok(await client.call_tool('recall', {'query': 'adoption agencies', 'session_id': 'conv-2'}))
        assert _memento_ids(narrowed) and _memento_ids(narrowed) <= conv2
        later = ok(await client.call_tool('recall', {'query': 'camping', 'since': '2023-06-01T00:00:00+00:00'}))
        assert '2023-06' in later and '2023-05' not in later
        assert 'Nothing archived matches' in ok(await client.call_tool('recall', {'query': 'xylophone'}))
        future = ok(await client.call_tool('recall', {'query': 'camping', 'since': '2030-01-01'}))
        assert future == "Nothing archived since 2030-01-01 matches 'camping'; without the time range more may."
        assert 'Give a query' in error(await client.call_tool('recall', {'query': '  '}))
        assert 'ISO' in error(await client.call_tool('recall', {'query': 'camping', 'since': 'last tuesday'}))


async def test_recover_block_returns_the_archived_messages(memory_file: MemoryFile) -> None:
    archived = {block.id: block for eviction in memory_file.default['conv-1'].evictions for block in eviction.blocks}
    assert len(archived) >= 4
    store = open_store(memory_file.uri)
    async with in_process(memory_file.uri) as client:
        for block_id, record in archived.items():
            header, body = texts(await client.call_tool('recover_block', {'block_id': block_id}))
            assert 'sha256 verified' in header and 'part 1 of 1' in header
            document = json.loads(body)
            assert document['id'] == block_id and document['namespace'] == 'default'
            [block] = document['blocks']
            assert block['block_id'] == block_id and block['session_id'] == 'conv-1'
            assert block['sha256'] == record.sha256 and block['sha256_verified'] is True
            assert block['messages'] == json.loads(record.messages_json)
            recovered = ModelMessagesTypeAdapter.validate_python(block['messages'])
            assert recovered == list(store.recover_block(block_id).messages)
        # a memento id recovers every block it summarizes, in session order
        memento = store.list_mementos(session_id='conv-1')[0]
        header, body = texts(await client.call_tool('recover_block', {'block_id': memento.id}))
        assert [b['block_id'] for b in json.loads(body)['blocks']] == list(memento.summarizes)
    store.close()


async def test_a_memento_over_an_altered_block_returns_the_others_and_names_it(tmp_path: Path) -> None:
    path = tmp_path / 'altered.db'
    store = open_store(f'sqlite://{path}')
    try:
        ingested = await DialogueIngestor(min_tokens=40, page_policy=PAGES).ingest(store, small_dialogue('conv'))
        first, second = (eviction.mementos[0] for eviction in ingested.evictions[:2])
        top = MementoRecord(
            id=memento_id_for('default', 'conv', [first.id, second.id]),
            session_id='conv',
            namespace='default',
            text='both',
            tokens=1,
            summarizes=(first.id, second.id),
            level=2,
            compressor='extractive',
        )
        store.write_eviction(Eviction(session_id='conv', namespace='default', mementos=(top,)))
    finally:
        store.close()
    altered, kept = first.summarizes[0], second.summarizes[0]
    with sqlite3.connect(path) as conn:  # a disk that changed the block's bytes behind the store's back
        conn.execute("UPDATE blocks SET messages_json = replace(messages_json, 'a', 'e') WHERE id = ?", (altered,))
    async with in_process(f'sqlite://{path}') as client:
        header, body = texts(await client.call_tool('recover_block', {'block_id': top.id}))
        assert f'Recovered 1 block for {top.id}' in header
        assert f'1 more block failed the sha256 check and is not returned: {altered}' in header
        document = json.loads(body)
        assert [b['block_id'] for b in document['blocks']] == [kept] and document['failed_sha256_check'] == [altered]
        assert 'failed its sha256 check' in error(await client.call_tool('recover_block', {'block_id': altered}))


async def test_long_answers_come_in_parts_that_concatenate(
    memory_file: MemoryFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    block_id = memory_file.default['conv-1'].evictions[0].blocks[0].id
    async with in_process(memory_file.uri) as client:
        whole = texts(await client.call_tool('recover_block', {'block_id': block_id}))[1]
        monkeypatch.setattr(_server, 'OUTPUT_CHARS', 200)
        first_header, first = texts(await client.call_tool('recover_block', {'block_id': block_id}))
        total = int(re.search(r'part 1 of (\d+)', first_header).group(1))  # type: ignore[union-attr]
        assert total > 1 and f'recover_block("{block_id}", part=2)' in first_header
        pieces = [first]
        for part in range(2, total + 1):
            header, piece = texts(await client.call_tool('recover_block', {'block_id': block_id, 'part': part}))
            assert f'part {part} of {total}' in header
            pieces.append(piece)
        assert ''.join(pieces) == whole and all(len(piece) <= 200 for piece in pieces)
        listing = ok(await client.call_tool('list_pages', {}))
        assert '[pages: part 1 of' in listing and 'list_pages(part=2)' in listing
        rows = json.loads(ok(await client.call_tool('query_memory', {'cypher': 'MATCH (e:Entity) RETURN e.key'})))
        assert 0 < len(rows['rows']) < rows['row_count'] and 'showing' in rows['note']


async def test_namespace_and_session_scope(scoped: ScopedMemory) -> None:
    conv1 = scoped.default['conv-1'].evictions[0].blocks[0].id
    conv2 = scoped.default['conv-2'].evictions[0].blocks[0].id
    other = scoped.other.evictions[0].blocks[0].id
    marked = scoped.marked.evictions[0].blocks[0].id
    conv2_memento = next(b.memento_id for b in scoped.default['conv-2'].blocks if b.memento_id)
    assert len({conv1, conv2, other, marked}) == 4
    async with in_process(scoped.uri, namespace=scoped.namespace) as client:
        assert ok(await client.call_tool('recover_block', {'block_id': conv2}))
        assert ok(await client.call_tool('recover_block', {'block_id': conv2_memento}))
        for foreign in (other, marked):
            assert 'No archived block' in error(await client.call_tool('recover_block', {'block_id': foreign}))
    async with in_process(scoped.uri, namespace=scoped.namespace, session_id='conv-1') as client:
        assert ok(await client.call_tool('recover_block', {'block_id': conv1}))
        message = error(await client.call_tool('recover_block', {'block_id': conv2}))
        assert 'No archived block' in message and "session 'conv-1'" in message
        # nor through a memento of the other session (it would recover all its blocks)
        assert 'No archived block' in error(await client.call_tool('recover_block', {'block_id': conv2_memento}))
        refused = error(await client.call_tool('recover_block', {'block_id': conv2, 'session_id': 'conv-2'}))
        assert "serves session 'conv-1' only" in refused
        listing = ok(await client.call_tool('list_pages', {}))
        assert 'session conv-1 (3 pages)' in listing and 'conv-2' not in listing
    async with in_process(scoped.uri, namespace=scoped.other_namespace) as client:
        assert json.loads(texts(await client.call_tool('recover_block', {'block_id': other}))[1])['blocks']
        assert json.loads(texts(await client.call_tool('recover_block', {'block_id': marked}))[1])['blocks']
        assert 'No archived block' in error(await client.call_tool('recover_block', {'block_id': conv1}))
        assert 'No archived block' in error(await client.call_tool('recover_block', {'block_id': 'blk_nope'}))


async def test_list_pages_and_retrieve_page(scoped: ScopedMemory) -> None:
    store = open_store(scoped.uri)
    default_pages = store.list_pages(namespace=scoped.namespace, session_id=None)
    other_pages = store.list_pages(namespace=scoped.other_namespace)
    store.close()
    conv1_pages = [p for p in default_pages if p.session_id == 'conv-1']
    conv2_pages = [p for p in default_pages if p.session_id == 'conv-2']
    assert conv1_pages and conv2_pages and other_pages
    assert {p.session_id for p in other_pages} == {'conv-1', 'marked'}
    async with in_process(scoped.uri, namespace=scoped.namespace) as client:
        listing = ok(await client.call_tool('list_pages', {}))
        assert all(page.id in listing for page in default_pages)
        assert not any(page.id in listing for page in other_pages)
        assert 'session conv-1' in listing and 'session conv-2' in listing and 'marked' not in listing
        page = next(p for p in conv2_pages if p.number == 2)
        text = ok(await client.call_tool('retrieve_page', {'page_id': page.id}))
        assert text.startswith(f'[page 2 {page.id}')
        assert _block_ids(text) == set(page.block_ids)
        ambiguous = error(await client.call_tool('retrieve_page', {'page_id': '2'}))
        assert 'conv-1, conv-2' in ambiguous and 'page id' in ambiguous
        by_number = ok(await client.call_tool('retrieve_page', {'page_id': '2', 'session_id': 'conv-2'}))
        assert by_number == text
        for foreign in other_pages:
            assert 'No page' in error(await client.call_tool('retrieve_page', {'page_id': foreign.id}))
        assert 'No page' in error(await client.call_tool('retrieve_page', {'page_id': 'pg_missing'}))
    async with in_process(scoped.uri, namespace=scoped.namespace, session_id='conv-1') as client:
        text = ok(await client.call_tool('retrieve_page', {'page_id': '2'}))
        assert text.startswith('[page 2 pg_') and page.id not in text
        listing = ok(await client.call_tool('list_pages', {}))
        assert all(p.id in listing for p in conv1_pages)
        assert not any(p.id in listing for p in conv2_pages + other_pages)
        for foreign in conv2_pages:  # a page id of another session of the namespace
            message = error(await client.call_tool('retrieve_page', {'page_id': foreign.id}))
            assert 'No page' in message and "session 'conv-1'" in message
    async with in_process(scoped.uri, namespace=scoped.other_namespace) as client:
        listing = ok(await client.call_tool('list_pages', {}))
        assert all(p.id in listing for p in other_pages)  # positive control: the ids are listed in their own scope
        assert not any(p.id in listing for p in default_pages)
        assert 'No page' in error(await client.call_tool('retrieve_page', {'page_id': page.id}))
    async with in_process(scoped.uri, namespace=scoped.empty_namespace) as client:
        assert 'No pages archived yet' in ok(await client.call_tool('list_pages', {}))


async def test_recall_answers_from_its_own_scope_only(scoped: ScopedMemory) -> None:
    store = open_store(scoped.uri)
    mine = _scope_ids(store, scoped.namespace)
    conv1 = _scope_ids(store, scoped.namespace, 'conv-1')
    theirs = _scope_ids(store, scoped.other_namespace)
    marked = _scope_ids(store, scoped.other_namespace, 'marked')
    store.close()
    assert conv1 < mine and marked < theirs and not mine & theirs
    # positive control: the marker word is found where it was archived
    async with in_process(scoped.uri, namespace=scoped.other_namespace) as client:
        found = ok(await client.call_tool('recall', {'query': MARKER, 'k': 20}))
    assert found.startswith('1. recover_block(') and MARKER in found.lower()
    hits = _block_ids(found) | _memento_ids(found)
    assert hits and hits <= marked
    async with in_process(scoped.uri, namespace=scoped.namespace) as client:
        missed = ok(await client.call_tool('recall', {'query': MARKER, 'k': 20}))
        assert missed == f'Nothing archived matches {MARKER!r}.'  # the query echoed, and nothing else
        # both namespaces archived the same dialogue: every hit is still this namespace's own
        shared = ok(await client.call_tool('recall', {'query': 'adoption agencies camping Boston', 'k': 20}))
        hits = _block_ids(shared) | _memento_ids(shared)
        assert hits and hits <= mine
    async with in_process(scoped.uri, namespace=scoped.namespace, session_id='conv-1') as client:
        pinned = ok(await client.call_tool('recall', {'query': 'adoption agencies camping Boston', 'k': 20}))
        hits = _block_ids(pinned) | _memento_ids(pinned)
        assert hits and hits <= conv1  # conv-2 holds the same words: none of its blocks is named
        refused = error(await client.call_tool('recall', {'query': 'camping', 'session_id': 'conv-2'}))
        assert "serves session 'conv-1' only" in refused
        assert ok(await client.call_tool('recall', {'query': MARKER})) == f'Nothing archived matches {MARKER!r}.'


async def test_query_memory_reads_and_refuses_writes(scoped: ScopedMemory) -> None:
    anchor = scoped.anchor
    cypher = f'MATCH (b:EvictedBlock{anchor}) WHERE b.session_id = $session_id RETURN b.id AS id ORDER BY id'
    store = open_store(scoped.uri)
    expected = store.query(cypher, session_id='conv-2', namespace=scoped.namespace)
    before = (store.stats(namespace=scoped.namespace), store.stats(namespace=scoped.other_namespace))
    store.close()
    assert expected and before[0].blocks == 12
    foreign = {'id': scoped.other.blocks[0].memento_id}
    by_id = f'MATCH (m:Memento{anchor}) WHERE m.id = $id RETURN m.session_id AS s'
    async with in_process(scoped.uri, namespace=scoped.other_namespace) as client:  # positive control
        answer = json.loads(ok(await client.call_tool('query_memory', {'cypher': by_id, 'params': foreign})))
        assert answer['rows'] == [{'s': 'conv-1'}]
    async with in_process(scoped.uri, namespace=scoped.namespace) as client:
        answer = json.loads(ok(await client.call_tool('query_memory', {'cypher': cypher, 'session_id': 'conv-2'})))
        assert answer == {'row_count': len(expected), 'rows': expected}
        with_param = json.loads(ok(await client.call_tool('query_memory', {'cypher': by_id, 'params': foreign})))
        assert with_param['rows'] == []  # a memento of the other namespace: not in this namespace's graph
        unanchored = {'cypher': 'MATCH (m:Memento) WHERE m.id = $id RETURN m.session_id AS s', 'params': foreign}
        if scoped.backend == 'sqlite':  # the embedded view holds this namespace only
            assert json.loads(ok(await client.call_tool('query_memory', unanchored)))['rows'] == []
        else:  # a Neo4j database holds every namespace: a pattern that could leave this one is not sent
            assert 'can read other namespaces' in error(await client.call_tool('query_memory', unanchored))
        for write in (
            'CREATE (n:Block {id: 1}) RETURN n',
            f'MATCH (b:EvictedBlock{anchor}) SET b.sha256 = "x" RETURN b',
            f'MATCH (b:EvictedBlock{anchor}) DETACH DELETE b',
            'MERGE (n:Session {id: "x"}) RETURN n',
        ):
            assert 'read-only' in error(await client.call_tool('query_memory', {'cypher': write})), write
        assert 'Query failed' in error(await client.call_tool('query_memory', {'cypher': 'MATCH (b RETURN b'}))
        too_many = error(
            await client.call_tool('query_memory', {'cypher': f'MATCH (e:Entity{anchor}) RETURN e.key', 'limit': 3})
        )
        assert 'Query failed' in too_many and '3' in too_many
        assert "this tool's limit argument" in too_many and '--limit' not in too_many  # what the caller can change
        spoofed = error(
            await client.call_tool(
                'query_memory',
                {
                    'cypher': f'MATCH (b:EvictedBlock{anchor}) RETURN b.id',
                    'params': {'namespace': scoped.other_namespace},
                },
            )
        )
        assert 'namespace' in spoofed and scoped.other.blocks[0].block_id not in spoofed
    # a server pinned to a session: its own blocks are read, another session's never
    pinned = (
        'MATCH (b:EvictedBlock {namespace: $namespace, session_id: $session_id}) WHERE b.id = $id RETURN b.id AS id'
    )
    conv1, conv2 = (scoped.default[sid].evictions[0].blocks[0].id for sid in ('conv-1', 'conv-2'))
    async with in_process(scoped.uri, namespace=scoped.namespace, session_id='conv-1') as client:
        own = json.loads(ok(await client.call_tool('query_memory', {'cypher': pinned, 'params': {'id': conv1}})))
        assert own['rows'] == [{'id': conv1}]  # positive control
        theirs = json.loads(ok(await client.call_tool('query_memory', {'cypher': pinned, 'params': {'id': conv2}})))
        assert theirs['rows'] == []
        spoofed = error(
            await client.call_tool('query_memory', {'cypher': pinned, 'params': {'id': conv2, 'session_id': 'conv-2'}})
        )
        assert "'conv-2'" in spoofed and conv2 not in spoofed
        unpinned = f'MATCH (b:EvictedBlock{anchor}) WHERE b.id = $id RETURN b.id AS id'
        refused = error(await client.call_tool('query_memory', {'cypher': unpinned, 'params': {'id': conv2}}))
        assert 'stays in namespace' in refused and "session 'conv-1'" in refused and conv2 not in refused
    store = open_store(scoped.uri)
    after = (store.stats(namespace=scoped.namespace), store.stats(namespace=scoped.other_namespace))
    store.close()
    assert after == before  # nothing was written


async def test_stats_match_the_store(memory_file: MemoryFile) -> None:
    store = open_store(memory_file.uri)
    whole = store.stats(session_id=None)
    one = store.stats(session_id='conv-1')
    other = store.stats(namespace='other')
    store.close()
    async with in_process(memory_file.uri) as client:
        result = await client.call_tool('stats', {})
        data = json.loads(ok(result))
        assert result.structured_content == data
        assert data['blocks'] == whole.blocks == 12 and data['mementos'] == whole.mementos
        assert data['tokens_saved'] == whole.tokens_saved and data['newest_sessions'] == ['conv-2', 'conv-1']
        narrowed = json.loads(ok(await client.call_tool('stats', {'session_id': 'conv-1'})))
        assert narrowed['blocks'] == one.blocks == 6 and narrowed['newest_sessions'] == ['conv-1']
    async with in_process(memory_file.uri, namespace='other') as client:
        data = json.loads(ok(await client.call_tool('stats', {})))
        assert data['namespace'] == 'other' and data['blocks'] == other.blocks == 6


async def test_writes_by_another_connection_show_up(tmp_path: Path) -> None:
    """An agent keeps archiving into the file the server reads: the next call sees the new blocks."""
    uri = f'sqlite://{tmp_path / "live.db"}'
    writer = open_store(uri)
    try:
        await DialogueIngestor(min_tokens=40, page_policy=PAGES).ingest(writer, small_dialogue('first'))
        async with in_process(uri) as client:
            before = json.loads(ok(await client.call_tool('stats', {})))
            cypher = 'MATCH (s:Session) RETURN s.id AS id ORDER BY id'
            assert json.loads(ok(await client.call_tool('query_memory', {'cypher': cypher})))['row_count'] == 1
            later = await DialogueIngestor(min_tokens=40, page_policy=PAGES).ingest(writer, small_dialogue('second'))
            after = json.loads(ok(await client.call_tool('stats', {})))
            assert after['blocks'] == 2 * before['blocks'] and after['newest_sessions'] == ['second', 'first']
            assert json.loads(ok(await client.call_tool('query_memory', {'cypher': cypher})))['row_count'] == 2
            new_block = later.evictions[-1].blocks[-1]
            body = texts(await client.call_tool('recover_block', {'block_id': new_block.id}))[1]
            assert json.loads(body)['blocks'][0]['sha256'] == new_block.sha256
    finally:
        writer.close()


class _Unreachable(HashedWords):
    """An embedding model whose provider is down."""

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        raise ConnectionError('embedding provider unreachable')


async def test_recall_stays_lexical_when_the_embedding_model_fails(
    memory_file: MemoryFile, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(memory_file.uri)
    try:
        async with Client(create_server(store, embedding=_Unreachable())) as client:
            with caplog.at_level(logging.WARNING, logger='mementograph'):
                text = ok(await client.call_tool('recall', {'query': 'adoption agencies', 'k': 3}))
    finally:
        store.close()
    assert text.startswith('1. recover_block("mem_') and 'adoption' in text and 'dense rank' not in text
    assert any('unreachable' in record.getMessage() for record in caplog.records)


class _Held(HashedWords):
    """An embedding model that embeds no block until released (as a large archive would take hours)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        if input_type == 'document':
            assert self.release.wait(60), 'never released'
        return await super().embed(inputs, input_type=input_type, settings=settings)


def test_a_recall_answers_while_the_archive_is_still_being_embedded(memory_file: MemoryFile) -> None:
    store = open_store(memory_file.uri)
    model = _Held()
    try:
        tools = MemoryTools(store, dense=DenseIndex(model), sync_wait=0.2)
        started = time.perf_counter()
        text = tools.recall('adoption agencies', k=3)
        assert time.perf_counter() - started < 30  # not held until the embedding ends
        count = store.count_blocks()
        assert text.startswith(f'[meaning: still embedding the {count} archived blocks in scope')
        assert '\n1. recover_block("mem_' in text and 'adoption' in text and 'dense rank' not in text
        model.release.set()
        assert tools._background is not None
        tools._background.wait(timeout=60)
        assert tools.dense is not None and len(tools.dense) == count
        text = tools.recall('adoption agencies', k=3)
        assert text.startswith('1. recover_block("mem_') and 'dense rank' in text
        tools.stop_syncs()  # what exit does: later syncs embed nothing
        assert tools.dense.stopped
    finally:
        model.release.set()
        store.close()


class _CountingReads:
    """A real store, with its `list_pages` calls counted."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self.list_pages_calls = 0

    def list_pages(self, **kwargs: Any) -> Any:
        self.list_pages_calls += 1
        return self.store.list_pages(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_retrieve_page_reads_the_page_list_once(memory_file: MemoryFile) -> None:
    store = open_store(memory_file.uri)
    try:
        page = store.list_pages(session_id='conv-1')[1]
        counting = _CountingReads(store)
        text = MemoryTools(counting).retrieve_page(page.id, session_id='conv-1')  # type: ignore[arg-type]
        assert text.startswith(f'[page 2 {page.id}') and counting.list_pages_calls == 1
    finally:
        store.close()


class _QueriesOnly(HashedWords):
    """The same model name as `HashedWords`, embedding queries only: any block vector must come from the store."""

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        assert input_type == 'query', 'a block was embedded again'
        return await super().embed(inputs, input_type=input_type, settings=settings)


async def test_a_server_stores_the_vectors_it_makes_for_the_next_one(tmp_path: Path) -> None:
    """A 100k-block archive takes hours to embed: a restarted server reads what the last one made."""
    uri = f'sqlite://{tmp_path / "memory.db"}'
    store = open_store(uri)
    try:
        await DialogueIngestor(min_tokens=40, page_policy=PAGES).ingest(store, small_dialogue('first'))
        key = DenseIndex(HashedWords()).model_key
        async with Client(create_server(store, embedding=HashedWords(), store_vectors=False)) as client:
            assert 'dense rank' in ok(await client.call_tool('recall', {'query': 'adoption agencies'}))
        assert store.read_vectors(key) == []  # told not to: the store is left as it was
        async with Client(create_server(store, embedding=HashedWords())) as client:
            assert 'dense rank' in ok(await client.call_tool('recall', {'query': 'adoption agencies'}))
        assert len(store.read_vectors(key)) == store.count_blocks() > 0
        async with Client(create_server(store, embedding=_QueriesOnly())) as client:
            text = ok(await client.call_tool('recall', {'query': 'adoption agencies'}))
        assert text.startswith('1. recover_block("mem_') and 'dense rank' in text
    finally:
        store.close()


class _ReadOnlyVectors:
    """A real store whose vector writes fail (a read-only file, a user without write rights)."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self.attempts = 0

    def write_vectors(self, *args: Any, **kwargs: Any) -> int:
        self.attempts += 1
        raise PermissionError('attempt to write a readonly database')

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def test_a_store_that_cannot_keep_vectors_costs_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uri = f'sqlite://{tmp_path / "memory.db"}'
    store = open_store(uri)
    try:
        for session in ('first', 'second', 'third'):
            await DialogueIngestor(min_tokens=40, page_policy=PAGES).ingest(store, small_dialogue(session))
        refusing = _ReadOnlyVectors(store)
        tools = MemoryTools(refusing, dense=DenseIndex(HashedWords(), persist=True))  # type: ignore[arg-type]
        with caplog.at_level(logging.DEBUG, logger='mementograph'):
            text = tools.recall('adoption agencies', k=3)
        tools.stop_syncs()
    finally:
        store.close()
    assert 'dense rank' in text  # the vectors serve this process all the same
    warned = [r for r in caplog.records if 'could not store' in r.getMessage()]
    assert refusing.attempts == 3 and len(warned) == 3  # one write per session
    assert [r.levelno for r in warned] == [logging.WARNING, logging.DEBUG, logging.DEBUG]


def test_the_server_reads_and_embeds_its_scope_before_the_first_recall(tmp_path: Path) -> None:
    """A client asks its first question minutes after starting the server: the vectors are ready by then."""
    uri = f'sqlite://{tmp_path / "memory.db"}'
    store = open_store(uri)
    try:
        asyncio.run(DialogueIngestor(min_tokens=40, page_policy=PAGES).ingest(store, small_dialogue('first')))
        key = DenseIndex(HashedWords()).model_key
        create_server(store, embedding=HashedWords())  # no call made
        deadline = time.monotonic() + 30
        while len(store.read_vectors(key)) < store.count_blocks() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(store.read_vectors(key)) == store.count_blocks() > 0
    finally:
        BackgroundSync.stop_all()
        store.close()


async def test_a_tokenizer_that_cannot_load_is_a_tool_error_saying_what_to_set(
    memory_file: MemoryFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv('MEMENTOGRAPH_ENCODING', 'nonsense')  # as unloadable as BPE files out of reach offline
    async with in_process(memory_file.uri) as client:
        message = error(await client.call_tool('retrieve_page', {'page_id': '1', 'session_id': 'conv-1'}))
    assert "unknown tiktoken encoding 'nonsense'" in message and 'estimate' in message
