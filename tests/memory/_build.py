"""Small builders for pydantic-ai histories in the memory tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from mementograph._tokens import TokenCounter
from mementograph.knowledge_graph.memory import BlockInput

T0 = datetime(2025, 6, 1, tzinfo=UTC)


def ts(i: int = 0) -> datetime:
    return T0 + timedelta(seconds=i)


def system(text: str) -> ModelRequest:
    return ModelRequest(parts=[SystemPromptPart(text, timestamp=ts())], timestamp=ts())


def user(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text, timestamp=ts())], timestamp=ts())


def say(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)], timestamp=ts(), model_name='test')


def bash(command: str, call_id: str, thought: str = '') -> ModelResponse:
    parts: list[TextPart | ToolCallPart] = [TextPart(thought)] if thought else []
    parts.append(ToolCallPart('bash', {'command': command}, tool_call_id=call_id))
    return ModelResponse(parts=parts, timestamp=ts(), model_name='test')


def calls(*specs: tuple[str, str]) -> ModelResponse:
    """One response with parallel calls: (tool, call_id) pairs."""
    parts = [ToolCallPart(tool, {'arg': call_id}, tool_call_id=call_id) for tool, call_id in specs]
    return ModelResponse(parts=list(parts), timestamp=ts(), model_name='test')


def returns(*specs: tuple[str, str, str]) -> ModelRequest:
    """One request with tool returns: (tool, call_id, content)."""
    parts = [ToolReturnPart(tool, content, tool_call_id=call_id, timestamp=ts()) for tool, call_id, content in specs]
    return ModelRequest(parts=list(parts), timestamp=ts())


def observation(code: int, output: str, call_id: str) -> ModelRequest:
    return returns(('bash', call_id, f'<returncode>{code}</returncode>\n<output>\n{output}\n</output>'))


def block_of(messages: list[ModelMessage], counter: TokenCounter | None = None) -> BlockInput:
    return BlockInput.from_messages(messages, counter or TokenCounter())


def debugging_block(counter: TokenCounter | None = None) -> BlockInput:
    """A realistic debugging block: a failing test run, a finding, a fix, a passing run."""
    log = '\n'.join(f'tests/test_calc.py::test_case_{i} PASSED' for i in range(40))
    messages: list[ModelMessage] = [
        user('The calculator adds wrong. Fix `add` in src/calc.py so that tests/test_calc.py passes.'),
        bash('pytest tests/test_calc.py -q', 'c1', thought='THOUGHT: Let me run the tests first.'),
        observation(
            1,
            f'{log}\nFAILED tests/test_calc.py::test_add - AssertionError: assert -1 == 5\n'
            '=================== 1 failed, 40 passed in 0.12s ===================',
            'c1',
        ),
        bash(
            'grep -n "def add" src/calc.py',
            'c2',
            thought='THOUGHT: The test `test_add` fails with 1 failed, 40 passed. The bug is in `add()`.',
        ),
        observation(0, '12:def add(a, b):', 'c2'),
        bash(
            "sed -i '13s/return a - b/return a + b/' src/calc.py && pytest tests/test_calc.py -q",
            'c3',
            thought=(
                'THOUGHT: Line 13 computes `a - b` instead of `a + b`; the root cause is a wrong operator. '
                'I will fix it with sed and rerun the tests.'
            ),
        ),
        observation(0, f'{log}\n=================== 41 passed in 0.10s ===================', 'c3'),
        say('The fix works: all 41 tests pass after changing line 13 of src/calc.py to `return a + b`.'),
    ]
    return block_of(messages, counter)
