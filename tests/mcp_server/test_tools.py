"""The six MCP tools through the SDK's own client (in-process), checked against a real SQLite memory file."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from pydantic_ai.embeddings import EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.messages import ModelMessagesTypeAdapter

from mementograph.eval import DialogueIngestor
from mementograph.knowledge_graph.dense import BackgroundSync, DenseIndex
from mementograph.knowledge_graph.store import GraphStore, open_store
from mementograph.mcp import MemoryTools, _server, create_server
from tests.builders import HashedWords
from tests.recall.conftest import small_dialogue

from ._client import TOOLS, error, in_process, ok, texts
from .conftest import PAGES, MemoryFile


def _block_ids(text: str) -> set[str]:
    return set(re.findall(r'blk_[0-9a-f]+', text))


def _memento_ids(text: str) -> set[str]:
    return set(re.findall(r'mem_[0-9a-f]+', text))


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


async def test_namespace_and_session_scope(memory_file: MemoryFile) -> None:
    conv1 = memory_file.default['conv-1'].evictions[0].blocks[0].id
    conv2 = memory_file.default['conv-2'].evictions[0].blocks[0].id
    other = memory_file.other.evictions[0].blocks[0].id
    assert len({conv1, conv2, other}) == 3
    async with in_process(memory_file.uri) as client:
        assert ok(await client.call_tool('recover_block', {'block_id': conv2}))
        assert 'No archived block' in error(await client.call_tool('recover_block', {'block_id': other}))
    async with in_process(memory_file.uri, session_id='conv-1') as client:
        assert ok(await client.call_tool('recover_block', {'block_id': conv1}))
        message = error(await client.call_tool('recover_block', {'block_id': conv2}))
        assert 'No archived block' in message and "session 'conv-1'" in message
        refused = error(await client.call_tool('recover_block', {'block_id': conv2, 'session_id': 'conv-2'}))
        assert "serves session 'conv-1' only" in refused
        listing = ok(await client.call_tool('list_pages', {}))
        assert 'session conv-1 (3 pages)' in listing and 'conv-2' not in listing
    async with in_process(memory_file.uri, namespace='other') as client:
        assert json.loads(texts(await client.call_tool('recover_block', {'block_id': other}))[1])['blocks']
        assert 'No archived block' in error(await client.call_tool('recover_block', {'block_id': conv1}))
        assert 'No archived block' in error(await client.call_tool('recover_block', {'block_id': 'blk_nope'}))


async def test_list_pages_and_retrieve_page(memory_file: MemoryFile) -> None:
    store = open_store(memory_file.uri)
    default_pages = store.list_pages(session_id=None)
    other_pages = store.list_pages(namespace='other')
    store.close()
    assert default_pages and other_pages
    async with in_process(memory_file.uri) as client:
        listing = ok(await client.call_tool('list_pages', {}))
        assert all(page.id in listing for page in default_pages)
        assert not any(page.id in listing for page in other_pages)
        assert 'session conv-1' in listing and 'session conv-2' in listing
        page = next(p for p in default_pages if p.session_id == 'conv-2' and p.number == 2)
        text = ok(await client.call_tool('retrieve_page', {'page_id': page.id}))
        assert text.startswith(f'[page 2 {page.id}')
        assert _block_ids(text) == set(page.block_ids)
        ambiguous = error(await client.call_tool('retrieve_page', {'page_id': '2'}))
        assert 'conv-1, conv-2' in ambiguous and 'page id' in ambiguous
        by_number = ok(await client.call_tool('retrieve_page', {'page_id': '2', 'session_id': 'conv-2'}))
        assert by_number == text
        assert 'No page' in error(await client.call_tool('retrieve_page', {'page_id': other_pages[0].id}))
        assert 'No page' in error(await client.call_tool('retrieve_page', {'page_id': 'pg_missing'}))
    async with in_process(memory_file.uri, session_id='conv-1') as client:
        text = ok(await client.call_tool('retrieve_page', {'page_id': '2'}))
        assert text.startswith('[page 2 pg_') and page.id not in text
    async with in_process(memory_file.uri, namespace='empty') as client:
        assert 'No pages archived yet' in ok(await client.call_tool('list_pages', {}))


async def test_query_memory_reads_and_refuses_writes(memory_file: MemoryFile) -> None:
    cypher = 'MATCH (b:EvictedBlock) WHERE b.session_id = $session_id RETURN b.id AS id ORDER BY id'
    store = open_store(memory_file.uri)
    expected = store.query(cypher, session_id='conv-2')
    store.close()
    assert expected
    async with in_process(memory_file.uri) as client:
        answer = json.loads(ok(await client.call_tool('query_memory', {'cypher': cypher, 'session_id': 'conv-2'})))
        assert answer == {'row_count': len(expected), 'rows': expected}
        with_param = json.loads(
            ok(
                await client.call_tool(
                    'query_memory',
                    {
                        'cypher': 'MATCH (m:Memento) WHERE m.id = $id RETURN m.session_id AS s',
                        'params': {'id': memory_file.other.blocks[0].memento_id},
                    },
                )
            )
        )
        assert with_param['rows'] == []  # a memento of namespace `other`: not in this namespace's graph
        for write in (
            'CREATE (n:Block {id: 1}) RETURN n',
            'MATCH (b:EvictedBlock) SET b.sha256 = "x" RETURN b',
            'MATCH (b:EvictedBlock) DETACH DELETE b',
            'MERGE (n:Session {id: "x"}) RETURN n',
        ):
            assert 'read-only' in error(await client.call_tool('query_memory', {'cypher': write}))
        assert 'Query failed' in error(await client.call_tool('query_memory', {'cypher': 'MATCH (b RETURN b'}))
        too_many = error(
            await client.call_tool('query_memory', {'cypher': 'MATCH (e:Entity) RETURN e.key', 'limit': 3})
        )
        assert 'Query failed' in too_many and '3' in too_many
        spoofed = error(
            await client.call_tool(
                'query_memory', {'cypher': 'MATCH (b:EvictedBlock) RETURN b.id', 'params': {'namespace': 'other'}}
            )
        )
        assert 'namespace' in spoofed
    store = open_store(memory_file.uri)
    assert store.stats(session_id=None).blocks == 12  # nothing was written
    store.close()


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
        assert data['tokens_saved'] == whole.tokens_saved and data['recent_sessions'] == ['conv-1', 'conv-2']
        narrowed = json.loads(ok(await client.call_tool('stats', {'session_id': 'conv-1'})))
        assert narrowed['blocks'] == one.blocks == 6 and narrowed['recent_sessions'] == ['conv-1']
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
            assert after['blocks'] == 2 * before['blocks'] and after['recent_sessions'] == ['first', 'second']
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
