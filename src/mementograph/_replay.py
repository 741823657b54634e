"""`replay` -- run a recorded transcript through a real pydantic-ai `Agent` and measure what compaction did.

The model is a `FunctionModel` that answers with the recorded assistant turns in order; every recorded tool is
registered as a real tool whose return is the recorded observation for that call. So the run is a real agent run
(capability hooks, tool execution, history handling) whose every byte is known in advance, and the same replay
with and without a compaction capability can be compared request by request.

Each replay works on its own deep copy of the transcript (pydantic-ai stamps and fills in messages as they land in
a run's history). A replay is reproducible: its runs get fixed ids, and what pydantic-ai stamps with the wall clock
gets its recorded time (`_RecordedTimes`), so two replays of one transcript send the same bytes and archive the
same blocks under the same ids. Each replayed reply carries provider-style usage measured in the replay itself
(`input_tokens` = tiktoken count of the request the model received), so strategies that anchor their token
estimate on reported usage (pydantic-ai-harness) see the context they actually sent, not the recorded run's.

`replay_report` is what `mementograph replay` prints: a baseline replay (no capability) and a replay with
`MementoCompaction`, then every evicted block recovered from the store and compared byte for byte with the
session log and with the run's own history, and the transcript's critical facts looked up in the last context the
model received and in the recovered blocks.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering, WrapperCapability
from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextContent,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import AgentDepsT, Tool
from pydantic_ai.usage import RequestUsage, UsageLimits

from ._messages import deserialize_messages, part_text, serialize_messages
from ._tokens import TokenCounter
from ._transcripts import TRANSCRIPT_EPOCH, TranscriptError, load_transcript

if TYPE_CHECKING:
    from pydantic_ai.models import ModelRequestContext

    from .knowledge_graph.memory import Compressor, Fact, Judge
    from .knowledge_graph.store import GraphStore

__all__ = (
    'DEFAULT_BUDGET',
    'DEFAULT_REPLAY_NAMESPACE',
    'ArchiveCheck',
    'ReplayReport',
    'ReplayTrace',
    'TimedCapability',
    'check_archive',
    'facts_present',
    'measure_replay',
    'replay_messages',
    'replay_report',
    'split_transcript',
    'summarize_reports',
    'trajectory_facts',
)

END_TEXT: Final = '[end of recorded transcript]'
DEFAULT_BUDGET: Final = 8_000
DEFAULT_REPLAY_NAMESPACE: Final = 'replay'
"""Namespace replays archive into, so a replay written to a real store never mixes with live agent sessions."""


@dataclass(frozen=True)
class RecordedTurn:
    """One recorded assistant turn and the user input that followed it (when the turn ended the agent's run)."""

    response: ModelResponse
    user_input: tuple[ModelRequest, ...]


def split_transcript(messages: Sequence[ModelMessage]) -> tuple[list[ModelMessage], list[RecordedTurn], dict[str, str]]:
    """The opening requests, the recorded turns in order, and each tool call's recorded return text."""
    first_response = next((i for i, m in enumerate(messages) if isinstance(m, ModelResponse)), len(messages))
    prefix = list(messages[:first_response])
    # tool results alone open nothing: pydantic-ai drops returns of no call and would have nothing to run
    if all(isinstance(part, BaseToolReturnPart) for message in prefix for part in message.parts):
        raise ValueError('the transcript has no opening request (system prompt or user task) before the first reply')
    turns: list[RecordedTurn] = []
    returns: dict[str, str] = {}
    response: ModelResponse | None = None
    pending: list[ModelRequest] = []
    for message in messages[first_response:]:
        if isinstance(message, ModelResponse):
            if response is not None:
                turns.append(RecordedTurn(response, tuple(pending)))
            response, pending = message, []
            continue
        for part in message.parts:
            if isinstance(part, BaseToolReturnPart):
                content = part.content if isinstance(part.content, str) else part_text(part)  # text exactly
                returns.setdefault(part.tool_call_id, content)
        if not any(isinstance(part, BaseToolCallPart | BaseToolReturnPart) for part in message.parts):
            pending.append(message)
    if response is not None:
        turns.append(RecordedTurn(response, tuple(pending)))
    return prefix, turns, returns


class _SerializedCache:
    """Exact bytes of single messages, computed once per message object."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[ModelMessage, bytes]] = {}

    def __call__(self, message: ModelMessage) -> bytes:
        hit = self._cache.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        data = serialize_messages([message])
        self._cache[id(message)] = (message, data)
        return data


@dataclass
class ReplayTrace:
    """What the model received on each request of one replay."""

    requests: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    instructions: list[str | None] = field(default_factory=list[str | None])
    """The instructions each request was sent with (`AgentInfo.instructions`): they come before the messages in
    the prompt, so a change to them breaks a cached prefix as a rewritten message does."""
    tokens: list[int] = field(default_factory=list[int])
    gap_seconds: list[float] = field(default_factory=list[float])
    """Time from one model reply to the next request: tool execution plus every capability hook."""
    final_history: list[ModelMessage] = field(default_factory=list[ModelMessage])
    history: list[ModelMessage] = field(default_factory=list[ModelMessage])
    """With `record_history=True`: every original message of the run in arrival order, before any capability
    rewrote the history -- position `i` is log position `i` of a compacting capability's session."""

    @property
    def peak_tokens(self) -> int:
        return max(self.tokens, default=0)

    @property
    def mean_tokens(self) -> float:
        return sum(self.tokens) / len(self.tokens) if self.tokens else 0.0

    def _messages_stable(self) -> list[bool]:
        """Per consecutive request pair: whether the later one was sent the earlier one's messages unchanged."""
        serialized = _SerializedCache()
        flags: list[bool] = []
        previous = [serialized(m) for m in self.requests[0]] if self.requests else []
        for request in self.requests[1:]:
            current = [serialized(m) for m in request]
            # the request just sent may gain parts (merged tool returns); compare all messages before it
            flags.append(current[: len(previous) - 1] == previous[:-1])
            previous = current
        return flags

    def _instructions_stable(self) -> list[bool]:
        """Per consecutive request pair: whether both were sent the same instructions (all pairs when a trace
        recorded none)."""
        if len(self.instructions) != len(self.requests):
            return [True] * max(len(self.requests) - 1, 0)
        return [old == new for old, new in itertools.pairwise(self.instructions)]

    def _stable_flags(self) -> list[bool]:
        return [m and i for m, i in zip(self._messages_stable(), self._instructions_stable(), strict=True)]

    def stable_transitions(self) -> tuple[int, int]:
        """`(stable, transitions)`: consecutive request pairs whose instructions and earlier messages were sent
        unchanged."""
        flags = self._stable_flags()
        return sum(flags), len(flags)

    def instruction_breaks(self) -> int:
        """Consecutive request pairs whose earlier messages were sent unchanged but whose instructions changed: the
        prefix breaks the instructions alone caused."""
        return sum(m and not i for m, i in zip(self._messages_stable(), self._instructions_stable(), strict=True))

    def cache_prefix_stability(self) -> float:
        """Share of consecutive requests whose instructions and earlier messages were sent unchanged (a cached
        prefix survives)."""
        stable, transitions = self.stable_transitions()
        return stable / transitions if transitions else 1.0

    def compaction_requests(self) -> list[int]:
        """Indices of the requests whose earlier messages changed (a compaction rewrote the history before them)."""
        return [index + 1 for index, stable in enumerate(self._messages_stable()) if not stable]

    def cached_prefix_tokens(self, counter: TokenCounter) -> tuple[int, int]:
        """`(cached, sent)` over requests 2..n: tokens of the longest unchanged message prefix shared with the
        previous request (what a provider's prompt cache could serve; none when the instructions, which come
        first, changed), and tokens sent (messages only, as `tokens`)."""
        serialized = _SerializedCache()
        cached = sent = 0
        same_instructions = iter(self._instructions_stable())
        for previous, current in itertools.pairwise(self.requests):
            if not next(same_instructions):
                sent += counter.count_messages(current)
                continue
            common = 0
            for old, new in zip(previous, current, strict=False):
                if old is not new and serialized(old) != serialized(new):
                    break
                common += 1
            cached += counter.count_messages(current[:common])
            sent += counter.count_messages(current)
        return cached, sent


@dataclass
class _RecordedTimes:
    """The recorded times of a transcript, for the messages and parts pydantic-ai stamps with the wall clock.

    pydantic-ai stamps every request it sends with `now` (a recorded one given back as `message_history` too), and
    every tool return it makes. Those times are serialized with the messages, so they are hashed into the ids of
    the blocks a compaction archives, ids the model's context shows: with the time of the replay in them, figures
    near the high-water mark would differ from one replay to the next. The replay re-enacts the recorded run, so
    it stamps the recorded times instead. Only the replay does: `MementoCompaction` archives what it is given.
    """

    requests: dict[int, tuple[Sequence[object], datetime | None]]
    """The recorded requests given to the agent, by the identity of their parts (a run that starts from a request
    sends a new one with its parts), with their recorded times."""
    returns: dict[str, tuple[datetime | None, datetime]]
    """Per tool call id: the recorded time of the request holding its return, and of the return."""

    @classmethod
    def of(cls, messages: Sequence[ModelMessage], given: Sequence[ModelRequest]) -> _RecordedTimes:
        returns: dict[str, tuple[datetime | None, datetime]] = {}
        for message in messages:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, BaseToolReturnPart):
                        returns.setdefault(part.tool_call_id, (message.timestamp, part.timestamp))
        return cls({id(m.parts): (m.parts, m.timestamp) for m in given}, returns)

    def stamp(self, message: ModelRequest, previous: datetime) -> None:
        """Give `message`, new in the run's history, its recorded time, else `previous` (the time of the message
        before it): a recorded request its own, a request of tool returns that of the recorded returns."""
        recorded = self.requests.get(id(message.parts))
        if recorded is not None and recorded[0] is message.parts:  # the parts are the recorded ones
            message.timestamp = recorded[1] or previous
            return
        calls = [part.tool_call_id for part in message.parts if isinstance(part, BaseToolReturnPart)]
        first = self.returns.get(calls[0]) if calls else None
        when = (first[0] or first[1]) if first is not None else previous
        message.timestamp = when
        for part in message.parts:  # tool returns, retry prompts, prompts a capability enqueued: all made in the run
            if isinstance(part, BaseToolReturnPart) and part.tool_call_id in self.returns:
                part.timestamp = self.returns[part.tool_call_id][1]
            elif hasattr(part, 'timestamp'):
                part.timestamp = when


@dataclass
class _ReplayHook(AbstractCapability[Any]):
    """Outermost hook of a replay: gives the request about to be sent its recorded time (`_RecordedTimes`) before
    any capability logs or archives it, and with a `sink` records every original message as it first appears,
    before any capability edits.

    Messages are matched by identity; memento stubs and micro-compacted messages (new objects made by
    `MementoCompaction`) are recognised by their metadata and skipped, so `sink` is the run's full history.
    """

    times: _RecordedTimes
    sink: list[ModelMessage] | None = None
    seen: dict[int, ModelMessage] = field(default_factory=dict[int, ModelMessage])

    def get_ordering(self) -> CapabilityOrdering | None:
        return CapabilityOrdering(position='outermost')

    def observe(self, messages: Sequence[ModelMessage]) -> None:
        for message in messages:
            if self.seen.get(id(message)) is message:
                continue
            self.seen[id(message)] = message
            if self.sink is not None and not _is_synthetic(message):
                self.sink.append(message)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        # what pydantic-ai stamped: the request it is about to send (the last message), tool returns included
        messages = ctx.messages
        last = messages[-1] if messages else None
        if isinstance(last, ModelRequest) and self.seen.get(id(last)) is not last:
            previous = messages[-2].timestamp if len(messages) > 1 else None
            self.times.stamp(last, previous or TRANSCRIPT_EPOCH)
        self.observe(messages)
        return request_context


def _is_synthetic(message: ModelMessage) -> bool:
    """A message made by `MementoCompaction` (a memento stub, or a request whose parts were micro-compacted)."""
    from .capabilities._layout import MICRO_METADATA, micro_part_id, stub_info

    if stub_info(message) is not None:
        return True
    for part in message.parts:
        if micro_part_id(part) is not None:
            return True
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
            for item in part.content:
                if (
                    isinstance(item, TextContent)
                    and isinstance(item.metadata, dict)
                    and MICRO_METADATA in item.metadata
                ):
                    return True
    return False


@dataclass
class TimedCapability(WrapperCapability[AgentDepsT]):
    """Wraps a capability and records how long each of its `before_model_request` calls took (seconds).

    The list is shared by every per-run copy, so one instance collects the timings of a whole replay.
    """

    seconds: list[float] = field(default_factory=list[float])

    async def before_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        start = time.perf_counter()
        try:
            return await self.wrapped.before_model_request(ctx, request_context)
        finally:
            self.seconds.append(time.perf_counter() - start)


async def replay_messages(
    messages: Sequence[ModelMessage],
    *,
    capabilities: Sequence[AbstractCapability[Any]] = (),
    counter: TokenCounter | None = None,
    record_history: bool = False,
) -> ReplayTrace:
    """Replay `messages` through an `Agent` with `capabilities` and record every request the model received.

    Args:
        messages: The transcript. It is deep-copied first, so replays of one transcript never share objects.
        capabilities: Capabilities of the agent (e.g. a compaction strategy).
        counter: Token counter for `trace.tokens` and for the usage reported with each replayed reply.
        record_history: Also record the run's full, unedited history in `trace.history`.
    """
    counter = counter or TokenCounter()
    transcript = deserialize_messages(serialize_messages(messages))
    prefix, turns, returns = split_transcript(transcript)
    trace = ReplayTrace()
    last_time = next((m.timestamp for m in reversed(transcript) if m.timestamp), TRANSCRIPT_EPOCH)
    end_of_transcript = ModelResponse(parts=[TextPart(END_TEXT)], timestamp=last_time)
    cursor: dict[str, float] = {'next': 0, 'replied_at': 0.0}

    def respond(request_messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if trace.requests:
            trace.gap_seconds.append(time.perf_counter() - cursor['replied_at'])
        tokens = counter.count_messages(request_messages)
        trace.requests.append(list(request_messages))
        trace.instructions.append(info.instructions)
        trace.tokens.append(tokens)
        index = int(cursor['next'])
        cursor['next'] = index + 1
        recorded = turns[index].response if index < len(turns) else end_of_transcript
        # A fresh object (FunctionModel sets model_name and usage on what it is given) with the usage a provider
        # would report for this request.
        usage = RequestUsage(input_tokens=tokens, output_tokens=counter.count_message(recorded))
        reply = replace(recorded, parts=list(recorded.parts), usage=usage)
        cursor['replied_at'] = time.perf_counter()
        return reply

    tool_names = sorted(
        {part.tool_name for turn in turns for part in turn.response.parts if isinstance(part, BaseToolCallPart)}
    )

    def recorded_return(ctx: RunContext[None], **_: Any) -> str:
        return returns.get(ctx.tool_call_id or '', '(no output was recorded for this call)')

    schema = {'type': 'object', 'additionalProperties': True}
    tools = [
        Tool.from_schema(recorded_return, name, 'Replays the recorded result.', schema, takes_ctx=True)
        for name in tool_names
    ]
    given = [m for m in prefix if isinstance(m, ModelRequest)] + [r for turn in turns for r in turn.user_input]
    times = _RecordedTimes.of(transcript, given)
    hook = _ReplayHook(times, trace.history if record_history else None)
    agent: Agent[None, str] = Agent(FunctionModel(respond), tools=tools, capabilities=[hook, *capabilities])
    # fixed ids (pydantic-ai would draw fresh UUIDs), unless the transcript names its conversation
    conversation = next((m.conversation_id for m in reversed(transcript) if m.conversation_id), 'replay')
    taken = {m.run_id for m in transcript}

    # A recorded turn without tool calls ends a run; the user input recorded after it starts the next one.
    history: list[ModelMessage] = prefix
    for number in itertools.count(1):
        run_id = f'replay-{number}'
        while run_id in taken:  # pydantic-ai refuses a run id its history holds
            run_id += "'"
        result = await agent.run(
            message_history=history,
            usage_limits=UsageLimits(request_limit=None, tool_calls_limit=None),
            run_id=run_id,
            conversation_id=conversation,
        )
        history = result.all_messages()
        served = int(cursor['next'])
        if served >= len(turns) or not turns[served - 1].user_input:
            break
        history = [*history, *turns[served - 1].user_input]
    trace.final_history = history
    hook.observe(history)  # what came after the last request (replies, which carry their recorded times)
    return trace


# ------------------------------------------------------------------------------------------------ measurement


def trajectory_facts(messages: Sequence[ModelMessage]) -> list[Fact]:
    """The critical facts of a whole transcript (`critical_facts(render_block(messages))`), unique by text."""
    from .knowledge_graph.memory import critical_facts, render_block

    unique: dict[str, Fact] = {}
    for fact in critical_facts(render_block(messages)):
        unique.setdefault(fact.text, fact)
    return list(unique.values())


_ANSI: Final = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]')


def facts_present(facts: Sequence[Fact], text: str) -> list[bool]:
    """For each fact, whether `text` carries it (`fact_present`: verbatim at word boundaries, exit codes by value).

    Terminal colour codes are removed from `text` first, as `critical_facts` removes them before extracting (a
    coloured `\x1b[1m732 passed\x1b[0m` carries the fact `732 passed`).
    """
    from .knowledge_graph.memory import fact_present

    plain = _ANSI.sub('', text)
    return [fact_present(fact, plain) for fact in facts]


@dataclass(frozen=True)
class ArchiveCheck:
    """One archived block (or micro-compacted part) read back and compared with the run."""

    block_id: str
    kind: str
    first_message: int
    last_message: int
    exact: bool
    """Recovered (hash-checked) messages equal, byte for byte, the session log's messages at
    `[first_message, last_message]` and the run's own history at those positions."""
    problem: str | None
    text: str
    """The recovered messages rendered (`render_block`); empty when recovery failed."""
    retention: float | None = None
    """`fact_retention(block.text, memento.text)` for an evicted block with a memento."""


def _first_difference(left: bytes, right: bytes) -> str:
    """Where two serialized messages first differ, as `path: left != right` (values cut to 60 characters)."""

    def cut(value: object) -> str:
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 60 else text[:57] + '...'

    def walk(a: object, b: object, path: str) -> str | None:
        if type(a) is not type(b):
            return f'{path or "."}: {cut(a)} != {cut(b)}'
        if isinstance(a, dict) and isinstance(b, dict):
            for key in [*a, *(k for k in b if k not in a)]:
                found = walk(a.get(key), b.get(key), f'{path}.{key}')
                if found:
                    return found
            return None
        if isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                return f'{path}: {len(a)} items != {len(b)} items'
            for index, (x, y) in enumerate(zip(a, b, strict=True)):
                found = walk(x, y, f'{path}[{index}]')
                if found:
                    return found
            return None
        return None if a == b else f'{path or "."}: {cut(a)} != {cut(b)}'

    try:
        return walk(json.loads(left), json.loads(right), '') or 'the bytes differ (same JSON value)'
    except ValueError:
        return 'the bytes differ'


def check_archive(
    store: GraphStore, session_id: str, history: Sequence[ModelMessage], *, namespace: str
) -> tuple[list[ArchiveCheck], str | None]:
    """Recover every block and stubbed part of a session and compare it with the log and with `history`.

    Returns the checks and, when the session log and `history` disagree anywhere, what differs (else `None`).
    """
    from .knowledge_graph.memory import fact_retention, render_block
    from .knowledge_graph.store import StoreError

    log: dict[int, bytes] = {}
    for event in store.read_events(session_id, namespace=namespace):
        if event.kind == 'message' and event.message_index is not None:
            log.setdefault(event.message_index, event.payload)
    serialized = _SerializedCache()
    mismatch: str | None = None
    if sorted(log) != list(range(len(log))):
        mismatch = 'the session log has gaps in its message positions'
    else:
        for index in range(min(len(log), len(history))):
            if log[index] != serialized(history[index]):
                difference = _first_difference(log[index], serialized(history[index]))
                mismatch = f'log position {index} differs from the run history ({difference}; log != run)'
                break
    checks: list[ArchiveCheck] = []
    for block in store.list_blocks(namespace=namespace, session_id=session_id, kind=None):
        problem: str | None = None
        text = ''
        try:
            recovered = store.recover_block(block.id, namespace=namespace, session_id=session_id)
        except StoreError as exc:
            problem = f'recovery failed: {type(exc).__name__}: {exc}'
        else:
            text = render_block(recovered.messages)
            positions = range(block.first_message, block.last_message + 1)
            if len(recovered.messages) != len(positions):
                problem = f'{len(recovered.messages)} messages recovered for {len(positions)} log positions'
            for offset, (message, position) in enumerate(zip(recovered.messages, positions, strict=False)):
                if problem is not None:
                    break
                data = serialized(message)
                logged = log.get(position)
                if logged is None:
                    problem = f'log position {position} (message {offset}) is missing'
                elif logged != data:
                    difference = _first_difference(data, logged)
                    problem = f'message {offset} differs from log position {position} ({difference}; block != log)'
                elif position >= len(history):
                    problem = f'message {offset} is beyond the run history ({len(history)} messages)'
                elif serialized(history[position]) != data:
                    difference = _first_difference(data, serialized(history[position]))
                    problem = (
                        f'message {offset} differs from the run at position {position} ({difference}; block != run)'
                    )
        retention: float | None = None
        if block.kind == 'block':
            memento = store.memento_of(block.id, namespace=namespace, session_id=session_id)
            if memento is not None:
                retention = fact_retention(block.text, memento.text)
        checks.append(
            ArchiveCheck(
                block_id=block.id,
                kind=block.kind,
                first_message=block.first_message,
                last_message=block.last_message,
                exact=problem is None,
                problem=problem,
                text=text,
                retention=retention,
            )
        )
    return checks, mismatch


def _share(part: float, whole: float, empty: float = 1.0) -> float:
    return part / whole if whole else empty


@dataclass(frozen=True)
class ReplayReport:
    """What one replay measured (the `mementograph replay` fields, plus the counts they are made of)."""

    source: str
    session_id: str
    budget: int
    messages: int
    """Messages in the transcript."""
    requests: int
    """Model requests of the replay."""
    peak_tokens_baseline: int
    """Largest request of the replay without any capability."""
    peak_tokens: int
    """Largest request with `MementoCompaction`."""
    mean_tokens_baseline: float
    mean_tokens: float
    max_message_tokens: int
    """Largest single message of the run: a peak above the budget is unavoidable when this exceeds it."""
    blocks_evicted: int
    blocks_recovered_exact: int
    parts_stubbed: int
    """Large tool results stubbed by micro-compaction (their messages archived as `part` records)."""
    parts_recovered_exact: int
    retention_blocks: int
    """Evicted blocks that have a memento (the blocks `fact_retention` averages over)."""
    retention_sum: float
    facts_total: int
    facts_in_context_count: int
    facts_available_count: int
    mementos: int
    mementos_verified: int
    stable_transitions: int
    """Consecutive request pairs whose instructions and earlier messages were sent unchanged."""
    transitions: int
    log_matches_history: bool
    problems: tuple[str, ...] = ()
    instruction_breaks: int = 0
    """Of the unstable pairs, those whose messages were unchanged and whose instructions changed (the page index
    after a page closed, when it rewrites the instructions)."""
    seconds: float = 0.0
    llm_tokens: int = 0
    """Tokens an LLM compressor or judge spent on this replay's mementos (0 for the extractive ones)."""

    @property
    def reduction(self) -> float:
        """`1 - peak_tokens / peak_tokens_baseline`."""
        return 1 - self.peak_tokens / self.peak_tokens_baseline if self.peak_tokens_baseline else 0.0

    @property
    def fact_retention(self) -> float:
        """Mean over evicted blocks of `fact_retention(block, memento)` (1.0 when nothing was evicted)."""
        return self.retention_sum / self.retention_blocks if self.retention_blocks else 1.0

    @property
    def facts_in_context(self) -> float:
        """Share of the transcript's critical facts present in the last request the model received."""
        return _share(self.facts_in_context_count, self.facts_total)

    @property
    def facts_available(self) -> float:
        """Share present in the last request or in an archived block that recovered exactly."""
        return _share(self.facts_available_count, self.facts_total)

    @property
    def memento_acceptance(self) -> float:
        """Share of the session's mementos the judge verified (1.0 when there are none)."""
        return _share(self.mementos_verified, self.mementos)

    @property
    def cache_prefix_stability(self) -> float:
        """Share of consecutive requests whose instructions and earlier messages were sent unchanged."""
        return _share(self.stable_transitions, self.transitions)

    @property
    def within_budget(self) -> bool:
        """Peak within 10% of the budget, or of the largest single message when that alone is over the budget (no
        compaction can take a message the model needs below its own size, but the rest must still go)."""
        return self.peak_tokens <= max(self.budget, self.max_message_tokens) * 1.1

    def to_dict(self) -> dict[str, Any]:
        """The contract fields first (the `replay --json` contract), then the counts behind them."""
        return {
            'path': self.source,
            'peak_tokens_baseline': self.peak_tokens_baseline,
            'peak_tokens': self.peak_tokens,
            'reduction': round(self.reduction, 4),
            'blocks_evicted': self.blocks_evicted,
            'blocks_recovered_exact': self.blocks_recovered_exact,
            'fact_retention': round(self.fact_retention, 4),
            'facts_in_context': round(self.facts_in_context, 4),
            'facts_available': round(self.facts_available, 4),
            'memento_acceptance': round(self.memento_acceptance, 4),
            'cache_prefix_stability': round(self.cache_prefix_stability, 4),
            'session_id': self.session_id,
            'budget': self.budget,
            'messages': self.messages,
            'requests': self.requests,
            'instruction_breaks': self.instruction_breaks,
            'mean_tokens_baseline': round(self.mean_tokens_baseline, 1),
            'mean_tokens': round(self.mean_tokens, 1),
            'max_message_tokens': self.max_message_tokens,
            'within_budget': self.within_budget,
            'parts_stubbed': self.parts_stubbed,
            'parts_recovered_exact': self.parts_recovered_exact,
            'facts_total': self.facts_total,
            'mementos': self.mementos,
            'mementos_verified': self.mementos_verified,
            'log_matches_history': self.log_matches_history,
            'problems': list(self.problems),
            'seconds': round(self.seconds, 3),
            'llm_tokens': self.llm_tokens,
        }


def measure_replay(
    source: str,
    transcript: Sequence[ModelMessage],
    baseline: ReplayTrace,
    trace: ReplayTrace,
    *,
    store: GraphStore,
    session_id: str,
    budget: int,
    namespace: str = DEFAULT_REPLAY_NAMESPACE,
    counter: TokenCounter | None = None,
    seconds: float = 0.0,
) -> ReplayReport:
    """Compare a `MementoCompaction` replay (`trace`, recorded with `record_history=True`) with its baseline."""
    from .knowledge_graph.memory import render_block

    counter = counter or TokenCounter()
    checks, mismatch = check_archive(store, session_id, trace.history, namespace=namespace)
    blocks = [c for c in checks if c.kind == 'block']
    parts = [c for c in checks if c.kind != 'block']
    facts = trajectory_facts(transcript)
    last_context = render_block(trace.requests[-1]) if trace.requests else ''
    in_context = facts_present(facts, last_context)
    archived = '\n'.join(c.text for c in checks if c.exact)
    in_archive = facts_present(facts, archived) if archived else [False] * len(facts)
    mementos = store.list_mementos(namespace=namespace, session_id=session_id)
    stable, transitions = trace.stable_transitions()
    problems = [f'{c.block_id}: {c.problem}' for c in checks if c.problem]
    if mismatch:
        problems.insert(0, mismatch)
    retained = [c.retention for c in blocks if c.retention is not None]
    return ReplayReport(
        source=source,
        session_id=session_id,
        budget=budget,
        messages=len(transcript),
        requests=len(trace.requests),
        peak_tokens_baseline=baseline.peak_tokens,
        peak_tokens=trace.peak_tokens,
        mean_tokens_baseline=baseline.mean_tokens,
        mean_tokens=trace.mean_tokens,
        max_message_tokens=max((counter.count_message(m) for m in trace.history or baseline.final_history), default=0),
        blocks_evicted=len(blocks),
        blocks_recovered_exact=sum(c.exact for c in blocks),
        parts_stubbed=len(parts),
        parts_recovered_exact=sum(c.exact for c in parts),
        retention_blocks=len(retained),
        retention_sum=sum(retained),
        facts_total=len(facts),
        facts_in_context_count=sum(in_context),
        facts_available_count=sum(a or b for a, b in zip(in_context, in_archive, strict=True)),
        mementos=len(mementos),
        mementos_verified=sum(m.verified for m in mementos),
        stable_transitions=stable,
        transitions=transitions,
        log_matches_history=mismatch is None,
        problems=tuple(problems),
        seconds=seconds,
        instruction_breaks=trace.instruction_breaks(),
    )


def session_base(path: str | Path) -> str:
    """The session id a replayed file is archived under (its stem), before `fresh_session_id` makes it unique."""
    return Path(path).name.removesuffix('.json').removesuffix('.traj')


def fresh_session_id(store: GraphStore, base: str, *, namespace: str = DEFAULT_REPLAY_NAMESPACE) -> str:
    """`base`, or `base.2`, `base.3`, ... -- the first id the store holds nothing under (so a replay never continues
    an earlier session of a persistent store)."""
    candidate, number = base, 1
    while store.last_message_index(candidate, namespace=namespace) >= 0 or store.list_blocks(
        namespace=namespace, session_id=candidate, kind=None
    ):
        number += 1
        candidate = f'{base}.{number}'
    return candidate


async def replay_report(
    source: str | Path | Sequence[ModelMessage],
    *,
    store: GraphStore,
    budget: int = DEFAULT_BUDGET,
    session_id: str | None = None,
    namespace: str = DEFAULT_REPLAY_NAMESPACE,
    counter: TokenCounter | None = None,
    name: str | None = None,
    compressor: Compressor | None = None,
    judge: Judge | Literal['default'] | None = 'default',
    settings: Mapping[str, Any] | None = None,
) -> ReplayReport:
    """Replay a transcript without and with `MementoCompaction(store, max_tokens=budget)` and measure it.

    Args:
        source: A transcript file (see `load_transcript`) or its messages.
        store: Where the capability archives; the session is created fresh (see `fresh_session_id`).
        budget: The capability's high-water mark in tokens.
        session_id: Base of the session id; default: the file stem (`replay` for messages).
        namespace: Namespace of the session.
        counter: Token counter (tiktoken `o200k_base` by default).
        name: How the report names the source (default: the path).
        compressor: The capability's compressor (default: extractive), e.g. `LLMCompressor(model)`.
        judge: The capability's judge (default: the rubric), e.g. `CombinedJudge(llm=LLMJudge(model))`.
        settings: More `MementoCompaction` settings, e.g. `{'memento_share': 0.5, 'low_water': 0.4}`
            (`archive_at_run_end` is off unless given: the report measures what compaction archived).

    Raises:
        TranscriptError: The file cannot be read or is malformed, or holds no replayable transcript.
    """
    from .capabilities import MementoCompaction
    from .knowledge_graph.memory import usage_meter

    if budget <= 0:
        raise ValueError(f'the budget must be a positive number of tokens, not {budget}')
    started = time.perf_counter()
    if isinstance(source, str | Path):
        path = Path(source)
        transcript = load_transcript(path)
        label = name or str(path)
        base = session_id or session_base(path)
    else:
        transcript = list(source)
        label = name or '<messages>'
        base = session_id or 'replay'
    counter = counter or TokenCounter()
    try:
        baseline = await replay_messages(transcript, counter=counter)
    except ValueError as exc:
        raise TranscriptError(f'{label}: {exc}') from exc
    sid = fresh_session_id(store, base, namespace=namespace)
    capability: MementoCompaction[Any] = MementoCompaction(
        store,
        max_tokens=budget,
        session_id=sid,
        namespace=namespace,
        compressor=compressor,
        judge=judge,
        # what compaction archived is what the report measures (blocks evicted, their mementos)
        **{'archive_at_run_end': False, **(settings or {})},
    )
    with usage_meter() as meter:
        trace = await replay_messages(transcript, capabilities=[capability], counter=counter, record_history=True)
    report = measure_replay(
        label,
        transcript,
        baseline,
        trace,
        store=store,
        session_id=sid,
        budget=budget,
        namespace=namespace,
        counter=counter,
        seconds=time.perf_counter() - started,
    )
    return replace(report, llm_tokens=meter.tokens)


def summarize_reports(reports: Sequence[ReplayReport]) -> dict[str, Any]:
    """The `total` object: peaks are the largest, `reduction` the mean of the files' reductions, counts are
    summed, and every share is pooled over what it counts (blocks, facts, mementos, request transitions)."""
    count = len(reports)
    retention_blocks = sum(r.retention_blocks for r in reports)
    facts = sum(r.facts_total for r in reports)
    mementos = sum(r.mementos for r in reports)
    transitions = sum(r.transitions for r in reports)
    return {
        'files': count,
        'peak_tokens_baseline': max((r.peak_tokens_baseline for r in reports), default=0),
        'peak_tokens': max((r.peak_tokens for r in reports), default=0),
        'reduction': round(sum(r.reduction for r in reports) / count, 4) if count else 0.0,
        'blocks_evicted': sum(r.blocks_evicted for r in reports),
        'blocks_recovered_exact': sum(r.blocks_recovered_exact for r in reports),
        'fact_retention': round(_share(round(sum(r.retention_sum for r in reports), 9), retention_blocks), 4),
        'facts_in_context': round(_share(sum(r.facts_in_context_count for r in reports), facts), 4),
        'facts_available': round(_share(sum(r.facts_available_count for r in reports), facts), 4),
        'memento_acceptance': round(_share(sum(r.mementos_verified for r in reports), mementos), 4),
        'cache_prefix_stability': round(_share(sum(r.stable_transitions for r in reports), transitions), 4),
        'budget': reports[0].budget if reports else None,
        'instruction_breaks': sum(r.instruction_breaks for r in reports),
        'mean_peak_tokens_baseline': round(sum(r.peak_tokens_baseline for r in reports) / count, 1) if count else 0.0,
        'mean_peak_tokens': round(sum(r.peak_tokens for r in reports) / count, 1) if count else 0.0,
        'within_budget': sum(r.within_budget for r in reports),
        'parts_stubbed': sum(r.parts_stubbed for r in reports),
        'parts_recovered_exact': sum(r.parts_recovered_exact for r in reports),
        'facts_total': facts,
        'mementos': mementos,
        'mementos_verified': sum(r.mementos_verified for r in reports),
        'log_matches_history': all(r.log_matches_history for r in reports),
        'problems': sum(len(r.problems) for r in reports),
        'seconds': round(sum(r.seconds for r in reports), 3),
        'llm_tokens': sum(r.llm_tokens for r in reports),
    }
