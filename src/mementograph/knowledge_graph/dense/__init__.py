"""Dense recall: block vectors from any pydantic-ai embedding model, ranked by cosine, fused into `hybrid` recall.

Optional: the lexical methods (`graph`, `bm25`, `fused`) need no model. A local model runs through onnxruntime
(the `dense` extra, `OnnxEmbeddingModel`); hosted ones through pydantic-ai.
"""

from __future__ import annotations

from ._background import BackgroundSync
from ._index import DenseIndex, DenseRanker, ScopedDenseIndex
from ._onnx import (
    ONNX_SCHEME,
    EmbeddingModelError,
    OnnxEmbeddingModel,
    OnnxModelFiles,
    embedding_model,
    existing_model_path,
)

__all__ = (
    'ONNX_SCHEME',
    'BackgroundSync',
    'DenseIndex',
    'DenseRanker',
    'EmbeddingModelError',
    'OnnxEmbeddingModel',
    'OnnxModelFiles',
    'ScopedDenseIndex',
    'embedding_model',
    'existing_model_path',
)
