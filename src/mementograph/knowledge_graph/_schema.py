"""`_schema` -- the graph model both backends hold, as frozen values.

Nodes: `Session`, `EvictedBlock`, `Memento`, `Page`, `Entity`; edges: `SUMMARIZES`, `IN_SESSION`, `NEXT`,
`CONTAINS`, `MENTIONS {count}`. Ids are derived from content and position so that a retried write is a no-op.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = (
    'DEFAULT_NAMESPACE',
    'BlockKind',
    'BlockRecord',
    'EntityRecord',
    'EventKind',
    'Eviction',
    'MementoRecord',
    'Mention',
    'PageRecord',
    'SessionEvent',
    'SessionRecord',
    'StoreStats',
    'block_id_for',
    'entity_id_for',
    'item_id',
    'item_ids',
    'memento_id_for',
    'page_id_for',
)

DEFAULT_NAMESPACE: Final = 'default'

BlockKind = Literal['block', 'part']
"""`block`: a completed block of conversation replaced by a memento; `part`: one large tool result or binary part
stubbed by micro-compaction (its whole message is archived)."""

EventKind = Literal['message', 'micro', 'auto', 'manual', 'archive']
"""Session log entries: a message as it arrived, a micro / automatic / manual compaction, or blocks archived at the
end of a run without leaving the context (`MementoCompaction.archive_at_run_end`)."""


def _digest(*parts: str, size: int = 24) -> str:
    return hashlib.sha256('\x1f'.join(parts).encode()).hexdigest()[:size]


_ITEM_ID: Final = re.compile(r'\b(?:blk|prt|mem|pg)_[0-9a-f]{16,24}\b')


def item_id(text: str) -> str:
    """The id a model meant: `text` without surrounding blanks, or the one block, part, memento or page id it
    holds (`recover_block("blk_...")` or `id: blk_...` typed as the argument)."""
    stripped = text.strip()
    found = _ITEM_ID.findall(stripped)
    return found[0] if len(found) == 1 and found[0] != stripped else stripped


def item_ids(text: str) -> list[str]:
    """The block, part, memento and page ids `text` names, each once, in order."""
    return list(dict.fromkeys(_ITEM_ID.findall(text)))


def block_id_for(namespace: str, session_id: str, seq: int, sha256: str, kind: BlockKind = 'block') -> str:
    """Deterministic block id: the same messages at the same place of the same session get the same id."""
    prefix = 'blk' if kind == 'block' else 'prt'
    return f'{prefix}_{_digest(namespace, session_id, str(seq), sha256, kind)}'


def memento_id_for(namespace: str, session_id: str, summarized_ids: Sequence[str]) -> str:
    """Deterministic memento id, from what it summarizes (never from its text, which may differ on a retry)."""
    return f'mem_{_digest(namespace, session_id, *summarized_ids)}'


def page_id_for(namespace: str, session_id: str, number: int) -> str:
    """Deterministic page id."""
    return f'pg_{_digest(namespace, session_id, str(number), size=16)}'


def entity_id_for(namespace: str, key: str) -> str:
    """Entities are shared across the sessions of a namespace, never across namespaces.

    The namespace is percent-encoded so the first `:` always ends it: namespace `a:b` with key `k` and namespace
    `a` with key `b:k` must not share an entity (nor a prefix range of ids). Namespaces without `:` or `%` keep
    their ids unchanged.
    """
    return f'{namespace.replace("%", "%25").replace(":", "%3A")}:{key}'


@dataclass(frozen=True)
class SessionRecord:
    """A `(:Session)` node."""

    id: str
    namespace: str = DEFAULT_NAMESPACE
    created_at: str = ''
    """ISO-8601 UTC time of the first write."""


@dataclass(frozen=True)
class BlockRecord:
    """An `(:EvictedBlock)`: the exact serialization of the messages it replaced, and their sha256."""

    id: str
    session_id: str
    namespace: str
    seq: int
    """Position in the session: index of the block's first message in the session's message log."""
    first_message: int
    last_message: int
    """Inclusive message-log index of the block's last message."""
    tokens: int
    sha256: str
    messages_json: bytes
    kind: BlockKind = 'block'
    text: str = ''
    """Plain-text rendering for full-text search: derived from the messages without the memory tools' calls and
    answers (`searchable_messages`: they quote the archive), never used for recovery; a backend may leave it
    unstored and read it back empty (the embedded store indexes from the messages themselves, by the same rule)."""
    started_at: str | None = None
    """ISO-8601 time of the block's first message, when known (time-range recall)."""

    @classmethod
    def from_messages(
        cls,
        messages: Sequence[ModelMessage],
        *,
        session_id: str,
        seq: int,
        tokens: int,
        namespace: str = DEFAULT_NAMESPACE,
        kind: BlockKind = 'block',
        text: str = '',
        started_at: str | None = None,
    ) -> BlockRecord:
        """Serialize `messages` exactly and derive the block's id and hash."""
        from .._messages import messages_sha256, serialize_messages  # pydantic-ai: not for a reader of the store

        if not messages:
            raise ValueError('a block holds at least one message')
        data = serialize_messages(messages)
        sha = messages_sha256(data)
        return cls(
            id=block_id_for(namespace, session_id, seq, sha, kind),
            session_id=session_id,
            namespace=namespace,
            seq=seq,
            first_message=seq,
            last_message=seq + len(messages) - 1,
            tokens=tokens,
            sha256=sha,
            messages_json=data,
            kind=kind,
            text=text,
            started_at=started_at,
        )


@dataclass(frozen=True)
class MementoRecord:
    """A `(:Memento)`: the text that stands in for what it `SUMMARIZES` (blocks, or mementos for a chain)."""

    id: str
    session_id: str
    namespace: str
    text: str
    tokens: int
    summarizes: tuple[str, ...]
    """Ids of the blocks (or, for a memento of mementos, the mementos) it stands in for, in order."""
    score: float | None = None
    """Judge score 0-10; `None` when no judge could score it."""
    verified: bool = False
    """True only when a judge scored it at or above the pass mark (fail closed)."""
    iterations: int = 0
    compressor: str = ''
    level: int = 1
    """1 for a memento of blocks, n+1 for a memento of level-n mementos."""


@dataclass(frozen=True)
class EntityRecord:
    """An `(:Entity)` node, keyed by its normalised form."""

    key: str
    name: str
    kind: str


@dataclass(frozen=True)
class Mention:
    """A `MENTIONS {count}` edge from a block or memento to an entity."""

    source_id: str
    entity: EntityRecord
    count: int = 1


@dataclass(frozen=True)
class PageRecord:
    """A `(:Page)` that `CONTAINS` blocks."""

    id: str
    session_id: str
    namespace: str
    number: int
    first_turn: int
    last_turn: int
    summary: str
    topics: tuple[str, ...]
    block_ids: tuple[str, ...]


@dataclass(frozen=True)
class SessionEvent:
    """One entry of a session's append-only log: a message (exact JSON) or a compaction naming its blocks.

    The log is the full record ("lossy in the live context, lossless in persistence"): messages in order, with
    the compactions that replaced some of them in the live context between them.
    """

    session_id: str
    namespace: str
    kind: EventKind
    payload: bytes
    """The message's exact serialization (a one-message list, for `message`), or a JSON compaction report."""
    sha256: str
    message_index: int | None = None
    """For `message`: its position in the session (0-based, contiguous); `None` for compactions."""
    block_ids: tuple[str, ...] = ()
    """For compactions: the blocks (and stubbed parts) they archived."""
    seq: int = -1
    """Order in the log, assigned by the store when the event is first written."""
    created_at: str = ''

    @property
    def key(self) -> str:
        """What makes an event unique in its session, so appending it twice is a no-op."""
        if self.kind == 'message':
            return f'message:{self.message_index}'
        return f'{self.kind}:{_digest(*self.block_ids) if self.block_ids else self.sha256}'

    @classmethod
    def for_message(
        cls, message: ModelMessage, *, session_id: str, index: int, namespace: str = DEFAULT_NAMESPACE
    ) -> SessionEvent:
        """The log entry of one message, serialized exactly."""
        from .._messages import messages_sha256, serialize_messages

        data = serialize_messages([message])
        return cls(
            session_id=session_id,
            namespace=namespace,
            kind='message',
            payload=data,
            sha256=messages_sha256(data),
            message_index=index,
        )


@dataclass(frozen=True)
class Eviction:
    """Everything one eviction writes; a store commits it in one transaction or not at all."""

    session_id: str
    namespace: str = DEFAULT_NAMESPACE
    blocks: tuple[BlockRecord, ...] = ()
    mementos: tuple[MementoRecord, ...] = ()
    mentions: tuple[Mention, ...] = ()
    pages: tuple[PageRecord, ...] = ()
    events: tuple[SessionEvent, ...] = ()

    def __post_init__(self) -> None:
        records: list[BlockRecord | MementoRecord | PageRecord | SessionEvent] = [
            *self.blocks,
            *self.mementos,
            *self.pages,
            *self.events,
        ]
        for record in records:
            if record.session_id != self.session_id or record.namespace != self.namespace:
                raise ValueError(
                    f'{type(record).__name__} of session {record.namespace}/{record.session_id} '
                    f'in an eviction of {self.namespace}/{self.session_id}'
                )


@dataclass(frozen=True)
class StoreStats:
    """Counts for `mementograph stats`."""

    sessions: int
    blocks: int
    parts: int
    mementos: int
    verified_mementos: int
    entities: int
    pages: int
    events: int
    block_tokens: int
    memento_tokens: int
    details: dict[str, int] = field(default_factory=dict[str, int])

    @property
    def tokens_saved(self) -> int:
        """Tokens the live context no longer carries (evicted block tokens minus memento tokens)."""
        return max(0, self.block_tokens - self.memento_tokens)
