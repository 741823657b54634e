"""`_layout` -- where each live message sits in the session's full record, and the stubs that stand in for
archived content.

Evicted blocks are replaced in place, so the live history is an order-preserving compression of the session log:
a memento stub covers a known range of log positions and every other message is the next position. The ranges
travel in the stubs' (model-invisible) metadata, so a history saved with `all_messages()` and passed back as
`message_history` in a later run maps onto the same log positions without asking the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from pydantic_ai.messages import (
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    TextContent,
    UserPromptPart,
)

__all__ = (
    'MEMENTO_METADATA',
    'MICRO_METADATA',
    'Slot',
    'StubInfo',
    'layout',
    'make_stub',
    'micro_part_id',
    'stub_info',
)

MEMENTO_METADATA: Final = 'mementograph.memento.v1'
"""Key of the metadata that marks a memento stub (on its `TextContent`, which survives request merging)."""

MICRO_METADATA: Final = 'mementograph.micro.v1'
"""Key of the metadata that marks a tool return stubbed by micro-compaction."""

_HARNESS_PIN: Final = 'pydantic-ai-harness.compaction.pin.v1'


@dataclass(frozen=True)
class StubInfo:
    """What a memento stub stands for."""

    target_id: str
    """The id `recover_block` takes: the block id, or the memento id of a memento of mementos."""
    memento_id: str
    first_message: int
    last_message: int
    """Inclusive log range the stub covers."""
    level: int
    archived_tokens: int

    def to_metadata(self) -> dict[str, Any]:
        return {
            MEMENTO_METADATA: {
                'target_id': self.target_id,
                'memento_id': self.memento_id,
                'first_message': self.first_message,
                'last_message': self.last_message,
                'level': self.level,
                'archived_tokens': self.archived_tokens,
            }
        }


def stub_info(message: ModelMessage) -> StubInfo | None:
    """The stub a message is, or `None` for an original message."""
    if not isinstance(message, ModelRequest) or len(message.parts) != 1:
        return None
    part = message.parts[0]
    if not isinstance(part, UserPromptPart) or isinstance(part.content, str) or len(part.content) != 1:
        return None
    item = part.content[0]
    if not isinstance(item, TextContent) or not isinstance(item.metadata, dict):
        return None
    data = item.metadata.get(MEMENTO_METADATA)
    if not isinstance(data, dict):
        return None
    try:
        return StubInfo(
            target_id=str(data['target_id']),
            memento_id=str(data['memento_id']),
            first_message=int(data['first_message']),
            last_message=int(data['last_message']),
            level=int(data['level']),
            archived_tokens=int(data['archived_tokens']),
        )
    except (KeyError, TypeError, ValueError):
        return None


def make_stub(info: StubInfo, memento_text: str, timestamp: datetime | None) -> ModelRequest:
    """The message that replaces archived content: deterministic text that names what `recover_block` takes.

    No counters or clocks appear in the text, so the same eviction renders the same prompt on every run;
    the timestamp is the covered content's own (when known), never "now".
    """
    span = f'messages {info.first_message}-{info.last_message}'
    kind = 'memento' if info.level == 1 else f'memento (level {info.level})'
    header = (
        f'[{kind} of {span}, {info.archived_tokens} tokens archived; '
        f'the full text: recover_block("{info.target_id}")]'
    )
    content = TextContent(f'{header}\n{memento_text}', metadata=info.to_metadata())
    if timestamp is None:
        part = UserPromptPart([content])
    else:
        part = UserPromptPart([content], timestamp=timestamp)
    return ModelRequest(parts=[part], timestamp=timestamp)


def micro_part_id(part: object) -> str | None:
    """The archive id of a micro-compacted tool return, or `None`."""
    if not isinstance(part, BaseToolReturnPart) or not isinstance(part.metadata, dict):
        return None
    value = part.metadata.get(MICRO_METADATA)
    return value if isinstance(value, str) else None


def is_pinned(message: ModelMessage) -> bool:
    """A message holding a part pinned with pydantic-ai-harness's `pin()`: kept verbatim, never archived away."""
    if not isinstance(message, ModelRequest):
        return False
    for part in message.parts:
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
            if any(isinstance(item, TextContent) and item.metadata == _HARNESS_PIN for item in part.content):
                return True
    return False


@dataclass(frozen=True)
class Slot:
    """One live message: a stub, or an original with its log position."""

    index: int
    log_index: int
    """Log position of an original message; for a stub, its first covered position."""
    stub: StubInfo | None
    pinned: bool


def layout(messages: Sequence[ModelMessage]) -> tuple[list[Slot], int]:
    """Slots of a live history and the log position the next new message gets."""
    slots: list[Slot] = []
    position = 0
    for index, message in enumerate(messages):
        info = stub_info(message)
        if info is not None:
            slots.append(Slot(index=index, log_index=info.first_message, stub=info, pinned=False))
            position = max(position, info.last_message + 1)
        else:
            slots.append(Slot(index=index, log_index=position, stub=None, pinned=is_pinned(message)))
            position += 1
    return slots, position
