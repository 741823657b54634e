"""Dense recall: a real local ONNX model, the in-memory index, the `dense` and `hybrid` methods on every backend."""

from __future__ import annotations

import asyncio
import shutil
import threading
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic_ai.embeddings import Embedder, EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType

from mementograph.eval import DialogueIngestor, IngestedDialogue, dense_index
from mementograph.knowledge_graph import BlockRecord, Eviction
from mementograph.knowledge_graph.dense import (
    BackgroundSync,
    DenseIndex,
    EmbeddingModelError,
    OnnxEmbeddingModel,
    OnnxModelFiles,
    embedding_model,
)
from mementograph.knowledge_graph.recall import rank_blocks, recall
from mementograph.knowledge_graph.store import GraphStore, open_store
from tests.builders import HashedWords, session_history
from tests.conftest import open_neo4j
from tests.recall.conftest import small_dialogue


@pytest.fixture(scope='module')
def onnx_model(onnx_model_path: Path) -> OnnxEmbeddingModel:
    return OnnxEmbeddingModel(onnx_model_path)


def test_onnx_model_gives_unit_vectors_that_rank_by_meaning(onnx_model: OnnxEmbeddingModel) -> None:
    docs = [
        'Melanie: Painting relaxes me after a long week, it is like therapy.',
        'Caroline: The build failed with TypeError in django/db/models/base.py.',
        'Melanie: My kids start school next Monday, the bus comes at eight.',
    ]
    matrix = onnx_model.vectors(docs)
    assert matrix.shape[0] == 3 and matrix.shape[1] >= 128
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-4)
    query = onnx_model.vectors(['What hobby helps Melanie unwind?'], query=True)[0]
    assert int(np.argmax(matrix @ query)) == 0  # no word of the answer is in the question
    # the same model through pydantic-ai's own API: what hosted models go through
    result = Embedder(onnx_model).embed_documents_sync(docs)
    assert np.allclose(np.asarray(result.embeddings, dtype=np.float32), matrix, atol=1e-5)
    assert result.model_name == onnx_model.model_name and len(result.inputs) == 3
    assert asyncio.run(onnx_model.max_input_tokens()) in (256, 512)


def test_model_files_errors_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingModelError, match='no such embedding model'):
        OnnxModelFiles.read(tmp_path / 'missing')
    empty = tmp_path / 'empty'
    empty.mkdir()
    with pytest.raises(EmbeddingModelError, match=r'empty: expected one \*\.onnx and one \*tokenizer\.json, found 0'):
        OnnxModelFiles.read(empty)
    archive = tmp_path / 'two.jar'
    with zipfile.ZipFile(archive, 'w') as zf:
        zf.writestr('a.onnx', b'x')
        zf.writestr('b.onnx', b'y')
        zf.writestr('a-tokenizer.json', '{}')
    with pytest.raises(EmbeddingModelError, match='found 2 and 1'):
        OnnxModelFiles.read(archive)
    broken = tmp_path / 'broken.jar'
    broken.write_bytes(b'not a zip')
    with pytest.raises(EmbeddingModelError, match=r'broken\.jar: cannot read'):
        OnnxModelFiles.read(broken)
    bad_graph = tmp_path / 'bad'
    bad_graph.mkdir()
    (bad_graph / 'm.onnx').write_bytes(b'not an onnx graph')
    (bad_graph / 'm-tokenizer.json').write_text('{"version": "1.0"}')
    with pytest.raises(EmbeddingModelError, match='bad: cannot load the model m'):
        OnnxEmbeddingModel(bad_graph).vectors(['x'])
    with pytest.raises(EmbeddingModelError, match='cannot use embedding model'):
        embedding_model('nosuchprovider:model')
    assert isinstance(embedding_model(f'onnx:{tmp_path}'), OnnxEmbeddingModel)


def test_a_local_model_keys_its_vectors_by_its_content_and_settings(onnx_model_path: Path, tmp_path: Path) -> None:
    key = DenseIndex(OnnxEmbeddingModel(onnx_model_path)).model_key
    assert key.startswith(f'onnx:{onnx_model_path.stem}@') and len(key.split('@')[1]) == 12
    moved = tmp_path / 'moved' / onnx_model_path.name
    moved.parent.mkdir()
    shutil.copy(onnx_model_path, moved)
    assert DenseIndex(OnnxEmbeddingModel(moved)).model_key == key  # the same files elsewhere: the same vectors
    # another model under the same file name (here: the same graph with another tokenizer) never shares them
    other = tmp_path / 'other' / onnx_model_path.name
    other.parent.mkdir()
    with zipfile.ZipFile(onnx_model_path) as source, zipfile.ZipFile(other, 'w') as target:
        for name in source.namelist():
            data = source.read(name)
            target.writestr(name, data + b'\n' if name.endswith('tokenizer.json') else data)
    assert DenseIndex(OnnxEmbeddingModel(other)).model_key != key
    assert DenseIndex(OnnxEmbeddingModel(onnx_model_path, pooling='cls')).model_key != key  # other vectors too


def test_dense_index_scopes_ranks_and_adds_once() -> None:
    made: list[int] = []
    index = DenseIndex(HashedWords(), progress=made.append)
    assert index.add([('b1', 'red apples and pears'), ('b2', 'blue sky over the sea')], session_id='s1') == 2
    assert made == [2]  # what a progress bar counts
    assert index.add([('b1', 'something else entirely')], session_id='s1') == 0  # first vector kept
    index.add([('b3', 'red apples in a basket')], session_id='s2')
    index.add([('b4', 'red apples elsewhere')], namespace='other', session_id='s1')
    assert len(index) == 4
    everywhere = index.rank_dense('red apples', namespace='default', session_id=None, limit=10)
    assert {b for b, _ in everywhere} == {'b1', 'b2', 'b3'}  # never another namespace's block
    assert everywhere[-1][0] == 'b2' and everywhere[0][1] > everywhere[-1][1]
    assert [b for b, _ in index.rank_dense('red apples', namespace='default', session_id='s2', limit=10)] == ['b3']
    scoped = index.scoped({'s1'}).rank_dense('red apples', namespace='default', session_id=None, limit=10)
    assert next(b for b, _ in scoped) == 'b1' and 'b3' not in {b for b, _ in scoped}
    assert index.rank_dense('red apples', namespace='default', session_id=None, limit=1) == everywhere[:1]
    assert index.rank_dense('x', namespace='nowhere', session_id=None, limit=5) == []


class _StopsAfterOneCall(HashedWords):
    """Stops its index while embedding the first chunk (as a process shutting down would)."""

    index: DenseIndex | None = None

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        assert self.index is not None
        self.index.stop()
        return await super().embed(inputs, input_type=input_type, settings=settings)


def test_stop_ends_embedding_at_the_next_chunk_and_keeps_what_was_made() -> None:
    model = _StopsAfterOneCall()
    index = model.index = DenseIndex(model)
    blocks = [(f'b{i}', f'block number {i}') for i in range(200)]
    added = index.add(blocks, session_id='s')
    assert 0 < added == len(index) < len(blocks)  # one chunk made and kept, the rest never asked for
    assert index.add(blocks, session_id='s') == 0  # stopped for good: the process is ending


class _FailsOnSecondChunk(HashedWords):
    """A hosted model whose provider goes down after the first batch of blocks."""

    calls = 0

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        self.calls += 1
        if self.calls > 1:
            raise ConnectionError('provider went down')
        return await super().embed(inputs, input_type=input_type, settings=settings)


def test_each_chunk_of_vectors_is_stored_as_it_is_made(tmp_path: Path) -> None:
    """A model failing (or a process killed) partway loses no chunk it already embedded."""
    store = open_store(f'sqlite://{tmp_path / "chunks.db"}')
    try:
        blocks = tuple(
            BlockRecord.from_messages(session_history(1), session_id='s', seq=i, tokens=5, text=f'block {i} notes')
            for i in range(150)
        )
        store.write_eviction(Eviction(session_id='s', blocks=blocks))
        index = DenseIndex(_FailsOnSecondChunk(), persist=True)
        with pytest.raises(ConnectionError):
            index.sync(store, session_id='s')
        assert len(store.read_vectors(index.model_key)) == len(index) == 64  # the first chunk of 64, stored
    finally:
        store.close()


@pytest.fixture(params=['memory', 'sqlite', 'neo4j'])
def archived(
    request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str
) -> Iterator[tuple[GraphStore, str, IngestedDialogue]]:
    """(store, namespace, what was ingested) holding the small dialogue, on each backend."""
    if request.param == 'neo4j':
        store: GraphStore = open_neo4j(request.getfixturevalue('neo4j_server'))
        namespace = unique_namespace
    else:
        store = open_store('memory://' if request.param == 'memory' else f'sqlite://{tmp_path / "memory.db"}')
        namespace = 'default'
    try:
        ingested = asyncio.run(DialogueIngestor(min_tokens=40, namespace=namespace).ingest(store, small_dialogue()))
        yield store, namespace, ingested
    finally:
        store.close()


def test_hybrid_recall_finds_what_only_meaning_links(
    archived: tuple[GraphStore, str, IngestedDialogue], onnx_model: OnnxEmbeddingModel
) -> None:
    store, namespace, ingested = archived
    index = dense_index(onnx_model, [(small_dialogue(), ingested)], namespace)
    assert len(index) == len(ingested.blocks)
    painting = next(b.block_id for b in ingested.blocks if any(t in ('S1:2', 'S1:3') for t in b.turn_ids))
    query = 'Which pastime does she find calming?'  # shares no word with "painting relaxes me"
    dense = rank_blocks(store, query, method='dense', namespace=namespace, session_id='conv-1', dense=index)
    assert dense[0].block_id == painting and dense[0].reasons[0].startswith('dense rank 1 (cosine ')
    hybrid = rank_blocks(store, query, method='hybrid', namespace=namespace, session_id='conv-1', dense=index)
    assert hybrid[0].block_id == painting
    hits = recall(store, query, 3, method='hybrid', namespace=namespace, session_id='conv-1', dense=index)
    assert hits[0].block_id == painting and any(r.startswith('dense rank 1') for r in hits[0].reasons)
    # words still count: an exact command is found as surely as without vectors
    command = 'python -m pytest tests/test_models.py'
    lexical = rank_blocks(store, command, method='fused', namespace=namespace, session_id='conv-1')
    mixed = rank_blocks(store, command, method='hybrid', namespace=namespace, session_id='conv-1', dense=index)
    assert mixed[0].block_id == lexical[0].block_id
    assert rank_blocks(store, query, method='dense', namespace=namespace, session_id='other', dense=index) == []


def test_dense_methods_need_an_index() -> None:
    store = open_store('memory://')
    try:
        for method in ('dense', 'hybrid'):
            with pytest.raises(ValueError, match='needs a dense index'):
                rank_blocks(store, 'anything', method=method)  # type: ignore[arg-type]
    finally:
        store.close()


def test_vectors_made_once_are_read_back_by_the_next_process(
    archived: tuple[GraphStore, str, IngestedDialogue],
) -> None:
    store, namespace, ingested = archived
    first = DenseIndex(HashedWords(), persist=True)
    assert first.sync(store, namespace=namespace, session_id='conv-1') == len(ingested.blocks) > 0
    assert len(store.read_vectors(first.model_key, namespace=namespace)) == len(ingested.blocks)
    # a later process: the same model finds every vector stored and embeds nothing
    later = DenseIndex(_Refusing(), persist=False)
    assert later.model_key == first.model_key
    assert later.sync(store, namespace=namespace, session_id='conv-1') == 0 and len(later) == len(ingested.blocks)
    query = 'red apples'
    first._queries[query] = later._queries[query] = first._embed([query], query=True)[0]  # the refusing model cannot
    assert later.rank_dense(query, namespace=namespace, session_id=None, limit=5) == first.rank_dense(
        query, namespace=namespace, session_id=None, limit=5
    )
    store.delete_session('conv-1', namespace=namespace)
    assert store.read_vectors(first.model_key, namespace=namespace) == []


class _Refusing(HashedWords):
    """The same model name as `HashedWords`, but any embedding fails: what it holds came from the store."""

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        raise AssertionError('nothing should be embedded again')


def test_concurrent_syncs_keep_one_vector_per_block(archived: tuple[GraphStore, str, IngestedDialogue]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    store, namespace, ingested = archived
    index = DenseIndex(_Slow())  # every sync is still embedding when the others start
    with ThreadPoolExecutor(4) as pool:
        done = list(pool.map(lambda _: index.sync(store, namespace=namespace, session_id='conv-1'), range(4)))
    assert len(index) == len(ingested.blocks) and sum(done) >= len(ingested.blocks)
    ranked = index.rank_dense('support group', namespace=namespace, session_id=None, limit=50)
    assert len(ranked) == len({block_id for block_id, _ in ranked}) == len(ingested.blocks)


class _Recording:
    """A real store that notes which of its methods were called, in order."""

    def __init__(self, inner: GraphStore) -> None:
        self.inner = inner
        self.calls: list[str] = []
        self.arguments: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            self.arguments.append(kwargs)
            return attribute(*args, **kwargs)

        return call


def test_a_sync_after_an_eviction_reads_only_what_is_new(archived: tuple[GraphStore, str, IngestedDialogue]) -> None:
    store, namespace, ingested = archived
    live = DenseIndex(HashedWords(), persist=True)  # the capability's
    assert live.sync(store, namespace=namespace, session_id='conv-1') == len(ingested.blocks)
    reader = DenseIndex(_Refusing())  # another process (the MCP server) reading the live one's vectors
    assert reader.sync(store, namespace=namespace, session_id='conv-1') == 0 and len(reader) == len(ingested.blocks)
    late = BlockRecord.from_messages(
        session_history(1, prefix='late'), session_id='conv-1', namespace=namespace, seq=10_000, tokens=80,
        text='late: value_0 = 0 # ok',
    )  # fmt: skip
    store.write_eviction(Eviction(session_id='conv-1', namespace=namespace, blocks=(late,)))

    recording = _Recording(store)
    assert live.sync(recording, namespace=namespace, session_id='conv-1') == 1  # type: ignore[arg-type]
    assert recording.calls == ['count_blocks', 'list_block_ids', 'read_vectors', 'get_block', 'write_vectors']
    assert live.sync(recording, namespace=namespace, session_id='conv-1') == 0  # type: ignore[arg-type]
    assert recording.calls[5:] == ['count_blocks']  # nothing new: one count
    # the reader, over the namespace, finds the one session that changed, lists it alone and reads the new block's
    # stored vector by id: no block read, nothing embedded
    recording.calls.clear()
    recording.arguments.clear()
    assert reader.sync(recording, namespace=namespace, session_id=None) == 0  # type: ignore[arg-type]
    assert recording.calls == ['block_counts', 'list_block_ids', 'read_vectors']
    assert recording.arguments[1]['session_id'] == 'conv-1' and recording.arguments[2]['block_ids'] == [late.id]
    assert len(reader) == len(ingested.blocks) + 1
    assert reader.sync(recording, namespace=namespace, session_id=None) == 0  # type: ignore[arg-type]
    assert recording.calls[3:] == ['block_counts']
    query = 'value_0 ok'
    reader._queries[query] = live._queries[query] = live._embed([query], query=True)[0]
    ranked = reader.rank_dense(query, namespace=namespace, session_id='conv-1', limit=50)
    assert ranked[0][0] == late.id  # the same vectors as the live index's (ties may come in another order)
    assert sorted(ranked) == sorted(live.rank_dense(query, namespace=namespace, session_id='conv-1', limit=50))
    # a forgotten session's vectors go at the next sync: no recall returns a block that is gone
    store.delete_session('conv-1', namespace=namespace)
    assert reader.sync(store, namespace=namespace, session_id=None) == 0 and len(reader) == 0
    assert recall(store, query, 5, method='hybrid', namespace=namespace, dense=reader) == []
    assert live.sync(store, namespace=namespace, session_id='conv-1') == 0 and len(live) == 0


class _Gated(HashedWords):
    """Holds every block embedding until `gate` opens, saying when the first one started."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self.gate = threading.Event()

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        if input_type == 'document':
            self.started.set()
            assert self.gate.wait(60)
        return await super().embed(inputs, input_type=input_type, settings=settings)


def test_a_background_request_while_its_sync_runs_runs_it_once_more(
    archived: tuple[GraphStore, str, IngestedDialogue],
) -> None:
    store, namespace, ingested = archived
    model = _Gated()
    background = BackgroundSync(DenseIndex(model))
    try:
        first = background.request(store, namespace=namespace, session_id='conv-1')
        assert model.started.wait(30)  # the sync listed the session's blocks and is embedding them
        late = BlockRecord.from_messages(
            session_history(1, prefix='late'), session_id='conv-1', namespace=namespace, seq=10_000, tokens=80,
            text='late: value_0 = 0 # ok',
        )  # fmt: skip
        store.write_eviction(Eviction(session_id='conv-1', namespace=namespace, blocks=(late,)))
        assert background.request(store, namespace=namespace, session_id='conv-1') is first  # one sync per scope
        model.gate.set()
        assert first.result(timeout=60) == len(ingested.blocks) + 1  # the rerun embedded the late block
        assert len(background.index) == len(ingested.blocks) + 1
    finally:
        model.gate.set()
        background.stop()


class _Slow(HashedWords):
    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        await asyncio.sleep(0.05)
        return await super().embed(inputs, input_type=input_type, settings=settings)


def test_a_hit_found_by_words_and_meaning_says_both() -> None:
    from mementograph.knowledge_graph.recall import RecallHit, render_recall

    hit = RecallHit(
        block_id='blk_1',
        session_id='s',
        score=1.5,
        memento_id=None,
        memento='RESULT: tests pass',
        block_ids=('blk_1',),
        matched=('pkg/mod.py (exact)',),
        reasons=('entity pkg/mod.py', 'bm25 rank 2', 'dense rank 1 (cosine 0.65)'),
    )
    assert '-- matched: pkg/mod.py (exact), dense rank 1 (cosine 0.65)\n' in render_recall([hit], 'q')
    lexical = RecallHit(**{**hit.__dict__, 'matched': (), 'reasons': ('bm25 rank 2', 'bm25 rank 5')})
    assert '-- matched: bm25 rank 2, bm25 rank 5\n' in render_recall([lexical], 'q')
