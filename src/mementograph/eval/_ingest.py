"""`_ingest` -- dialogue into the real engine and store: blocks, mementos, `MENTIONS`, pages, the session log.

A benchmark conversation is replayed the way the capability would archive it: turns become pydantic-ai messages
(`user` -> `ModelRequest(UserPromptPart)`, `assistant` -> `ModelResponse(TextPart)`, each stamped with its time),
`segment_blocks` cuts them into blocks at turn boundaries, `MementoEngine` (extractive compressor, rubric judge,
refine loop) writes each block's memento, `mentions_for` links blocks and mementos to their entities, and
`pages_for_eviction` groups blocks into pages. One `Eviction` per segment (a LoCoMo session, a LongMemEval
session) goes to the store in one transaction. Blocks never cross a segment: sessions on different days are
different conversations.

Nothing here reads a benchmark's answers or evidence: ingest sees only the dialogue.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Literal, TypeVar

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from .._tokens import TokenCounter
from .._transcripts import TRANSCRIPT_EPOCH
from ..knowledge_graph import (
    DEFAULT_NAMESPACE,
    BlockRecord,
    Eviction,
    MementoRecord,
    Mention,
    SessionEvent,
    memento_id_for,
)
from ..knowledge_graph.entities import mentions_for
from ..knowledge_graph.memory import (
    BlockInput,
    CombinedJudge,
    CompressionError,
    ExtractiveCompressor,
    Judge,
    LLMCompressor,
    LLMJudge,
    MementoEngine,
    MementoResult,
    RubricJudge,
    render_block,
    segment_blocks,
)
from ..knowledge_graph.recall import PagePolicy, pages_for_eviction
from ..knowledge_graph.store import GraphStore, open_store

__all__ = (
    'DIALOGUE_MAX_TOKENS',
    'DIALOGUE_MIN_TOKENS',
    'Dialogue',
    'DialogueIngestor',
    'EngineSpec',
    'IngestedBlock',
    'IngestedDialogue',
    'Progress',
    'Segment',
    'Turn',
    'default_workers',
    'distinct_errors',
    'ingest_all',
)

DIALOGUE_MIN_TOKENS: Final = 100
"""Blocks of dialogue close at the first turn boundary past this size: two to four chat turns, or one
question with its answer. Small blocks keep a recalled block about one thing."""
DIALOGUE_MAX_TOKENS: Final = 1_500


Progress = Callable[[str], None]
"""Told what a long evaluation is doing (`ingested 3/10 dialogues`, `ranking 1,345 questions`)."""


@dataclass(frozen=True)
class EngineSpec:
    """Which models write and judge the mementos at ingest, by name, so that worker processes build the same engine.

    The defaults need no model: the extractive compressor and the rubric judge, what the capability uses by default.
    With a model the benchmark measures what that model's mementos keep (answer retention) and find (recall).
    """

    compressor: str | None = None
    """A pydantic-ai model name for `LLMCompressor` (e.g. `'openai:gpt-4o-mini'`); `None`: extractive."""
    judge: str | None = None
    """A model name for `CombinedJudge(RubricJudge(), LLMJudge(model))`; `None`: the rubric alone."""
    extractive: tuple[tuple[str, float], ...] = ()
    """Settings of the extractive compressor, as `(field, value)` pairs (e.g. `(('dialogue_stretch', 2.0),)`), to
    measure them; ignored with `compressor`."""

    def engine(self, counter: TokenCounter) -> MementoEngine:
        judge: Judge = RubricJudge(counter=counter)
        if self.judge is not None:
            judge = CombinedJudge(rubric=RubricJudge(counter=counter), llm=LLMJudge(self.judge))
        compressor = (
            ExtractiveCompressor(counter=counter, **dict(self.extractive))  # type: ignore[arg-type]
            if self.compressor is None
            else LLMCompressor(self.compressor)
        )
        return MementoEngine(compressor=compressor, judge=judge, counter=counter)

    @property
    def names(self) -> tuple[str, str]:
        """`(compressor, judge)` as a report names them."""
        compressor = 'extractive' if self.compressor is None else f'llm:{self.compressor}'
        return compressor, 'rubric' if self.judge is None else f'rubric+llm:{self.judge}'


@dataclass(frozen=True)
class Turn:
    """One dialogue turn; `text` already carries the speaker's name when the dialogue has named speakers."""

    turn_id: str
    role: Literal['user', 'assistant']
    text: str
    timestamp: datetime | None = None


@dataclass(frozen=True)
class Segment:
    """A run of turns no block may cross (one sitting: a LoCoMo session, a LongMemEval session)."""

    segment_id: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Dialogue:
    """A whole conversation, archived as one store session."""

    session_id: str
    segments: tuple[Segment, ...]


@dataclass(frozen=True)
class IngestedBlock:
    """Where a block came from (its turns) and what stands in for it."""

    block_id: str
    session_id: str
    segment_id: str
    turn_ids: tuple[str, ...]
    tokens: int
    memento_id: str | None
    """`None` when the engine could not make a memento shorter than the block (it would stay in context)."""
    memento_text: str
    memento_tokens: int
    verified: bool


@dataclass(frozen=True)
class IngestedDialogue:
    """What one dialogue became, and the exact writes (replayable into another store)."""

    session_id: str
    blocks: tuple[IngestedBlock, ...]
    evictions: tuple[Eviction, ...]
    turns: int
    dialogue_tokens: int
    usage_tokens: int = 0
    """LLM tokens the engine spent on this dialogue's mementos (0 for the extractive compressor and rubric)."""
    memento_errors: tuple[str, ...] = ()
    """Why blocks have no memento, one entry per such block (a failing compressor: a model's errors)."""


def _message(turn: Turn, index: int) -> ModelMessage:
    """The message of a turn, stamped with its time (or a fixed epoch plus its index): never the clock, so the
    same dialogue always serializes to the same bytes and the same block ids."""
    stamp = turn.timestamp or TRANSCRIPT_EPOCH + timedelta(seconds=index)
    if turn.role == 'user':
        return ModelRequest(parts=[UserPromptPart(turn.text, timestamp=stamp)])
    return ModelResponse(parts=[TextPart(turn.text)], timestamp=stamp)


@dataclass
class DialogueIngestor:
    """Archives dialogues through the engine into stores.

    The engine's work is the expensive part; `ingest` returns the writes it made so the same dialogue can be
    written into other stores with `replay` (e.g. one store per LongMemEval question, plus a pooled one).
    """

    counter: TokenCounter = field(default_factory=TokenCounter)
    engine: MementoEngine | None = None
    """Default: `MementoEngine(ExtractiveCompressor(), RubricJudge())` sharing `counter`."""
    namespace: str = DEFAULT_NAMESPACE
    min_tokens: int = DIALOGUE_MIN_TOKENS
    max_tokens: int = DIALOGUE_MAX_TOKENS
    page_policy: PagePolicy = field(default_factory=PagePolicy)
    log_messages: bool = True
    """Also append every message to the session's event log (the full record), as the capability does."""

    def __post_init__(self) -> None:
        if self.engine is None:
            self.engine = EngineSpec().engine(self.counter)

    async def ingest(self, store: GraphStore, dialogue: Dialogue) -> IngestedDialogue:
        """Segment, compress, link and write `dialogue` as session `dialogue.session_id` of `store`."""
        assert self.engine is not None
        session_id = dialogue.session_id
        messages: list[ModelMessage] = []
        turn_ids: list[str] = []
        evictions: list[Eviction] = []
        ingested: list[IngestedBlock] = []
        tokens_total = 0
        usage_tokens = 0
        errors: list[str] = []
        for segment in dialogue.segments:
            start = len(messages)
            segment_messages = [_message(turn, start + i) for i, turn in enumerate(segment.turns)]
            messages.extend(segment_messages)
            turn_ids.extend(turn.turn_id for turn in segment.turns)
            if not segment_messages:
                continue
            cuts = segment_blocks(
                segment_messages, self.counter, min_tokens=self.min_tokens, max_tokens=self.max_tokens
            )
            inputs: list[tuple[int, int, BlockInput]] = []
            for cut in cuts:
                chunk = tuple(segment_messages[cut.start : cut.end])
                text = render_block(chunk)
                inputs.append((start + cut.start, start + cut.end, BlockInput(chunk, text, cut.tokens)))
                tokens_total += cut.tokens
            results = await asyncio.gather(*(self._memento(block) for _, _, block in inputs))
            blocks: list[BlockRecord] = []
            mementos: list[MementoRecord] = []
            mentions: list[Mention] = []
            for (first, end, block_input), outcome in zip(inputs, results, strict=True):
                result = None
                if isinstance(outcome, str):
                    errors.append(outcome)
                else:
                    result = outcome
                stamp = segment.turns[first - start].timestamp
                block = BlockRecord.from_messages(
                    block_input.messages,
                    session_id=session_id,
                    namespace=self.namespace,
                    seq=first,
                    tokens=block_input.tokens,
                    text=block_input.text,
                    started_at=stamp.isoformat() if stamp else None,
                )
                blocks.append(block)
                mentions.extend(mentions_for(block.id, block.text))
                memento: MementoRecord | None = None
                if result is not None:
                    usage_tokens += result.usage_tokens
                    memento = result.as_record(
                        id=memento_id_for(self.namespace, session_id, [block.id]),
                        session_id=session_id,
                        namespace=self.namespace,
                        summarizes=(block.id,),
                    )
                    mementos.append(memento)
                    mentions.extend(mentions_for(memento.id, memento.text))
                ingested.append(
                    IngestedBlock(
                        block_id=block.id,
                        session_id=session_id,
                        segment_id=segment.segment_id,
                        turn_ids=tuple(turn_ids[first:end]),
                        tokens=block.tokens,
                        memento_id=None if memento is None else memento.id,
                        memento_text='' if memento is None else memento.text,
                        memento_tokens=0 if memento is None else memento.tokens,
                        verified=False if memento is None else memento.verified,
                    )
                )
            pages = pages_for_eviction(
                store,
                session_id=session_id,
                namespace=self.namespace,
                blocks=blocks,
                mementos=mementos,
                mentions=mentions,
                policy=self.page_policy,
            )
            events: list[SessionEvent] = []
            if self.log_messages:
                events = [
                    SessionEvent.for_message(message, session_id=session_id, namespace=self.namespace, index=start + i)
                    for i, message in enumerate(segment_messages)
                ]
            events.append(
                SessionEvent(
                    session_id=session_id,
                    namespace=self.namespace,
                    kind='auto',
                    payload=b'{"source": "eval ingest"}',
                    sha256='',
                    block_ids=tuple(block.id for block in blocks),
                )
            )
            eviction = Eviction(
                session_id=session_id,
                namespace=self.namespace,
                blocks=tuple(blocks),
                mementos=tuple(mementos),
                mentions=tuple(mentions),
                pages=pages,
                events=tuple(events),
            )
            store.write_eviction(eviction)
            evictions.append(eviction)
        return IngestedDialogue(
            session_id=session_id,
            blocks=tuple(ingested),
            evictions=tuple(evictions),
            turns=len(messages),
            dialogue_tokens=tokens_total,
            usage_tokens=usage_tokens,
            memento_errors=tuple(errors),
        )

    async def _memento(self, block: BlockInput) -> MementoResult | str:
        """The block's memento, or why there is none (the compressor failed: the block is archived without one)."""
        assert self.engine is not None
        try:
            return await self.engine.make_memento(block)
        except CompressionError as exc:
            return str(exc)

    @staticmethod
    def replay(store: GraphStore, ingested: IngestedDialogue) -> None:
        """Write an already ingested dialogue into another store (same records, same ids)."""
        for eviction in ingested.evictions:
            store.write_eviction(eviction)


_WORKER: tuple[tuple[str, int, int, EngineSpec], DialogueIngestor] | None = None
"""This process's ingestor and the settings it was built with."""
_LOOP: tuple[int, asyncio.AbstractEventLoop] | None = None
_T = TypeVar('_T')


def _run_in_process_loop(work: Coroutine[Any, Any, _T]) -> _T:
    """Run `work` on this process's one event loop. A model's HTTP client (pydantic-ai caches one per provider)
    keeps connections bound to the loop that opened them, so a new loop per dialogue would fail on the second.
    Keyed by pid: a forked worker must not run its parent's loop."""
    global _LOOP
    pid = os.getpid()
    if _LOOP is None or _LOOP[0] != pid or _LOOP[1].is_closed():
        _LOOP = (pid, asyncio.new_event_loop())
    return _LOOP[1].run_until_complete(work)


def _ingest_in_worker(dialogue: Dialogue, settings: tuple[str, int, int, EngineSpec]) -> IngestedDialogue:
    global _WORKER
    if _WORKER is None or _WORKER[0] != settings:
        namespace, min_tokens, max_tokens, spec = settings
        counter = TokenCounter()
        ingestor = DialogueIngestor(
            counter=counter,
            engine=spec.engine(counter),
            namespace=namespace,
            min_tokens=min_tokens,
            max_tokens=max_tokens,
            log_messages=False,
        )
        _WORKER = (settings, ingestor)
    store = open_store('memory://')
    try:
        return _run_in_process_loop(_WORKER[1].ingest(store, dialogue))
    finally:
        store.close()


def ingest_all(
    dialogues: Sequence[Dialogue],
    *,
    workers: int = 1,
    namespace: str = DEFAULT_NAMESPACE,
    min_tokens: int = DIALOGUE_MIN_TOKENS,
    max_tokens: int = DIALOGUE_MAX_TOKENS,
    engine: EngineSpec | None = None,
    progress: Progress | None = None,
) -> list[IngestedDialogue]:
    """The engine's work for many dialogues, in `workers` processes, each dialogue in a private in-memory store.

    A dialogue is its own session, so what it becomes (blocks, mementos, mentions, pages) does not depend on other
    sessions: the returned writes are exactly what `DialogueIngestor.ingest` would write, ready for `replay`.
    The session log is left out (`log_messages=False`): benchmarks do not read it. `engine` names the models
    that write and judge the mementos (default: none, the extractive compressor and the rubric); `progress` hears
    `ingested N/M dialogues` as they finish (with a model, ingest takes minutes).
    """
    settings = (namespace, min_tokens, max_tokens, engine or EngineSpec())
    out: list[IngestedDialogue] = []

    def done(dialogue: IngestedDialogue) -> None:
        out.append(dialogue)
        if progress is not None:
            progress(f'ingested {len(out)}/{len(dialogues)} dialogues')

    if workers <= 1 or len(dialogues) < 2:
        for dialogue in dialogues:
            done(_ingest_in_worker(dialogue, settings))
        return out
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context('fork' if 'fork' in multiprocessing.get_all_start_methods() else 'spawn')
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        for ingested in pool.map(_ingest_in_worker, dialogues, [settings] * len(dialogues), chunksize=4):
            done(ingested)
    return out


def distinct_errors(errors: Sequence[str], limit: int = 5) -> list[str]:
    """The first `limit` distinct errors, in the order they came: a failing model repeats one error per block."""
    return list(dict.fromkeys(errors))[:limit]


def default_workers() -> int:
    """Processes for ingest: the CPUs this process may use, at most 4."""
    import os

    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))
