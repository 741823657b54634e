"""Images a tool returns: counted as the provider counts them, so compaction keeps the context under its mark, and
each one archived byte for byte."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mementograph import MementoCompaction, open_store
from mementograph._tokens import TokenCounter

PAGES = 40
HIGH_WATER = 8_000


def screenshot_of(page: int) -> bytes:
    """A 1280 x 800 PNG (~1,366 tokens to the provider; its placeholder in the text counts ~10)."""
    buffer = io.BytesIO()
    Image.new('RGB', (1280, 800), (page * 5, 40, 90)).save(buffer, 'PNG')
    return buffer.getvalue()


async def test_screenshots_a_tool_returns_are_compacted_and_kept(tmp_path: Path) -> None:
    store = open_store(f'sqlite://{tmp_path / "m.db"}')
    counter = TokenCounter()
    sent: list[list[ModelMessage]] = []

    def browse(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(list(messages))
        page = len(sent)
        if page > PAGES:
            return ModelResponse(parts=[TextPart('Every page is checked.')])
        call = ToolCallPart('screenshot', {'page': page}, tool_call_id=f'shot_{page}')
        return ModelResponse(parts=[TextPart(f'Checking page {page}.'), call])

    agent = Agent(FunctionModel(browse), capabilities=[MementoCompaction(store, max_tokens=HIGH_WATER, session_id='s')])

    @agent.tool_plain
    def screenshot(page: int) -> BinaryContent:
        return BinaryContent(screenshot_of(page), media_type='image/png')

    await agent.run('Check all 40 pages of the site.')

    def live_images(request: list[ModelMessage]) -> set[str]:
        return {
            part.tool_call_id
            for message in request
            for part in message.parts
            if isinstance(part, ToolReturnPart) and isinstance(part.content, BinaryContent)
        }

    peak = max(counter.count_messages(request) for request in sent)
    assert peak <= HIGH_WATER * 1.1  # without compaction: ~55,000 tokens to the provider, all 40 images
    live = live_images(sent[-1])
    assert len(live) < 10
    archived: dict[str, bytes] = {}
    for block in store.list_blocks(session_id='s', kind=None):
        for message in store.recover_block(block.id).messages:
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and isinstance(part.content, BinaryContent):
                    archived[part.tool_call_id] = part.content.data
    for page in range(1, PAGES + 1):
        if f'shot_{page}' not in live:
            assert archived[f'shot_{page}'] == screenshot_of(page)
