"""`_onnx` -- a sentence-transformer exported to ONNX, run locally: dense recall with no network and no torch.

Any pydantic-ai embedding model works for dense recall (`openai:text-embedding-3-small`,
`sentence-transformers:all-MiniLM-L6-v2`, ...). This one needs only `onnxruntime` and `tokenizers` (the `dense`
extra) and a model file plus its `tokenizer.json`, which is what a machine without a model hub (or with only a
package registry, see `scripts/fetch-embedding-model`) can have. A model is a directory holding one `*.onnx` and
one `*tokenizer.json`, or a zip/jar holding them (LangChain4j publishes BGE and MiniLM this way on Maven Central).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic_ai.embeddings import EmbeddingModel, EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.usage import RequestUsage

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ('ONNX_SCHEME', 'EmbeddingModelError', 'OnnxEmbeddingModel', 'OnnxModelFiles', 'embedding_model')

ONNX_SCHEME: Final = 'onnx:'
Pooling = Literal['mean', 'cls']
_BGE_QUERY_PREFIX: Final = 'Represent this sentence for searching relevant passages: '
_BATCH: Final = 16


class EmbeddingModelError(RuntimeError):
    """An embedding model that cannot be loaded: missing package, missing or unreadable files."""


@dataclass(frozen=True)
class OnnxModelFiles:
    """The bytes of a model: the ONNX graph and its tokenizer, read from a directory or a zip/jar."""

    name: str
    onnx: bytes
    tokenizer: str

    @classmethod
    def read(cls, path: str | Path) -> OnnxModelFiles:
        """Read one `*.onnx` and one `*tokenizer.json` from `path` (a directory, or a zip/jar archive)."""
        path = existing_model_path(path)
        try:
            if path.is_dir():
                names = {p.name: p for p in path.iterdir() if p.is_file()}
                onnx_name, tokenizer_name = cls._pick(path, list(names))
                return cls(
                    name=Path(onnx_name).stem,
                    onnx=names[onnx_name].read_bytes(),
                    tokenizer=names[tokenizer_name].read_text(encoding='utf-8'),
                )
            with zipfile.ZipFile(path) as archive:
                onnx_name, tokenizer_name = cls._pick(path, archive.namelist())
                return cls(
                    name=Path(onnx_name).stem,
                    onnx=archive.read(onnx_name),
                    tokenizer=archive.read(tokenizer_name).decode('utf-8'),
                )
        except (OSError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
            raise EmbeddingModelError(f'{path}: cannot read the embedding model: {exc}') from exc

    @staticmethod
    def _pick(path: Path, names: Sequence[str]) -> tuple[str, str]:
        models = [n for n in names if n.endswith('.onnx')]
        tokenizers = [n for n in names if n.endswith('tokenizer.json')]
        if len(models) != 1 or len(tokenizers) != 1:
            raise EmbeddingModelError(
                f'{path}: expected one *.onnx and one *tokenizer.json, found {len(models)} and {len(tokenizers)}'
            )
        return models[0], tokenizers[0]


def _defaults(name: str) -> tuple[Pooling, str, int]:
    """Pooling, query prefix and input cap of the model families we know by name (BGE: CLS token and an
    instruction before queries, 512 tokens; sentence-transformers such as MiniLM: mean of tokens, 256)."""
    if re.search(r'bge', name, re.IGNORECASE):
        return 'cls', _BGE_QUERY_PREFIX, 512
    return 'mean', '', 256


class OnnxEmbeddingModel(EmbeddingModel):
    """A local ONNX sentence-transformer as a pydantic-ai `EmbeddingModel` (vectors L2-normalised).

    Loaded at the first `embed`, once; safe to share between threads (one onnxruntime session, which is).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        pooling: Pooling | None = None,
        query_prefix: str | None = None,
        max_tokens: int | None = None,
        threads: int | None = None,
        settings: EmbeddingSettings | None = None,
    ) -> None:
        """Args:
        path: a directory, or a zip/jar, holding one `*.onnx` and one `*tokenizer.json`.
        pooling: `mean` (sentence-transformers) or `cls` (BGE); by default chosen from the model's file name.
        query_prefix: text put before queries (BGE's retrieval instruction); by default from the file name.
        max_tokens: inputs are cut to this many tokens (the model's window); by default from the file name.
        threads: onnxruntime intra-op threads (default: onnxruntime's, every core).
        settings: pydantic-ai embedding settings (unused by this model beyond the base class).
        """
        super().__init__(settings=settings)
        self.path = Path(path).expanduser()
        self._pooling = pooling
        self._query_prefix = query_prefix
        self._max_tokens = max_tokens
        self._threads = threads
        self._loaded: tuple[Any, Any, list[str], str] | None = None
        self._fingerprint = ''
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return self.path.stem

    @property
    def system(self) -> str:
        return 'onnx'

    @property
    def fingerprint(self) -> str:
        """A digest of what makes the vectors: the graph, the tokenizer, pooling, query prefix and input cap (loads
        the model). Two models whose files share a name differ here, so a store never mixes their vectors."""
        self._load()
        return self._fingerprint

    def _load(self) -> tuple[Any, Any, list[str], str]:
        with self._lock:
            if self._loaded is not None:
                return self._loaded
            try:
                import onnxruntime as ort  # type: ignore[import-untyped]
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EmbeddingModelError(
                    f'local ONNX embeddings need onnxruntime and tokenizers ({exc.name} is missing): '
                    "pip install -e '/path/to/mementograph[dense]' (the dense extra of your checkout)"
                ) from exc
            files = OnnxModelFiles.read(self.path)
            pooling, prefix, max_tokens = _defaults(files.name)
            self._pooling = self._pooling or pooling
            self._query_prefix = prefix if self._query_prefix is None else self._query_prefix
            options = ort.SessionOptions()
            if self._threads:
                options.intra_op_num_threads = self._threads
            try:  # both libraries raise bare `Exception`s for files they cannot read
                tokenizer = Tokenizer.from_str(files.tokenizer)
                session = ort.InferenceSession(files.onnx, options, providers=['CPUExecutionProvider'])
            except Exception as exc:
                raise EmbeddingModelError(f'{self.path}: cannot load the model {files.name}: {exc}') from exc
            self._max_tokens = self._max_tokens or max_tokens
            tokenizer.enable_truncation(self._max_tokens)
            tokenizer.enable_padding()
            inputs = [i.name for i in session.get_inputs()]
            digest = hashlib.sha256(files.onnx)
            for part in (files.tokenizer, self._pooling, self._query_prefix, str(self._max_tokens)):
                digest.update(b'\0' + part.encode('utf-8', 'surrogatepass'))
            self._fingerprint = digest.hexdigest()[:12]
            self._loaded = (session, tokenizer, inputs, self._query_prefix)
            return self._loaded

    def vectors(self, texts: Sequence[str], *, query: bool = False) -> npt.NDArray[np.float32]:
        """Embed `texts` now (blocking): one L2-normalised row per text. Shortest first in batches, so a batch
        pads little."""
        import numpy as np

        session, tokenizer, inputs, prefix = self._load()
        if query and prefix:
            texts = [prefix + text for text in texts]
        out = np.zeros((len(texts), 0), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), _BATCH):
            batch = order[start : start + _BATCH]
            encoded = tokenizer.encode_batch([texts[i] for i in batch])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feed = {'input_ids': ids, 'attention_mask': mask}
            if 'token_type_ids' in inputs:
                feed['token_type_ids'] = np.zeros_like(ids)
            hidden = session.run(None, feed)[0]
            if self._pooling == 'cls':
                pooled = hidden[:, 0]
            else:
                pooled = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            if out.shape[1] == 0:
                out = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
            out[batch] = pooled
        return out

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        texts, _ = self.prepare_embed(inputs, settings)
        matrix = await asyncio.to_thread(self.vectors, texts, query=input_type == 'query')
        return EmbeddingResult(
            embeddings=matrix.tolist(),
            inputs=texts,
            input_type=input_type,
            model_name=self.model_name,
            provider_name=self.system,
            usage=RequestUsage(input_tokens=0),
        )

    async def max_input_tokens(self) -> int | None:
        _, tokenizer, _, _ = await asyncio.to_thread(self._load)
        truncation = tokenizer.truncation
        return None if truncation is None else int(truncation['max_length'])


def existing_model_path(path: str | Path) -> Path:
    """`path` (user-expanded) when something is there to read a local model from; else `EmbeddingModelError`."""
    path = Path(path).expanduser()
    if not path.exists():
        raise EmbeddingModelError(
            f'{path}: no such embedding model; give a directory (or .jar/.zip) holding a *.onnx file and its '
            'tokenizer.json (scripts/fetch-embedding-model fetches one from Maven Central)'
        )
    return path


def embedding_model(spec: str | EmbeddingModel) -> EmbeddingModel:
    """An embedding model from a name: `onnx:PATH` for a local ONNX model, else any pydantic-ai embedding model
    name (`openai:text-embedding-3-small`, `sentence-transformers:all-MiniLM-L6-v2`, ...)."""
    if isinstance(spec, EmbeddingModel):
        return spec
    if spec.startswith(ONNX_SCHEME):
        return OnnxEmbeddingModel(spec[len(ONNX_SCHEME) :])
    from pydantic_ai.embeddings import infer_embedding_model

    try:
        return infer_embedding_model(spec)
    except Exception as exc:  # pydantic-ai raises UserError, ValueError or an import error by provider
        raise EmbeddingModelError(
            f'cannot use embedding model {spec!r}: {exc} (a local model is onnx:PATH; others are pydantic-ai names '
            'such as openai:text-embedding-3-small)'
        ) from exc
