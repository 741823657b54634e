"""`_segment` -- split a message history into blocks at semantic boundaries, never inside a tool pair or a fence.

The history is first grouped into **units** that must never be split:

- a `ModelResponse` with tool calls together with every following `ModelRequest` up to the one that answers the
  last of its calls (parallel calls may be answered across several requests);
- an assistant action of the bash text protocol (one fenced bash command, no tool calls) with the observation
  request that follows it (a `UserPromptPart` starting `<returncode>`);
- a fenced block spanning messages: a prose part with an odd number of fence lines opens a fence that the next
  such part closes (only prose parts count: a tool output cut in the middle of a code block is data, not a fence
  of the conversation);
- otherwise a single message.

Between units, a boundary scores 3 when a user turn starts (or the model ended its turn), 2 when the files the
next unit works on (paths in its commands and in the assistant's text) share nothing with the block so far (a
topic shift), 1 after a completed action/observation pair, else 0. The scan is greedy and online: a block ends
at a boundary scoring 2 or more once it holds `min_tokens`, or at any boundary scoring 1 or more once it holds
`target_tokens`; when the next unit would push it past `max_tokens`, the block ends at its best boundary (highest
score, then latest) that leaves it at least `min_tokens`. A unit larger than `max_tokens` is a block of its own.

Because every decision depends only on units already seen, appending messages never changes a block that was
reported `complete`: those blocks are a stable prefix, which keeps eviction (and the prompt cache) stable.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from pydantic_ai.messages import (
    BaseToolCallPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    UserPromptPart,
)

from ..._messages import args_text, tool_call_ids, tool_return_ids
from ..._tokens import TokenCounter
from ..._transcripts import split_bash_action
from ._facts import command_facts, prose_facts
from ._render import is_observation, shell_command

__all__ = ('Segment', 'segment_blocks')

USER_TURN: Final = 3
TOPIC_SHIFT: Final = 2
PAIR_DONE: Final = 1

_FENCE_LINE = re.compile(r'^[ \t]*(?:`{3,}|~{3,})', re.MULTILINE)


@dataclass(frozen=True)
class Segment:
    """A block of the history: `messages[start:end]`."""

    start: int
    """Index of the block's first message."""
    end: int
    """Index one past the block's last message (exclusive)."""
    tokens: int
    """Tokens of the block's messages (`TokenCounter.count_messages`)."""
    complete: bool
    """False for the trailing block while it may still grow (an unanswered call, an open turn, under the minimum)."""


@dataclass(frozen=True)
class _Unit:
    start: int
    end: int
    tokens: int
    files: frozenset[str]
    user_turn: bool
    """Starts with a user prompt that is not an observation (a new turn)."""
    pair: bool
    """Holds a completed action/observation pair."""
    turn_end: bool
    """Ends with a model response that neither calls a tool nor issues a text-protocol action."""
    closed: bool
    """Ended because nothing was left open (no unanswered call, pending action or open fence), not because the
    history ran out."""


def _prose_fence_count(message: ModelMessage) -> int:
    count = 0
    for part in message.parts:
        if isinstance(part, SystemPromptPart | TextPart | ThinkingPart) or (
            isinstance(part, UserPromptPart) and not is_observation(part)
        ):
            content = part.content
            if isinstance(content, str):
                count += len(_FENCE_LINE.findall(content))
    return count


def _text_action(message: ModelMessage) -> str | None:
    """The command of a bash text-protocol action (a response with one fenced bash block and no tool calls)."""
    if not isinstance(message, ModelResponse) or tool_call_ids(message):
        return None
    text = '\n'.join(part.content for part in message.parts if isinstance(part, TextPart))
    action = split_bash_action(text)
    return action[1] if action else None


def _is_observation_request(message: ModelMessage) -> bool:
    return isinstance(message, ModelRequest) and any(is_observation(part) for part in message.parts)


def _starts_user_turn(message: ModelMessage) -> bool:
    if not isinstance(message, ModelRequest) or tool_return_ids(message):
        return False
    return any(isinstance(part, UserPromptPart) and not is_observation(part) for part in message.parts)


_FILES_CACHE: OrderedDict[int, tuple[ModelMessage, frozenset[str]]] = OrderedDict()
_FILES_CACHE_LIMIT: Final = 50_000


def _message_files(message: ModelMessage) -> frozenset[str]:
    """Paths in a response's commands and prose, cached by message identity (messages are immutable in a history,
    and a growing history is segmented again and again)."""
    if not isinstance(message, ModelResponse):
        return frozenset()
    hit = _FILES_CACHE.get(id(message))
    if hit is not None and hit[0] is message:
        return hit[1]
    paths: set[str] = set()
    for part in message.parts:
        if isinstance(part, BaseToolCallPart):
            command = shell_command(part)
            facts = command_facts(command if command is not None else args_text(part))
        elif isinstance(part, TextPart):
            facts = prose_facts(part.content)
        else:
            continue
        paths.update(fact.text for fact in facts if fact.kind == 'path')
    files = frozenset(paths)
    _FILES_CACHE[id(message)] = (message, files)
    if len(_FILES_CACHE) > _FILES_CACHE_LIMIT:
        _FILES_CACHE.popitem(last=False)
    return files


def _files(messages: Sequence[ModelMessage]) -> frozenset[str]:
    """Files a unit works on: paths in its commands and in the assistant's prose (not in tool output)."""
    return frozenset().union(*(_message_files(message) for message in messages))


def _units(messages: Sequence[ModelMessage], counter: TokenCounter) -> list[_Unit]:
    units: list[_Unit] = []
    count = len(messages)
    index = 0
    while index < count:
        start = index
        open_calls: set[str] = set()
        fence_open = False
        awaiting_observation = False
        pair = False
        closed = False
        while index < count:
            message = messages[index]
            if awaiting_observation and _is_observation_request(message):
                awaiting_observation = False
                pair = True
            calls = tool_call_ids(message)
            returns = tool_return_ids(message)
            if returns & open_calls:
                pair = True
            open_calls = (open_calls | calls) - returns
            if _prose_fence_count(message) % 2:
                fence_open = not fence_open
            index += 1
            if _text_action(message) is not None and index < count and _is_observation_request(messages[index]):
                awaiting_observation = True
            if not open_calls and not fence_open and not awaiting_observation:
                closed = True
                break
        chunk = messages[start:index]
        last = chunk[-1]
        units.append(
            _Unit(
                start=start,
                end=index,
                tokens=counter.count_messages(chunk),
                files=_files(chunk),
                user_turn=_starts_user_turn(chunk[0]),
                pair=pair,
                turn_end=isinstance(last, ModelResponse) and not tool_call_ids(last) and _text_action(last) is None,
                closed=closed,
            )
        )
    return units


def _score(previous: _Unit, following: _Unit, block_files: frozenset[str]) -> int:
    if following.user_turn or previous.turn_end:
        return USER_TURN
    if following.files and block_files and not (following.files & block_files):
        return TOPIC_SHIFT
    if previous.pair:
        return PAIR_DONE
    return 0


def segment_blocks(
    messages: Sequence[ModelMessage],
    counter: TokenCounter,
    *,
    min_tokens: int = 200,
    max_tokens: int = 4000,
    target_tokens: int | None = None,
) -> list[Segment]:
    """Split `messages` into consecutive blocks covering them exactly once, in order.

    Args:
        messages: The history (pydantic-ai messages, as the agent holds them).
        counter: Counts tokens (cached per message).
        min_tokens: A block ends at a strong boundary (user turn, topic shift) only once it holds this many tokens.
        max_tokens: A block never grows past this unless a single unbreakable unit does.
        target_tokens: A block ends at any completed action/observation pair once it holds this many tokens;
            defaults to half of `max_tokens` (blocks of a size worth a memento, not one per command).

    Returns:
        The blocks; all but the last are `complete`. The last is complete only when it holds `min_tokens` and the
        model ended its turn (no unanswered call, no pending action, no open fence).

    Raises:
        ValueError: `min_tokens`, `target_tokens` and `max_tokens` are not `0 <= min <= target <= max`.
    """
    target = max_tokens // 2 if target_tokens is None else target_tokens
    target = max(target, min_tokens)
    if min_tokens < 0 or max_tokens < 1 or not min_tokens <= target <= max_tokens:
        raise ValueError(
            f'need 0 <= min_tokens <= target_tokens <= max_tokens, got {min_tokens}, {target_tokens}, {max_tokens}'
        )
    units = _units(messages, counter)
    blocks: list[tuple[int, int]] = []  # unit ranges
    start = 0
    while start < len(units):
        end = start + 1  # units[start:end] is the open block
        tokens = units[start].tokens
        files = units[start].files
        cut: int | None = None
        scores: list[int] = []  # scores[k] is the boundary before units[start + 1 + k]
        while end < len(units):
            following = units[end]
            score = _score(units[end - 1], following, files)
            if (score >= TOPIC_SHIFT and tokens >= min_tokens) or (score >= PAIR_DONE and tokens >= target):
                cut = end
                break
            if tokens + following.tokens > max_tokens:
                cut = _best_cut(units, start, end, [*scores, score], min_tokens)
                break
            scores.append(score)
            tokens += following.tokens
            files = files | following.files
            end += 1
        if cut is None:  # the tail
            blocks.append((start, len(units)))
            break
        blocks.append((start, cut))
        start = cut

    segments: list[Segment] = []
    for number, (first, last) in enumerate(blocks):
        chunk_units = units[first:last]
        tokens = sum(unit.tokens for unit in chunk_units)
        is_tail = number == len(blocks) - 1
        last_unit = chunk_units[-1]
        complete = not is_tail or (tokens >= min_tokens and last_unit.turn_end and last_unit.closed)
        segments.append(Segment(chunk_units[0].start, chunk_units[-1].end, tokens, complete))
    return segments


def _best_cut(units: Sequence[_Unit], start: int, end: int, scores: Sequence[int], min_tokens: int) -> int:
    """The boundary to close an overflowing block at: highest score, then latest, leaving >= `min_tokens`."""
    best = end
    best_score = -1
    tokens = 0
    for offset, score in enumerate(scores):
        boundary = start + 1 + offset
        tokens += units[boundary - 1].tokens
        if tokens >= min_tokens and score >= best_score:
            best, best_score = boundary, score
    return best
