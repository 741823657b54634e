"""Builders for realistic pydantic-ai histories used across tests."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from pydantic_ai.embeddings import EmbeddingModel, EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from mementograph._messages import deserialize_messages, serialize_messages

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def ts(i: int) -> datetime:
    return T0 + timedelta(seconds=i)


def user(text: str, i: int = 0) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text, timestamp=ts(i))], timestamp=ts(i))


def assistant(text: str, i: int = 0) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)], timestamp=ts(i), model_name='function:test')


def call(tool: str, args: dict[str, object], call_id: str, i: int = 0, thought: str = '') -> ModelResponse:
    parts: list[TextPart | ToolCallPart] = [TextPart(thought)] if thought else []
    parts.append(ToolCallPart(tool, args, tool_call_id=call_id))
    return ModelResponse(parts=parts, timestamp=ts(i), model_name='function:test')


def ret(tool: str, content: object, call_id: str, i: int = 0) -> ModelRequest:
    return ModelRequest(parts=[ToolReturnPart(tool, content, tool_call_id=call_id, timestamp=ts(i))], timestamp=ts(i))


def rich_history() -> list[ModelMessage]:
    """System prompt, unicode, a tool pair with nested args, binary and URL parts.

    Returned as pydantic-ai itself loads a history (`BinaryContent` of an image loads as `BinaryImage`, URLs get
    their media type): equality with recovered messages is then exact, not up to that canonical form.
    """
    return deserialize_messages(serialize_messages(_rich_history()))


def _rich_history() -> list[ModelMessage]:
    return [
        ModelRequest(
            parts=[
                SystemPromptPart('You are a careful engineer.', timestamp=ts(0)),
                UserPromptPart(
                    [
                        'Fix the failing test — ünïcödé ✓ 日本語 🚀',
                        BinaryContent(b'\x89PNG\r\n\x1a\n\x00\xff', media_type='image/png'),
                        ImageUrl('https://example.com/a.png'),
                    ],
                    timestamp=ts(0),
                ),
            ],
            timestamp=ts(0),
        ),
        call('bash', {'command': 'pytest tests/test_x.py -q', 'env': {'A': [1, 2.5, None]}}, 'call_1', 1, 'run tests'),
        ret('bash', '1 failed, 2 passed in 0.12s\nAssertionError: 3 != 4', 'call_1', 2),
        call('read_file', {'path': 'src/pkg/mod.py'}, 'call_2', 3),
        ret('read_file', {'lines': ['def f(x):', '    return x + 1'], 'size': 27}, 'call_2', 4),
        assistant('Fixed `f` in src/pkg/mod.py: x + 1 → x + 2; pytest exits 0.', 5),
    ]


def session_history(turns: int, *, prefix: str = 'turn') -> list[ModelMessage]:
    """`turns` user/tool/assistant cycles."""
    messages: list[ModelMessage] = []
    i = 0
    for turn in range(turns):
        messages.append(user(f'{prefix} {turn}: check file src/mod_{turn}.py', i))
        messages.append(call('bash', {'command': f'cat src/mod_{turn}.py'}, f'c{turn}', i + 1))
        messages.append(ret('bash', f'value_{turn} = {turn * 7} # ok\n' * 20, f'c{turn}', i + 2))
        messages.append(assistant(f'src/mod_{turn}.py defines value_{turn} = {turn * 7}.', i + 3))
        i += 4
    return messages


class HashedWords(EmbeddingModel):
    """A deterministic bag-of-words embedding (each word hashed to one of 64 axes): exact overlap, no meaning."""

    @property
    def model_name(self) -> str:
        return 'hashed-words'

    @property
    def system(self) -> str:
        return 'test'

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        texts, _ = self.prepare_embed(inputs, settings)
        rows = []
        for text in texts:
            row = [0.0] * 64
            for word in re.findall(r'\w+', text.lower()):
                row[int(hashlib.sha256(word.encode()).hexdigest(), 16) % 64] += 1.0
            rows.append(row)
        return EmbeddingResult(
            rows, inputs=texts, input_type=input_type, model_name='hashed-words', provider_name='test'
        )
