"""`MementoCompaction` -- evicts completed blocks into verified mementos, keeps every block recoverable.

Example:
    ```python
    from pydantic_ai import Agent
    from mementograph import MementoCompaction

    agent = Agent('openai:gpt-5', capabilities=[MementoCompaction(store='sqlite:///tmp/memory.db', max_tokens=60_000)])
    ```

Privacy: `namespace` and the session scope every read and write, `retention` decides how long the archive lives
(`'permanent'`, `'run'`, `'none'`), and `redact` (e.g. `redact_secrets`) is applied to every text before it is
archived:

    ```python
    from mementograph import MementoCompaction, redact_secrets

    MementoCompaction('sqlite:///tmp/memory.db', namespace='team-a', retention='run', redact=redact_secrets)
    ```
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
import os
import threading
import warnings
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import tzinfo
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar, get_args

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.abstract import WrapRunHandler
from pydantic_ai.messages import InstructionPart, ModelMessage, ModelRequest, ModelResponse, SystemPromptPart
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import AbstractToolset

from .._daemon import start_in_daemon_thread
from .._redact import RedactionError, Redactor, redact_secrets
from .._threads import StoreCalls, in_thread, run_blocking
from .._tokens import ENCODING_ENV, TokenCounter, check_encoding, encoding_for_model
from ..knowledge_graph import DEFAULT_NAMESPACE
from ..knowledge_graph.dense import ONNX_SCHEME, BackgroundSync, DenseIndex, embedding_model, existing_model_path
from ..knowledge_graph.entities import MentionExtractor, default_mention_extractor, llm_extractor_from_env
from ..knowledge_graph.memory import (
    Compressor,
    ExtractiveCompressor,
    Judge,
    MementoEngine,
    RubricJudge,
    TimeZone,
    time_zone,
)
from ..knowledge_graph.recall import PAGE_INDEX_HEADER, page_index_text
from ..knowledge_graph.store import STORE_ENV, GraphStore, StoreTimeoutError, check_store_uri, open_store
from ..knowledge_graph.store._conform import require_store
from ._breaker import CompressorBreaker
from ._compactor import CompactionPolicy, CompactionReport, SessionCompactor, Trigger
from ._events import MementoBreakerEvent, MementoEvictedEvent, MementoSkippedEvent, MementoWarning
from ._toolset import MementoToolset

if TYPE_CHECKING:
    from pydantic_ai.embeddings import EmbeddingModel
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.run import AgentRunResult

__all__ = ('MementoCompaction', 'MementoWarning', 'Retention')

logger = logging.getLogger('mementograph')
T = TypeVar('T')

DEFAULT_MAX_FRACTION = 0.6
DEFAULT_CONTEXT_WINDOW = 200_000
_SPAN_NAME = 'memento_compaction'
_SCRATCH_URI = 'memory://'

Retention = Literal['permanent', 'run', 'none']
RecallScope = Literal['session', 'namespace']
"""How long a session's archive lives: for good, until the end of the run, or not at all (see
`MementoCompaction.retention`)."""
_RETENTIONS: tuple[Retention, ...] = get_args(Retention)
_RECALL_SCOPES: tuple[RecallScope, ...] = get_args(RecallScope)


def _is_async(function: object) -> bool:
    """Whether calling `function` gives an awaitable: an `async def`, one under a `functools.wraps` decorator, or
    an object whose `__call__` is one."""
    if not callable(function):
        return False
    return any(
        inspect.iscoroutinefunction(candidate)
        for candidate in (function, inspect.unwrap(function), type(function).__call__)
    )


def _check_embedding_name(spec: str) -> None:
    """Raise `EmbeddingModelError` for an embedding model name that cannot work: an `onnx:PATH` with nothing at
    the path, an unknown provider, a provider whose package is not installed. A model that fails later (the
    network, a key) still only leaves recall lexical."""
    if spec.startswith(ONNX_SCHEME):
        existing_model_path(spec[len(ONNX_SCHEME) :])  # the model itself is read at the first embedding
    else:
        embedding_model(spec)


def _is_whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _open(store: GraphStore | str | None) -> GraphStore:
    return store if store is not None and not isinstance(store, str) else open_store(store)


RECALL_SYNC_WAIT_SECONDS: Final = 5.0
"""How long the `recall` tool waits for archived blocks still being embedded before it answers without them."""


def _recall_index(embedding: EmbeddingModel | str) -> DenseIndex:
    return DenseIndex(embedding_model(embedding), persist=True)


def _embedding_failed(exc: BaseException) -> None:
    logger.warning('mementograph: embedding archived blocks failed: %s: %s', type(exc).__name__, exc)


def _background_sync(dense: _Shared[DenseIndex]) -> BackgroundSync:
    return BackgroundSync(dense.get(), on_error=_embedding_failed)


@dataclass
class _Shared(Generic[T]):
    """A value made at first use, once, and shared by every per-run copy of the capability (its store, the
    `recall` tool's dense index)."""

    make: Callable[[], T]
    _value: T | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self) -> T:
        with self._lock:
            if self._value is None:
                self._value = self.make()
            return self._value

    def renew(self, stale: T) -> None:
        """Make the value again at its next use, if it is still `stale` (another run may have renewed it)."""
        with self._lock:
            if self._value is stale:
                self._value = None


@dataclass
class _RunState:
    compactor: SessionCompactor | None = None
    manual_requested: bool = False
    reports: list[CompactionReport] = field(default_factory=list[CompactionReport])
    recovered: int = 0
    warned_near_limit: bool = False
    scratch: GraphStore | None = None
    """With `retention='none'`: the run's private in-memory store, dropped when the run ends."""
    in_run: bool = False
    """Inside `wrap_run`, which applies the retention when the run ends."""
    page_index: str | None = None
    """The session's page index as the instructions carry it; `None` until the run's first request reads it."""
    page_index_tokens: int = 0
    """Its size, kept out of the history's share of the high-water mark."""
    index_pages_closed: int = 0
    """The compactor's `pages_closed` when the index was last read after a compaction."""
    pending_index: tuple[str, int] | None = None
    """An index read after a compaction closed a page, and its size, waiting for a request that compacts: the
    instructions come before the messages, so changing them on any other request would cost the provider's cached
    prefix one more request."""
    run_id: str | None = None
    """The run this state belongs to."""
    calls: StoreCalls | None = None
    """The run's store calls, bounded by `store_timeout` (made at first use)."""
    warned: set[str] = field(default_factory=set[str])
    """Reasons for a skip already warned about in this run: a failure that lasts is warned about once, then logged at
    INFO (each skip still emits its event)."""
    history_read: bool = False
    """The run's history was read against the session's log (`SessionCompactor.unmerged`), at its first request."""
    history: list[ModelMessage] | None = None
    """The run's own history list (`ctx.messages` of its requests), which pydantic-ai goes on appending to: what a
    failed run did after its last request is read off it."""
    final: list[ModelMessage] | None = None
    """The history the run ended with, as last given to the log."""
    log_error: BaseException | None = None
    """Why that history could not be queued for the log; reported when the run ends, with how much is missing."""


@dataclass
class MementoCompaction(AbstractCapability[AgentDepsT]):
    """Replaces completed blocks of the conversation with verified mementos once the context passes a high-water
    mark, writing each block to the graph store *before* it leaves the context.

    Every evicted block stays recoverable byte for byte (`recover_block`), findable (`recall`, `retrieve_page`)
    and queryable; every message is appended to the session's log as it arrives. If the store or the compressor
    fails, nothing is evicted, the run continues with its full context, and a `MementoSkippedEvent` plus a
    `MementoWarning` say why.
    """

    store: GraphStore | str | None = None
    """A `GraphStore`, a store URI, or `None` for `MEMENTOGRAPH_STORE` / the embedded default."""

    _: KW_ONLY

    max_tokens: int | None = None
    """High-water mark in tokens. Mutually exclusive with `max_fraction`."""

    max_fraction: float | None = None
    """High-water mark as a fraction of the model's context window (default 0.6 when `max_tokens` is unset)."""

    low_water: float = 0.5
    """Evict down to this fraction of the high-water mark; the gap is what keeps the prompt prefix stable between
    evictions."""

    min_saving_tokens: int = 200
    """Skip an eviction that would save fewer tokens (each eviction rewrites the cached prompt prefix)."""

    micro_min_tokens: int = 1_000
    """Old tool results at least this large are stubbed first (micro-compaction), their originals archived."""

    keep_recent_messages: int = 6
    """The newest messages are not micro-compacted (only a tool result too large for the mark, when nothing else
    brings the context under it, is stubbed wherever it is)."""

    memento_share: float = 0.3
    """Mementos may take this share of the high-water mark before the oldest are merged into a memento of
    mementos, which fills what the others leave of it (their items pooled, each once)."""

    conversation_memento_share: float = 0.6
    """`memento_share` for a conversation: used when conversation mementos (speakers' lines) hold most of the
    mementos' tokens. A chat's turns are short, so compactions stay rare per request whatever the share, and its
    mementos are all that is left of its past (LoCoMo's dialogues at an 8,000 mark: 0.3 keeps 0.333 of the
    answers in the last context at prefix stability 0.988, 0.6 keeps 0.561 at 0.985)."""

    session_id: str | None = None
    """The session to archive into; `None` uses the run's `conversation_id`, so a conversation continued with
    `message_history` continues its session."""

    namespace: str = DEFAULT_NAMESPACE
    """Namespace isolating this agent's sessions from others in the same store: the memory tools (`recover_block`,
    `recall`, `retrieve_page`) read only this namespace and the run's session, so an id from elsewhere is simply
    not found."""

    recall_scope: RecallScope = 'session'
    """What the memory tools search: `'session'`, the run's conversation (what it evicted, and what runs
    continuing it evicted); `'namespace'`, every session of the namespace, so an assistant that starts a new
    conversation each time (a new `conversation_id`) recalls what earlier ones archived, and `recover_block` /
    `retrieve_page` take their ids. Give each user their own namespace then: it is what keeps their memories
    apart."""

    retention: Retention = 'permanent'
    """How long the archive lives. `'permanent'`: in the store for good. `'run'`: everything the session holds
    (log, blocks, mementos, pages, mentions) is deleted from the store when the run ends -- also when it fails or
    is cancelled -- so `recover_block` works during the run only, and a session continued in a later run starts
    from an empty archive each run (the mementos carried over in `message_history` stay in the context, their
    blocks are gone). The whole session is deleted, so don't share a session between a `'run'` capability and a
    permanent one. `'none'`: the configured store is never opened or written (a SQLite file is not even created):
    evictions still need a lossless archive for `recover_block`, so the run uses a private in-process `memory://`
    store that is dropped when the run ends."""

    archive_at_run_end: bool | Literal['auto'] = 'auto'
    """At the end of a successful run, archive the session's completed blocks that no eviction archived (the
    history is left as it is), so `recall` finds a conversation that never passed the high-water mark too -- a chat
    assistant of many short conversations recalls them all. A later eviction stubs such a block with the memento
    written then: nothing is compressed twice. The run's last block waits for the next run's end when it is smaller
    than any memento of it, and never goes with a tool call unanswered (deferred tools). `'auto'` (the default):
    on with the extractive compressor and a rubric judge (or none), which need no model; off with any other, whose
    calls a block that is never evicted would cost. With `retention` other than `'permanent'`, never (the archive
    does not outlive the run). A failure is a `MementoWarning`: the session log holds every message."""

    redact: Redactor | None = None
    """Applied to every text before it is archived: the session log, each archived block (user and system prompts,
    instructions, text, tool call arguments, tool returns, metadata, textual attachments), and, derived from those,
    mementos, entities and pages. Pass `redact_secrets` for common secrets or your own `str -> str` function (it
    must be deterministic). The archive holds the redacted version, hashed as such, so `recover_block` returns the
    redacted text byte for byte; the live context is left as it is. A hook that raises means no eviction and one
    `MementoWarning` a run naming its error (a `MementoSkippedEvent` at each request): nothing is archived
    unredacted. The messages before the one it fails on are logged; that one and the later ones wait, in order,
    and are tried again at every request and at the run's end (where a warning says how many are still missing);
    a run continuing the session (`message_history`) logs them once the hook takes them."""

    compressor: Compressor | None = None
    """Memento compressor; `None` is the extractive one (no LLM). Pass `LLMCompressor(model)` for an LLM."""

    judge: Judge | Literal['default'] | None = 'default'
    """Judge of mementos; `'default'` is the deterministic rubric. `None` stores every memento unverified."""

    compress_timeout: float | None = 120.0
    """Longest wait, in seconds, for one block's memento: its compression and judging, refinements included (a
    model that never answers would otherwise hold the run for good). Past it the compression is cancelled and
    counts as failed, as a compressor that raises: nothing is evicted, the run continues with its full context, a
    `MementoWarning` and a `MementoSkippedEvent` say why, and after 3 such failures on one block the extractive
    compressor and the rubric judge (no model) write its memento. After 3 mementos in a row that timed out (or
    failed with the provider down), they write every memento for `compress_cooldown`. A late answer is dropped.
    `None` waits as long as the compressor takes."""

    compress_cooldown: float = 300.0
    """Seconds the compressor's and judge's model is given up on once it failed 3 mementos in a row for a reason not
    about their blocks (`compress_timeout` passed; the provider unreachable, overloaded, rate-limited or refusing the
    credentials): the extractive compressor and the rubric judge, which need no model, write every memento meanwhile
    (at once: no block waits for its own 3 failures), so an outage does not hold the context over its mark. Then one
    memento tries the model again: made, the model writes the mementos again; failed, the wait doubles (up to 8
    times this). One `MementoWarning` when it is given up on, a log line when it is back, and a
    `MementoBreakerEvent` each time (but at a run's end, whose event stream has closed). Every run of the capability
    shares it: the model is theirs alike."""

    encoding: str | None = None
    """tiktoken encoding, or `'estimate'`; `None`: `$MEMENTOGRAPH_ENCODING`, else one from the model name
    (`o200k_base` for most)."""

    context_window: int | None = None
    """The model's window in tokens; `None` resolves it from the model (or `fallback_context_window`)."""

    fallback_context_window: int = DEFAULT_CONTEXT_WINDOW
    """Window assumed when the model does not report one."""

    hard_limit_fraction: float = 0.95
    """When the context still exceeds this fraction of the window after compaction, the model is told plainly."""

    mentions: MentionExtractor | None = None
    """Entity linker for `MENTIONS` edges; `None` uses the recall layer's deterministic extractor, or with
    `$MEMENTOGRAPH_ENTITY_MODEL` set (`provider:model`) an `LLMEntityExtractor` of that model, which adds the
    model's entities to the deterministic ones (a name that can never work, such as an unknown provider, is
    refused when the capability is made)."""

    embedding: EmbeddingModel | str | None = None
    """An embedding model for the `recall` tool: any pydantic-ai embedding model or its name
    (`openai:text-embedding-3-small`), or `onnx:PATH` for a local one (the `dense` extra, see
    `scripts/fetch-embedding-model`). With one, `recall` ranks `hybrid` (entity graph + full text + vectors), which
    finds a block that says the same thing in other words; `None` (the default) ranks by entities and words only,
    with no model. Blocks are embedded as they are archived (see `embed_eagerly`); the vectors are stored beside
    their blocks (deleted with the session), so a later run, or the MCP server, reads them instead of embedding
    again. A model that fails leaves that recall lexical, with a warning."""

    embed_eagerly: bool = True
    """With `embedding`: embed each eviction's blocks in a background thread right after they are archived, so a
    recall finds them ready (otherwise the first recall of a long session embeds every block at once, ~0.13 s a
    block with a local model on 2 cores). `False` embeds at the next recall instead, and spends nothing (no CPU,
    no API calls) on sessions that never recall."""

    timezone: str | tzinfo | None = 'local'
    """Whose calendar relative dates in the conversation mean: a dialogue memento keeps "yesterday" as "yesterday
    (7 May 2023)", reading the day off the message's timestamp on this clock. `'local'` (the machine's), `'UTC'`,
    an IANA name (`'America/Los_Angeles'`) or a `tzinfo`. pydantic-ai stamps messages in UTC, so an evening in
    California is already the next day there: set the users' zone when the agent serves people elsewhere."""

    page_index: bool = True
    """Show the model the session's paged index (each closed page's number, turns, summary and topics; groups of
    old pages folded into one line) in the instructions, so it knows what `retrieve_page` and `recall` can bring
    back. The text changes only after a page closes, and only on a request whose history a compaction rewrites (it
    evicts a block), whose cached prompt prefix is gone anyway: the instructions come before the messages, so a
    change on any other request would cost the provider's cache one more request. Until then the closed page's
    mementos are in the context. A run continuing the conversation starts with the text its last request was sent
    (a new conversation of the session with the store's), and a manual compaction's index goes out with the next
    request, whose history it rewrote. It takes at most 5% of the high-water mark (newest pages first, older ones
    left to `retrieve_page`), and the history compacts to the mark minus the index, so the two together stay
    within it."""

    store_timeout: float | None = 30.0
    """Longest wait, in seconds, for one store call of the capability (a compaction's reads and write, the log's
    flush, a memory tool's read). A store that has not answered by then (a hung server or driver, a lock another
    process never releases) counts as failing: nothing is evicted, the model gets the full history, a
    `MementoWarning` says why, and the call is left to finish on its own (what it writes is written again,
    idempotently, by the next compaction). Until it returns, compactions are skipped at once rather than waiting
    again (a `MementoSkippedEvent` and an INFO log line each; warned about once, and once more when the store
    answers). `None` waits as long as the store takes."""

    id: str | None = 'memento_compaction'
    """Stable capability id (one memento compaction per agent)."""

    _shared: _Shared[GraphStore] = field(init=False, repr=False, compare=False)
    _dense: _Shared[DenseIndex] | None = field(init=False, repr=False, compare=False)
    _embedder: _Shared[BackgroundSync] | None = field(init=False, repr=False, compare=False)
    _toolset: MementoToolset[AgentDepsT] = field(init=False, repr=False, compare=False)
    _state: _RunState = field(init=False, repr=False, compare=False)
    _zone: TimeZone = field(init=False, repr=False, compare=False)
    _breaker: CompressorBreaker = field(init=False, repr=False, compare=False)
    """One for every run: the compressor's model is down for all of them alike."""

    def __post_init__(self) -> None:
        # a spec gives strings as easily as numbers: '0.5' would fail in a comparison, 'false' would count as True
        numbers = ('max_fraction', 'low_water', 'memento_share', 'conversation_memento_share', 'hard_limit_fraction')
        for name in (*numbers, 'store_timeout', 'compress_timeout', 'compress_cooldown'):
            value = getattr(self, name)
            if value is not None and not _is_number(value):
                raise TypeError(f'{name} must be a number, not {value!r}')
        for name in ('page_index', 'embed_eagerly'):
            if not isinstance(value := getattr(self, name), bool):
                raise TypeError(f'{name} must be true or false, not {value!r}')
        if not isinstance(self.archive_at_run_end, bool) and self.archive_at_run_end != 'auto':
            raise TypeError(f"archive_at_run_end must be true, false or 'auto', not {self.archive_at_run_end!r}")
        if self.max_tokens is not None and self.max_fraction is not None:
            raise ValueError('set max_tokens or max_fraction, not both')
        for name in ('max_tokens', 'context_window', 'fallback_context_window'):
            value = getattr(self, name)
            if value is not None and (not _is_whole(value) or value <= 0):
                raise ValueError(f'{name} must be a positive number of tokens, not {value!r}')
        for name in ('min_saving_tokens', 'micro_min_tokens', 'keep_recent_messages'):
            if not _is_whole(value := getattr(self, name)) or value < 0:
                raise ValueError(f'{name} must be a whole number, 0 or more, not {value!r}')
        if not 0 < self.hard_limit_fraction <= 1:
            raise ValueError(f'hard_limit_fraction must be in (0, 1], not {self.hard_limit_fraction!r}')
        for name in ('session_id', 'namespace'):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f'{name} must be a non-empty str, not {value!r}')
        if self.max_fraction is not None and not 0 < self.max_fraction <= 1:
            raise ValueError('max_fraction must be in (0, 1]')
        if not 0 <= self.low_water < 1:
            raise ValueError('low_water must be in [0, 1)')
        if self.max_tokens is None and self.context_window is not None and self._mark(self.context_window) < 1:
            raise ValueError(  # else every request would fail with a mark of 0 tokens, as warnings only
                f'a high-water mark of {self.context_window} * {self.max_fraction or DEFAULT_MAX_FRACTION} tokens '
                'is under 1 token; raise context_window or max_fraction, or set max_tokens'
            )
        StoreCalls(self.store_timeout)  # a bad value fails here, not at the first request
        if self.compress_timeout is not None and not self.compress_timeout > 0:
            raise ValueError(
                f'compress_timeout must be a positive number of seconds or None, not {self.compress_timeout!r}'
            )
        if not _is_number(self.compress_cooldown) or not self.compress_cooldown >= 0:
            raise ValueError(f'compress_cooldown must be 0 or more seconds, not {self.compress_cooldown!r}')
        for name in ('memento_share', 'conversation_memento_share'):  # else every compaction would fail at run time
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f'{name} must be in (0, 1]')
        if self.recall_scope not in _RECALL_SCOPES:
            raise ValueError(
                f'recall_scope must be one of {", ".join(map(repr, _RECALL_SCOPES))}, not {self.recall_scope!r}'
            )
        if self.retention not in _RETENTIONS:
            raise ValueError(f'retention must be one of {", ".join(map(repr, _RETENTIONS))}, not {self.retention!r}')
        if self.redact is not None and not callable(self.redact):
            raise ValueError('redact must be a function taking and returning a str')
        if isinstance(self.store, str):  # misspelt, it would only warn at every request and archive nothing
            check_store_uri(self.store)
        elif self.store is None and self.retention != 'none' and os.environ.get(STORE_ENV):
            try:
                check_store_uri(os.environ[STORE_ENV])
            except ValueError as exc:
                raise type(exc)(f'{exc} (from ${STORE_ENV})') from None
        elif self.store is not None:  # a store of one's own missing a member would fail the first eviction
            require_store(self.store, expected='a GraphStore, a store URI or None')
        if self.encoding is not None:  # likewise: a typo would fail every request with TokenizerUnavailableError
            check_encoding(self.encoding)
        elif os.environ.get(ENCODING_ENV):
            try:
                check_encoding(os.environ[ENCODING_ENV])
            except ValueError as exc:
                raise ValueError(f'{exc} (from ${ENCODING_ENV})') from None
        if self.mentions is None:  # likewise: a misspelt entity model would fail every call, as warnings only
            llm_extractor_from_env()
        if isinstance(self.embedding, str):  # likewise a name that can never give a model (recall would stay lexical)
            _check_embedding_name(self.embedding)
        for role, value, method in (('compressor', self.compressor, 'compress'), ('judge', self.judge, 'judge')):
            if value is not None and value != 'default' and not _is_async(getattr(value, method, None)):
                # a plain `def` would fail at every compaction of every run, as warnings only
                raise TypeError(
                    f'{role} must have an `async def {method}(...)` method ({type(value).__name__} has not)'
                )
        self._zone = time_zone(self.timezone)
        self._shared = _Shared(partial(_open, self.store))
        # the vectors stay valid for every run: one index, filled once per session
        self._dense = None if self.embedding is None else _Shared(partial(_recall_index, self.embedding))
        self._embedder = None
        if self._dense is not None and self.embed_eagerly:
            self._embedder = _Shared(partial(_background_sync, self._dense))
        self._toolset = MementoToolset(self)
        self._breaker = CompressorBreaker(cooldown=self.compress_cooldown)
        self._state = _RunState()
        self._run_copy = False
        self._latest_run = self._state  # what `reports` shows on the capability as configured

    # -- pydantic-ai plumbing -------------------------------------------------------------------------------------

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return 'MementoCompaction'

    @classmethod
    def from_spec(cls, *args: Any, **kwargs: Any) -> MementoCompaction[Any]:
        """Build from an agent spec: `{MementoCompaction: {store: 'sqlite://memory.db', max_tokens: 60000}}`.

        A spec names settings by value: `retention: run`, and `redact: secrets` for `redact_secrets` (a spec
        cannot hold a function; pass other hooks in code).
        """
        redact = kwargs.get('redact')
        if isinstance(redact, str):
            if redact != 'secrets':
                raise ValueError(f"redact in a spec must be 'secrets' (redact_secrets), not {redact!r}")
            kwargs['redact'] = redact_secrets
        return cls(*args, **kwargs)

    async def for_run(self, ctx: RunContext[AgentDepsT]) -> MementoCompaction[AgentDepsT]:
        # a shallow copy: one store and one toolset for every run (`replace` would validate and build a new
        # toolset, ~2 ms a run, only to drop it); the run's own state is fresh
        run = copy.copy(self)
        run._state = _RunState()
        run._run_copy = True
        self._latest_run = run._state
        return run

    def get_toolset(self) -> AbstractToolset[AgentDepsT] | None:
        return self._toolset

    def get_instructions(self) -> Callable[[RunContext[AgentDepsT]], Awaitable[InstructionPart | None]] | None:
        return self._page_index_instruction if self.page_index else None

    async def _page_index_instruction(self, ctx: RunContext[AgentDepsT]) -> InstructionPart | None:
        """The page index as an instruction (read from the store once per run, then kept until a page closes and
        a request compacts: see `_refresh_page_index`)."""
        state = self._state
        if state.page_index is None:
            await self._read_page_index_bounded(ctx)
        elif state.pending_index is not None and self._will_compact(ctx, state.pending_index[1]):
            (state.page_index, state.page_index_tokens), state.pending_index = state.pending_index, None
        return _index_part(state.page_index or '')

    def _will_compact(self, ctx: RunContext[AgentDepsT], index_tokens: int) -> bool:
        """Whether this request's history is over the mark an index of `index_tokens` leaves, with a block to evict:
        its hook then rewrites messages the last request was sent (a compaction that only stubs the newest tool
        result leaves the cached prefix as it was)."""
        compactor = self._state.compactor
        if compactor is None or self._state.run_id != ctx.run_id:
            return True
        high = max(1, self.high_water(ctx) - index_tokens)
        try:
            return compactor.tokens(ctx.messages, exact_above=high) > high and (
                compactor.evicts_a_block(ctx.messages) is not False
            )
        except Exception:  # counting fails in the hook too, which then compacts nothing: the index goes out now
            return True

    async def _read_page_index_bounded(self, ctx: RunContext[AgentDepsT], *, pending: bool = False) -> None:
        try:
            await self.store_calls()(self._read_page_index, ctx, pending)
        except StoreTimeoutError as exc:  # the index is a convenience: never a reason to wait on a hung store
            logger.warning('mementograph: could not read the page index: %s', exc)
            if self._state.page_index is None:
                self._state.page_index = ''

    def _read_page_index(self, ctx: RunContext[AgentDepsT], pending: bool = False) -> bool:
        """Read the index into the run state, cut to its share of the mark; True when it changed. With `pending`,
        a changed index waits in `pending_index` for a request that compacts.

        A run continuing a conversation starts with the index its last request was sent with (the store's may be
        newer: a page closed after the last compaction of the run before), so its first request keeps the prefix."""
        state = self._state
        sent: tuple[str, int] | None = None
        try:
            compactor = self.compactor(ctx)
            text = page_index_text(
                compactor.store,
                session_id=compactor.session_id,
                namespace=compactor.namespace,
                max_tokens=min(_INDEX_MAX_TOKENS, int(self.high_water(ctx) * _INDEX_SHARE)),
                counter=compactor.counter,
            )
            tokens = compactor.counter.count_text(text) if text else 0
            if state.page_index is None and (last_sent := _index_sent(ctx.messages)) not in (None, text):
                sent = last_sent, compactor.counter.count_text(last_sent) if last_sent else 0
        except Exception as exc:  # the index is a convenience: never a reason to fail the request
            logger.warning('mementograph: could not read the page index: %s: %s', type(exc).__name__, exc)
            if state.page_index is None:
                state.page_index = ''  # not retried on every request; the next compaction reads it again
            return False
        if sent is not None:
            (state.page_index, state.page_index_tokens), pending = sent, True
        if text == state.page_index:
            state.pending_index = None
            return False
        if pending:
            state.pending_index = text, tokens
        else:
            state.page_index, state.page_index_tokens, state.pending_index = text, tokens, None
        return True

    async def _refresh_page_index(self, ctx: RunContext[AgentDepsT], *, with_next_compaction: bool = False) -> None:
        """After a compaction: when it closed a page, a later request's instructions carry the new index.

        Not this request's: pydantic-ai stamps the request with its instructions, and the session log holds the
        request as it was before the compaction; changing them now would make the log and the archive differ.
        After a compaction of the hook (`with_next_compaction`), not the next request's either: the instructions
        come before the messages, so changing them breaks the provider's cached prefix; the new index waits for
        the next request whose history is over the mark with a block to evict, which breaks it anyway. Meanwhile
        the closed page's mementos are in the context. After a manual or orchestrated compaction, the next
        request's history is rewritten already, so the new index goes with it. A compaction that closed no page
        leaves the index as it was, and it is not read again (a round trip to a server at every compaction)."""
        state = self._state
        if not self.page_index or state.page_index is None or state.compactor is None:
            return
        if state.compactor.pages_closed == state.index_pages_closed:
            return
        state.index_pages_closed = state.compactor.pages_closed
        await self._read_page_index_bounded(ctx, pending=with_next_compaction)

    @property
    def graph_store(self) -> GraphStore:
        """The store the run archives into (opened on first use): the configured one, or with `retention='none'`
        the run's private in-memory store."""
        if self.retention == 'none':
            state = self._state
            if state.scratch is None:
                state.scratch = open_store(_SCRATCH_URI)
            return state.scratch
        return self._shared.get()

    def _reopen_if_replaced(self) -> None:
        """A store file deleted or replaced since the capability opened it (a restore from a backup, say) is
        opened again at the run's start, from the URI the capability was given: the old connection refuses to
        write (the file is gone), and every later run would archive nothing. A store object the caller made is
        the caller's to reopen."""
        if self.retention == 'none' or not isinstance(self.store, str | None):
            return
        store = self._shared.get()
        replaced = getattr(store, 'file_replaced', None)
        if callable(replaced) and replaced():
            logger.warning('mementograph: %s was deleted or replaced; opening it again', store.uri)
            self._shared.renew(store)
            store.close()

    def dense_index(self) -> DenseIndex | None:
        """The `recall` tool's vectors, with `embedding` set (the model loads at first use)."""
        return None if self._dense is None else self._dense.get()

    def synced_dense_index(
        self, store: GraphStore, session_id: str | None, *, wait: float | None = RECALL_SYNC_WAIT_SECONDS
    ) -> tuple[DenseIndex | None, bool]:
        """`(the recall tool's vectors, whether they cover every archived block of the session)`; `(None, False)`
        without `embedding`, or with the model failing (recall then ranks by entities and words, and a warning
        says why). Blocking, for at most `wait` seconds while the eager embedding runs: the recall shares that
        sync rather than embedding the same blocks beside it, and answers from what is embedded when it is slow."""
        try:
            index = self.dense_index()
            if index is None:
                return None, False
            if self._embedder is None:
                index.sync(store, namespace=self.namespace, session_id=session_id)
                return index, True
            return index, self._embedder.get().synced(store, namespace=self.namespace, session_id=session_id, wait=wait)
        except Exception as exc:  # a model or network failure must not cost the agent its recall, or its run
            logger.warning('mementograph: dense recall unavailable, ranking lexically: %s: %s', type(exc).__name__, exc)
            return None, False

    def _embed_in_background(self, store: GraphStore, session_id: str) -> None:
        """Start embedding what was just archived (`embed_eagerly`); the run does not wait for it."""
        if self._embedder is None:
            return
        try:
            self._embedder.get().request(store, namespace=self.namespace, session_id=session_id)
        except Exception as exc:  # a model that cannot even be made (a bad name): recall says it again, lexically
            _embedding_failed(exc)

    @property
    def reports(self) -> list[CompactionReport]:
        """Compaction passes of the current run, in order; read on the capability as you configured it (each run
        works on a copy), those of the latest run it started. `CompactionReport` is in `mementograph.capabilities`."""
        return self._state.reports if self._run_copy else self._latest_run.reports

    # -- compaction -----------------------------------------------------------------------------------------------

    def recall_session(self, ctx: RunContext[Any]) -> str | None:
        """The session the memory tools search, or `None` for the whole namespace (`recall_scope`)."""
        return None if self.recall_scope == 'namespace' else self.resolve_session_id(ctx)

    def resolve_session_id(self, ctx: RunContext[Any]) -> str:
        return self.session_id or ctx.conversation_id or 'default'

    def _window(self, ctx: RunContext[Any]) -> int:
        if self.context_window is not None:
            return self.context_window
        window = getattr(ctx.model, 'context_window', None)
        return window if isinstance(window, int) and window > 0 else self.fallback_context_window

    def high_water(self, ctx: RunContext[Any]) -> int:
        if self.max_tokens is not None:
            return self.max_tokens
        # at least 1: a tiny window (a model's, or `fallback_context_window`) compacts all it can, not never
        return max(1, self._mark(self._window(ctx)))

    def _mark(self, window: int) -> int:
        """The high-water mark `max_fraction` of `window` gives."""
        return int(window * (self.max_fraction or DEFAULT_MAX_FRACTION))

    def store_calls(self) -> StoreCalls:
        """The run's bounded store calls (one per run: it remembers a call that timed out until it returns)."""
        state = self._state
        if state.calls is None:
            state.calls = StoreCalls(self.store_timeout)
        return state.calls

    def compactor(self, ctx: RunContext[Any]) -> SessionCompactor:
        """This run's compactor (created on first use, bound to the run's session)."""
        state = self._state
        if state.compactor is not None and state.run_id not in (None, ctx.run_id):
            # not copied per run (a tier of a harness compaction calls this instance for every run): a new run
            # starts from a fresh state, as `for_run` gives the copies
            state.compactor.close()
            self._state = self._latest_run = state = _RunState()
        state.run_id = ctx.run_id
        high = max(1, self.high_water(ctx) - state.page_index_tokens)
        if state.compactor is None:
            state.compactor = self._new_compactor(
                self.resolve_session_id(ctx), getattr(ctx.model, 'model_name', None), high, self.store_calls()
            )
        elif state.compactor.policy.high_water_tokens != high:
            state.compactor.policy = self._policy(high)
        return state.compactor

    def _new_compactor(self, session_id: str, model_name: str | None, high: int, calls: StoreCalls) -> SessionCompactor:
        self._reopen_if_replaced()
        encoding = self.encoding or encoding_for_model(model_name)
        counter = TokenCounter(encoding, defer_loading=True)  # the log goes on without a tokenizer
        judge: Judge | None = RubricJudge() if self.judge == 'default' else self.judge
        engine = MementoEngine(compressor=self.compressor or ExtractiveCompressor(), judge=judge)
        return SessionCompactor(
            store=self.graph_store,
            session_id=session_id,
            namespace=self.namespace,
            counter=counter,
            engine=engine,
            policy=self._policy(high),
            mentions=self.mentions or default_mention_extractor(),
            redact=self.redact,
            zone=self._zone,
            calls=calls,
            compress_timeout=self.compress_timeout,
            breaker=self._breaker,
        )

    def _policy(self, high: int) -> CompactionPolicy:
        return CompactionPolicy(
            high_water_tokens=high,
            low_water_tokens=int(high * self.low_water),
            min_saving_tokens=self.min_saving_tokens,
            micro_min_tokens=self.micro_min_tokens,
            keep_recent_messages=self.keep_recent_messages,
            memento_share=self.memento_share,
            conversation_memento_share=self.conversation_memento_share,
            # blocks small enough that the protected tail (the current block) never takes much of the budget
            max_block_tokens=max(400, min(4_000, high // 4)),
        )

    async def compact_now(
        self, ctx: RunContext[AgentDepsT], *, trigger: Trigger
    ) -> tuple[list[ModelMessage], CompactionReport] | None:
        """Compact `ctx.messages` in place (persistently); `None` and a warning when it could not be done."""
        try:
            compactor = self.compactor(ctx)
            messages = list(ctx.messages)
            with ctx.tracer.start_as_current_span(_SPAN_NAME) as span:
                new, report = await compactor.compact(messages, trigger=trigger, exhaustive=trigger == 'manual')
                if span.is_recording():
                    span.set_attributes(
                        {
                            'mementograph.trigger': trigger,
                            'mementograph.session_id': compactor.session_id,
                            'mementograph.tokens_before': report.tokens_before,
                            'mementograph.tokens_after': report.tokens_after,
                            'mementograph.blocks_evicted': len(report.block_ids),
                            'mementograph.usage_tokens': report.usage_tokens,
                        }
                    )
        except Exception as exc:
            await self._breaker_events(ctx)
            await self._skipped(ctx, f'compaction failed: {type(exc).__name__}: {exc}', error=exc)
            return None
        await self._breaker_events(ctx)
        self._state.reports.append(report)
        if report.changed:
            ctx.messages[:] = new
            await self._refresh_page_index(ctx, with_next_compaction=trigger == 'auto')
            if report.block_ids:
                self._embed_in_background(compactor.store, compactor.session_id)
            await ctx.emit(
                MementoEvictedEvent(
                    session_id=compactor.session_id,
                    trigger=trigger,
                    block_ids=report.block_ids,
                    memento_ids=report.memento_ids,
                    micro_part_ids=report.micro_part_ids,
                    merged_memento_ids=report.merged_memento_ids,
                    tokens_before=report.tokens_before,
                    tokens_after=report.tokens_after,
                    verified=report.verified,
                    unverified=report.unverified,
                    usage_tokens=report.usage_tokens,
                )
            )
        elif report.skipped:
            await ctx.emit(
                MementoSkippedEvent(session_id=compactor.session_id, reason=report.skipped, tokens=report.tokens_before)
            )
        return new, report

    async def compact(self, messages: list[ModelMessage], ctx: RunContext[AgentDepsT]) -> list[ModelMessage]:
        """The `CompactionStrategy` protocol of pydantic-ai-harness: compact unconditionally (a tier of
        `TieredCompaction` / `FallbackCompaction`). Archive first; on any failure the messages come back as they
        were. Harness-pinned parts are never archived away.

        As a tier, no run end reaches this object: `retention='run'` then refuses to archive (nothing could delete
        it), and `retention='none'` keeps its in-memory archive for the capability's lifetime."""
        if self.retention == 'run' and not self._state.in_run:
            await self._skipped(ctx, "retention='run' needs MementoCompaction among the agent's capabilities")
            return messages
        try:
            # unconditional: the orchestrator decides when to stop, so evict every completed block it may
            new, report = await self.compactor(ctx).compact(list(messages), trigger='auto', exhaustive=True)
        except Exception as exc:
            await self._breaker_events(ctx)
            await self._skipped(ctx, f'compaction failed: {type(exc).__name__}: {exc}', error=exc)
            return messages
        await self._breaker_events(ctx)
        self._state.reports.append(report)
        if report.changed:
            await self._refresh_page_index(ctx)
        return new

    async def _breaker_events(self, ctx: RunContext[AgentDepsT]) -> None:
        """A `MementoBreakerEvent` for each time the run's mementos opened or closed the breaker (its warning and
        log lines are the compactor's)."""
        compactor = self._state.compactor
        if compactor is None:
            return
        for change in compactor.take_breaker_changes():
            try:
                await ctx.emit(
                    MementoBreakerEvent(
                        session_id=compactor.session_id,
                        opened=change.opened,
                        model=compactor.model_name(),
                        error=change.error or None,
                        failures=change.failures,
                        cooldown=change.cooldown,
                        probe=change.probe,
                    )
                )
            except Exception:  # an event sink failing must not break the run either
                logger.exception('mementograph: could not emit the breaker event')

    async def _skipped(self, ctx: RunContext[AgentDepsT], reason: str, *, error: BaseException | None = None) -> None:
        key = reason
        if isinstance(error, RedactionError):  # one warning a run, whatever message the hook fails on
            reason, key = self._redaction_failed(error), _REDACT_FAILED
        # a hang was warned about when it began, and a lasting failure at its first skip of the run
        if (isinstance(error, StoreTimeoutError) and not error.waited) or key in self._state.warned:
            logger.info('mementograph: %s; continuing with the full context', reason)
        else:
            self._state.warned.add(key)
            logger.warning('mementograph: %s; continuing with the full context', reason)
            warnings.warn(f'mementograph: {reason}; continuing with the full context', MementoWarning, stacklevel=2)
        try:
            await ctx.emit(
                MementoSkippedEvent(
                    session_id=self.resolve_session_id(ctx),
                    reason=reason,
                    error=None if error is None else f'{type(error).__name__}: {error}',
                )
            )
        except Exception:  # an event sink failing must not break the run either
            logger.exception('mementograph: could not emit the skipped event')

    def _redaction_failed(self, error: RedactionError) -> str:
        """The reason a failing hook gives: its error, and what waits for the session log meanwhile."""
        compactor = self._state.compactor
        waiting = 0 if compactor is None else compactor.log_waiting()
        reason = f'{error} (nothing is written unredacted, and nothing is evicted while it fails'
        if waiting:
            verb = 'waits' if waiting == 1 else 'wait'
            reason += f'; {_messages(waiting)} {verb} for the session log, tried again at every request and at the '
            reason += 'end of the run'
        return reason + ')'

    async def wrap_run(self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        """Log what arrived after the last model request (the final answer), and make the whole log durable
        before the run returns -- also when it fails; a store that does not answer is waited for at most
        `store_timeout`. With `retention` `'run'` or `'none'`, drop the run's archive instead."""
        self._state.in_run = True
        try:
            result = await handler()
        except BaseException:
            if self.retention == 'permanent':  # what the run did before it failed: tool results, a last response
                await self._log_failed_run(ctx)
            self._end_run()
            raise
        if self.retention == 'permanent':
            await self._log_final(result.all_messages(), ctx)
            await self._archive_run_end(result.all_messages(), ctx)
        await in_thread(self._end_run)  # waits for the log (bounded) and may delete: off the loop
        return result

    async def log_history(self, messages: Sequence[ModelMessage]) -> int:
        """Append to the session's log what it does not hold yet of `messages`, a finished run's
        `all_messages()`, then archive its completed blocks as the run's end would have (`archive_at_run_end`);
        returns how many messages were appended. Raises the store's error, or `StoreTimeoutError` when the store
        has not answered within `store_timeout`; archiving failing is a warning, as at a run's end.

        Every run logs its history itself, with one exception: `Agent.run_stream` with structured output (an
        output tool) adds its closing request (the output tool's `'Final result processed.'` return, and the returns
        of the other tool calls of the last response) to the stream's own history only, after every hook of the run
        has run, so no capability ever sees it. At the run's end the last response's output tool call looks
        unanswered, so the run's last turn waits to be archived. After such a stream,
        `await memento.log_history(result.all_messages())` logs the closing request and archives what `agent.run`
        would have archived at its end. A later run that continues the conversation (`message_history`) would log
        and archive it too, and neither logs or archives anything twice: the history is placed in the log as a
        run's is (a continuation goes on from the log's last message, anything else after it).

        The session is `session_id`, else the history's `conversation_id`. Tokens are counted (and blocks cut by
        them) with the encoding the run used: `encoding`, else that of the model that wrote the history's last
        response (its `ModelResponse.model_name`, the name a run reads off its model). With `retention` `'run'` or
        `'none'` the session is not kept after its run, and nothing is written.
        """
        calls = StoreCalls(self.store_timeout)
        logged = await calls(self._log_history, messages)
        if logged is None:
            return 0
        compactor, history, count = logged
        try:
            if self._archives_at_run_end():
                await self._archive_completed(compactor, history)
        finally:
            await calls(compactor.close)
        return count

    def log_history_sync(self, messages: Sequence[ModelMessage]) -> int:
        """`log_history`, blocking (for `run_stream_sync`): it logs and archives alike, every store call of the
        archive bounded by `store_timeout` and archiving failing a warning; the log's writes are waited for up to
        `store_timeout`, where the log stands without a bound. The archive (the compressor is async) runs on a
        private event loop, in a thread of its own when called from a running one, which waits for it."""
        logged = self._log_history(messages)
        if logged is None:
            return 0
        compactor, history, count = logged
        try:
            if self._archives_at_run_end():
                run_blocking(partial(self._archive_completed, compactor, history))
        finally:
            compactor.close()
        return count

    def _log_history(self, messages: Sequence[ModelMessage]) -> tuple[SessionCompactor, list[ModelMessage], int] | None:
        """A compactor of the history's session, the history as the log holds it (merged requests taken apart) and
        how many of its messages were queued for the log; `None` when the session is not kept (blocking)."""
        if self.retention != 'permanent' or not messages:
            return None
        conversation = next((m.conversation_id for m in reversed(messages) if m.conversation_id), None)
        session = self.session_id or conversation or 'default'
        high = self.max_tokens or self._mark(self.context_window or self.fallback_context_window)
        # the run's encoding: its model's name, which each response of the run carries
        model = next((m.model_name for m in reversed(messages) if isinstance(m, ModelResponse) and m.model_name), None)
        compactor = self._new_compactor(session, model, max(1, high), StoreCalls(self.store_timeout))
        try:
            history = compactor.unmerged(messages) or list(messages)
            return compactor, history, compactor.sync_log(history)
        except BaseException:
            compactor.close()
            raise

    async def _log_final(self, messages: list[ModelMessage], ctx: RunContext[AgentDepsT]) -> None:
        """Queue the messages the log does not hold yet; even while the store hangs, they are queued (and written
        if it answers before the process ends). A failure is reported at the run's end, with what is missing."""
        self._state.final = messages
        try:
            await self._logging_compactor(ctx, messages)
        except Exception as exc:
            self._state.log_error = exc

    def _archives_at_run_end(self) -> bool:
        """Whether a successful run's end archives its completed blocks (`archive_at_run_end`, `'auto'` resolved)."""
        if self.retention != 'permanent':
            return False
        if self.archive_at_run_end != 'auto':
            return self.archive_at_run_end
        deterministic_judge = self.judge in ('default', None) or isinstance(self.judge, RubricJudge)
        return isinstance(self.compressor, ExtractiveCompressor | None) and deterministic_judge

    async def _archive_run_end(self, messages: list[ModelMessage], ctx: RunContext[AgentDepsT]) -> None:
        """`archive_at_run_end`: archive what the run completed and no eviction archived; a store or compressor
        failing is a warning (every store call bounded by `store_timeout`), the run's result is returned as it is."""
        compactor = self._state.compactor
        if not self._archives_at_run_end() or compactor is None or self._state.run_id != ctx.run_id:
            return
        if self._state.log_error is not None:  # the log lacks messages: the run's end says which, and why
            return
        await self._archive_completed(compactor, messages)

    async def _archive_completed(self, compactor: SessionCompactor, messages: list[ModelMessage]) -> None:
        """Archive the completed blocks of `messages` no eviction archived; a failure is a warning."""
        try:
            report = await compactor.archive_completed(messages)
        except RedactionError:  # warned about by the log, whose messages wait with it; the run's end counts them
            return
        except Exception as exc:
            reason = f'could not archive the run at its end: {type(exc).__name__}: {exc}'
            if isinstance(exc, StoreTimeoutError) and not exc.waited:  # a hang warned about when it began
                logger.info('mementograph: %s%s', reason, _log_is_whole(compactor))
                return
        else:
            if report.block_ids:
                self._embed_in_background(compactor.store, compactor.session_id)
            if not report.failures:
                return
            reason = f'blocks left to archive later, the compressor failed on {"; ".join(report.failures)}'
        reason += _log_is_whole(compactor)
        logger.warning('mementograph: %s', reason)
        warnings.warn(f'mementograph: {reason}', MementoWarning, stacklevel=3)

    async def _log_failed_run(self, ctx: RunContext[AgentDepsT]) -> None:
        """Queue what a failed (or cancelled) run added after its last model request (tool results, a response).
        Only a run that made a request has a log."""
        state = self._state
        if state.compactor is None or state.history is None or state.run_id != ctx.run_id:
            return
        state.final = list(state.history)
        try:
            await state.compactor.log(state.final)
        except BaseException as exc:  # a second cancellation, a store failing: the run's own error is what rises
            state.log_error = exc

    def _end_run(self) -> None:
        state = self._state
        compactor = state.compactor
        in_flight: Future[None] | None = None  # a log append the delete must not overtake
        error = state.log_error
        if compactor is not None:  # the log goes with the run unless permanent: stop its writer first
            try:
                if self.retention == 'run':
                    in_flight = compactor.discard_log()
                else:
                    compactor.close()
            except Exception as exc:
                error = exc
        if error is not None:
            self._log_incomplete(error, compactor)
        if self.retention == 'run' and compactor is not None:
            reason = f'could not delete session {compactor.session_id!r} at the end of the run (retention=run)'
            busy = self.store_calls().busy()
            try:
                if busy is not None:  # a call to the store is hung: the delete would hang behind it
                    raise StoreTimeoutError(busy)
                self._delete_session(compactor, in_flight)
            except Exception as exc:
                logger.warning('mementograph: %s: %s: %s', reason, type(exc).__name__, exc)
                warnings.warn(f'mementograph: {reason}: {exc}', MementoWarning, stacklevel=3)
        if state.scratch is not None:
            scratch, state.scratch = state.scratch, None
            try:
                scratch.close()
            except Exception:  # an in-memory database; nothing to lose
                logger.debug('mementograph: closing the run store failed', exc_info=True)

    def _log_incomplete(self, error: BaseException, compactor: SessionCompactor | None) -> None:
        """One warning at the run's end: how many messages the session log is missing, why, and what becomes of
        them."""
        state = self._state
        messages = state.final or state.history or []
        count, exact = len(messages), False
        if compactor is not None:
            with contextlib.suppress(Exception):  # a count that cannot be made leaves the upper bound
                count, exact = compactor.unlogged(messages)
        if isinstance(error, RedactionError) and _REDACT_FAILED in state.warned:
            why = 'the redact hook fails on the first of them, as warned; nothing was written unredacted'
        else:
            why = f'{type(error).__name__}: {error}'
        whose = '' if compactor is None else f' of session {compactor.session_id!r}'
        message = f'could not complete the session log{whose}'
        if count or not exact:
            missing = _messages(count) if exact else f'up to {_messages(count)}'
            message += (
                f": {missing} not in it yet ({why}); they are in the run's result, and a run that continues the "
                'session (message_history) logs them'
            )
        else:
            message += f' ({why})'
        logger.warning('mementograph: %s', message)
        warnings.warn(f'mementograph: {message}', MementoWarning, stacklevel=3)

    def _delete_session(self, compactor: SessionCompactor, in_flight: Future[None] | None) -> None:
        """Delete the run's session once the log's last append has returned, waiting at most `store_timeout`."""
        session = compactor.session_id

        def delete() -> None:
            if in_flight is not None:
                with contextlib.suppress(BaseException):  # failed or not, it has stopped writing
                    in_flight.result()
            compactor.store.delete_session(session, namespace=compactor.namespace)

        deleting = start_in_daemon_thread(delete, name='mementograph-store')
        try:
            deleting.result(self.store_timeout)
        except TimeoutError:
            deleting.add_done_callback(partial(_report_late_delete, session))
            raise StoreTimeoutError(
                f'the store did not answer delete_session within {self.store_timeout:g} s (store_timeout); the '
                f'delete goes on if it answers while this process runs, else `mementograph forget --session '
                f'{session}` deletes the session'
            ) from None

    async def before_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Log new messages; past the high-water mark, compact (archive first, then rewrite the history)."""
        try:
            _stamp_pending_request(ctx)
            compactor = await self._logging_compactor(ctx, ctx.messages, own_history=True)
            self._state.history = ctx.messages
            tokens = compactor.tokens(ctx.messages, exact_above=compactor.policy.high_water_tokens)
        except Exception as exc:
            await self._skipped(ctx, f'memory unavailable: {type(exc).__name__}: {exc}', error=exc)
            return request_context
        failure = compactor.log_failure()
        if failure is not None:
            await self._skipped(ctx, f'session log append failed (retried later): {failure}', error=failure)
        if tokens <= compactor.policy.high_water_tokens:
            return request_context
        outcome = await self.compact_now(ctx, trigger='auto')
        if outcome is not None and outcome[1].changed:
            request_context = replace(request_context, messages=outcome[0])
            tokens = outcome[1].tokens_after
        self._warn_near_limit(ctx, tokens)
        return request_context

    async def _logging_compactor(
        self, ctx: RunContext[AgentDepsT], messages: list[ModelMessage], *, own_history: bool = False
    ) -> SessionCompactor:
        """This run's compactor with `messages` queued for the session log. Making it opens the store, so that (and
        the first read of where the log stands) happens off the loop, bounded by `store_timeout`.

        In the run's `own_history` (`ctx.messages`), requests pydantic-ai merged from logged ones are taken apart
        first (`SessionCompactor.unmerged`), so a conversation carried on for a third run is not logged again: the
        model still gets them merged (pydantic-ai merges the request it sends)."""
        state = self._state
        if state.compactor is not None and state.run_id == ctx.run_id:
            compactor = self.compactor(ctx)  # no store I/O: the mark may follow the page index's size
        else:
            compactor = await self.store_calls()(self.compactor, ctx)
        if own_history and not self._state.history_read:  # `compactor` may have begun a new state
            self._state.history_read = True
            split = await self.store_calls()(compactor.unmerged, messages)
            if split is not None:
                messages[:] = split
        await compactor.log(messages)
        return compactor

    def _warn_near_limit(self, ctx: RunContext[AgentDepsT], tokens: int) -> None:
        window = self._window(ctx)
        if tokens < window * self.hard_limit_fraction or self._state.warned_near_limit:
            return
        self._state.warned_near_limit = True
        notice = (
            f'Context is at {tokens} of {window} tokens and could not be compacted further. '
            'Finish the current step concisely; recover archived blocks only when needed.'
        )
        try:
            ctx.enqueue(SystemPromptPart(notice, scope='request'))
        except Exception:
            logger.warning('mementograph: %s', notice)


def _report_late_delete(session_id: str, deleting: Future[None]) -> None:
    """The outcome of a `retention='run'` delete the run's end stopped waiting for."""
    error = deleting.exception()
    if error is None:
        logger.warning('mementograph: the store answered: session %r is deleted (retention=run)', session_id)
    else:
        logger.warning(
            'mementograph: could not delete session %r (retention=run): %s: %s; `mementograph forget --session %s` '
            'deletes it',
            session_id, type(error).__name__, error, session_id,
        )  # fmt: skip


_REDACT_FAILED: Final = 'the redact hook failed'
"""The key of every redaction failure among the reasons a run has warned about (each message's may differ)."""


def _log_is_whole(compactor: SessionCompactor) -> str:
    """What a warning about the run's end adds when the session log holds every message (else the run's end says
    what it lacks)."""
    return '' if compactor.log_waiting() else '; the session log holds every message'


def _messages(count: int) -> str:
    return f'{count} message' if count == 1 else f'{count} messages'


_INDEX_NAME = 'memory_index'
_INDEX_SHARE = 0.05
_INDEX_MAX_TOKENS = 1_500


def _index_part(text: str) -> InstructionPart | None:
    return InstructionPart(content=text, dynamic=True, name=_INDEX_NAME) if text else None


def _index_sent(messages: Sequence[ModelMessage]) -> str | None:
    """The page index the last request before the one being sent went out with ('' for none: also when it had no
    instructions at all), or `None` when there is no such request (a new conversation)."""
    last = next((m for m in reversed(messages[:-1]) if isinstance(m, ModelRequest)), None)
    if last is None:
        return None
    start = (last.instructions or '').find(PAGE_INDEX_HEADER)
    if last.instructions is None or start < 0:
        return ''
    end = last.instructions.find('\n\n', start)  # instruction parts are joined by a blank line; the index has none
    return last.instructions[start:] if end < 0 else last.instructions[start:end]


def _stamp_pending_request(ctx: RunContext[Any]) -> None:
    """Give the request about to be sent the run and conversation ids pydantic-ai stamps on it right after the
    `before_model_request` hooks, so the log records it exactly as the history will hold it."""
    last = ctx.messages[-1] if ctx.messages else None
    if isinstance(last, ModelRequest):
        last.run_id = last.run_id or ctx.run_id
        last.conversation_id = last.conversation_id or ctx.conversation_id
