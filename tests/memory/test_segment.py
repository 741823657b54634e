"""Segmentation: exact coverage, tool pairs and fences never split, stable complete prefix (property tests)."""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart

from mementograph._messages import tool_call_ids, tool_return_ids
from mementograph._tokens import TokenCounter
from mementograph.knowledge_graph.memory import Segment, segment_blocks

from ._build import bash, calls, observation, returns, say, user

COUNTER = TokenCounter(encoding='estimate')
EXAMPLES = int(os.environ.get('MEMENTOGRAPH_HYPOTHESIS_EXAMPLES', '150'))
"""Raise for a deeper search (e.g. 5000); the default keeps the suite fast."""
_WORDS = ('alpha', 'beta', 'src/app/mod.py', 'gamma', 'delta', 'lib/util.py', 'epsilon')
_FENCE = re.compile(r'^[ \t]*```', re.MULTILINE)


def words(n: int, seed: int) -> str:
    return ' '.join(_WORDS[(seed + i) % len(_WORDS)] for i in range(n))


# one "event" is a list of messages that a history appends at once
Event = list[ModelMessage]


@st.composite
def events(draw: st.DrawFn) -> list[Event]:
    out: list[Event] = []
    n_events = draw(st.integers(min_value=0, max_value=14))
    for index in range(n_events):
        kind = draw(st.sampled_from(['user', 'text', 'tools', 'bash_text', 'fence', 'big']))
        size = draw(st.integers(min_value=1, max_value=120))
        if kind == 'user':
            out.append([user(words(size, index))])
        elif kind == 'text':
            out.append([say(words(size, index))])
        elif kind == 'tools':
            n_calls = draw(st.integers(min_value=1, max_value=3))
            ids = [f'call_{index}_{k}' for k in range(n_calls)]
            split = draw(st.integers(min_value=0, max_value=n_calls - 1))
            reverse = draw(st.booleans())
            answers = [('tool', call_id, words(size, k)) for k, call_id in enumerate(ids)]
            if reverse:
                answers.reverse()
            requests: list[ModelMessage] = [returns(*answers[: split + 1])]
            if answers[split + 1 :]:
                requests.append(returns(*answers[split + 1 :]))
            out.append([calls(*[('tool', call_id) for call_id in ids]), *requests])
        elif kind == 'bash_text':
            out.append(
                [
                    say(f'THOUGHT: {words(size, index)}\n\n```bash\nls {words(2, index)}\n```'),
                    user(f'<returncode>0</returncode><output>\n{words(size, index + 1)}\n</output>'),
                ]
            )
        elif kind == 'fence':
            out.append([say(f'Here is code:\n```python\n{words(size, index)}'), say(f'{words(size, 1)}\n```\ndone')])
        else:
            out.append([say(words(size * 20, index))])
    if draw(st.booleans()):  # an unanswered call at the tail
        out.append([calls(('tool', 'dangling'))])
    return out


def _flatten(evts: Sequence[Event]) -> list[ModelMessage]:
    return [message for event in evts for message in event]


def _safe_boundaries(messages: Sequence[ModelMessage]) -> set[int]:
    """Independent reference: positions where no call is open, no text action awaits its observation, no fence
    of prose is open."""
    safe = {0, len(messages)}
    open_calls: set[str] = set()
    fence_parity = 0
    for index, message in enumerate(messages):
        open_calls = (open_calls | tool_call_ids(message)) - tool_return_ids(message)
        for part in message.parts:
            content = getattr(part, 'content', None)
            is_obs = isinstance(part, UserPromptPart) and str(content).startswith('<returncode>')
            if isinstance(part, TextPart | UserPromptPart) and isinstance(content, str) and not is_obs:
                fence_parity ^= len(_FENCE.findall(content)) % 2
        following = messages[index + 1] if index + 1 < len(messages) else None
        text_action = (
            isinstance(message, ModelResponse)
            and not tool_call_ids(message)
            and '```bash' in ''.join(p.content for p in message.parts if isinstance(p, TextPart))
            and isinstance(following, ModelRequest)
            and any(
                isinstance(p, UserPromptPart) and str(p.content).startswith('<returncode>') for p in following.parts
            )
        )
        if not open_calls and not fence_parity and not text_action:
            safe.add(index + 1)
    return safe


def _check_invariants(messages: Sequence[ModelMessage], segments: Sequence[Segment], max_tokens: int) -> None:
    if not messages:
        assert segments == []
        return
    # exact coverage, in order
    assert segments[0].start == 0 and segments[-1].end == len(messages)
    for before, after in itertools.pairwise(segments):
        assert before.end == after.start
    assert all(segment.start < segment.end for segment in segments)
    # every cut is a safe boundary: no tool pair, text action/observation or fence is ever split
    safe = _safe_boundaries(messages)
    for segment in segments:
        assert segment.start in safe
        assert segment.tokens == COUNTER.count_messages(messages[segment.start : segment.end])
        if segment.tokens > max_tokens:  # only an unbreakable unit may exceed the maximum
            inner = [b for b in safe if segment.start < b < segment.end]
            assert inner == [], (segment, inner)
    block_of = {i: n for n, segment in enumerate(segments) for i in range(segment.start, segment.end)}
    for index, message in enumerate(messages):
        for call_id in tool_call_ids(message):
            answered = [j for j, m in enumerate(messages) if call_id in tool_return_ids(m)]
            assert all(block_of[j] == block_of[index] for j in answered)
    # all but the last block are complete
    assert all(segment.complete for segment in segments[:-1])


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    evts=events(),
    min_tokens=st.sampled_from([0, 50, 200]),
    max_tokens=st.sampled_from([120, 400, 2000]),
    cut=st.integers(min_value=0, max_value=40),
)
def test_blocks_cover_history_and_never_split_pairs(
    evts: list[Event], min_tokens: int, max_tokens: int, cut: int
) -> None:
    messages = _flatten(evts)
    min_tokens = min(min_tokens, max_tokens)
    segments = segment_blocks(messages, COUNTER, min_tokens=min_tokens, max_tokens=max_tokens)
    _check_invariants(messages, segments, max_tokens)
    # deterministic
    assert segment_blocks(messages, COUNTER, min_tokens=min_tokens, max_tokens=max_tokens) == segments
    # appending never changes a complete block: the complete blocks of a prefix are a prefix of the blocks
    prefix = messages[: min(cut, len(messages))]
    early = segment_blocks(prefix, COUNTER, min_tokens=min_tokens, max_tokens=max_tokens)
    complete = [segment for segment in early if segment.complete]
    assert segments[: len(complete)] == complete


def test_tool_pair_answered_across_two_requests_stays_together() -> None:
    messages: list[ModelMessage] = [
        user(words(200, 0)),
        calls(('read', 'a'), ('read', 'b')),
        returns(('read', 'a', words(300, 1))),
        returns(('read', 'b', words(300, 2))),
        say(words(50, 3)),
    ]
    segments = segment_blocks(messages, COUNTER, min_tokens=10, max_tokens=200)
    owner = {i: s for s in segments for i in range(s.start, s.end)}
    assert owner[1] == owner[2] == owner[3]


def test_single_huge_message_is_its_own_block() -> None:
    messages: list[ModelMessage] = [user(words(100, 0)), say(words(5000, 1)), user(words(100, 2))]
    segments = segment_blocks(messages, COUNTER, min_tokens=10, max_tokens=500)
    assert [(s.start, s.end) for s in segments] == [(0, 1), (1, 2), (2, 3)]
    assert segments[1].tokens > 500


def test_tail_with_unanswered_call_is_incomplete() -> None:
    messages: list[ModelMessage] = [user(words(300, 0)), say(words(300, 1)), bash('pytest', 'c1')]
    segments = segment_blocks(messages, COUNTER, min_tokens=50, max_tokens=4000)
    assert segments[-1].end == 3 and not segments[-1].complete
    assert segments[0].complete


def test_tail_is_complete_once_the_turn_ended() -> None:
    messages: list[ModelMessage] = [
        user(words(300, 0)),
        bash('ls', 'c1'),
        observation(0, words(100, 1), 'c1'),
        say('Done: the listing shows everything.'),
    ]
    assert segment_blocks(messages, COUNTER, min_tokens=50)[-1].complete
    # ... but not while under the minimum
    assert not segment_blocks(messages, COUNTER, min_tokens=5000, max_tokens=8000)[-1].complete
    # ... nor when it ends with a tool return (the model has not answered yet)
    assert not segment_blocks(messages[:3], COUNTER, min_tokens=50)[-1].complete


def test_user_turns_are_boundaries() -> None:
    messages: list[ModelMessage] = [
        user(words(100, 0)),
        say(words(100, 1)),
        user(words(100, 2)),
        say(words(100, 3)),
        user(words(10, 4)),
    ]
    segments = segment_blocks(messages, COUNTER, min_tokens=50, max_tokens=4000)
    assert [(s.start, s.end) for s in segments] == [(0, 2), (2, 4), (4, 5)]


def test_text_protocol_action_and_observation_stay_together() -> None:
    messages: list[ModelMessage] = [user(words(50, 0))]
    for i in range(6):
        messages.append(say(f'THOUGHT: step {i} {words(40, i)}\n\n```bash\nls dir_{i}\n```'))
        messages.append(user(f'<returncode>0</returncode><output>\n{words(80, i)}\n</output>'))
    segments = segment_blocks(messages, COUNTER, min_tokens=20, max_tokens=150)
    assert len(segments) > 2
    for segment in segments:  # no block starts with an observation: it stays with its action
        first = messages[segment.start]
        assert not str(getattr(first.parts[0], 'content', '')).startswith('<returncode>')


def test_fence_spanning_messages_is_not_split() -> None:
    messages: list[ModelMessage] = [
        user(words(100, 0)),
        say('```python\n' + words(200, 1)),
        user(words(200, 2)),
        say(words(50, 3) + '\n```'),
        user(words(100, 4)),
    ]
    segments = segment_blocks(messages, COUNTER, min_tokens=10, max_tokens=100)
    owner = {i: s for s in segments for i in range(s.start, s.end)}
    assert owner[1] == owner[2] == owner[3]


def test_invalid_sizes_are_rejected() -> None:
    with pytest.raises(ValueError, match='min_tokens'):
        segment_blocks([], COUNTER, min_tokens=500, max_tokens=100)


def test_empty_history() -> None:
    assert segment_blocks([], COUNTER) == []


def test_parallel_call_part_types() -> None:
    response = ModelResponse(parts=[ToolCallPart('a', {}, tool_call_id='x'), ToolCallPart('b', {}, tool_call_id='y')])
    assert tool_call_ids(response) == {'x', 'y'}
