"""`GraphStore` -- the protocol every backend implements and the shared contract suite checks."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._schema import (
    DEFAULT_NAMESPACE,
    BlockKind,
    BlockRecord,
    EntityRecord,
    Eviction,
    MementoRecord,
    Mention,
    PageRecord,
    SessionEvent,
    SessionRecord,
    StoreStats,
)

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = ('BlockLink', 'GraphLinks', 'GraphStore', 'MementoLink', 'PageLink', 'RecoveredBlock', 'TextHit')


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


@dataclass(frozen=True)
class BlockLink:
    """An evicted block's place in the graph, without its bytes: what `verify_store` walks."""

    id: str
    session_id: str
    kind: BlockKind
    seq: int
    first_message: int
    last_message: int
    next_ids: tuple[str, ...]
    """Where its `NEXT` edges lead, as stored (a backend that derives `NEXT` from `seq` reports the derived edge)."""
    in_session: bool
    """Its session record exists and it is linked to it (`IN_SESSION`)."""


@dataclass(frozen=True)
class MementoLink:
    """A memento's links, without its text."""

    id: str
    session_id: str
    level: int
    summarizes: tuple[str, ...]
    """What the memento says it stands in for, in order (`MementoRecord.summarizes`)."""
    targets: tuple[str, ...]
    """Where its `SUMMARIZES` edges lead, as stored, by position (`''` for a target that has no id)."""


@dataclass(frozen=True)
class PageLink:
    """A page's `CONTAINS` edges as stored, including any to a block that is no longer there."""

    id: str
    session_id: str
    number: int
    first_turn: int
    last_turn: int
    members: tuple[tuple[str, int], ...]
    """`(block id, position)` of every `CONTAINS` edge, by position."""


@dataclass(frozen=True)
class GraphLinks:
    """Every block, memento and page of a scope with its edges, without bytes or text (small even at 100k blocks)."""

    blocks: tuple[BlockLink, ...]
    mementos: tuple[MementoLink, ...]
    pages: tuple[PageLink, ...]


@runtime_checkable
class GraphStore(Protocol):
    """A lossless block store and knowledge graph.

    Reads are scoped by `namespace` (default `'default'`) and, when given, `session_id`; `session_id=None`
    explicitly widens a read to every session of the namespace. A record outside the scope is simply not found.
    Writes are idempotent: ids are derived from content and position, so replaying a write changes nothing.
    A store is called from several threads (the capability's worker threads, `recall`'s full-text search beside
    its graph reads), so every method must be safe to call concurrently.
    """

    @property
    def uri(self) -> str:
        """The URI the store was opened with (credentials removed)."""
        ...

    def write_eviction(self, eviction: Eviction) -> None:
        """Write blocks, mementos, edges, pages and events of one eviction in one transaction, or nothing.

        A page record extends the page the store holds (`PageConflictError` when it does not continue it); a page
        the store holds closed (a summary) keeps its turns, summary and topics, so the index changes only when a
        page closes, also while another run of the session evicts from a view of the page before it closed."""
        ...

    def append_events(self, events: Sequence[SessionEvent]) -> None:
        """Append to session logs in order; an event whose `key` the session's log holds is left as it is.

        A message event whose position holds another message (another run writes the session at the same time)
        raises `LogConflictError`, and nothing of the call is written.
        """
        ...

    def append_branch(self, events: Sequence[SessionEvent]) -> int:
        """Append message events of one session after the last message its log holds, in one transaction: each
        event's `message_index` is read as its offset from there (0 for the first). Returns the position the
        first was given. What a run whose positions another run took logs itself as: no other writer can take
        these positions between reading where the log ends and writing."""
        ...

    def read_events(
        self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE, since_seq: int = 0
    ) -> list[SessionEvent]:
        """A session's log from `since_seq` on, in order, with `seq` set."""
        ...

    def last_message_index(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> int:
        """The highest `message_index` in a session's log, or -1 when it holds no message."""
        ...

    def message_indices_of(self, session_id: str, sha256: str, *, namespace: str = DEFAULT_NAMESPACE) -> list[int]:
        """Every `message_index` of a session's logged messages with this sha256, newest first: where a
        conversation continued in a later run may start in the session's log (a branch repeats its opening)."""
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

    def get_blocks(
        self, block_ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[BlockRecord]:
        """Stored block records by id, unchecked, in one read (every block under a memento of mementos: one round
        trip on a server, not one a block). Ids not found in scope are left out; the result follows the order of
        `block_ids` (duplicates once)."""
        ...

    def get_mementos(
        self, memento_ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[MementoRecord]:
        """Mementos by id, in one read (the children of a merge, a level of a chain). Ids not found in scope are
        left out; the result follows the order of `memento_ids` (duplicates once)."""
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

    def write_vectors(
        self, model: str, vectors: Sequence[tuple[str, bytes]], *, namespace: str = DEFAULT_NAMESPACE
    ) -> int:
        """Keep `(block_id, float32 bytes)` embeddings of `model` with their blocks (derived data, deleted with the
        session); a block id not in the namespace is skipped. Returns how many were stored."""
        ...

    def read_vectors(
        self,
        model: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        block_ids: Collection[str] | None = None,
    ) -> list[tuple[str, str, bytes]]:
        """`(block_id, session_id, float32 bytes)` of every stored embedding of `model` in scope (only of
        `block_ids` when given: what an index that holds the rest lacks)."""
        ...

    def block_counts(self, *, namespace: str = DEFAULT_NAMESPACE) -> dict[str, int]:
        """Session id -> how many blocks (not stubbed parts) it holds, for every session of the namespace with one:
        which sessions changed since an index last looked, from the scope index alone."""
        ...

    def list_block_ids(
        self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[tuple[str, str]]:
        """`(block_id, session_id)` of the scope's blocks (not stubbed parts), without their payloads: which of them
        an index built earlier lacks, at the cost of the ids alone."""
        ...

    def count_blocks(
        self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None, kind: BlockKind | None = 'block'
    ) -> int:
        """How many blocks the scope holds: one indexed count, for a cheap "anything new?" before a costly read."""
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

    def replace_mentions(
        self, source_ids: Sequence[str], mentions: Sequence[Mention], *, namespace: str = DEFAULT_NAMESPACE
    ) -> int:
        """Replace every `MENTIONS` edge from the blocks and mementos `source_ids` with `mentions`, in one
        transaction: how records archived before the entity extractor changed get what it finds now
        (`reindex_entities`). Entities nothing mentions any more go; document frequencies follow.

        Every mention's source must be one of `source_ids` (`ValueError` otherwise), and every source a block or
        memento of `namespace` (`NotFoundError` otherwise, and nothing is written). Returns how many edges it wrote.
        """
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

    def scan_blocks(
        self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None, after: str = '', limit: int = 256
    ) -> list[BlockRecord]:
        """Up to `limit` blocks of every kind with an id greater than `after`, in id order: a whole archive read
        page by page in bounded memory (pass the last id as `after` until a page comes back short)."""
        ...

    def graph_links(self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None) -> GraphLinks:
        """The `NEXT`, `IN_SESSION`, `SUMMARIZES` and `CONTAINS` edges of a scope as stored, for integrity checks."""
        ...

    def check_storage(self) -> tuple[str, ...]:
        """What the database engine finds wrong in its own storage (SQLite: `PRAGMA integrity_check`), as lines of
        its words; `()` when it finds nothing, or has no check a client can run (Neo4j's is an offline admin
        command). Raises `StoreCorruptError` when the storage is too damaged to check."""
        ...

    def delete_session(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> int:
        """Delete everything of a session; returns how many records went."""
        ...

    def close(self) -> None:
        """Release connections; the store is unusable afterwards."""
        ...
