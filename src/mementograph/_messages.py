"""`_messages` -- exact serialization and plain-text rendering of pydantic-ai messages.

Every layer (token counting, segmentation, critical facts, entities, full-text search) reads messages through
these functions, so they all agree on what a message "says".
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence

from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    BinaryContent,
    FileUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    UserPromptPart,
)
from pydantic_core import PydanticSerializationError, ValidationError

__all__ = (
    'args_text',
    'deserialize_messages',
    'message_text',
    'messages_sha256',
    'part_text',
    'serialize_messages',
    'tool_call_ids',
    'tool_return_ids',
    'without_surrogates',
)


_SURROGATE = re.compile('[\ud800-\udfff]')
_REPLACEMENT = '\ufffd'.encode()
_ESCAPED_SURROGATE = re.compile(r'\\u[dD][89a-fA-F][0-9a-fA-F]{2}')


def serialize_messages(messages: Sequence[ModelMessage]) -> bytes:
    """The exact pydantic-ai JSON serialization of `messages`: the bytes that are archived and hashed.

    A string holding a lone surrogate (text decoded with `surrogateescape`, e.g. a binary file read by a tool) has
    no UTF-8 form, so pydantic-ai cannot write it; those messages are written as the same JSON with every non-ASCII
    character escaped, which keeps the surrogate (`\\udcff`) and reads back to equal messages.

    Raises:
        ValueError: the messages cannot be written so that they read back equal (pydantic silently replaces a
            lone surrogate in a dictionary key with U+FFFD): the caller archives nothing rather than something else.
    """
    try:
        data = ModelMessagesTypeAdapter.dump_json(list(messages))
    except PydanticSerializationError as exc:
        python = ModelMessagesTypeAdapter.dump_python(list(messages), mode='json')
        data = json.dumps(python, ensure_ascii=True, separators=(',', ':')).encode('ascii')
        problem = str(exc)
    else:
        if _REPLACEMENT not in data:  # nothing was replaced: the usual case needs no check
            return data
        problem = 'a character was replaced'
    if deserialize_messages(data) != list(messages):
        raise ValueError(
            f'these messages cannot be archived exactly ({problem}): a dictionary key holds a lone surrogate'
        )
    return data


def deserialize_messages(data: bytes | str) -> list[ModelMessage]:
    """Inverse of `serialize_messages`."""
    try:
        return ModelMessagesTypeAdapter.validate_json(data)
    except ValidationError:
        if not _ESCAPED_SURROGATE.search(data if isinstance(data, str) else data.decode('utf-8', 'replace')):
            raise
        # pydantic's JSON parser rejects an escaped lone surrogate; Python's keeps it
        return ModelMessagesTypeAdapter.validate_python(json.loads(data))


def without_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD: text derived from messages (rendered blocks, mementos,
    entities, search text) must be valid UTF-8 for the stores; the archived messages keep the originals."""
    return text if text.isascii() else _SURROGATE.sub('\ufffd', text)


def messages_sha256(data: bytes) -> str:
    """Hex sha256 of serialized messages; checked on every recovery."""
    return hashlib.sha256(data).hexdigest()


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, BinaryContent):
        return f'[binary {content.media_type}, {len(content.data)} bytes]'
    if isinstance(content, FileUrl):
        return f'[{type(content).__name__} {content.url}]'
    if isinstance(content, list | tuple):
        return '\n'.join(_content_text(item) for item in content)
    text = getattr(content, 'content', None)
    if isinstance(text, str):
        return text
    if content is None:
        return ''
    try:
        return json.dumps(content, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(content)


def part_text(part: object) -> str:
    """What a part says, as plain text (tool calls as `name(args)`, binary parts as a short placeholder), lone
    surrogates replaced (`without_surrogates`)."""
    return without_surrogates(_part_text(part))


def _part_text(part: object) -> str:
    if isinstance(part, SystemPromptPart | UserPromptPart | TextPart | ThinkingPart):
        return _content_text(part.content)
    if isinstance(part, BaseToolCallPart):
        return f'{part.tool_name}({args_text(part)})'
    if isinstance(part, BaseToolReturnPart):
        return _content_text(part.content)
    if isinstance(part, RetryPromptPart):
        return part.model_response()
    return _content_text(getattr(part, 'content', None))


def args_text(part: BaseToolCallPart) -> str:
    """A tool call's arguments as compact JSON (`args_as_json_str`); arguments holding a lone surrogate, which
    pydantic cannot write, are written by `json` instead (non-ASCII as is, the surrogate too)."""
    try:
        return part.args_as_json_str()
    except PydanticSerializationError:
        return json.dumps(part.args_as_dict(), ensure_ascii=False, separators=(',', ':'))


def message_text(message: ModelMessage) -> str:
    """All parts of a message as plain text, one part per line."""
    texts = (part_text(part) for part in message.parts)
    return '\n'.join(text for text in texts if text)


def tool_call_ids(message: ModelMessage) -> set[str]:
    """Ids of the tool calls a response makes."""
    if not isinstance(message, ModelResponse):
        return set()
    return {part.tool_call_id for part in message.parts if isinstance(part, BaseToolCallPart)}


def tool_return_ids(message: ModelMessage) -> set[str]:
    """Ids of the tool calls a request answers (returns and retry prompts for a tool)."""
    if not isinstance(message, ModelRequest):
        return set()
    ids: set[str] = set()
    for part in message.parts:
        if isinstance(part, BaseToolReturnPart) or (isinstance(part, RetryPromptPart) and part.tool_name is not None):
            ids.add(part.tool_call_id)
    return ids


def iter_texts(messages: Iterable[ModelMessage]) -> Iterable[str]:
    """`message_text` of each message."""
    return (message_text(message) for message in messages)
