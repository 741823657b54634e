"""`replay` -- run a recorded transcript through a real pydantic-ai `Agent` and measure what compaction did.

The model is a `FunctionModel` that answers with the recorded assistant turns in order; every recorded tool is
registered as a real tool whose return is the recorded observation for that call. So the run is a real agent run
(capability hooks, tool execution, history handling) whose every byte is known in advance, and the same replay
with and without a compaction capability can be compared request by request.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import Tool
from pydantic_ai.usage import UsageLimits

from ._messages import part_text, serialize_messages
from ._tokens import TokenCounter

__all__ = ('ReplayTrace', 'replay_messages', 'split_transcript')

END_TEXT = '[end of recorded transcript]'


@dataclass(frozen=True)
class RecordedTurn:
    """One recorded assistant turn and the user input that followed it (when the turn ended the agent's run)."""

    response: ModelResponse
    user_input: tuple[ModelRequest, ...]


def split_transcript(messages: Sequence[ModelMessage]) -> tuple[list[ModelMessage], list[RecordedTurn], dict[str, str]]:
    """The opening requests, the recorded turns in order, and each tool call's recorded return text."""
    first_response = next((i for i, m in enumerate(messages) if isinstance(m, ModelResponse)), len(messages))
    prefix = list(messages[:first_response])
    if not prefix:
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
                returns.setdefault(part.tool_call_id, part_text(part))
        if not any(isinstance(part, BaseToolCallPart | BaseToolReturnPart) for part in message.parts):
            pending.append(message)
    if response is not None:
        turns.append(RecordedTurn(response, tuple(pending)))
    return prefix, turns, returns


def _ends_run(response: ModelResponse) -> bool:
    return not any(isinstance(part, BaseToolCallPart) for part in response.parts)


@dataclass
class ReplayTrace:
    """What the model received on each request of one replay."""

    requests: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    tokens: list[int] = field(default_factory=list[int])
    gap_seconds: list[float] = field(default_factory=list[float])
    """Time from one model reply to the next request: tool execution plus every capability hook."""
    final_history: list[ModelMessage] = field(default_factory=list[ModelMessage])

    @property
    def peak_tokens(self) -> int:
        return max(self.tokens, default=0)

    @property
    def mean_tokens(self) -> float:
        return sum(self.tokens) / len(self.tokens) if self.tokens else 0.0

    def cache_prefix_stability(self) -> float:
        """Share of consecutive requests whose earlier messages were sent unchanged (a cached prefix survives)."""
        if len(self.requests) < 2:
            return 1.0
        stable = 0
        previous = [serialize_messages([m]) for m in self.requests[0]]
        for request in self.requests[1:]:
            current = [serialize_messages([m]) for m in request]
            # the request just sent may gain parts (merged tool returns); compare all messages before it
            if current[: len(previous) - 1] == previous[:-1]:
                stable += 1
            previous = current
        return stable / (len(self.requests) - 1)


async def replay_messages(
    messages: Sequence[ModelMessage],
    *,
    capabilities: Sequence[AbstractCapability[Any]] = (),
    counter: TokenCounter | None = None,
) -> ReplayTrace:
    """Replay `messages` through an `Agent` with `capabilities` and record every request the model received."""
    counter = counter or TokenCounter()
    prefix, turns, returns = split_transcript(messages)
    trace = ReplayTrace()
    cursor: dict[str, float] = {'next': 0, 'replied_at': 0.0}

    def respond(request_messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if trace.requests:
            trace.gap_seconds.append(time.perf_counter() - cursor['replied_at'])
        trace.requests.append(list(request_messages))
        trace.tokens.append(counter.count_messages(request_messages))
        index = int(cursor['next'])
        cursor['next'] = index + 1
        reply = turns[index].response if index < len(turns) else ModelResponse(parts=[TextPart(END_TEXT)])
        cursor['replied_at'] = time.perf_counter()
        return reply

    tool_names = sorted(
        {part.tool_name for turn in turns for part in turn.response.parts if isinstance(part, BaseToolCallPart)}
    )

    def recorded(ctx: RunContext[None], **_: Any) -> str:
        return returns.get(ctx.tool_call_id or '', '(no output was recorded for this call)')

    schema = {'type': 'object', 'additionalProperties': True}
    tools = [Tool.from_schema(recorded, name, 'Replays the recorded result.', schema, takes_ctx=True) for name in tool_names]
    agent: Agent[None, str] = Agent(FunctionModel(respond), tools=tools, capabilities=list(capabilities))

    # A recorded turn without tool calls ends a run; the user input recorded after it starts the next one.
    history: list[ModelMessage] = prefix
    while True:
        result = await agent.run(
            message_history=history, usage_limits=UsageLimits(request_limit=None, tool_calls_limit=None)
        )
        history = result.all_messages()
        served = int(cursor['next'])
        if served >= len(turns) or not turns[served - 1].user_input:
            break
        history = [*history, *turns[served - 1].user_input]
    trace.final_history = history
    return trace
