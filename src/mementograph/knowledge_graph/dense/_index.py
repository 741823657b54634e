"""`_index` -- block vectors in memory and their cosine ranking (brute force: exact, and fast enough at 100k)."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

from pydantic_ai.embeddings import Embedder, EmbeddingModel

from ..._echoes import searchable_messages
from ..._messages import deserialize_messages
from .._schema import DEFAULT_NAMESPACE, BlockRecord
from ..memory import render_block
from ..store import BlockNotFoundError, GraphStore
from ._onnx import OnnxEmbeddingModel

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ('DenseIndex', 'DenseRanker', 'ScopedDenseIndex')

logger = logging.getLogger('mementograph')

_QUERY_CACHE: Final = 64
_SCAN_PAGE: Final = 256
_EMBED_CHUNK: Final = 64
"""Texts per embedding call: batches a model well, and bounds how long `stop` waits."""


class DenseRanker(Protocol):
    """What recall needs of a dense index: blocks of a scope by similarity to a query, best first."""

    def rank_dense(self, query: str, *, namespace: str, session_id: str | None, limit: int) -> list[tuple[str, float]]:
        """`(block_id, cosine)` of the `limit` nearest blocks in the namespace (or one session of it)."""
        ...


def _normalised(rows: Sequence[Sequence[float]]) -> npt.NDArray[np.float32]:
    import numpy as np

    matrix: npt.NDArray[np.float32] = np.asarray(rows, dtype=np.float32).reshape(len(rows), -1)
    norms: npt.NDArray[np.float32] = np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    return matrix / norms


@dataclass
class DenseIndex:
    """Vectors of archived blocks' text, by namespace and session; `rank_dense` is exact cosine over them.

    `sync` brings in what a store archived: the vectors of this model the store keeps, then the blocks still
    missing, embedded (and, with `persist`, written back to the store beside their blocks, so the next process
    reads them instead of embedding again), and drops the vectors of sessions the store forgot. It costs one
    count when nothing changed. `add` takes texts directly (a benchmark's turns). Adding a block id twice keeps the
    first vector.
    """

    model: EmbeddingModel
    """Any pydantic-ai embedding model; `OnnxEmbeddingModel` runs locally."""
    max_chars: int = 6_000
    """Text embedded per block: models read a window of 256-8k tokens; the rest would be tokenized for nothing."""
    persist: bool = False
    """`sync` writes the vectors it made to the store beside their blocks (derived data, like an index: the
    capability, `mementograph recall` and the MCP server do unless told not to), so no later process embeds the
    same blocks again."""
    progress: Callable[[int], None] | None = None
    """Told how many blocks each embedding call made (what a progress bar counts: a first sync can take long)."""
    _ids: list[str] = field(default_factory=list[str])
    _scopes: dict[tuple[str, str], int] = field(default_factory=dict[tuple[str, str], int])
    """(namespace, session) -> its code; each row carries its scope's code, so a scope is one vectorised mask."""
    _codes: list[int] = field(default_factory=list[int])
    _next_code: int = 0
    _known: set[str] = field(default_factory=set[str])
    _chunks: list[npt.NDArray[np.float32]] = field(default_factory=list)
    _code_array: npt.NDArray[np.int32] | None = None
    _queries: OrderedDict[str, npt.NDArray[np.float32]] = field(default_factory=OrderedDict)
    _synced: dict[tuple[str, str], int] = field(default_factory=dict[tuple[str, str], int])
    """(namespace, session) -> its block count when this index last synced it."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _store_failed: bool = False
    """A write of vectors failed once (warned); later failures are logged at debug level, not once per chunk."""

    def __len__(self) -> int:
        return len(self._ids)

    def _embed(self, texts: Sequence[str], *, query: bool) -> npt.NDArray[np.float32]:
        if isinstance(self.model, OnnxEmbeddingModel):
            return self.model.vectors(texts, query=query)
        embedder = Embedder(self.model)
        result = embedder.embed_sync(list(texts), input_type='query' if query else 'document')
        return _normalised(result.embeddings)

    @property
    def model_key(self) -> str:
        """The name a store keeps this model's vectors under; a local model's also carries its `fingerprint`, as
        its name is only its file's (two `model.onnx` directories would otherwise read each other's vectors)."""
        key = f'{self.model.system}:{self.model.model_name}'
        if isinstance(self.model, OnnxEmbeddingModel):
            key += f'@{self.model.fingerprint}'
        return key

    def add(self, blocks: Sequence[tuple[str, str]], *, namespace: str = DEFAULT_NAMESPACE, session_id: str) -> int:
        """Embed `(block_id, text)` pairs of one session; returns how many were new."""
        return self._embed_new(blocks, namespace=namespace, session_id=session_id)

    def _embed_new(
        self, blocks: Sequence[tuple[str, str]], *, namespace: str, session_id: str, store: GraphStore | None = None
    ) -> int:
        """Embed the blocks this index lacks, a chunk at a time; with `store` (and `persist`), each chunk's vectors
        are stored as soon as they are made, so a model failing or a process killed later loses no earlier chunk."""
        fresh = [(block_id, text) for block_id, text in dict(blocks).items() if block_id not in self._known]
        made = 0
        for start in range(0, len(fresh), _EMBED_CHUNK):  # a stop waits for one chunk at most
            if self._stopping.is_set():
                break
            chunk = fresh[start : start + _EMBED_CHUNK]
            ids = [block_id for block_id, _ in chunk]
            matrix = self._embed([text[: self.max_chars] for _, text in chunk], query=False)
            self._keep(ids, matrix, namespace=namespace, session_id=session_id)
            if store is not None and self.persist:
                self._store_vectors(store, ids, matrix, namespace=namespace)
            made += len(chunk)
            if self.progress is not None:
                self.progress(len(chunk))
        return made

    @property
    def stopped(self) -> bool:
        """`stop` was called: syncs embed nothing more."""
        return self._stopping.is_set()

    def stop(self) -> None:
        """End a running `sync` at its next chunk of embeddings (what it made is kept; the scope is synced again
        in full next time), and every later one: for a process shutting down."""
        self._stopping.set()

    def _keep(self, ids: Sequence[str], matrix: npt.NDArray[np.float32], *, namespace: str, session_id: str) -> None:
        with self._lock:
            if self._chunks and self._chunks[0].shape[1] != matrix.shape[1]:
                raise ValueError(
                    f'{self.model_key} gave {matrix.shape[1]}-dimensional vectors, the index holds '
                    f'{self._chunks[0].shape[1]}: one index, one model'
                )
            rows = [i for i, block_id in enumerate(ids) if block_id not in self._known]  # a concurrent sync's
            if not rows:
                return
            code = self._scopes.get((namespace, session_id))
            if code is None:  # codes are never reused: a dropped scope's code could still be in a snapshot
                code = self._scopes[(namespace, session_id)] = self._next_code
                self._next_code += 1
            for i in rows:
                self._ids.append(ids[i])
                self._codes.append(code)
                self._known.add(ids[i])
            self._chunks.append(matrix if len(rows) == len(ids) else matrix[rows])
            self._code_array = None

    def _load_stored(
        self, store: GraphStore, *, namespace: str, session_id: str | None, block_ids: Collection[str] | None = None
    ) -> None:
        """The vectors of this model the store keeps for the scope (only of `block_ids` when given), made earlier
        by this or another process."""
        import numpy as np

        by_session: dict[str, list[tuple[str, bytes]]] = {}
        stored = store.read_vectors(self.model_key, namespace=namespace, session_id=session_id, block_ids=block_ids)
        for block_id, sid, data in stored:
            if block_id not in self._known:
                by_session.setdefault(sid, []).append((block_id, data))
        width = self._chunks[0].shape[1] if self._chunks else None
        for sid, rows in by_session.items():
            usable = [(b, d) for b, d in rows if len(d) % 4 == 0 and (width is None or len(d) == 4 * width)]
            sizes = {len(d) for _, d in usable}
            if len(sizes) != 1:  # vectors of another width (a model of the same name changed): embedded again
                continue
            matrix = np.frombuffer(b''.join(d for _, d in usable), dtype='<f4').reshape(len(usable), -1)
            self._keep([b for b, _ in usable], matrix.astype(np.float32), namespace=namespace, session_id=sid)
            width = matrix.shape[1]

    def sync(self, store: GraphStore, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None) -> int:
        """Embed the scope's archived blocks this index lacks (their rendered messages); returns how many.

        Block counts per session say which sessions changed (one count for a session, one grouped count over the
        scope index for a namespace); when none did, that is all. Otherwise the changed scope's block ids say what
        is missing, and only that is read: stored vectors by id, then the blocks still without one (a sync after
        an eviction reads one block, not the session or the namespace). Many missing blocks (a first sync) are read
        a page at a time instead.
        """
        if session_id is None:
            counts = store.block_counts(namespace=namespace)
            # a session this index holds that the store no longer has was forgotten: its vectors go too
            counts.update({sid: 0 for ns, sid in list(self._scopes) if ns == namespace and sid not in counts})
        else:
            counts = {session_id: store.count_blocks(namespace=namespace, session_id=session_id)}
        changed = {sid: count for sid, count in counts.items() if self._synced.get((namespace, sid), 0) != count}
        if not changed:
            return 0
        # the one changed session is listed alone; several, in one listing of the namespace
        listed = session_id if session_id is not None else next(iter(changed)) if len(changed) == 1 else None
        listing = [
            (block_id, sid)
            for block_id, sid in store.list_block_ids(namespace=namespace, session_id=listed)
            if sid in changed
        ]
        self._drop_stale(namespace, changed, {block_id for block_id, _ in listing})
        missing = [(block_id, sid) for block_id, sid in listing if block_id not in self._known]
        if missing:
            many = len(missing) > _SCAN_PAGE
            wanted = None if many else [block_id for block_id, _ in missing]
            self._load_stored(store, namespace=namespace, session_id=listed, block_ids=wanted)
            missing = [(block_id, sid) for block_id, sid in missing if block_id not in self._known]
        if len(missing) > _SCAN_PAGE:
            fresh = self._embed_scanned(store, namespace=namespace, session_id=listed)
        else:
            fresh = self._embed_sessions(store, _texts_of(store, missing, namespace=namespace), namespace=namespace)
        if not self._stopping.is_set():  # a stopped sync did not see everything
            for sid, count in changed.items():
                self._synced[(namespace, sid)] = count
        return fresh

    def _drop_stale(self, namespace: str, sessions: Collection[str], present: Collection[str]) -> None:
        """Forget the vectors of `sessions` whose blocks are no longer in the store (`forget` deleted the session):
        a recall must not return a block that is gone."""
        import numpy as np

        with self._lock:
            codes = [self._scopes[(namespace, sid)] for sid in sessions if (namespace, sid) in self._scopes]
            if not codes or not self._ids:
                return
            in_scope = np.flatnonzero(np.isin(np.asarray(self._codes, dtype=np.int32), codes))
            stale = {int(row) for row in in_scope if self._ids[row] not in present}
            if not stale:
                return
            keep = [row for row in range(len(self._ids)) if row not in stale]
            matrix = np.concatenate(self._chunks)[keep]
            self._ids = [self._ids[row] for row in keep]
            self._codes = [self._codes[row] for row in keep]
            self._known = set(self._ids)
            self._chunks = [matrix] if keep else []
            self._code_array = None

    def _embed_scanned(self, store: GraphStore, *, namespace: str, session_id: str | None) -> int:
        """Embed the scope's blocks this index lacks, reading the scope a page at a time (bounded memory)."""
        fresh = 0
        after = ''
        while True:
            page = store.scan_blocks(namespace=namespace, session_id=session_id, after=after, limit=_SCAN_PAGE)
            by_session: dict[str, list[tuple[str, str]]] = {}
            for block in page:
                if block.kind == 'block' and block.id not in self._known:
                    by_session.setdefault(block.session_id, []).append((block.id, _block_text(block)))
            fresh += self._embed_sessions(store, by_session, namespace=namespace)
            if len(page) < _SCAN_PAGE or self._stopping.is_set():
                return fresh
            after = page[-1].id

    def _embed_sessions(
        self, store: GraphStore, by_session: Mapping[str, Sequence[tuple[str, str]]], *, namespace: str
    ) -> int:
        return sum(
            self._embed_new(blocks, namespace=namespace, session_id=sid, store=store)
            for sid, blocks in by_session.items()
        )

    def _store_vectors(
        self, store: GraphStore, ids: Sequence[str], matrix: npt.NDArray[np.float32], *, namespace: str
    ) -> None:
        """Vectors are derived data: a store that cannot keep them costs the next process an embedding, no more."""
        try:
            rows = [(block_id, matrix[i].astype('<f4').tobytes()) for i, block_id in enumerate(ids)]
            store.write_vectors(self.model_key, rows, namespace=namespace)
        except Exception as exc:  # any store failure: the vectors stay in this process
            log = logger.debug if self._store_failed else logger.warning
            self._store_failed = True  # a read-only store fails every chunk: one warning says it
            log(
                'mementograph: could not store %d block vectors (they stay in this process; the next one embeds '
                'them again): %s: %s',
                len(ids),
                type(exc).__name__,
                exc,
            )

    def _query_vector(self, query: str) -> npt.NDArray[np.float32]:
        with self._lock:
            cached = self._queries.get(query)
            if cached is not None:
                self._queries.move_to_end(query)
                return cached
        vector: npt.NDArray[np.float32] = self._embed([query], query=True)[0]
        with self._lock:
            self._queries[query] = vector
            while len(self._queries) > _QUERY_CACHE:
                self._queries.popitem(last=False)
        return vector

    def _arrays(self) -> tuple[list[str], npt.NDArray[np.float32], npt.NDArray[np.int32]]:
        """A consistent snapshot: ids, vectors and scope codes of the same rows."""
        import numpy as np

        with self._lock:
            if not self._chunks:  # emptied by a concurrent `_drop_stale`
                return [], _empty(), np.zeros(0, dtype=np.int32)
            if len(self._chunks) > 1:
                self._chunks = [np.concatenate(self._chunks)]
            if self._code_array is None:
                self._code_array = np.asarray(self._codes, dtype=np.int32)
            return self._ids[:], self._chunks[0], self._code_array

    def rank_dense(
        self,
        query: str,
        *,
        namespace: str,
        session_id: str | None,
        limit: int,
        sessions: Collection[str] | None = None,
    ) -> list[tuple[str, float]]:
        """`(block_id, cosine)` of the `limit` nearest blocks of the scope: one session, or the namespace (only
        `sessions` of it when given)."""
        import numpy as np

        if not self._ids or limit <= 0:
            return []
        wanted = [
            code
            for (ns, sid), code in list(self._scopes.items())
            if ns == namespace and (session_id is None or sid == session_id) and (sessions is None or sid in sessions)
        ]
        if not wanted:
            return []
        ids, matrix, codes = self._arrays()
        rows = np.flatnonzero(np.isin(codes, wanted))
        if not len(rows):
            return []
        similarity = (matrix if len(rows) == len(ids) else matrix[rows]) @ self._query_vector(query)
        if len(similarity) > limit:  # the best `limit` unordered, then only those sorted
            head = np.argpartition(-similarity, limit - 1)[:limit]
            top = head[np.argsort(-similarity[head], kind='stable')]
        else:
            top = np.argsort(-similarity, kind='stable')
        return [(ids[int(rows[i])], float(similarity[i])) for i in top]

    def scoped(self, sessions: Collection[str]) -> ScopedDenseIndex:
        """This index seen through a set of sessions (a LongMemEval question's own haystack)."""
        return ScopedDenseIndex(self, frozenset(sessions))


def _empty() -> npt.NDArray[np.float32]:
    import numpy as np

    return np.zeros((0, 0), dtype=np.float32)


def _texts_of(
    store: GraphStore, blocks: Sequence[tuple[str, str]], *, namespace: str
) -> dict[str, list[tuple[str, str]]]:
    """Session -> `(block_id, text)` of the given `(block_id, session_id)`s, read one by one (a few)."""
    by_session: dict[str, list[tuple[str, str]]] = {}
    for block_id, sid in blocks:
        try:
            block = store.get_block(block_id, namespace=namespace, session_id=sid)
        except BlockNotFoundError:  # forgotten since it was listed: nothing left to embed
            continue
        by_session.setdefault(sid, []).append((block_id, _block_text(block)))
    return by_session


def _block_text(block: BlockRecord) -> str:
    return block.text or render_block(searchable_messages(deserialize_messages(block.messages_json)))


@dataclass(frozen=True)
class ScopedDenseIndex:
    """A `DenseIndex` restricted to some sessions."""

    index: DenseIndex
    sessions: frozenset[str]

    def rank_dense(self, query: str, *, namespace: str, session_id: str | None, limit: int) -> list[tuple[str, float]]:
        return self.index.rank_dense(
            query, namespace=namespace, session_id=session_id, limit=limit, sessions=self.sessions
        )
