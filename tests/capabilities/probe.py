"""A probing agent for the privacy tests: a real `Agent` on a `FunctionModel` that reads large files until blocks
are evicted, then calls the memory tools with whatever ids a test gives it (or finds in its own context)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mementograph._messages import message_text

Args = dict[str, Any] | Callable[[list[ModelMessage]], dict[str, Any]]
_POINTER = re.compile(r'recover_block\("((?:blk|mem)_[0-9a-f]+)"\)')


def module_body(marker: str, step: int) -> str:
    """A ~1.5k-token file whose every line names `marker` (so recall can look for it)."""
    return '\n'.join(
        f'def {marker.lower()}_{step}_{i}(x):  # {marker} module {step} line {i}\n    return x * {i}' for i in range(60)
    )


def own_pointer(messages: Sequence[ModelMessage]) -> dict[str, Any]:
    """`recover_block` arguments for the first memento stub in the model's own context."""
    for message in messages:
        match = _POINTER.search(message_text(message))
        if match:
            return {'block_id': match.group(1)}
    raise AssertionError('no memento stub in the context: nothing was evicted')


@dataclass
class ProbeModel:
    """One call per `lead` probe `(tool, args)`, `steps` calls of `read_file`, one call per probe, a final answer.

    `fail_at` raises at that model call; `hang_at` sets `hanging` and waits forever there (to be cancelled).
    """

    marker: str
    steps: int = 8
    probes: list[tuple[str, Args]] = field(default_factory=list[tuple[str, Args]])
    lead: list[tuple[str, Args]] = field(default_factory=list[tuple[str, Args]])
    fail_at: int | None = None
    hang_at: int | None = None
    hanging: asyncio.Event = field(default_factory=asyncio.Event)
    made: int = 0
    seen: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        call = self.made
        self.made += 1
        if call == self.fail_at:
            raise RuntimeError('model provider down')
        if call == self.hang_at:
            self.hanging.set()
            await asyncio.Event().wait()
        if call < len(self.lead):
            return self._probe(self.lead[call], messages, f'lead_{call}')
        call -= len(self.lead)
        if call < self.steps:
            args = {'path': f'src/{self.marker.lower()}/module_{call}.py'}
            return ModelResponse(
                parts=[ToolCallPart('read_file', args, tool_call_id=f'{self.marker.lower()}_read_{call}')]
            )
        probe = call - self.steps
        if probe < len(self.probes):
            return self._probe(self.probes[probe], messages, f'probe_{probe}')
        return ModelResponse(parts=[TextPart(f'{self.marker}: all {self.steps} modules read.')])

    def _probe(self, probe: tuple[str, Args], messages: list[ModelMessage], name: str) -> ModelResponse:
        tool, args = probe
        resolved = args(messages) if callable(args) else args
        call_id = f'{self.marker.lower()}_{name}'  # unique across runs sharing a history
        return ModelResponse(parts=[ToolCallPart(tool, resolved, tool_call_id=call_id)])


def probe_agent(model: ProbeModel, capabilities: Sequence[object], **kwargs: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=list(capabilities), **kwargs)  # type: ignore[arg-type]

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        return module_body(model.marker, int(path.rsplit('_', 1)[1].split('.')[0]))

    return agent


def tool_returns(model: ProbeModel, tool: str) -> list[str]:
    """What each of this model's calls of `tool` returned, in order, as the model was shown it (a later compaction
    may have archived it out of the final history; a history carried over from another run holds other calls)."""
    returns: dict[str, str] = {}
    prefix = f'{model.marker.lower()}_'
    for messages in model.seen:
        for message in messages:
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and part.tool_name == tool and part.tool_call_id.startswith(prefix):
                    returns.setdefault(part.tool_call_id, str(part.content))
    return list(returns.values())
