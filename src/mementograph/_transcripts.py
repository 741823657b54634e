"""`_transcripts` -- load recorded agent transcripts as pydantic-ai messages.

Three formats are read, recognised by their shape (never by the file name):

- **mini-swe-agent** trajectories (`*.traj.json`, `trajectory_format: mini-swe-agent-1`): an object with a
  `messages` list of OpenAI-chat dicts, where the assistant writes one fenced bash command and the next user
  message is the observation `<returncode>N</returncode><output>...</output>`.
- **OpenAI-chat** JSON lists (`role`, `content`, optional `tool_calls` / `tool_call_id`), or an object holding
  such a list under `messages`.
- **pydantic-ai** messages JSON (`ModelMessagesTypeAdapter`), returned exactly as stored.

The bash text protocol is turned into real tool pairs by default (`ToolCallPart('bash', {'command': ...})` answered
by `ToolReturnPart('bash', observation)`, ids `call_<index>`) so that everything downstream (tool-pair-safe
segmentation, recovery, replay through an `Agent`) sees the same structure a live tool-calling agent produces.
Timestamps are a fixed epoch plus the message index, so two loads of one file serialize to the same bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final, cast

from pydantic import ValidationError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

__all__ = (
    'TRANSCRIPT_EPOCH',
    'TranscriptError',
    'load_transcript',
    'messages_from_chat',
    'parse_transcript',
    'split_bash_action',
)

TRANSCRIPT_EPOCH: Final = datetime(2025, 1, 1, tzinfo=UTC)
"""Timestamp of message 0 of every loaded transcript; message `i` is stamped `TRANSCRIPT_EPOCH + i` seconds."""

BASH_TOOL: Final = 'bash'

_BASH_FENCE = re.compile(r'```(?:bash|sh|shell)[ \t]*\n(.*?)\n?```', re.DOTALL)


class TranscriptError(ValueError):
    """A transcript could not be read: the message names the file and the position (line/column or message index)."""


def split_bash_action(text: str) -> tuple[str, str] | None:
    """Split an assistant message of the bash text protocol into `(thought, command)`.

    Returns `None` unless the message holds exactly one fenced bash block: mini-swe-agent rejects any other count
    with a format error and runs nothing, so such a message is not an action.
    """
    matches = list(_BASH_FENCE.finditer(text))
    if len(matches) != 1:
        return None
    match = matches[0]
    thought = (text[: match.start()].rstrip() + '\n\n' + text[match.end() :].strip()).strip()
    return thought, match.group(1)


def _stamp(index: int) -> datetime:
    return TRANSCRIPT_EPOCH + timedelta(seconds=index)


def _content(raw: object, where: str) -> str:
    if raw is None:
        return ''
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):  # OpenAI content parts: keep the text ones, in order
        texts: list[str] = []
        for item in cast(list[object], raw):
            if isinstance(item, Mapping):
                text = cast(Mapping[str, object], item).get('text')
                if isinstance(text, str):
                    texts.append(text)
            elif isinstance(item, str):
                texts.append(item)
        return '\n'.join(texts)
    raise TranscriptError(f'{where}: content must be a string or a list of parts, not {type(raw).__name__}')


def _tool_calls(raw: object, where: str, index: int) -> list[ToolCallPart]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise TranscriptError(f'{where}: tool_calls must be a list')
    parts: list[ToolCallPart] = []
    for n, call in enumerate(cast(list[object], raw)):
        if not isinstance(call, Mapping):
            raise TranscriptError(f'{where}: tool_calls[{n}] must be an object')
        call_map = cast(Mapping[str, object], call)
        function = call_map.get('function', call_map)
        if not isinstance(function, Mapping):
            raise TranscriptError(f'{where}: tool_calls[{n}].function must be an object')
        function_map = cast(Mapping[str, object], function)
        name = function_map.get('name')
        if not isinstance(name, str) or not name:
            raise TranscriptError(f'{where}: tool_calls[{n}] has no function name')
        args = function_map.get('arguments')
        if not (args is None or isinstance(args, str | dict)):
            raise TranscriptError(f'{where}: tool_calls[{n}].arguments must be a JSON string or an object')
        call_id = call_map.get('id')
        tool_call_id = call_id if isinstance(call_id, str) and call_id else f'call_{index}_{n}'
        parts.append(ToolCallPart(name, cast('str | dict[str, object] | None', args), tool_call_id=tool_call_id))
    return parts


def messages_from_chat(
    chat: Sequence[object], *, source: str = '<chat>', bash_tools: bool = True
) -> list[ModelMessage]:
    """Convert OpenAI-chat dicts (as in mini-swe-agent trajectories) to pydantic-ai messages.

    Args:
        chat: The `messages` list: dicts with `role` and `content` (and `tool_calls` / `tool_call_id`).
        source: Names the input in error messages (usually the file path).
        bash_tools: Turn the bash text protocol (an assistant message with exactly one fenced bash command followed
            by a user message) into a `ToolCallPart`/`ToolReturnPart` pair. With `False` the text is kept as it
            was: the command stays in the assistant's `TextPart` and the observation is a `UserPromptPart`.

    Raises:
        TranscriptError: A message is not an object, has an unknown role, or malformed content or tool calls.
    """
    messages: list[ModelMessage] = []
    pending_request: list[ModelRequestPart] = []
    pending_bash: str | None = None  # tool_call_id of a bash action awaiting its observation
    call_names: dict[str, str] = {}

    def flush() -> None:
        if pending_request:
            first = pending_request[0]
            stamp = first.timestamp if isinstance(first, SystemPromptPart | UserPromptPart | ToolReturnPart) else None
            messages.append(ModelRequest(parts=list(pending_request), timestamp=stamp))
            pending_request.clear()

    for index, raw in enumerate(chat):
        where = f'{source}: message {index}'
        if not isinstance(raw, Mapping):
            raise TranscriptError(f'{where}: expected an object with "role" and "content", got {type(raw).__name__}')
        item = cast(Mapping[str, object], raw)
        role = item.get('role')
        content = _content(item.get('content'), where)
        stamp = _stamp(index)
        if role in ('system', 'developer'):
            pending_request.append(SystemPromptPart(content, timestamp=stamp))
        elif role == 'user':
            if pending_bash is not None:
                pending_request.append(ToolReturnPart(BASH_TOOL, content, tool_call_id=pending_bash, timestamp=stamp))
                pending_bash = None
            else:
                pending_request.append(UserPromptPart(content, timestamp=stamp))
        elif role == 'tool':
            call_id = item.get('tool_call_id')
            if not isinstance(call_id, str) or not call_id:
                raise TranscriptError(f'{where}: a tool message needs a "tool_call_id"')
            name = item.get('name')
            tool_name = name if isinstance(name, str) and name else call_names.get(call_id, 'tool')
            pending_request.append(ToolReturnPart(tool_name, content, tool_call_id=call_id, timestamp=stamp))
        elif role == 'assistant':
            flush()
            if pending_bash is not None:  # an action that was never answered stays a call without a return
                pending_bash = None
            parts: list[ModelResponsePart] = []
            calls = _tool_calls(item.get('tool_calls'), where, index)
            action = split_bash_action(content) if bash_tools and not calls else None
            next_item = chat[index + 1] if index + 1 < len(chat) else None
            answered = isinstance(next_item, Mapping) and cast(Mapping[str, object], next_item).get('role') == 'user'
            if action is not None and answered:
                thought, command = action
                if thought:
                    parts.append(TextPart(thought))
                pending_bash = f'call_{index}'
                parts.append(ToolCallPart(BASH_TOOL, {'command': command}, tool_call_id=pending_bash))
            else:
                if content:
                    parts.append(TextPart(content))
                parts.extend(calls)
                call_names.update((call.tool_call_id, call.tool_name) for call in calls)
            messages.append(ModelResponse(parts=parts or [TextPart('')], timestamp=stamp, model_name='transcript'))
        else:
            raise TranscriptError(f'{where}: unknown role {role!r}')
    flush()
    return messages


def parse_transcript(data: str | bytes, *, source: str = '<transcript>', bash_tools: bool = True) -> list[ModelMessage]:
    """Parse a transcript from JSON text; see the module docstring for the formats.

    Raises:
        TranscriptError: Invalid JSON (with line and column), an unrecognised shape, or a malformed message.
    """
    try:
        doc: object = json.loads(data)
    except json.JSONDecodeError as exc:
        raise TranscriptError(f'{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}') from exc
    except UnicodeDecodeError as exc:
        raise TranscriptError(f'{source}: not UTF-8 text (byte {exc.start})') from exc
    except RecursionError as exc:  # json gives no position for this one
        raise TranscriptError(f'{source}: invalid JSON: lists or objects nested too deeply to read') from exc
    if isinstance(doc, Mapping):
        mapping = cast(Mapping[str, object], doc)
        inner = mapping.get('messages')
        if not isinstance(inner, list):
            raise TranscriptError(f'{source}: a transcript object needs a "messages" list')
        doc = inner
    if not isinstance(doc, list):
        raise TranscriptError(f'{source}: expected a JSON list of messages or an object with "messages"')
    items = cast(list[object], doc)
    if not items:
        return []
    first = items[0]
    if isinstance(first, Mapping) and 'kind' in first and 'parts' in first:
        try:
            return ModelMessagesTypeAdapter.validate_python(items)
        except ValidationError as exc:
            error = exc.errors()[0]
            location = error['loc']
            position = f'message {location[0]}' if location else 'top level'
            raise TranscriptError(
                f'{source}: {position}: invalid pydantic-ai message ({error["msg"]} at {location})'
            ) from exc
    return messages_from_chat(items, source=source, bash_tools=bash_tools)


def load_transcript(path: str | Path, *, bash_tools: bool = True) -> list[ModelMessage]:
    """Load a transcript file (mini-swe-agent `.traj.json`, OpenAI-chat JSON, or pydantic-ai messages JSON).

    Args:
        path: The file to read.
        bash_tools: See `messages_from_chat`; pydantic-ai JSON is always returned exactly as stored.

    Raises:
        TranscriptError: The file cannot be read or is malformed; the message names the file and the position.
    """
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise TranscriptError(f'{file}: cannot read: {exc.strerror or exc}') from exc
    return parse_transcript(data, source=str(file), bash_tools=bash_tools)
