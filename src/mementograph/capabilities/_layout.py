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
from typing import Any, Final, Literal

from pydantic_ai.messages import (
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextContent,
    TextPart,
    UserPromptPart,
)

__all__ = (
    'MEMENTO_METADATA',
    'MICRO_METADATA',
    'Slot',
    'StubInfo',
    'layout',
    'make_stub',
    'micro_id_of',
    'micro_part_id',
    'micro_part_of',
    'named_ids',
    'stub_info',
    'stub_shape',
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


def _info_from(data: object) -> StubInfo | None:
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


def stub_info(message: ModelMessage) -> StubInfo | None:
    """The stub a message belongs to, or `None` for an original message."""
    if isinstance(message, ModelResponse):
        return _info_from((message.metadata or {}).get(MEMENTO_METADATA))
    if not message.parts:
        return None
    found: StubInfo | None = None
    for part in message.parts:
        if not isinstance(part, UserPromptPart) or isinstance(part.content, str) or len(part.content) != 1:
            return None
        item = part.content[0]
        if not isinstance(item, TextContent) or not isinstance(item.metadata, dict):
            return None
        found = _info_from(item.metadata.get(MEMENTO_METADATA))
        if found is None:
            return None
    return found


StubShape = Literal['request', 'response', 'request-response', 'response-request']
"""Which messages a stub is made of: each of its ends the opposite of the message beside it, so the history keeps
alternating requests and responses and pydantic-ai never merges a stub into its neighbours."""


def stub_shape(messages: Sequence[ModelMessage], start: int, end: int) -> StubShape:
    """The stub shape that replaces `messages[start:end]`.

    Beside a response, a stub's end is a request; beside a request, a response: pydantic-ai merges consecutive
    requests of a history, and a history holds some where the stubbed messages begin or end (a structured-output
    run ends with a request, and the next run's prompt follows it). A stub merged into an original request would
    be neither a stub nor an original, and the history would no longer map onto the log. At the history's ends the
    stub mirrors what it replaces.
    """
    if start > 0:
        opens_with_request = not isinstance(messages[start - 1], ModelRequest)
    else:
        opens_with_request = isinstance(messages[start], ModelRequest)
    if end < len(messages):
        closes_with_request = not isinstance(messages[end], ModelRequest)
    else:
        closes_with_request = isinstance(messages[end - 1], ModelRequest)
    if opens_with_request:
        return 'request' if closes_with_request else 'request-response'
    return 'response-request' if closes_with_request else 'response'


def make_stub(
    info: StubInfo, memento_text: str, timestamp: datetime | None, shape: StubShape = 'request'
) -> list[ModelMessage]:
    """The messages that replace archived content: deterministic text that names what `recover_block` takes.

    No counters or clocks appear in the text, so the same eviction renders the same prompt on every run;
    the timestamp is the covered content's own (when known), never "now". The memento is user-voice text
    (a `ModelRequest`) when the shape has a request; the response half of a two-message stub is a fixed note
    (named `mementograph` so pydantic-ai never merges it with a neighbouring response).
    """
    span = f'messages {info.first_message}-{info.last_message}'
    kind = 'memento' if info.level == 1 else f'memento (level {info.level})'
    header = (
        f'[{kind} of {span}, {info.archived_tokens} tokens archived; the full text: recover_block("{info.target_id}")]'
    )
    metadata = info.to_metadata()

    def request(text: str) -> ModelRequest:
        content = [TextContent(text, metadata=metadata)]
        part = UserPromptPart(content) if timestamp is None else UserPromptPart(content, timestamp=timestamp)
        return ModelRequest(parts=[part], timestamp=timestamp)

    def response(text: str) -> ModelResponse:
        if timestamp is None:
            return ModelResponse(parts=[TextPart(text)], model_name='mementograph', metadata=metadata)
        return ModelResponse(parts=[TextPart(text)], model_name='mementograph', metadata=metadata, timestamp=timestamp)

    full = f'{header}\n{memento_text}'
    if shape == 'request':
        return [request(full)]
    if shape == 'response':
        return [response(full)]
    note = f'[{span} archived]'
    if shape == 'request-response':
        return [request(full), response(note)]
    return [response(note), request(full)]


def micro_part_id(part: object) -> str | None:
    """The archive id of a micro-compacted tool return, or `None`."""
    if not isinstance(part, BaseToolReturnPart) or not isinstance(part.metadata, dict):
        return None
    value = part.metadata.get(MICRO_METADATA)
    return value if isinstance(value, str) else None


def micro_id_of(part: object) -> str | None:
    """The archive id a micro-compacted part names: a stubbed tool return, or a binary item's placeholder."""
    found = micro_part_id(part)
    if found is not None:
        return found
    if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
        for item in part.content:
            if isinstance(item, TextContent) and isinstance(item.metadata, dict):
                value = item.metadata.get(MICRO_METADATA)
                if isinstance(value, str):
                    return value
    return None


def micro_part_of(message: ModelMessage) -> str | None:
    """The archive id of a micro-compacted part of `message` (its first), or `None`."""
    return next((pid for part in message.parts if (pid := micro_id_of(part)) is not None), None)


def named_ids(messages: Sequence[ModelMessage]) -> set[str]:
    """The archive ids the stubs of a history name: what its model was told `recover_block` takes."""
    ids: set[str] = set()
    for message in messages:
        info = stub_info(message)
        if info is not None:
            ids.update((info.target_id, info.memento_id))
        ids.update(pid for part in message.parts if (pid := micro_id_of(part)) is not None)
    return ids


def is_pinned(message: ModelMessage) -> bool:
    """A message holding a part pinned with pydantic-ai-harness's `pin()`: kept verbatim, never archived away."""
    if not isinstance(message, ModelRequest):
        return False
    return any(
        isinstance(part, UserPromptPart)
        and not isinstance(part.content, str)
        and any(isinstance(item, TextContent) and item.metadata == _HARNESS_PIN for item in part.content)
        for part in message.parts
    )


@dataclass(frozen=True)
class Slot:
    """One live message: a stub, or an original with its log position."""

    index: int
    log_index: int
    """Log position of an original message; for a stub, its first covered position."""
    stub: StubInfo | None
    pinned: bool


def layout(
    messages: Sequence[ModelMessage], *, start: int = 0, slots: Sequence[Slot] = (), position: int = 0
) -> tuple[list[Slot], int]:
    """Slots of a live history and the log position the next new message gets.

    `start`, `slots` and `position` continue an earlier layout of `messages[:start]`, so a grown history is laid
    out by reading only its new messages.
    """
    out = list(slots[:start])
    for index in range(start, len(messages)):
        message = messages[index]
        info = stub_info(message)
        if info is not None:
            out.append(Slot(index=index, log_index=info.first_message, stub=info, pinned=False))
            position = max(position, info.last_message + 1)
        else:
            out.append(Slot(index=index, log_index=position, stub=None, pinned=is_pinned(message)))
            position += 1
    return out, position
