"""`GraphStore` -- the protocol every backend implements and the shared contract suite checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic_ai.messages import ModelMessage

from .._schema import (
    DEFAULT_NAMESPACE,
    BlockKind,
    BlockRecord,
    EntityRecord,
    Eviction,
    MementoRecord,
    PageRecord,
    SessionEvent,
    SessionRecord,
    StoreStats,
)

__all__ = ('GraphStore', 'RecoveredBlock', 'TextHit')


@dataclass(frozen=True)
class RecoveredBlock:
    """An evicted block read back and hash-checked: `messages` equal the originals."""

    record: BlockRecord
    messages: tuple[ModelMessage, ...]


@dataclass(frozen=True)
class TextHit:
    """A full-text (BM25) match: a block or memento id, its block ids and its rank score (higher is better)."""

    id: str
    block_ids: tuple[str, ...]
    score: float


@runtime_checkable
class GraphStore(Protocol):
    """A lossless block store and knowledge graph.

    Reads are scoped by `namespace` (default `'default'`) and, when given, `session_id`; `session_id=None`
    explicitly widens a read to every session of the namespace. A record outside the scope is simply not found.
    Writes are idempotent: ids are derived from content and position, so replaying a write changes nothing.
    """

    @property
    def uri(self) -> str:
        """The URI the store was opened with (credentials removed)."""
        ...

    def write_eviction(self, eviction: Eviction) -> None:
        """Write blocks, mementos, edges, pages and events of one eviction in one transaction, or nothing."""
        ...

    def append_events(self, events: Sequence[SessionEvent]) -> None:
        """Append to session logs in order; an event whose `key` the session's log holds is left as it is."""
        ...

    def read_events(
        self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE, since_seq: int = 0
    ) -> list[SessionEvent]:
        """A session's log from `since_seq` on, in order, with `seq` set."""
        ...

    def last_message_index(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> int:
        """The highest `message_index` in a session's log, or -1 when it holds no message."""
        ...

    def get_block(
        self, block_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> BlockRecord:
        """The stored block record, unchecked. Raises `BlockNotFoundError`."""
        ...

    def recover_block(
        self, block_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> RecoveredBlock:
        """The block's original messages, after checking its sha256. Raises `BlockNotFoundError` or
        `BlockIntegrityError`."""
        ...

    def get_memento(
        self, memento_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> MementoRecord:
        """A memento by id. Raises `MementoNotFoundError`."""
        ...

    def memento_of(
        self, target_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> MementoRecord | None:
        """The memento that `SUMMARIZES` a block (or a memento), if any."""
        ...

    def list_sessions(self, *, namespace: str | None = DEFAULT_NAMESPACE) -> list[SessionRecord]:
        """Sessions of a namespace (`None`: of every namespace)."""
        ...

    def list_blocks(
        self,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        kind: BlockKind | None = 'block',
    ) -> list[BlockRecord]:
        """Blocks in session order (`kind=None`: stubbed parts too)."""
        ...

    def list_mementos(
        self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[MementoRecord]:
        """Mementos in session order."""
        ...

    def list_pages(self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None) -> list[PageRecord]:
        """Pages in order."""
        ...

    def entities_of(self, source_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> list[tuple[EntityRecord, int]]:
        """Entities a block or memento `MENTIONS`, with their counts, most mentioned first."""
        ...

    def search_text(
        self, query: str, *, k: int = 10, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[TextHit]:
        """BM25 full-text search over mementos and blocks, best first."""
        ...

    def query(
        self,
        cypher: str,
        params: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
        namespace: str | None = None,
        limit: int | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """Run a read-only Cypher query; rows as plain dicts. At most `limit` rows (default 1000) and `timeout`
        seconds (default 10), else `QueryError`; writes raise `ReadOnlyViolationError`."""
        ...

    def stats(self, *, namespace: str | None = DEFAULT_NAMESPACE, session_id: str | None = None) -> StoreStats:
        """Counts of what the store holds in scope (`namespace=None`: everything)."""
        ...

    def delete_session(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> int:
        """Delete everything of a session; returns how many records went."""
        ...

    def close(self) -> None:
        """Release connections; the store is unusable afterwards."""
        ...
