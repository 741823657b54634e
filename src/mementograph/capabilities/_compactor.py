"""`SessionCompactor` -- one session's archive-first compaction, independent of pydantic-ai's run machinery.

Data flows one way: live messages -> the session log (every message as it arrives) -> micro-compaction of old,
large tool results and binary parts -> segmentation -> mementos (compressor + judge) -> one store transaction ->
only then the live history is rewritten. Any failure before the commit leaves the history exactly as it was.

With a `redact` hook, every message is redacted on its way into the store (the log and each archived block), and
mementos, entities and pages are made from the redacted blocks, so nothing the hook removes reaches the store or
the compressor; a failing hook fails the write (nothing is archived unredacted).
"""

from __future__ import annotations

import asyncio
import bisect
import inspect
import json
import logging
import warnings
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final, Literal, TypeVar

from pydantic_ai.messages import (
    BaseToolReturnPart,
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    TextContent,
    UserContent,
    UserPromptPart,
)

from .._echoes import echo_note, searchable_messages
from .._media import attachment_tokens, attachments
from .._messages import (
    deserialize_messages,
    message_text,
    messages_sha256,
    part_text,
    serialize_messages,
    tool_call_ids,
    tool_return_ids,
)
from .._redact import MessageRedactor, Redactor
from .._threads import StoreCalls
from .._tokens import MESSAGE_OVERHEAD_TOKENS, TokenCounter
from ..knowledge_graph import (
    BlockRecord,
    Eviction,
    MementoRecord,
    Mention,
    SessionEvent,
    memento_id_for,
)
from ..knowledge_graph.entities import MentionExtractor
from ..knowledge_graph.memory import (
    BlockInput,
    CompressionError,
    ExtractiveCompressor,
    MementoEngine,
    MementoResult,
    RubricJudge,
    Segment,
    TimeZone,
    is_conversation_memento,
    render_block,
    segment_blocks,
    without_outlines,
)
from ..knowledge_graph.recall import pages_for_eviction
from ..knowledge_graph.store import GraphStore, LogConflictError, NotFoundError, PageConflictError
from ._breaker import BreakerChange, CompressorBreaker, is_outage
from ._events import MementoWarning
from ._layout import (
    MICRO_METADATA,
    Slot,
    StubInfo,
    layout,
    make_stub,
    micro_id_of,
    micro_part_id,
    micro_part_of,
    stub_info,
    stub_shape,
)
from ._logwriter import SessionLogWriter
from ._merges import split_merged

__all__ = ('ArchiveReport', 'CompactionPolicy', 'CompactionReport', 'SessionCompactor', 'Trigger')

Trigger = Literal['auto', 'manual']

_STUB_OVERHEAD_TOKENS: Final = 40
"""Header tokens a stub adds to its memento text (estimate used only for planning)."""
_RECENT_BLOCKS: Final = 64
"""Blocks whose `MENTIONS` and tokens the compactor keeps for the open page (a default page closes at 8 blocks)."""
_STUBBED_SPAN_SAVING: Final = 20
"""Tokens a span holding micro-compacted stubs must at least save when its memento replaces it."""
_MIN_EVICTABLE_TOKENS: Final = 2 * _STUB_OVERHEAD_TOKENS
"""A complete block smaller than this is left in context: its memento and stub would not be smaller than it."""
_STUB_MARGIN_TOKENS: Final = 8
"""Taken off a too-large stub of an oversized tool result, beyond its excess, when its size is corrected."""
_MERGE_FILL: Final = 0.9
"""A merge fills the mementos' share up to this much, so the next eviction's stub fits before another merge."""
_MERGE_MIN_SHARE: Final = 0.15
"""A merged memento may always take this share of its children (the compressor's usual target), even when the
other stubs leave less room."""
_MERGE_MAX_SHARE: Final = 0.9
"""A merged memento takes at most this share of its children: a merge always frees room."""

_PAGE_ATTEMPTS: Final = 5
"""Times an eviction computes its pages and writes when other runs keep paging the session's blocks meanwhile."""
COMPRESS_ATTEMPTS: Final = 3
"""Compactions a block's compressor may fail on (or outlast `compress_timeout`) before the extractive compressor
and the rubric judge, which need no model, write its memento."""
_CANCEL_GRACE_SECONDS: Final = 1.0
"""How long a compression past its `compress_timeout` is given to stop once cancelled (an async model call stops at
once); one blocked in a thread is left to end on its own, its answer dropped."""

logger = logging.getLogger('mementograph')

_ReturnPart = TypeVar('_ReturnPart', bound=BaseToolReturnPart[Any])
T = TypeVar('T')
K = TypeVar('K')


def _has_binary(message: ModelMessage) -> bool:
    """Whether a part of `message` holds binary content: megabytes, whatever its tokens."""
    return any(isinstance(item, BinaryContent) for item in attachments(message))


@dataclass(frozen=True)
class CompactionPolicy:
    """When and how far to compact."""

    high_water_tokens: int
    """Compact when the live context passes this many tokens."""
    low_water_tokens: int
    """Evict down to this many tokens (hysteresis: the cached prompt prefix then stays stable while it regrows)."""
    min_saving_tokens: int = 200
    """Skip an eviction that would save fewer tokens than this (each one rewrites the prompt prefix)."""
    micro_min_tokens: int = 1_000
    """A tool result at least this large becomes a stub once it is old."""
    keep_recent_messages: int = 6
    """The newest messages are not micro-compacted (only a tool result too large for the mark, when nothing else
    brings the context under it, is stubbed wherever it is)."""
    stub_head_chars: int = 300
    stub_tail_chars: int = 300
    memento_share: float = 0.3
    """When memento stubs alone take more than this share of the high-water mark, the oldest are merged into a
    memento of mementos."""
    conversation_memento_share: float = 0.6
    """The same share when conversation mementos (speakers' lines) hold most of the stubs' tokens."""
    min_block_tokens: int = 200
    max_block_tokens: int = 4_000

    def __post_init__(self) -> None:
        if self.high_water_tokens <= 0:
            raise ValueError('high_water_tokens must be positive')
        if not 0 <= self.low_water_tokens < self.high_water_tokens:
            raise ValueError('low_water_tokens must be at least 0 and below high_water_tokens')
        for name in ('memento_share', 'conversation_memento_share'):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f'{name} must be in (0, 1]')


@dataclass(frozen=True)
class CompactionReport:
    """What one compaction pass did (or why it did nothing)."""

    trigger: Trigger
    tokens_before: int
    tokens_after: int
    micro_part_ids: tuple[str, ...] = ()
    block_ids: tuple[str, ...] = ()
    memento_ids: tuple[str, ...] = ()
    merged_memento_ids: tuple[str, ...] = ()
    verified: int = 0
    unverified: int = 0
    archived_tokens: int = 0
    memento_tokens: int = 0
    usage_tokens: int = 0
    """LLM tokens spent compressing and judging (0 for the extractive compressor and rubric judge)."""
    skipped: str | None = None
    """Why nothing (more) was evicted, when that is the case."""

    @property
    def changed(self) -> bool:
        return bool(self.micro_part_ids or self.block_ids or self.merged_memento_ids)

    @property
    def tokens_saved(self) -> int:
        return max(0, self.tokens_before - self.tokens_after)

    def to_json(self) -> bytes:
        data = {
            'trigger': self.trigger,
            'tokens_before': self.tokens_before,
            'tokens_after': self.tokens_after,
            'micro_part_ids': list(self.micro_part_ids),
            'block_ids': list(self.block_ids),
            'memento_ids': list(self.memento_ids),
            'merged_memento_ids': list(self.merged_memento_ids),
            'verified': self.verified,
            'unverified': self.unverified,
            'skipped': self.skipped,
        }
        return json.dumps(data, sort_keys=True).encode()


@dataclass(frozen=True)
class ArchiveReport:
    """What archiving a history's completed blocks without evicting them did (`SessionCompactor.archive_completed`)."""

    block_ids: tuple[str, ...] = ()
    memento_ids: tuple[str, ...] = ()
    verified: int = 0
    archived_tokens: int = 0
    usage_tokens: int = 0
    """LLM tokens spent compressing and judging (0 for the extractive compressor and rubric judge)."""
    failures: tuple[str, ...] = ()
    """The blocks the compressor failed on, and why: left for a later run's end (or eviction)."""

    def to_json(self) -> bytes:
        data = {
            'block_ids': list(self.block_ids),
            'memento_ids': list(self.memento_ids),
            'verified': self.verified,
            'archived_tokens': self.archived_tokens,
        }
        return json.dumps(data, sort_keys=True).encode()


def _verbatim(block: BlockInput) -> MementoResult:
    """The memento of a block too small for a shorter one: its own text (unjudged, so unverified)."""
    return MementoResult(
        text=block.text,
        tokens=block.tokens,
        score=None,
        verified=False,
        iterations=0,
        compressor='verbatim',
        judge='',
        feedback='the block is too small for a shorter memento: its text is its memento',
        facts_total=0,
        facts_kept=0,
        usage_tokens=0,
    )


def _unanswered(messages: Sequence[ModelMessage]) -> bool:
    """Whether a tool call among `messages` has no answer among them (a deferred tool's, at a run's end)."""
    calls: set[str] = set()
    answers: set[str] = set()
    for message in messages:
        calls |= tool_call_ids(message)
        answers |= tool_return_ids(message)
    return bool(calls - answers)


def _timestamp(message: ModelMessage) -> datetime | None:
    stamp = message.timestamp
    if stamp is None and isinstance(message, ModelRequest):
        stamp = next((t for p in message.parts if isinstance(t := getattr(p, 'timestamp', None), datetime)), None)
    return stamp


def _is_first_task(message: ModelMessage) -> bool:
    return isinstance(message, ModelRequest) and any(
        isinstance(part, UserPromptPart) and stub_info(message) is None for part in message.parts
    )


@dataclass
class SessionCompactor:
    """Compacts one session's live history against one store.

    The store is written first and the history rewritten only after the commit, so an exception anywhere leaves
    the caller's messages untouched; callers turn exceptions into "no eviction" plus a warning.
    """

    store: GraphStore
    session_id: str
    namespace: str
    counter: TokenCounter
    engine: MementoEngine
    policy: CompactionPolicy
    mentions: MentionExtractor | None = None
    redact: Redactor | None = None
    """Applied to every text before it is archived (see `mementograph.redact_secrets`)."""
    zone: TimeZone = None
    """Whose calendar relative dates in the session's messages mean (`BlockInput.zone`)."""
    calls: StoreCalls = field(default_factory=lambda: StoreCalls(None))
    """How compaction calls the store: in a worker thread, bounded by its timeout (unbounded by default)."""
    compress_timeout: float | None = None
    """Longest wait, in seconds, for one memento (its compression and judging, refinements included); past it the
    compression is cancelled and counts as failed (`None`: unbounded)."""
    breaker: CompressorBreaker = field(default_factory=CompressorBreaker)
    """Gives the compressor's and judge's model up for a cool-down once it failed several mementos in a row for a
    reason not about their blocks (`_breaker`); `MementoCompaction` shares one between its runs."""
    _breaker_changes: list[BreakerChange] = field(default_factory=list[BreakerChange], init=False, repr=False)
    """The breaker's openings and closings this compactor's mementos caused, for the capability's events
    (`take_breaker_changes`)."""
    _outages: set[int | str] = field(default_factory=set[int | str], init=False, repr=False)
    """Blocks (and merges) whose last memento by the model failed for a reason not about them (`is_outage`): made
    by the fallback at once when the breaker is open by the time their compaction has all its outcomes."""
    _logged_through: int | None = field(default=None, init=False, repr=False)
    _base: int | None = field(default=None, init=False, repr=False)
    """Where this run's history starts in the session's log (`log_base`)."""
    _seen: list[ModelMessage] = field(default_factory=list[ModelMessage], init=False, repr=False)
    _seen_slots: list[Slot] = field(default_factory=list[Slot], init=False, repr=False)
    _seen_tokens: int = field(default=0, init=False, repr=False)
    """Exact tokens of `_seen[:_exact_upto]`."""
    _exact_upto: int = field(default=0, init=False, repr=False)
    _bound_rest: int = field(default=0, init=False, repr=False)
    """An upper bound of the tokens of `_seen[_exact_upto:]`: their UTF-8 bytes (a BPE token is at least a byte),
    plus their attachments' estimates as `TokenCounter` counts them."""
    _seen_position: int = field(default=0, init=False, repr=False)
    _writer: SessionLogWriter | None = field(default=None, init=False, repr=False)
    _unwritten: tuple[int, bool] = field(default=(0, True), init=False, repr=False)
    """Messages the log writer still held when `close` stopped it, and whether that count is exact."""
    _warned_conflict: bool = field(default=False, init=False, repr=False)
    _redactor: MessageRedactor | None = field(default=None, init=False, repr=False)
    """`redact` with a memo shared by the log writer and `archived`: each message is redacted once."""
    _recent_mentions: dict[str, tuple[Mention, ...]] = field(
        default_factory=dict[str, tuple[Mention, ...]], init=False, repr=False
    )
    """`MENTIONS` of the blocks evicted lately, so closing a page reads no entities back from the store."""
    pages_closed: int = field(default=0, init=False)
    """Pages this compactor's evictions closed: the page index (closed pages only) changes with it alone."""
    _recent_tokens: dict[str, int] = field(default_factory=dict[str, int], init=False, repr=False)
    """Tokens of the blocks this compactor archived lately, so extending the open page reads none of its blocks
    back (each a round trip on a server, with the block's whole messages)."""
    _archived_bounds: set[int] | None = field(default=None, init=False, repr=False)
    """Log positions where an archived block of the session starts, or ends + 1: a history that holds archived
    messages raw again (a session continued from its `transcript`) is cut there, so its blocks are the archived
    ones (stubbed with their stored mementos, `_evict_archived`) and never overlap them. Read once a run."""
    _archived_through: int = field(default=-1, init=False, repr=False)
    _archived_spans: dict[int, tuple[int, str]] = field(
        default_factory=dict[int, tuple[int, str]], init=False, repr=False
    )
    """The session's archived blocks by first log position: `(last position, block id)`. A block archived at a run's
    end (`archive_completed`) is still in the context raw: a later eviction stubs it with its stored memento
    (`_evict_archived`), never a block that overlaps it. Read with `_archived_bounds`."""
    _warned_fallback: bool = field(default=False, init=False, repr=False)
    _merge_failed: bool = field(default=False, init=False, repr=False)
    """A merge of this compaction failed: it is not tried again before the next one."""
    _compress_failures: dict[int | str, int] = field(default_factory=dict[int | str, int], init=False, repr=False)
    """Compressions that failed or timed out, per block (its first log position) or merge (its oldest memento's
    id). A failure leaves the block in the context to be tried again; after `COMPRESS_ATTEMPTS` the extractive
    compressor writes its memento, so one block the compressor will not take (an LLM's refusal, a model that never
    answers) does not keep every later block in the context for good. A model failing every block is the breaker's
    (`breaker`): it gives the model up for all of them at once."""

    # -- the live history -----------------------------------------------------------------------------------------

    def view(self, messages: Sequence[ModelMessage]) -> list[Slot]:
        """`layout(messages)`, reusing the work for an unchanged prefix.

        Between compactions a history only grows, so each request costs an identity check of the known prefix
        plus the new messages, not a re-read of every message.
        """
        known = len(self._seen)
        # list equality tries identity first: ~5 us for a 1,000-message prefix, where comparing ids took ~90; a
        # message replaced by an equal one lays out the same
        if known > len(messages) or list(messages[:known]) != self._seen:
            self._forget_view()
            known = 0
        if known < len(messages):
            self._seen_slots, self._seen_position = layout(
                messages, start=known, slots=self._seen_slots, position=self._seen_position or self.log_base(messages)
            )
            self._bound_rest += sum(
                len(message_text(m).encode()) + MESSAGE_OVERHEAD_TOKENS + attachment_tokens(m) for m in messages[known:]
            )
            self._seen = list(messages)
        return self._seen_slots

    def _forget_view(self) -> None:
        """Drop `view`'s cache: the next call lays the history out anew (from `log_base`)."""
        self._seen, self._seen_slots, self._seen_position = [], [], 0
        self._seen_tokens = self._exact_upto = self._bound_rest = 0

    def log_base(self, messages: Sequence[ModelMessage]) -> int:
        """The log position of the history's first message, found once per run.

        A session's log numbers every message of the session. A run that continues a logged conversation (its
        history reaches the log's last message, as logged) goes on from there; a new conversation under a session
        id already in use (a second run with `session_id='build-logs'`), a branch of an earlier conversation or a
        retry of a request that was logged before a failure is logged after the log's end, so no message is taken
        for one already logged and no block takes a logged position. Two runs writing one session at the same time
        find each other when an append meets the other's message at its position (`LogConflictError`): the run
        that meets it is logged again after the log's end, as a branch is (`_relog`).
        """
        if self._base is None:
            self._base = self._find_base(messages)
        return self._base

    def _find_base(self, messages: Sequence[ModelMessage]) -> int:
        last = self.store.last_message_index(self.session_id, namespace=self.namespace)
        # what the log held when the base was chosen: read again later, it could take in another run's appends
        # and leave this run's first messages unlogged
        self._logged_through = last
        if last < 0 or not messages:
            return 0
        if stub_info(messages[0]) is not None:
            starts = [0]  # the stubs carry their own positions
        else:
            starts = self.store.message_indices_of(
                self.session_id, self._logged_sha(messages[0]), namespace=self.namespace
            )
            if not starts and isinstance(messages[0], ModelRequest):
                starts = self._resumed_start(messages, last)
        for start in starts:
            if self._reaches_tail(messages, start, last):
                return start
        return last + 1

    def _resumed_start(self, messages: Sequence[ModelMessage], last: int) -> list[int]:
        """Where a history starts whose first message is no logged one, if that message is a re-created copy of a
        logged request: a run resumed from a pending first request (a crash left it the conversation's only logged
        message) sends a copy with a new timestamp, and later runs carry the copy on. The history's first stub, or
        else its message logged at the log's end, says where it starts; the copy there must have the logged text."""
        if len(messages) == 1:
            return [last]  # the copy itself is the log's end: `_reaches_tail` compares its text
        start = None
        slots = layout(messages)[0]  # positions from 0 up to the first stub, which carries its own
        stubbed = next((slot for slot in slots if slot.stub is not None), None)
        if stubbed is not None:
            start = stubbed.log_index - sum(1 for slot in slots[: stubbed.index] if slot.stub is None)
        else:
            for slot in reversed(slots[1:]):
                sha = self._logged_sha(messages[slot.index])
                if last in self.store.message_indices_of(self.session_id, sha, namespace=self.namespace):
                    start = last - slot.log_index
                    break
        if start is None or start < 0:
            return []
        first = message_text(self._originals([messages[0]])[0])
        return [start] if self._logged_text(start) == first else []

    def _reaches_tail(self, messages: Sequence[ModelMessage], start: int, last: int) -> bool:
        """Whether `messages`, laid out from `start`, hold the log's last message: as logged, or in a stub."""
        for slot in layout(messages, position=start)[0]:
            if slot.stub is not None:
                if slot.stub.first_message <= last <= slot.stub.last_message:
                    return True
            elif slot.log_index == last:
                message = messages[slot.index]
                if last in self.store.message_indices_of(
                    self.session_id, self._logged_sha(message), namespace=self.namespace
                ):
                    return True
                # a run resumed from a pending request sends a re-created copy of it (a new timestamp): the same text
                resumed = slot.index == len(messages) - 1 and isinstance(message, ModelRequest)
                return resumed and self._logged_text(last) == message_text(self._originals([message])[0])
        return False

    def unmerged(self, messages: Sequence[ModelMessage]) -> list[ModelMessage] | None:
        """`messages` with the requests pydantic-ai merged from consecutive logged ones taken apart again
        (`_merges`), when only so the history continues the session's log; `None` when it continues it as it is,
        or not at all (a new conversation, a branch). Before the run's first `log`: it finds where the history
        starts in the log (`log_base`) when it continues the log, and the history it returns is the one to lay out.
        """
        if self._base is not None or not messages:
            return None
        last = self.store.last_message_index(self.session_id, namespace=self.namespace)
        if last < 0:
            self._base, self._logged_through = 0, last
            return None
        if stub_info(messages[0]) is not None:
            starts = [0]
        else:
            sha = self._logged_sha(messages[0])
            starts = self.store.message_indices_of(self.session_id, sha, namespace=self.namespace)
        for start in starts:
            if self._reaches_tail(messages, start, last):
                self._base, self._logged_through = start, last
                return None
        # a merge drops the run id every request of a run carries: without one, the history is a branch
        if not any(isinstance(message, ModelRequest) and message.run_id is None for message in messages):
            return None
        for start in starts:
            split = self._taken_apart(messages, start, last)
            if split is not None:
                self._base, self._logged_through = start, last
                return split
        return None

    def _taken_apart(self, messages: Sequence[ModelMessage], start: int, last: int) -> list[ModelMessage] | None:
        """`messages` laid out from `start`, each message as logged or a merge of logged requests taken apart, if
        that reaches the log's last message and takes something apart (one read of the log from `start`)."""
        events = {
            event.message_index: event
            for event in self.store.read_events(self.session_id, namespace=self.namespace, since_seq=start)
            if event.kind == 'message' and event.message_index is not None
        }
        out: list[ModelMessage] = []
        position, changed = start, False
        for index, message in enumerate(messages):
            if position > last:
                out += messages[index:]
                break
            info = stub_info(message)
            if info is not None:
                out.append(message)
                position = max(position, info.last_message + 1)
                continue
            event = events.get(position)
            if event is None:
                return None
            if self._logged_sha(message) == event.sha256:
                out.append(message)
                position += 1
                continue
            split = self._merged_from(message, events, position, last)
            if split is None:
                return None
            out += split
            position += len(split)
            changed = True
        return out if changed and position > last else None

    def _merged_from(
        self, message: ModelMessage, events: dict[int, SessionEvent], position: int, last: int
    ) -> list[ModelRequest] | None:
        """The logged requests from `position` on that `message` merges, taken apart, each checked against its
        logged sha256 (one request: its parts put back in their logged order)."""
        if not isinstance(message, ModelRequest):
            return None
        logged: list[ModelMessage] = []
        for at in range(position, last + 1):
            event = events.get(at)
            original = None if event is None else deserialize_messages(event.payload)[0]
            if not isinstance(original, ModelRequest):
                return None
            logged.append(original)
            parts = sum(len(m.parts) for m in logged)
            if parts < len(message.parts):
                continue
            split = split_merged(message, logged) if parts == len(message.parts) else None
            if split is None or any(self._logged_sha(m) != events[position + i].sha256 for i, m in enumerate(split)):
                return None
            return split
        return None

    def _logged_text(self, position: int) -> str | None:
        """The text of the message the log holds at `position` (its events from that `seq` on: a message's `seq`
        is at least its position, and only compaction events come between)."""
        for event in self.store.read_events(self.session_id, namespace=self.namespace, since_seq=position):
            if event.kind == 'message' and event.message_index == position:
                return message_text(deserialize_messages(event.payload)[0])
        return None

    def _logged_sha(self, message: ModelMessage) -> str:
        """The sha256 the log holds for `message` (redacted; read back from the archive when micro-compacted)."""
        return messages_sha256(serialize_messages(self._originals([message])))

    def _layout(self, messages: Sequence[ModelMessage]) -> list[Slot]:
        return layout(messages, position=self.log_base(messages))[0]

    def tokens(self, messages: Sequence[ModelMessage], *, exact_above: int | None = None) -> int:
        """Tokens of a live history, cached per message and per unchanged prefix.

        With `exact_above`, a cheap upper bound is returned while it stays at or below that mark: far below the
        high-water mark nothing needs exact counting, and tokenizing every large tool result as it arrives would
        be most of the hook's cost.
        """
        self.view(messages)
        if exact_above is not None and self._seen_tokens + self._bound_rest <= exact_above:
            return self._seen_tokens + self._bound_rest
        if self._exact_upto < len(self._seen):
            self._seen_tokens += self.counter.count_messages(self._seen[self._exact_upto :])
            self._exact_upto, self._bound_rest = len(self._seen), 0
        return self._seen_tokens

    # -- the full record ------------------------------------------------------------------------------------------

    def sync_log(self, messages: Sequence[ModelMessage]) -> int:
        """Append every original message the session log does not hold yet; returns how many were appended."""
        slots = self.view(messages)
        if self._logged_through is None:
            self._logged_through = self.store.last_message_index(self.session_id, namespace=self.namespace)
        pending: list[Slot] = []
        for slot in reversed(slots):  # the new messages are at the end
            if slot.stub is not None:
                continue  # its position is its block's, logged long ago (before `log_base` on a branch)
            if slot.log_index <= self._logged_through:
                break
            pending.append(slot)
        if pending:
            if self._writer is None:
                self._writer = SessionLogWriter(
                    self.store, self.session_id, self.namespace, redact=self._message_redactor()
                )
            self._writer.submit(
                [(slot.log_index, self._as_arrived(messages[slot.index])) for slot in reversed(pending)]
            )
            self._logged_through = pending[0].log_index
        return len(pending)

    def _as_arrived(self, message: ModelMessage) -> ModelMessage:
        """`message`, or the original of a micro-compacted one, read back from the archive (redacted there): a
        branch logs its whole history again, stubbed tool results too, and the log holds what arrived."""
        part_id = micro_part_of(message)
        if part_id is None:
            return message
        original = self._archived_part(part_id)[0]
        redactor = self._message_redactor()
        return original if redactor is None else redactor.known(original)

    def _relog(self, messages: Sequence[ModelMessage]) -> None:
        """After a conflict (another run took a position this run's layout gave): log the history again after the
        log's end, as a branch's is, in one store call no other writer can come between (`append_branch`), and lay
        it out from there. What the run logged before stays where it is."""
        if not self._warned_conflict:
            self._warned_conflict = True
            logger.warning(
                'mementograph: another run is writing session %r (namespace %r) at the same time; this run is '
                "logged again after the log's end, as a branch (give concurrent runs their own session ids to "
                'keep their logs apart)',
                self.session_id,
                self.namespace,
            )
        originals = self._originals([message for message in messages if stub_info(message) is None])
        events = [
            SessionEvent.for_message(message, session_id=self.session_id, namespace=self.namespace, index=offset)
            for offset, message in enumerate(originals)
        ]
        self._base = self._logged_through = None
        self._forget_view()
        if events:  # the new base: the raw messages come after every stub's range, one position each
            self._base = self.store.append_branch(events)
            self._logged_through = self._base + len(events) - 1

    async def log(self, messages: Sequence[ModelMessage]) -> None:
        """`sync_log` without blocking the loop: the first call of a run reads where the log stands from the store
        (off the loop, bounded by `calls`); later ones only queue appends for the log's own thread. After a
        conflict an append met, the history is laid out again first (`_relog`)."""
        if self._writer is not None and self._writer.conflict() is not None:
            await self.calls(self._relog, messages)
        elif self._logged_through is not None and self._base is not None:
            self.sync_log(messages)
        else:
            await self.calls(self.sync_log, messages)

    def log_failure(self) -> BaseException | None:
        """An append to the session log that failed in the background since the last call (retried later)."""
        return None if self._writer is None else self._writer.failure()

    def flush_log(self) -> None:
        """Make every logged message durable (raises if the store still fails), after a conflict in the place
        `_relog` gives them."""
        self._until_logged(lambda writer: writer.flush())

    def close(self) -> None:
        """Flush the log and stop its writer thread (waiting for the store at most `calls.timeout`)."""
        writer = self._writer
        try:
            self._until_logged(lambda writer: writer.close(self.calls.timeout))
        finally:
            self._writer = None
            self._unwritten = (0, True) if writer is None else (writer.waiting(), writer.waiting_exactly())

    def log_waiting(self) -> int:
        """Messages queued for the session log and not yet in it."""
        return 0 if self._writer is None else self._writer.waiting()

    def unlogged(self, messages: Sequence[ModelMessage]) -> tuple[int, bool]:
        """How many messages of `messages` (the history this compactor logs) the session log does not hold yet, and
        whether that count is exact: those queued for it (also after `close`), and those not queued yet. Before
        where the history starts in the log is known, every original message of it counts: at most that many."""
        if self._base is None or self._logged_through is None:
            return sum(1 for slot in layout(messages)[0] if slot.stub is None), False
        writer = self._writer
        queued, exact = self._unwritten if writer is None else (writer.waiting(), writer.waiting_exactly())
        through = self._logged_through
        return queued + sum(1 for s in self.view(messages) if s.stub is None and s.log_index > through), exact

    def _until_logged(self, finish: Callable[[SessionLogWriter], None]) -> None:
        """`finish(writer)`; after a conflict it meets, `_relog` (which logs everything held) and `finish` again."""
        writer = self._writer
        if writer is None:
            return
        try:
            finish(writer)
        except LogConflictError:
            messages = self._seen
            writer.conflict()
            self._relog(messages)
            finish(writer)

    def discard_log(self) -> Future[None] | None:
        """Stop the log's writer without writing what it still holds (the session is about to be deleted); returns
        its append still running, if any, which the delete must wait for."""
        writer, self._writer = self._writer, None
        return None if writer is None else writer.discard()

    def archived(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """`messages` as the store gets them: redacted when there is a `redact` hook (raises `RedactionError`).

        A message the log writer redacted already is not redacted again (the hook is the costly part of archiving).
        """
        redactor = self._message_redactor()
        return list(messages) if redactor is None else redactor(messages)

    def _message_redactor(self) -> MessageRedactor | None:
        if self.redact is None:
            return None
        if self._redactor is None or self._redactor.redact is not self.redact:
            self._redactor = MessageRedactor(self.redact)
        return self._redactor

    # -- compaction -----------------------------------------------------------------------------------------------

    async def compact(
        self, messages: list[ModelMessage], *, trigger: Trigger = 'auto', exhaustive: bool = False
    ) -> tuple[list[ModelMessage], CompactionReport]:
        """Micro-compact, evict and merge until the history fits the low-water mark (or nothing more can go).

        `exhaustive` evicts every completed block it may (a manual compaction, or a tier whose orchestrator
        decides when to stop). Returns the new history (the input list itself when nothing changed) and a report.
        """
        low_water = 0 if exhaustive else self.policy.low_water_tokens
        await self.log(messages)
        await self.calls(self.flush_log)  # the log holds every message before the compaction that follows them
        before = self.counter.count_messages(messages)
        report = CompactionReport(trigger=trigger, tokens_before=before, tokens_after=before)
        current = messages

        current, report = await self._micro(current, report)
        tokens = self.counter.count_messages(current)
        if tokens > low_water:
            if self._archived_bounds is None:
                await self.calls(self._bounds)  # once a run, off the loop and bounded like every store read
            current, report = await self._evict_archived(current, tokens, report, low_water)
            if report.block_ids:
                tokens = self.counter.count_messages(current)
            if tokens > low_water:
                current, report = await self._evict(current, tokens, report, low_water)
        self._merge_failed = False
        current, report = await self._merge(current, report)
        for _ in range(3):  # still over the mark with nothing left to evict: fold mementos further
            if self._merge_failed or self.counter.count_messages(current) <= self.policy.high_water_tokens:
                break
            merged = len(report.merged_memento_ids)
            current, report = await self._merge(current, report, force=True)
            if len(report.merged_memento_ids) == merged:
                break
        current, report = await self._stub_oversized(current, report)
        after = self.counter.count_messages(current)
        report = replace(report, tokens_after=after)
        if not report.changed and report.skipped is None:
            report = replace(report, skipped='nothing old enough to compact')
        return (current if report.changed else messages), report

    async def _micro(
        self, messages: list[ModelMessage], report: CompactionReport
    ) -> tuple[list[ModelMessage], CompactionReport]:
        slots = self._layout(messages)
        cutoff = len(messages) - self.policy.keep_recent_messages
        stubbed: dict[int, tuple[BlockRecord, ModelRequest]] = {}
        for slot in slots[: max(0, cutoff)]:
            message = messages[slot.index]
            if slot.stub is not None or slot.pinned or not isinstance(message, ModelRequest):
                continue
            if self.counter.count_message(message) < self.policy.micro_min_tokens:
                continue
            archived = self._archive_for_stubs(message, slot)
            if archived is not None:
                record, large = archived
                stubbed[slot.index] = record, self._stubbed(message, record, large)
        return await self._write_stubs(messages, stubbed, report)

    async def _stub_oversized(
        self, messages: list[ModelMessage], report: CompactionReport
    ) -> tuple[list[ModelMessage], CompactionReport]:
        """Still over the high-water mark with nothing left to evict or merge: stub the largest tool results,
        the newest too, each keeping as much of its head and tail as the mark leaves room for.

        Only a tool result too large for the mark by itself (or with the protected messages) gets here, most often
        one the model has not read yet: sent whole, it would overflow the model's window and fail the run. The
        original is archived like any micro-compacted part, and `recover_block` pages through it.
        """
        high = self.policy.high_water_tokens
        tokens = self.counter.count_messages(messages)
        if tokens <= high:
            return messages, report
        slots = self._layout(messages)
        requests = [
            (self.counter.count_message(message), slot, message)
            for slot in slots
            if slot.stub is None
            and not slot.pinned
            and isinstance(message := messages[slot.index], ModelRequest)
            and any(isinstance(part, BaseToolReturnPart) and micro_id_of(part) is None for part in message.parts)
        ]
        stubbed: dict[int, tuple[BlockRecord, ModelRequest]] = {}
        for size, slot, message in sorted(requests, key=lambda item: -item[0]):
            if tokens <= high or size < self.policy.micro_min_tokens:
                break
            target = size - (tokens - high)  # this message's size that brings the context to the mark
            keep = target - _STUB_OVERHEAD_TOKENS
            archived = self._archive_for_stubs(message, slot)  # once: only the stub is remade below
            if archived is None:
                continue
            record, large = archived
            stub = self._stubbed(message, record, large, keep_tokens=max(0, keep))
            for _ in range(3):  # characters per token vary along a text: correct the estimate
                excess = self.counter.count_message(stub) - target
                if excess <= 0 or keep <= 0:
                    break
                keep -= 2 * excess + _STUB_MARGIN_TOKENS
                stub = self._stubbed(message, record, large, keep_tokens=max(0, keep))
            stubbed[slot.index] = record, stub
            tokens += self.counter.count_message(stub) - size
        return await self._write_stubs(messages, stubbed, report)

    async def _write_stubs(
        self,
        messages: list[ModelMessage],
        stubbed: dict[int, tuple[BlockRecord, ModelRequest]],
        report: CompactionReport,
    ) -> tuple[list[ModelMessage], CompactionReport]:
        """Archive the stubbed messages' originals with a `micro` event (one transaction), then swap the stubs in."""
        if not stubbed:
            return messages, report
        records = [record for record, _ in stubbed.values()]
        rewritten = [stubbed[i][1] if i in stubbed else m for i, m in enumerate(messages)]
        # the context size after the step, so a replay of the log (`mementograph plot`) is exact here
        after = self.counter.count_messages(rewritten)
        event = SessionEvent(
            session_id=self.session_id,
            namespace=self.namespace,
            kind='micro',
            payload=json.dumps({'parts': [r.id for r in records], 'tokens_after': after}).encode(),
            sha256='',
            block_ids=tuple(r.id for r in records),
        )
        await self.calls(
            self.store.write_eviction,
            Eviction(session_id=self.session_id, namespace=self.namespace, blocks=tuple(records), events=(event,)),
        )
        ids = tuple(r.id for r in records)
        return rewritten, replace(report, micro_part_ids=(*report.micro_part_ids, *ids))

    def _archive_for_stubs(self, message: ModelRequest, slot: Slot) -> tuple[BlockRecord, dict[int, int]] | None:
        """The archive record of a request holding large tool results or binary content, and its tool results to
        stub (part index -> tokens); `None` when it has nothing to stub.

        What to stub is decided on the live message first: a large request often has nothing to stub (many small
        parts), and redacting it only to find that out would be wasted.
        """
        large: dict[int, int] = {}  # index of a tool return to stub -> its tokens
        for index, part in enumerate(message.parts):
            if isinstance(part, BaseToolReturnPart) and micro_part_id(part) is None:
                tokens = self.counter.count_text(part_text(part))
                if tokens >= self.policy.micro_min_tokens:
                    large[index] = tokens
        if not large and not _has_binary(message):
            return None
        archived = self.archived([message])[0]
        record = BlockRecord.from_messages(
            [archived],
            session_id=self.session_id,
            namespace=self.namespace,
            seq=slot.log_index,
            tokens=self.counter.count_message(archived),
            kind='part',
            text='\n'.join(map(message_text, searchable_messages([archived]))),  # as the embedded store renders it
        )
        return record, large

    def _stubbed(
        self, message: ModelRequest, record: BlockRecord, large: dict[int, int], *, keep_tokens: int = 0
    ) -> ModelRequest:
        """`message` with its `large` tool results and binary content replaced by stubs pointing at `record`.

        `keep_tokens` is how much of the stubbed results' text may stay (head and tail, shared among them); at least
        the policy's head and tail stay.
        """
        pointer = f'recover_block("{record.id}")'
        share = keep_tokens / sum(large.values()) if large else 0.0
        parts: list[ModelRequestPart] = []
        for index, part in enumerate(message.parts):
            if isinstance(part, BaseToolReturnPart) and index in large:
                text, tokens = part_text(part), large[index]
                kept = int(len(text) * share) // 2  # characters at each end, in proportion to the tokens kept
                head = text[: max(self.policy.stub_head_chars, kept)]
                tail = text[len(text) - max(self.policy.stub_tail_chars, kept) :]
                stub = (
                    f'{head}\n[... {tokens} tokens of this tool result archived; the full text: {pointer} ...]\n{tail}'
                )
                parts.append(_stub_part(part, stub, record.id))
                continue
            if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
                items: list[UserContent] = []
                for item in part.content:
                    if isinstance(item, BinaryContent):
                        items.append(TextContent(_placeholder(item, pointer), metadata={MICRO_METADATA: record.id}))
                    else:
                        items.append(item)
                parts.append(replace(part, content=items))
                continue
            if isinstance(part, BaseToolReturnPart) and micro_part_id(part) is None:
                content = part.content
                if isinstance(content, BinaryContent):  # a screenshot tool's image, say
                    content = _placeholder(content, pointer)
                elif isinstance(content, list) and any(isinstance(item, BinaryContent) for item in content):
                    content = [_placeholder(i, pointer) if isinstance(i, BinaryContent) else i for i in content]
                else:
                    parts.append(part)
                    continue
                parts.append(_stub_part(part, content, record.id))
                continue
            parts.append(part)
        return replace(message, parts=parts)

    def _model_free(self) -> bool:
        """Whether the engine needs no model (the extractive compressor and the rubric judge, or none)."""
        return isinstance(self.engine.compressor, ExtractiveCompressor) and isinstance(
            self.engine.judge, RubricJudge | None
        )

    def _fallback(self) -> MementoEngine:
        """The engine that needs no model: the extractive compressor and the rubric judge (a judge that never
        answers would otherwise hang the fallback too)."""
        judge = None if self.engine.judge is None else RubricJudge()
        return replace(self.engine, compressor=ExtractiveCompressor(), judge=judge)

    def _engine_for(self, key: int | str, what: str) -> MementoEngine:
        """The engine, or for a block (or merge) its compressor failed on `COMPRESS_ATTEMPTS` times, the fallback,
        said in a warning."""
        if self._compress_failures.get(key, 0) < COMPRESS_ATTEMPTS or self._model_free():
            return self.engine  # with no model, nothing else to fall back on: tried again, and warned about again
        if not self._warned_fallback:
            self._warned_fallback = True
            judge = self.engine.judge
            judged = '' if judge is None or isinstance(judge, RubricJudge) else ', judged by the rubric'
            warnings.warn(
                f'mementograph: {self.engine.compressor.name} failed {COMPRESS_ATTEMPTS} times on {what}; the '
                f'extractive compressor writes the mementos of such blocks{judged}',
                MementoWarning,
                stacklevel=3,
            )
        return self._fallback()

    async def _memento(self, block: BlockInput, key: int | str, what: str) -> MementoResult:
        """The memento of `block` (`what`, for warnings), bounded by `compress_timeout`; a failure is counted
        against `key`. While the breaker is open, the fallback makes it.

        Past the bound the compression is cancelled and `CompressionError` raised, as for a compressor that fails:
        the block stays in the context. Its answer, should one still come (a model call blocked in a thread cannot
        be stopped), is dropped: nothing but this method reads it, and it has returned.
        """
        self._outages.discard(key)
        engine = self._engine_for(key, what)
        by_model = engine is self.engine and not self._model_free()
        use = self.breaker.acquire() if by_model else 'fallback'
        if by_model and use == 'fallback':
            engine, by_model = self._fallback(), False
        probe = use == 'probe'  # the one memento the model may make while the breaker is open
        try:
            result = await self._bounded(engine, block)
        except Exception as exc:
            self._compress_failures[key] = self._compress_failures.get(key, 0) + 1
            if by_model and is_outage(exc):
                self._outages.add(key)
                self._breaker_changed(self.breaker.failed(exc, probe=probe))
            elif by_model:
                self.breaker.answered(probe=probe)
            raise
        except BaseException:
            if probe:
                self.breaker.release()
            raise
        if by_model:
            self._breaker_changed(self.breaker.succeeded(probe=probe))
        return result

    async def _made(self, jobs: Sequence[tuple[int | str, BlockInput, str]]) -> list[MementoResult | BaseException]:
        """The mementos of `jobs` (`(key, block, what)`, as `_memento` takes them), made at once; each outcome is
        its memento or its error (`_rescued`)."""
        outcomes = await asyncio.gather(*(self._memento(b, k, w) for k, b, w in jobs), return_exceptions=True)
        return await self._rescued(jobs, outcomes)

    async def _rescued(
        self, jobs: Sequence[tuple[int | str, BlockInput, str]], outcomes: Sequence[MementoResult | BaseException]
    ) -> list[MementoResult | BaseException]:
        """`outcomes`, where the model failed a job for a reason not about it and the breaker is open now (it
        failed often enough, maybe with this very job among those made at once), with the fallback's memento:
        the compaction goes ahead instead of waiting for the next one."""
        rescued = list(outcomes)
        for index, ((key, block, _), outcome) in enumerate(zip(jobs, outcomes, strict=True)):
            if not isinstance(outcome, Exception) or key not in self._outages or not self.breaker.is_open:
                continue
            self._outages.discard(key)
            try:
                rescued[index] = await self._bounded(self._fallback(), block)
            except Exception as exc:
                self._compress_failures[key] = self._compress_failures.get(key, 0) + 1
                rescued[index] = exc
        return rescued

    def _breaker_changed(self, change: BreakerChange | None) -> None:
        """Say that the breaker opened (a warning; at INFO when a probe failed) or closed (a log line), and keep
        the change for the capability's event."""
        if change is None:
            return
        self._breaker_changes.append(change)
        name = self.model_name()
        if not change.opened:
            logger.warning('mementograph: %s made a memento again; it writes the mementos again', name)
            return
        fallback = 'the extractive compressor' + ('' if self.engine.judge is None else ' and the rubric judge')
        if change.probe:
            logger.info(
                'mementograph: %s still fails (%s); %s write every memento for %g s more, then the model is tried again',
                name, change.error, fallback, change.cooldown,
            )  # fmt: skip
            return
        message = (
            f'{name} failed {change.failures} mementos in a row ({change.error}); {fallback} (no model) write every '
            f'memento for {change.cooldown:g} s (compress_cooldown), then the model is tried again'
        )
        logger.warning('mementograph: %s', message)
        warnings.warn(f'mementograph: {message}', MementoWarning, stacklevel=2)

    def take_breaker_changes(self) -> list[BreakerChange]:
        """The breaker's changes since the last call (for the capability's events)."""
        changes, self._breaker_changes = self._breaker_changes, []
        return changes

    def model_name(self) -> str:
        """The compressor's name, and the judge's when that is not the rubric (what the breaker gives up on)."""
        compressor, judge = self.engine.compressor, self.engine.judge
        if judge is None or isinstance(judge, RubricJudge):
            return compressor.name
        return f'{compressor.name} and {_judge_name(judge)}'

    async def _bounded(self, engine: MementoEngine, block: BlockInput) -> MementoResult:
        timeout = self.compress_timeout
        if timeout is None:
            return await engine.make_memento(block)
        task = asyncio.ensure_future(engine.make_memento(block))
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout)
        except BaseException:  # the compaction is cancelled: so is its compression
            task.cancel()
            raise
        if task in done:
            return task.result()
        task.cancel()
        task.add_done_callback(_drop_outcome)
        await asyncio.wait({task}, timeout=_CANCEL_GRACE_SECONDS)
        judge = '' if engine.judge is None else f' and {_judge_name(engine.judge)}'
        raise CompressionError(
            f'{engine.compressor.name}{judge} gave no memento within {timeout:g} s (compress_timeout); cancelled'
        ) from TimeoutError(f'no memento within {timeout:g} s')

    def _originals_of(self, spans: Sequence[Sequence[ModelMessage]]) -> list[list[ModelMessage]]:
        return [self._originals(span) for span in spans]

    def _mementos_of(self, infos: Sequence[StubInfo]) -> list[MementoRecord]:
        """The stubs' mementos in one read (a merge's children: one round trip on a server, not one a child); one
        not found is read alone, for the store's `MementoNotFoundError`."""
        ids = [info.memento_id for info in infos]
        found = {m.id: m for m in self.store.get_mementos(ids, namespace=self.namespace, session_id=self.session_id)}
        return [
            found[memento_id]
            if memento_id in found
            else self.store.get_memento(memento_id, namespace=self.namespace, session_id=self.session_id)
            for memento_id in ids
        ]

    def _originals(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """Messages as they were logged (redacted, with a hook): micro-compacted ones are read back from their
        archived parts (redacted already), the others come from `archived` (the log writer's redaction, reused)."""
        originals: list[ModelMessage] = []
        for message in messages:
            part_id = micro_part_of(message)
            originals.extend(self.archived([message]) if part_id is None else self._archived_part(part_id))
        return originals

    def _archived_part(self, part_id: str) -> tuple[ModelMessage, ...]:
        """The message a micro-compacted part was cut from, as archived (redacted already)."""
        return self.store.recover_block(part_id, namespace=self.namespace, session_id=self.session_id).messages

    def _blocks_of(self, messages: list[ModelMessage], run: Sequence[Slot]) -> list[Segment]:
        """A run of `messages` (from `_runs`) cut into blocks, their positions in `messages`."""
        start = run[0].index
        segments = segment_blocks(
            messages[start : run[-1].index + 1],
            self.counter,
            min_tokens=self.policy.min_block_tokens,
            max_tokens=self.policy.max_block_tokens,
        )
        return [replace(segment, start=segment.start + start, end=segment.end + start) for segment in segments]

    def evicts_a_block(self, messages: list[ModelMessage]) -> bool | None:
        """Whether compacting `messages` has a complete block to evict, so it rewrites messages sent before (not
        only the newest, stubbed when too large); `None` when telling needs a store read (no compaction yet)."""
        if self._archived_bounds is None:
            return None
        return bool(self._candidates(messages))

    def _candidates(self, messages: list[ModelMessage]) -> list[tuple[Segment, int]]:
        """Complete blocks that may be evicted, oldest first, each with its first log position."""
        slots = self._layout(messages)
        archived = self._archived_overlap()
        candidates: list[tuple[Segment, int]] = []
        for run, kept in self._runs(messages, slots):
            if kept:
                continue
            for absolute in self._blocks_of(messages, run):
                # a block too small for any memento to be smaller (a lone "done" between stubs) stays as it is,
                # unless it carries an attachment: few tokens, but the bytes are worth taking out of the context
                span = messages[absolute.start : absolute.end]
                tiny = absolute.tokens < _MIN_EVICTABLE_TOKENS and not any(map(_has_binary, span))
                if absolute.complete and absolute.end < len(messages) and not tiny:
                    first, last = slots[absolute.start].log_index, slots[absolute.end - 1].log_index
                    if not archived(first, last):  # an archived block is stubbed as archived (`_evict_archived`)
                        candidates.append((absolute, first))
        return candidates

    def _runs(self, messages: list[ModelMessage], slots: Sequence[Slot]) -> list[tuple[list[Slot], bool]]:
        """The history's raw messages in the runs blocks are cut from, in order, each with whether it is a message
        eviction keeps in the context (the first task, a pinned message: a run of its own); stubs separate runs, and
        so do the bounds of archived blocks: a raw message an archived block holds is cut as that block was, and
        what follows the last one starts a run (archived at a run's end, a block may end where none would later)."""
        first_task = next((s.index for s in slots if s.stub is None and _is_first_task(messages[s.index])), None)
        bounds, _ = self._bounds()
        runs: list[tuple[list[Slot], bool]] = [([], False)]
        for slot in slots:
            if slot.stub is not None:
                runs.append(([], False))
            elif slot.pinned or slot.index == first_task:
                runs += [([slot], True), ([], False)]
            else:
                if slot.log_index in bounds and runs[-1][0]:
                    runs.append(([], False))
                runs[-1][0].append(slot)
        return [(run, kept) for run, kept in runs if run]

    def _archived_overlap(self) -> Callable[[int, int], bool]:
        """Whether a range of log positions overlaps a block the archive holds (archived blocks never overlap each
        other: only the last one starting in or before the range can reach into it)."""
        spans = self._archived_spans
        starts = sorted(spans)

        def overlaps(first: int, last: int) -> bool:
            at = bisect.bisect_right(starts, last) - 1
            return at >= 0 and spans[starts[at]][0] >= first

        return overlaps

    def _bounds(self) -> tuple[set[int], int]:
        """`_archived_bounds`, and the last position an archived block holds (-1: none)."""
        if self._archived_bounds is None:
            links = self.store.graph_links(namespace=self.namespace, session_id=self.session_id)
            blocks = [block for block in links.blocks if block.kind == 'block']
            self._archived_bounds = {p for block in blocks for p in (block.first_message, block.last_message + 1)}
            self._archived_through = max((block.last_message for block in blocks), default=-1)
            self._archived_spans = {block.first_message: (block.last_message, block.id) for block in blocks}
        return self._archived_bounds, self._archived_through

    async def _mentions_of(self, source_id: str, text: str) -> tuple[Mention, ...]:
        if self.mentions is None:
            return ()
        found = self.mentions(source_id, text)
        return tuple(await found if inspect.isawaitable(found) else found)

    def _remember_mentions(self, block_id: str, mentions: tuple[Mention, ...]) -> None:
        _remember(self._recent_mentions, block_id, mentions)

    async def _evict(
        self,
        messages: list[ModelMessage],
        tokens: int,
        report: CompactionReport,
        low_water: int,
        *,
        fit_stubs: bool = False,
    ) -> tuple[list[ModelMessage], CompactionReport]:
        """Replace the oldest complete blocks with their mementos, archived first, down to `low_water`.

        A block's memento is made from its original messages, so where micro-compaction stubbed its tool results
        the memento may be larger than the span it replaces. That is taken while the eviction saves tokens in all;
        when it does not and the context is over the high-water mark (a context full of stubs: a store back after
        an outage), `fit_stubs` makes each such span's memento smaller than its stubs, or that context could never
        be evicted.
        """
        chosen = self._planned(self._candidates(messages), tokens, low_water)
        if not chosen:
            return messages, replace(report, skipped='no complete block outside the protected messages')

        inputs = []
        archives: list[tuple[tuple[ModelMessage, ...], str]] = []  # each block's messages and search text
        spans = [messages[segment.start : segment.end] for segment, _ in chosen]
        for span, originals in zip(spans, await self.calls(self._originals_of, spans), strict=True):  # one hop
            block_messages = tuple(originals)
            room = None
            if fit_stubs and any(micro_part_of(message) is not None for message in span):
                room = max(1, self.counter.count_messages(span) - _STUB_OVERHEAD_TOKENS - _STUBBED_SPAN_SAVING)
            block_input, text = self._block_input(block_messages, room)
            archives.append((block_messages, text))
            inputs.append(block_input)
        outcomes = await self._made(
            [(i, b, f'the block at message {i}') for (_, i), b in zip(chosen, inputs, strict=True)]
        )
        failed = next((i for i, outcome in enumerate(outcomes) if isinstance(outcome, BaseException)), None)
        if failed is not None:
            error = outcomes[failed]
            assert isinstance(error, BaseException)
            if failed == 0 or not isinstance(error, Exception):
                raise error
            # The blocks before it are evicted; it and the newer ones stay in context and are tried again next
            # time, so the archive stays in session order.
            message = f'compaction stopped at block {failed + 1} of {len(outcomes)}: {type(error).__name__}: {error}'
            warnings.warn(f'mementograph: {message}', MementoWarning, stacklevel=2)
            chosen, inputs, archives = chosen[:failed], inputs[:failed], archives[:failed]
        results = [outcome for outcome in outcomes[: len(chosen)] if isinstance(outcome, MementoResult)]
        spent = sum(outcome.usage_tokens for outcome in outcomes if isinstance(outcome, MementoResult))

        blocks: list[BlockRecord] = []
        mementos: list[MementoRecord] = []
        mentions: list[Mention] = []
        stubs: dict[int, tuple[int, list[ModelMessage]]] = {}
        saving = 0
        usage = report.usage_tokens + spent  # every memento made, whether or not its block is evicted below
        kept: list[MementoResult] = []
        for (segment, log_index), block_input, (archived, text), result in zip(
            chosen, inputs, archives, results, strict=True
        ):
            if kept and tokens - saving <= low_water:
                break  # the mementos came out smaller than planned: the newer blocks may stay
            kept.append(result)
            live_tokens = self.counter.count_messages(messages[segment.start : segment.end])
            stamp = _timestamp(archived[0])
            block, memento = self._records(archived, text, block_input, log_index, result)
            info = StubInfo(
                target_id=block.id,
                memento_id=memento.id,
                first_message=block.first_message,
                last_message=block.last_message,
                level=1,
                archived_tokens=block.tokens,
            )
            stub = make_stub(info, result.text, stamp, stub_shape(messages, segment.start, segment.end))
            saving += live_tokens - self.counter.count_messages(stub)
            blocks.append(block)
            mementos.append(memento)
            mentions.extend(await self._record_mentions(block, memento))
            stubs[segment.start] = (segment.end, stub)
        if saving < self.policy.min_saving_tokens:
            over = tokens > self.policy.high_water_tokens  # skipped, the request would go out over the mark
            if over and not fit_stubs and any(micro_part_of(m) is not None for span in spans for m in span):
                return await self._evict(
                    messages, tokens, replace(report, usage_tokens=usage), low_water, fit_stubs=True
                )
            return messages, replace(
                report, usage_tokens=usage, skipped=f'saving {saving} tokens is below min_saving_tokens'
            )

        compaction = CompactionReport(
            trigger=report.trigger,
            tokens_before=tokens,
            tokens_after=tokens - saving,
            block_ids=tuple(b.id for b in blocks),
            memento_ids=tuple(m.id for m in mementos),
            verified=sum(r.verified for r in kept),
            unverified=sum(not r.verified for r in kept),
        )
        event = SessionEvent(
            session_id=self.session_id,
            namespace=self.namespace,
            kind=report.trigger,
            payload=compaction.to_json(),
            sha256='',
            block_ids=compaction.block_ids,
        )
        await self.calls(
            self._write_paged,
            Eviction(
                session_id=self.session_id,
                namespace=self.namespace,
                blocks=tuple(blocks),
                mementos=tuple(mementos),
                mentions=tuple(mentions),
                events=(event,),
            ),
        )
        rewritten = _splice(messages, stubs)
        return rewritten, replace(
            report,
            block_ids=(*report.block_ids, *compaction.block_ids),
            memento_ids=(*report.memento_ids, *compaction.memento_ids),
            verified=report.verified + sum(r.verified for r in kept),
            unverified=report.unverified + sum(not r.verified for r in kept),
            archived_tokens=report.archived_tokens + sum(b.tokens for b in blocks),
            memento_tokens=report.memento_tokens + sum(m.tokens for m in mementos),
            usage_tokens=usage,
        )

    def _write_paged(self, eviction: Eviction) -> None:
        """`write_eviction` with the pages of its blocks, computed from the session's pages as the store holds
        them; computed again when another run paged blocks of the session in between (`PageConflictError`)."""
        for attempt in range(_PAGE_ATTEMPTS):
            pages = pages_for_eviction(
                self.store,
                session_id=self.session_id,
                namespace=self.namespace,
                blocks=eviction.blocks,
                mementos=eviction.mementos,
                mentions=eviction.mentions,
                earlier_mentions=self._recent_mentions,
                earlier_tokens=self._recent_tokens,
            )
            try:
                self.store.write_eviction(replace(eviction, pages=pages))
            except PageConflictError:
                if attempt == _PAGE_ATTEMPTS - 1:
                    raise
                continue
            self.pages_closed += sum(1 for page in pages if page.summary)
            for block in eviction.blocks:  # written: its size is known without reading it back
                _remember(self._recent_tokens, block.id, block.tokens)
                if self._archived_bounds is not None and block.kind == 'block':
                    self._archived_bounds |= {block.first_message, block.last_message + 1}
                    self._archived_through = max(self._archived_through, block.last_message)
                    self._archived_spans[block.first_message] = (block.last_message, block.id)
            return

    # -- archiving without evicting -------------------------------------------------------------------------------

    def _block_input(self, block_messages: tuple[ModelMessage, ...], room: int | None = None) -> tuple[BlockInput, str]:
        """A block's compressor input, and the text it is found by (its full-text and entity text).

        Both are made from `searchable_messages`: not the memory tools' answers, which quote the archive; a block of
        those calls alone is read as a sentence saying which (`echo_note`). Its size is all it holds: the memento
        stands in for all of it, and must be smaller.
        """
        searchable = tuple(searchable_messages(block_messages))
        text = render_block(searchable)
        size = self.counter.count_text(text if searchable == block_messages else render_block(block_messages))
        read = text if text.strip() else echo_note(block_messages)
        return BlockInput(messages=searchable, text=read, tokens=size, zone=self.zone, max_tokens=room), text

    def _records(
        self,
        archived: tuple[ModelMessage, ...],
        text: str,
        block_input: BlockInput,
        log_index: int,
        result: MementoResult,
    ) -> tuple[BlockRecord, MementoRecord]:
        """The archive records of a block (its messages byte for byte, found by `text`; first logged at
        `log_index`) and of its memento."""
        stamp = _timestamp(archived[0])
        block = BlockRecord.from_messages(
            archived,
            session_id=self.session_id,
            namespace=self.namespace,
            seq=log_index,
            tokens=block_input.tokens,
            text=text,
            started_at=stamp.isoformat() if stamp else None,
        )
        memento = MementoRecord(
            id=memento_id_for(self.namespace, self.session_id, [block.id]),
            session_id=self.session_id,
            namespace=self.namespace,
            text=result.text,
            tokens=result.tokens,
            summarizes=(block.id,),
            score=result.score,
            verified=result.verified,
            iterations=result.iterations,
            compressor=result.compressor,
        )
        return block, memento

    async def _record_mentions(self, block: BlockRecord, memento: MementoRecord) -> list[Mention]:
        """The `MENTIONS` of a block and of its memento (the block's kept for closing its page)."""
        if self.mentions is None:
            return []
        block_mentions = await self._mentions_of(block.id, block.text)
        self._remember_mentions(block.id, block_mentions)
        return [*block_mentions, *(await self._mentions_of(memento.id, memento.text))]

    async def archive_completed(self, messages: list[ModelMessage]) -> ArchiveReport:
        """Archive the completed blocks of `messages` after the last one the session's archive holds, leaving the
        history as it is: at the end of a run, so that `recall` finds a conversation that never passed the
        high-water mark.

        The blocks are those an eviction would cut (the same ids, so a later eviction stubs them with the mementos
        written here, `_evict_archived`, and compresses nothing twice), each message eviction keeps in the context
        (the first task, a pinned message) a block of its own with its text as its memento when it is too small for
        a shorter one, and the last block, which the run's end completes: unless a tool call in it is unanswered
        (deferred tools), or it is too small for a memento to be smaller -- as a block of its own it would then stay
        in the context for good; it waits for the next run's end, joined with what follows. A compressor failing on
        a block leaves it and the newer ones for a later run's end; a store or redaction failure raises, and nothing
        is written.
        """
        await self.log(messages)
        chosen, inputs, archives = await self.calls(self._archive_inputs, messages)  # one hop, tokenizing too
        if not chosen:
            return ArchiveReport()
        spans = [messages[segment.start : segment.end] for segment, _ in chosen]

        jobs = [(i, b, f'the block at message {i}') for (_, i), b in zip(chosen, inputs, strict=True)]

        async def make(log_index: int, block: BlockInput, span: Sequence[ModelMessage], what: str) -> MementoResult:
            if block.tokens < _MIN_EVICTABLE_TOKENS and not any(map(_has_binary, span)):
                return _verbatim(block)  # no memento could be smaller, and no eviction will take it
            return await self._memento(block, log_index, what)

        made = await asyncio.gather(
            *(make(i, b, span, what) for (i, b, what), span in zip(jobs, spans, strict=True)), return_exceptions=True
        )
        outcomes = await self._rescued(jobs, made)
        blocks: list[BlockRecord] = []
        mementos: list[MementoRecord] = []
        mentions: list[Mention] = []
        failures: list[str] = []
        usage = 0
        for (_, log_index), block_input, (archived, text), outcome in zip(
            chosen, inputs, archives, outcomes, strict=True
        ):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome
                failures.append(f'the block at message {log_index}: {type(outcome).__name__}: {outcome}')
                continue
            usage += outcome.usage_tokens
            if failures:  # the archive stays in session order: the newer blocks wait with the failed one
                continue
            block, memento = self._records(archived, text, block_input, log_index, outcome)
            blocks.append(block)
            mementos.append(memento)
            mentions.extend(await self._record_mentions(block, memento))
        report = ArchiveReport(
            block_ids=tuple(block.id for block in blocks),
            memento_ids=tuple(memento.id for memento in mementos),
            verified=sum(memento.verified for memento in mementos),
            archived_tokens=sum(block.tokens for block in blocks),
            usage_tokens=usage,
            failures=tuple(failures),
        )
        if blocks:
            event = SessionEvent(
                session_id=self.session_id,
                namespace=self.namespace,
                kind='archive',
                payload=report.to_json(),
                sha256='',
                block_ids=report.block_ids,
            )
            eviction = Eviction(
                session_id=self.session_id,
                namespace=self.namespace,
                blocks=tuple(blocks),
                mementos=tuple(mementos),
                mentions=tuple(mentions),
                events=(event,),
            )
            await self.calls(self._write_paged, eviction)
        return report

    def _archive_inputs(
        self, messages: list[ModelMessage]
    ) -> tuple[list[tuple[Segment, int]], list[BlockInput], list[tuple[tuple[ModelMessage, ...], str]]]:
        """`_unarchived(messages)`, their compressor inputs, and their messages as archived with the text they are
        found by, once the log holds every message (blocking)."""
        self.flush_log()
        chosen = self._unarchived(messages)
        inputs: list[BlockInput] = []
        archives: list[tuple[tuple[ModelMessage, ...], str]] = []
        for originals in self._originals_of([messages[segment.start : segment.end] for segment, _ in chosen]):
            block_input, text = self._block_input(tuple(originals))
            inputs.append(block_input)
            archives.append((tuple(originals), text))
        return chosen, inputs, archives

    def _unarchived(self, messages: list[ModelMessage]) -> list[tuple[Segment, int]]:
        """The blocks `archive_completed` archives, oldest first, each with its first log position: those after the
        last one archived, up to the first that cannot be, so the archive (and its pages) stays in session order."""
        slots = self._layout(messages)
        _, through = self._bounds()
        chosen: list[tuple[Segment, int]] = []
        for run, kept in self._runs(messages, slots):
            start = run[0].index
            if kept:
                blocks = [Segment(start, start + 1, self.counter.count_message(messages[start]), complete=True)]
            else:
                blocks = self._blocks_of(messages, run)
            for absolute in blocks:
                span = messages[absolute.start : absolute.end]
                first = slots[absolute.start].log_index
                if first <= through:
                    continue
                small = absolute.tokens < _MIN_EVICTABLE_TOKENS and not any(map(_has_binary, span))
                if _unanswered(span) or (small and not kept and absolute.end == len(messages)):
                    return chosen  # the last block waits for the next run's end, joined with what follows
                chosen.append((absolute, first))
        return chosen

    async def _evict_archived(
        self, messages: list[ModelMessage], tokens: int, report: CompactionReport, low_water: int
    ) -> tuple[list[ModelMessage], CompactionReport]:
        """Stub the oldest blocks the archive holds that are still raw in the context (archived at a run's end, or
        a session continued from its log) with their stored mementos, down to `low_water`: nothing is compressed,
        and nothing but the compaction's event is written. A block whose messages no longer hash to its archived
        bytes stays: its stub would not stand for what the model saw."""
        chosen = self._planned(self._archived_in_context(messages), tokens, low_water)
        if not chosen:
            return messages, report
        spans = [messages[segment.start : segment.end] for segment, _ in chosen]
        stored = await self.calls(self._stored, [block_id for _, block_id in chosen], spans)  # one hop
        stubs: dict[int, tuple[int, list[ModelMessage]]] = {}
        kept: list[tuple[BlockRecord, MementoRecord]] = []
        saving = 0
        for (segment, _), span, records in zip(chosen, spans, stored, strict=True):
            if records is None:
                continue
            if kept and tokens - saving <= low_water:
                break
            block, memento = records
            info = StubInfo(block.id, memento.id, block.first_message, block.last_message, 1, block.tokens)
            shape = stub_shape(messages, segment.start, segment.end)
            stub = make_stub(info, memento.text, _timestamp(span[0]), shape)
            stub_saving = segment.tokens - self.counter.count_messages(stub)
            if stub_saving <= 0:
                continue
            saving += stub_saving
            kept.append(records)
            stubs[segment.start] = (segment.end, stub)
        if saving < self.policy.min_saving_tokens:
            return messages, report
        compaction = CompactionReport(
            trigger=report.trigger,
            tokens_before=tokens,
            tokens_after=tokens - saving,
            block_ids=tuple(block.id for block, _ in kept),
            memento_ids=tuple(memento.id for _, memento in kept),
            verified=sum(memento.verified for _, memento in kept),
            unverified=sum(not memento.verified for _, memento in kept),
        )
        event = SessionEvent(
            session_id=self.session_id,
            namespace=self.namespace,
            kind=report.trigger,
            payload=compaction.to_json(),
            sha256='',
            block_ids=compaction.block_ids,
        )
        await self.calls(self.store.append_events, [event])
        return _splice(messages, stubs), replace(
            report,
            block_ids=(*report.block_ids, *compaction.block_ids),
            memento_ids=(*report.memento_ids, *compaction.memento_ids),
            verified=report.verified + compaction.verified,
            unverified=report.unverified + compaction.unverified,
            archived_tokens=report.archived_tokens + sum(block.tokens for block, _ in kept),
            memento_tokens=report.memento_tokens + sum(memento.tokens for _, memento in kept),
        )

    def _archived_in_context(self, messages: list[ModelMessage]) -> list[tuple[Segment, str]]:
        """Archived blocks whose messages are all raw in the context, oldest first, with their ids: not the last
        block, nor a message eviction keeps in the context (the first task, a pinned one)."""
        if not self._archived_spans:
            return []
        slots = self._layout(messages)
        raw = {slot.log_index: slot for run, kept in self._runs(messages, slots) if not kept for slot in run}
        found: list[tuple[Segment, str]] = []
        for first in sorted(self._archived_spans):
            last, block_id = self._archived_spans[first]
            head, tail = raw.get(first), raw.get(last)
            if (
                head is None
                or tail is None
                or tail.index - head.index != last - first
                or tail.index + 1 >= len(messages)
            ):
                continue
            span = messages[head.index : tail.index + 1]
            found.append((Segment(head.index, tail.index + 1, self.counter.count_messages(span), True), block_id))
        return found

    def _stored(
        self, block_ids: Sequence[str], spans: Sequence[Sequence[ModelMessage]]
    ) -> list[tuple[BlockRecord, MementoRecord] | None]:
        """Each archived block with its memento, if its live messages (as archived: redacted, micro-compacted parts
        read back) still hash to the block's bytes; `None` where not (or its memento is gone)."""
        found: list[tuple[BlockRecord, MementoRecord] | None] = []
        scope = {'namespace': self.namespace, 'session_id': self.session_id}
        blocks = {block.id: block for block in self.store.get_blocks(block_ids, **scope)}  # one read for them all
        for block_id, span in zip(block_ids, spans, strict=True):
            # one not found is read alone, for the store's own error
            block = blocks[block_id] if block_id in blocks else self.store.get_block(block_id, **scope)
            memento = self.store.memento_of(block_id, **scope)
            same = messages_sha256(serialize_messages(self._originals(span))) == block.sha256
            found.append((block, memento) if same and memento is not None and memento.level == 1 else None)
        return found

    def _planned(self, candidates: Iterable[tuple[Segment, K]], tokens: int, low_water: int) -> list[tuple[Segment, K]]:
        """The oldest of `candidates` whose mementos are planned to bring `tokens` down to `low_water`."""
        chosen: list[tuple[Segment, K]] = []
        projected = tokens
        for segment, key in candidates:
            if projected <= low_water:
                break
            chosen.append((segment, key))
            projected -= segment.tokens - int(segment.tokens * self.engine_ratio()) - _STUB_OVERHEAD_TOKENS
        return chosen

    def engine_ratio(self) -> float:
        """The compressor's size target, used to plan how many blocks to evict."""
        ratio = getattr(self.engine.compressor, 'target_ratio', 0.2)
        return float(ratio) if isinstance(ratio, int | float) else 0.2

    def _memento_share(self, messages: Sequence[ModelMessage], stub_tokens: dict[int, int]) -> float:
        """`conversation_memento_share` when conversation mementos hold most of the stubs' tokens: a chat's turns
        are short, so a larger share costs few extra compactions per request (LoCoMo's dialogues: prefix stability
        0.988 at 0.3, 0.985 at 0.6), while its mementos are all that is left of its past."""
        conversation = other = 0
        for index, tokens in stub_tokens.items():
            memento = message_text(messages[index]).partition('\n')[2]  # below the stub's header line
            if not memento.strip():
                continue  # the note half of a two-message stub
            if is_conversation_memento(memento):
                conversation += tokens
            else:
                other += tokens
        policy = self.policy
        return policy.conversation_memento_share if conversation > other else policy.memento_share

    async def _merge(
        self, messages: list[ModelMessage], report: CompactionReport, *, force: bool = False
    ) -> tuple[list[ModelMessage], CompactionReport]:
        """Mementos of mementos: when stubs alone outgrow their share, merge the oldest adjacent run of them."""
        slots = self._layout(messages)
        stub_tokens = {s.index: self.counter.count_message(messages[s.index]) for s in slots if s.stub is not None}
        budget = int(self.policy.high_water_tokens * self._memento_share(messages, stub_tokens))
        if not force and sum(stub_tokens.values()) <= budget:
            return messages, report
        # stubs grouped per memento (a stub may be two messages), then the oldest run of adjacent groups
        groups: list[list[Slot]] = []
        runs: list[list[list[Slot]]] = []
        for slot in slots:
            if slot.stub is None:
                groups = []
                continue
            if groups and groups[-1][0].stub is not None and groups[-1][0].stub.memento_id == slot.stub.memento_id:
                groups[-1].append(slot)
                continue
            groups.append([slot])
            if len(groups) == 1:
                runs.append(groups)
        run_groups = next((r for r in runs if len(r) >= 2), None)
        if run_groups is None:
            return messages, replace(report, skipped=(report.skipped or 'mementos over their share, none adjacent'))
        if len(run_groups) > 3:
            run_groups = run_groups[: len(run_groups) // 2 + 1]
        run = [slot for group in run_groups for slot in group]
        infos = [group[0].stub for group in run_groups if group[0].stub is not None]
        try:
            children = await self.calls(self._mementos_of, infos)  # one hop for all of them
        except NotFoundError:
            # stubs carried over from a run whose archive is gone (retention 'run' or 'none'): nothing to merge
            return messages, replace(report, skipped=(report.skipped or 'mementos over their share, archive gone'))
        texts = tuple(without_outlines(child.text) for child in children)
        text = '\n\n'.join(texts)
        tokens = self.counter.count_text(text)
        # the merged memento fills what the other stubs leave of the share (less a margin for the next stub),
        # shrinking its children by at least a tenth and to no less than the compressor's usual target
        beside = sum(stub_tokens.values()) - sum(stub_tokens[slot.index] for slot in run)
        room = int(budget * _MERGE_FILL) - beside
        merged_input = BlockInput(
            messages=tuple(messages[slot.index] for slot in run),
            text=text,
            tokens=tokens,
            zone=self.zone,
            merges=texts,
            max_tokens=min(max(room, int(tokens * _MERGE_MIN_SHARE)), int(tokens * _MERGE_MAX_SHARE)),
        )
        key = f'merge:{infos[0].memento_id}'
        (result,) = await self._made([(key, merged_input, f'the mementos from message {infos[0].first_message}')])
        if isinstance(result, BaseException):
            exc = result
            if not report.changed or not isinstance(exc, Exception):
                raise exc  # nothing done yet: the compaction fails, as with any failing compressor
            # what this compaction evicted is committed: it stays evicted, and the merge is tried again next time
            self._merge_failed = True
            reason = f'merging mementos failed: {type(exc).__name__}: {exc}'
            warnings.warn(f'mementograph: {reason}; tried again at the next compaction', MementoWarning, stacklevel=2)
            return messages, replace(report, skipped=report.skipped or reason)
        level = max(info.level for info in infos) + 1
        memento = MementoRecord(
            id=memento_id_for(self.namespace, self.session_id, [c.id for c in children]),
            session_id=self.session_id,
            namespace=self.namespace,
            text=result.text,
            tokens=result.tokens,
            summarizes=tuple(c.id for c in children),
            score=result.score,
            verified=result.verified,
            iterations=result.iterations,
            compressor=result.compressor,
            level=level,
        )
        info = StubInfo(
            target_id=memento.id,
            memento_id=memento.id,
            first_message=infos[0].first_message,
            last_message=infos[-1].last_message,
            level=level,
            archived_tokens=sum(i.archived_tokens for i in infos),
        )
        start, end = run[0].index, run[-1].index + 1
        stub = make_stub(info, result.text, _timestamp(messages[start]), stub_shape(messages, start, end))
        rewritten = _splice(messages, {start: (end, stub)})
        event = SessionEvent(
            session_id=self.session_id,
            namespace=self.namespace,
            kind=report.trigger,
            payload=json.dumps(
                {
                    'merged': [c.id for c in children],
                    'into': memento.id,
                    'tokens_after': self.counter.count_messages(rewritten),
                }
            ).encode(),
            sha256='',
            block_ids=(memento.id,),
        )
        mentions = await self._mentions_of(memento.id, memento.text)
        await self.calls(
            self.store.write_eviction,
            Eviction(
                session_id=self.session_id,
                namespace=self.namespace,
                mementos=(memento,),
                mentions=mentions,
                events=(event,),
            ),
        )
        return rewritten, replace(
            report,
            merged_memento_ids=(*report.merged_memento_ids, memento.id),
            usage_tokens=report.usage_tokens + result.usage_tokens,
        )


def _judge_name(judge: object) -> str:
    """A judge's name for messages: its `name`, else its class's (a custom judge need not have one)."""
    return str(getattr(judge, 'name', type(judge).__name__))


def _drop_outcome(task: asyncio.Future[Any]) -> None:
    """Read the outcome of a compression given up on, so asyncio does not report it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _remember(recent: dict[str, T], block_id: str, value: T) -> None:
    """Keep `value` for one of the latest `_RECENT_BLOCKS` blocks, forgetting the oldest beyond them."""
    recent[block_id] = value
    while len(recent) > _RECENT_BLOCKS:
        del recent[next(iter(recent))]


def _stub_part(part: _ReturnPart, content: str | list[Any], part_id: str) -> _ReturnPart:
    """`part` saying `content` instead, marked as the micro-compacted stub of archived part `part_id`."""
    metadata = {**(part.metadata if isinstance(part.metadata, dict) else {}), MICRO_METADATA: part_id}
    return replace(part, content=content, metadata=metadata)


def _placeholder(item: BinaryContent, pointer: str) -> str:
    return f'[{item.media_type}, {len(item.data)} bytes archived; the original: {pointer}]'


def _splice(messages: list[ModelMessage], stubs: dict[int, tuple[int, list[ModelMessage]]]) -> list[ModelMessage]:
    """Replace `messages[start:end]` with the stub messages for each `start: (end, stub)`."""
    out: list[ModelMessage] = []
    index = 0
    while index < len(messages):
        if index in stubs:
            end, stub = stubs[index]
            out.extend(stub)
            index = end
        else:
            out.append(messages[index])
            index += 1
    return out


def decode_log_messages(events: Sequence[SessionEvent]) -> list[ModelMessage]:
    """The original messages of a session log, in order."""
    messages: list[ModelMessage] = []
    for event in events:
        if event.kind == 'message':
            messages.extend(deserialize_messages(event.payload))
    return messages
