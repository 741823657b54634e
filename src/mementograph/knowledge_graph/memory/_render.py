"""`_render` -- the plain-text view of a block that the compressors, the judges and the fact extractor all read.

A block is rendered part by part (`part_text`, the same text `message_text` gives) under a one-line header that
names who said it: `[system]`, `[user]`, `[assistant]`, `[thinking]`, `[call NAME]`, `[return NAME]`,
`[retry NAME]`, and `[observation]` for a user message of the bash text protocol (it starts with `<returncode>`).
The headers let `critical_facts` tell prose from commands and from command output using only the text, so the
`fact_retention` metric needs nothing but two strings.

One deliberate difference from `part_text`: a shell tool call (arguments holding a string `command` or `cmd`) is
rendered as the raw command, not as JSON, so that a command can be quoted verbatim (JSON escapes every quote).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    UserPromptPart,
)

from ..._messages import part_text, without_surrogates
from ..._transcripts import split_bash_action
from ._regions import OBSERVATION_PREFIX, parse_regions

__all__ = (
    'Action',
    'block_actions',
    'exit_code_of',
    'is_observation',
    'render_block',
    'shell_command',
    'text_actions',
)

_EXIT_TAG = re.compile(r'<returncode>\s*(-?\d+)\s*</returncode>')
_EXIT_TEXT = re.compile(
    r'\b(?:exit(?:ed)?(?: with)?(?: code| status)|return(?:ed)? code|returncode|exit_code)\s*[:=]?\s*(-?\d+)\b',
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Action:
    """A command and what came back: a tool call and its return, or a bash text-protocol action/observation."""

    tool: str
    """Tool name (`bash` for the text protocol)."""
    command: str
    """The raw command (shell tools) or `name(args)` (other tools)."""
    output: str | None
    """What the tool returned; `None` when the block holds no answer."""
    exit_code: int | None
    """Exit code parsed from the output (`<returncode>N</returncode>`, `exit code N`, ...), when there is one."""


def shell_command(part: BaseToolCallPart) -> str | None:
    """The command string of a shell-like tool call (`{"command": ...}` or `{"cmd": ...}`), else `None`."""
    try:
        args = part.args_as_dict()
    except Exception:  # malformed JSON arguments: not a shell command we can quote
        return None
    for key in ('command', 'cmd'):
        value = args.get(key)
        if isinstance(value, str):
            return value
    return None


def is_observation(part: object) -> bool:
    """A user prompt of the bash text protocol: the observation of the previous action."""
    return (
        isinstance(part, UserPromptPart)
        and isinstance(part.content, str)
        and part.content.lstrip().startswith(OBSERVATION_PREFIX)
    )


def _part_header_and_text(part: object) -> tuple[str, str]:
    if isinstance(part, SystemPromptPart):
        return 'system', part_text(part)
    if isinstance(part, UserPromptPart):
        return ('observation' if is_observation(part) else 'user'), part_text(part)
    if isinstance(part, TextPart):
        return 'assistant', without_surrogates(part.content)
    if isinstance(part, ThinkingPart):
        return 'thinking', without_surrogates(part.content)
    if isinstance(part, BaseToolCallPart):
        command = shell_command(part)
        text = part_text(part) if command is None else without_surrogates(command)
        return f'call {_safe_name(part.tool_name)}', text
    if isinstance(part, BaseToolReturnPart):
        return f'return {_safe_name(part.tool_name)}', part_text(part)
    if isinstance(part, RetryPromptPart):
        return f'retry {_safe_name(part.tool_name or "output")}', part_text(part)
    return 'other', part_text(part)


def _safe_name(name: str) -> str:
    return without_surrogates(re.sub(r'[\]\n]', '_', name)[:80]) or 'tool'


def render_block(messages: Sequence[ModelMessage]) -> str:
    """Render messages as headed plain text (see the module docstring). Deterministic; empty parts are skipped."""
    chunks: list[str] = []
    for message in messages:
        for part in message.parts:
            header, text = _part_header_and_text(part)
            if text.strip():
                chunks.append(f'[{header}]\n{text}')
    return '\n'.join(chunks)


def exit_code_of(output: str) -> int | None:
    """The exit code an output reports, if any (the first one)."""
    match = _EXIT_TAG.search(output) or _EXIT_TEXT.search(output)
    return int(match.group(1)) if match else None


def _iter_actions(messages: Sequence[ModelMessage]) -> Iterator[Action]:
    returns: dict[str, str] = {}
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, BaseToolReturnPart | RetryPromptPart) and part.tool_call_id:
                    returns.setdefault(part.tool_call_id, part_text(part))
    for index, message in enumerate(messages):
        if not isinstance(message, ModelResponse):
            continue
        calls = [part for part in message.parts if isinstance(part, BaseToolCallPart)]
        for call in calls:
            command = shell_command(call)
            output = returns.get(call.tool_call_id)
            yield Action(
                tool=call.tool_name,
                command=command if command is not None else part_text(call),
                output=output,
                exit_code=exit_code_of(output) if output is not None else None,
            )
        if calls:
            continue
        # bash text protocol: one fenced command answered by an observation in the next request
        text = '\n'.join(part.content for part in message.parts if isinstance(part, TextPart))
        action = split_bash_action(text)
        following = messages[index + 1] if index + 1 < len(messages) else None
        if action is None or not isinstance(following, ModelRequest):
            continue
        observation = next((part for part in following.parts if is_observation(part)), None)
        if observation is None:
            continue
        output = part_text(observation)
        yield Action(tool='bash', command=action[1], output=output, exit_code=exit_code_of(output))


def block_actions(messages: Sequence[ModelMessage]) -> list[Action]:
    """The commands of a block in order, each with what came back (tool calls are matched by id)."""
    return list(_iter_actions(messages))


def text_actions(text: str) -> list[Action]:
    """The actions of a rendered block read from its text alone (calls paired with returns in order, per tool)."""
    actions: list[Action] = []
    waiting: list[int] = []  # indexes of actions without output, oldest first
    for region in parse_regions(text):
        if region.kind == 'call':
            actions.append(Action(region.label.removeprefix('call '), region.text, None, None))
            waiting.append(len(actions) - 1)
        elif region.kind == 'prose' and region.label == 'assistant':
            action = split_bash_action(region.text)
            if action is not None:
                actions.append(Action('bash', action[1], None, None))
                waiting.append(len(actions) - 1)
        elif region.kind == 'output' and waiting:
            tool = region.label.split(' ', 1)[1] if ' ' in region.label else 'bash'
            match = next((index for index in waiting if actions[index].tool == tool), waiting[0])
            waiting.remove(match)
            actions[match] = replace(actions[match], output=region.text, exit_code=exit_code_of(region.text))
    return actions
