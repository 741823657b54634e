"""A scripted tool-using agent (FunctionModel) for end-to-end tests: real Agent, real tools, real store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.usage import RequestUsage

from mementograph._messages import message_text


def file_body(step: int) -> str:
    lines = [f'def handler_{step}_{i}(x):  # src/app/module_{step}.py line {i}\n    return x * {i}' for i in range(60)]
    return '\n'.join(lines)


@dataclass
class ScriptedModel:
    """Calls `read_file` then `run_tests` for each step, then answers; records what each request contained."""

    steps: int = 12
    extra_calls: list[ToolCallPart] = field(default_factory=list[ToolCallPart])
    """Calls made (in order) after the scripted steps, before the final answer."""
    made: int = 0
    seen: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    tool_names: list[list[str]] = field(default_factory=list[list[str]])
    infos: list[AgentInfo] = field(default_factory=list[AgentInfo])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        self.tool_names.append(sorted(t.name for t in info.function_tools))
        self.infos.append(info)
        calls = self.made  # its own count: evicted tool returns no longer appear in `messages`
        self.made += 1
        usage = RequestUsage(input_tokens=sum(len(message_text(m)) // 4 for m in messages), output_tokens=20)
        total_scripted = self.steps * 2
        if calls < total_scripted:
            step, phase = divmod(calls, 2)
            if phase == 0:
                call = ToolCallPart('read_file', {'path': f'src/app/module_{step}.py'}, tool_call_id=f'read_{step}')
            else:
                call = ToolCallPart(
                    'run_tests', {'target': f'tests/test_module_{step}.py'}, tool_call_id=f'test_{step}'
                )
            return ModelResponse(parts=[TextPart(f'Step {step}: checking module_{step}.'), call], usage=usage)
        extra = calls - total_scripted
        if extra < len(self.extra_calls):
            return ModelResponse(parts=[self.extra_calls[extra]], usage=usage)
        return ModelResponse(parts=[TextPart(f'All {self.steps} modules pass; exit code 0.')], usage=usage)


async def _stream(
    model: Callable[[list[ModelMessage], AgentInfo], ModelResponse], messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """The same scripted replies, streamed (listeners of capability events make a run stream)."""
    response = model(messages, info)
    for index, part in enumerate(response.parts):
        if isinstance(part, TextPart):
            yield part.content
        elif isinstance(part, ToolCallPart):
            yield {
                index: DeltaToolCall(
                    name=part.tool_name, json_args=part.args_as_json_str(), tool_call_id=part.tool_call_id
                )
            }


def streaming_model(
    model: Callable[[list[ModelMessage], AgentInfo], ModelResponse], model_name: str | None = None
) -> FunctionModel:
    """`model` as a `FunctionModel` that answers a streamed request the same way as a plain one (named
    `model_name`, which picks the encoding its tokens are counted with)."""
    return FunctionModel(
        model, stream_function=lambda messages, info: _stream(model, messages, info), model_name=model_name
    )


def scripted_agent(model: ScriptedModel, capabilities: list[object], **kwargs: object) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(streaming_model(model), capabilities=capabilities, **kwargs)  # type: ignore[arg-type]

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        step = int(path.rsplit('_', 1)[1].split('.')[0])
        return file_body(step)

    @agent.tool_plain
    def run_tests(target: str) -> str:
        """Run a test file."""
        return f'$ pytest {target} -q\n3 passed in 0.21s\nexit code 0'

    return agent


def stub_texts(messages: list[ModelMessage]) -> list[str]:
    from mementograph.capabilities._layout import stub_info

    return [message_text(m) for m in messages if stub_info(m) is not None]


def is_original(message: ModelMessage) -> bool:
    from mementograph.capabilities._layout import stub_info

    return stub_info(message) is None


Factory = Callable[..., Agent[None, str]]
_ = (UserPromptPart,)
