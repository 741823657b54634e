"""The `recall` tool with an embedding model: `hybrid` ranking over the run's own session, lexical when the model
fails, and never another session's blocks (the vectors are shared by every run of the capability)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from pydantic_ai.embeddings import EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType

from mementograph import MementoCompaction, open_store
from mementograph.knowledge_graph.dense import DenseIndex, EmbeddingModelError, OnnxEmbeddingModel
from mementograph.mcp import MemoryTools
from tests.builders import HashedWords
from tests.capabilities.probe import ProbeModel, probe_agent, tool_returns


async def test_recall_tool_ranks_hybrid_within_the_session(tmp_path: Path, onnx_model_path: Path) -> None:
    store = open_store(f'sqlite://{tmp_path / "memory.db"}')
    try:
        capability = MementoCompaction(store, max_tokens=2_500, embedding=OnnxEmbeddingModel(onnx_model_path))
        alpha = ProbeModel('ZEBRAALPHA', probes=[('recall', {'query': 'functions that multiply their argument'})])
        await probe_agent(alpha, [capability]).run('Read every module.', conversation_id='alpha')
        [found] = tool_returns(alpha, 'recall')
        assert found.startswith('1. recover_block(') and 'dense rank' in found
        index = capability.dense_index()
        assert index is not None
        _embedded(capability)  # the evictions after the recall were embedded in the background
        archived = len(store.list_blocks(session_id='alpha'))
        assert len(index) == archived and index.sync(store, session_id='alpha') == 0
        stored = store.read_vectors(index.model_key, session_id='alpha')  # for the next run and the MCP server
        assert len(stored) == archived and {sid for _, sid, _ in stored} == {'alpha'}

        beta = ProbeModel('QUOKKABETA', probes=[('recall', {'query': 'functions that multiply their argument'})])
        await probe_agent(beta, [capability]).run('Read every module.', conversation_id='beta')
        [other] = tool_returns(beta, 'recall')
        assert 'quokkabeta' in other.lower() and 'zebraalpha' not in other.lower()  # one index, scoped reads
        index.sync(store, session_id='beta')
        assert len(index) == len(store.list_blocks(session_id='alpha')) + len(store.list_blocks(session_id='beta'))
    finally:
        store.close()


def _embedded(capability: MementoCompaction[None]) -> None:
    """Wait until the background embedding of every eviction so far is done."""
    assert capability._embedder is not None
    capability._embedder.get().wait(timeout=60)


@pytest.mark.parametrize('eagerly', [True, False])
async def test_evicted_blocks_are_embedded_in_the_background_unless_asked_not_to(tmp_path: Path, eagerly: bool) -> None:
    store = open_store(f'sqlite://{tmp_path / "memory.db"}')
    try:
        capability = MementoCompaction(store, max_tokens=2_500, embedding=HashedWords(), embed_eagerly=eagerly)
        model = ProbeModel('ZEBRAALPHA')  # no recall during the run
        await probe_agent(model, [capability]).run('Read every module.', conversation_id='alpha')
        archived = store.count_blocks(session_id='alpha')
        assert archived > 0
        index = DenseIndex(HashedWords())
        if eagerly:
            _embedded(capability)
            assert len(store.read_vectors(index.model_key, session_id='alpha')) == archived
        else:
            assert capability._embedder is None and store.read_vectors(index.model_key, session_id='alpha') == []
    finally:
        store.close()


class _Gated(HashedWords):
    """Holds every block embedding until `gate` opens, counting the block texts it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.embedded = 0

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        if input_type == 'document':
            assert self.gate.wait(60)
            self.embedded += 1 if isinstance(inputs, str) else len(inputs)
        return await super().embed(inputs, input_type=input_type, settings=settings)


async def test_a_recall_shares_the_background_embedding_and_does_not_wait_long_for_it(tmp_path: Path) -> None:
    store = open_store(f'sqlite://{tmp_path / "memory.db"}')
    model = _Gated()
    try:
        capability = MementoCompaction(store, max_tokens=2_500, embedding=model)
        await probe_agent(ProbeModel('ZEBRAALPHA'), [capability]).run('Read every module.', conversation_id='alpha')
        index, complete = capability.synced_dense_index(store, 'alpha', wait=0.1)  # the embedding is held
        assert index is not None and not complete and model.embedded == 0
        model.gate.set()
        index, complete = capability.synced_dense_index(store, 'alpha', wait=60)
        archived = store.count_blocks(session_id='alpha')
        assert complete and index is not None and len(index) == archived > 0
        assert model.embedded == archived  # each block once: the recall waited on the background sync
    finally:
        model.gate.set()
        store.close()


async def test_a_failing_model_leaves_recall_lexical(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = open_store(f'sqlite://{tmp_path / "memory.db"}')
    try:
        # a model object fails only when used (a name that can never work is refused when the capability is made)
        capability = MementoCompaction(store, max_tokens=2_500, embedding=OnnxEmbeddingModel(tmp_path / 'no-model'))
        model = ProbeModel('ZEBRAALPHA', probes=[('recall', {'query': 'ZEBRAALPHA module'})])
        with caplog.at_level(logging.WARNING, logger='mementograph'):
            await probe_agent(model, [capability]).run('Read every module.', conversation_id='alpha')
        [found] = tool_returns(model, 'recall')
        assert found.startswith('1. recover_block(') and 'dense rank' not in found
        assert any(
            'dense recall unavailable' in r.getMessage() and 'no-model' in r.getMessage() for r in caplog.records
        )
    finally:
        store.close()


def test_an_embedding_name_that_cannot_work_is_refused_when_made(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingModelError, match='no-model: no such embedding model'):
        MementoCompaction('memory://', embedding=f'onnx:{tmp_path / "no-model"}')
    with pytest.raises(EmbeddingModelError, match="cannot use embedding model 'nosuchprovider:x'"):
        MementoCompaction('memory://', embedding='nosuchprovider:x')


class _QueriesOnly(OnnxEmbeddingModel):
    """The same local model, refusing to embed blocks: whatever vectors it ranks were read from the store."""

    def vectors(self, texts: Sequence[str], *, query: bool = False) -> npt.NDArray[np.float32]:
        assert query, 'a block was embedded again instead of read from the store'
        return super().vectors(texts, query=query)


async def test_the_mcp_server_reads_the_vectors_the_capability_stored(tmp_path: Path, onnx_model_path: Path) -> None:
    uri = f'sqlite://{tmp_path / "memory.db"}'
    store = open_store(uri)
    try:
        capability = MementoCompaction(store, max_tokens=2_500, embedding=OnnxEmbeddingModel(onnx_model_path))
        model = ProbeModel('ZEBRAALPHA', probes=[('recall', {'query': 'ZEBRAALPHA'})])
        await probe_agent(model, [capability]).run('Read every module.', conversation_id='alpha')
        index = capability.dense_index()
        assert index is not None
        _embedded(capability)  # the blocks archived after the run's own recall
    finally:
        store.close()
    store = open_store(uri)  # another process, as the MCP server is
    try:
        tools = MemoryTools(store, dense=DenseIndex(_QueriesOnly(onnx_model_path)))
        text = tools.recall('functions that multiply their argument', k=3, session_id='alpha')
        assert text.startswith('1. recover_block(') and 'dense rank' in text
        assert tools.dense is not None and len(tools.dense) == store.count_blocks(session_id='alpha') > 0
    finally:
        store.close()
