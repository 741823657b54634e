"""Loading transcripts: mini-swe-agent trajectories, OpenAI-chat lists, pydantic-ai JSON; errors name the spot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from mementograph._messages import serialize_messages
from mementograph._transcripts import TRANSCRIPT_EPOCH, TranscriptError, load_transcript, parse_transcript

TRAJECTORY = {
    'instance_id': 'demo__demo-1',
    'trajectory_format': 'mini-swe-agent-1',
    'info': {'exit_status': 'Submitted'},
    'messages': [
        {'role': 'system', 'content': 'You are a helpful assistant.'},
        {'role': 'user', 'content': 'Fix the bug in src/a.py.'},
        {'role': 'assistant', 'content': 'THOUGHT: Look first.\n\n```bash\nls src\n```', 'extra': {'response': {}}},
        {'role': 'user', 'content': '<returncode>0</returncode>\n<output>\na.py\n</output>'},
        {'role': 'assistant', 'content': 'THOUGHT: two at once\n\n```bash\nls\n```\n\n```bash\npwd\n```'},
        {'role': 'user', 'content': 'Please always provide EXACTLY ONE action in triple backticks, found 2 actions.'},
        {
            'role': 'assistant',
            'content': 'THOUGHT: Submit.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```',
        },
        {'role': 'user', 'content': 'diff --git a/src/a.py b/src/a.py'},
    ],
}


def test_mini_swe_agent_trajectory_becomes_tool_pairs(tmp_path: Path) -> None:
    path = tmp_path / 'demo.traj.json'
    path.write_text(json.dumps(TRAJECTORY))
    messages = load_transcript(path)
    assert [type(m).__name__ for m in messages] == [
        'ModelRequest',
        'ModelResponse',
        'ModelRequest',
        'ModelResponse',
        'ModelRequest',
        'ModelResponse',
        'ModelRequest',
    ]
    first = messages[0]
    assert isinstance(first, ModelRequest)
    assert isinstance(first.parts[0], SystemPromptPart) and isinstance(first.parts[1], UserPromptPart)
    action = messages[1]
    assert isinstance(action, ModelResponse)
    assert action.parts == [
        TextPart('THOUGHT: Look first.'),
        ToolCallPart('bash', {'command': 'ls src'}, tool_call_id='call_2'),
    ]
    answer = messages[2]
    assert isinstance(answer, ModelRequest) and isinstance(answer.parts[0], ToolReturnPart)
    assert answer.parts[0].tool_call_id == 'call_2' and str(answer.parts[0].content).startswith('<returncode>0')
    # a rejected message (two commands) is not an action: its text stays, the format error is a user prompt
    rejected = messages[3]
    assert isinstance(rejected, ModelResponse) and len(rejected.parts) == 1
    assert isinstance(rejected.parts[0], TextPart) and '```bash\npwd' in rejected.parts[0].content
    feedback = messages[4]
    assert isinstance(feedback, ModelRequest) and isinstance(feedback.parts[0], UserPromptPart)
    # the submission's output answers the submit command
    submitted = messages[6]
    assert isinstance(submitted, ModelRequest) and isinstance(submitted.parts[0], ToolReturnPart)
    # deterministic: fixed epoch timestamps, byte-identical reloads
    assert first.parts[0].timestamp == TRANSCRIPT_EPOCH
    assert serialize_messages(load_transcript(path)) == serialize_messages(messages)


def test_text_protocol_kept_on_request(tmp_path: Path) -> None:
    messages = parse_transcript(json.dumps(TRAJECTORY), bash_tools=False)
    action, observation = messages[1], messages[2]
    raw = TRAJECTORY['messages'][2]['content']  # type: ignore[index]
    assert isinstance(action, ModelResponse) and action.parts == [TextPart(raw)]
    assert isinstance(observation, ModelRequest) and isinstance(observation.parts[0], UserPromptPart)


def test_openai_chat_with_tool_calls() -> None:
    chat = [
        {'role': 'user', 'content': 'What is in /etc/hosts?'},
        {
            'role': 'assistant',
            'content': None,
            'tool_calls': [
                {
                    'id': 'call_a',
                    'type': 'function',
                    'function': {'name': 'read_file', 'arguments': '{"path": "/etc/hosts"}'},
                },
                {
                    'id': 'call_b',
                    'type': 'function',
                    'function': {'name': 'stat', 'arguments': '{"path": "/etc/hosts"}'},
                },
            ],
        },
        {'role': 'tool', 'tool_call_id': 'call_a', 'content': '127.0.0.1 localhost'},
        {'role': 'tool', 'tool_call_id': 'call_b', 'content': [{'type': 'text', 'text': 'size 21'}]},
        {'role': 'assistant', 'content': 'It maps localhost to 127.0.0.1.'},
    ]
    messages = parse_transcript(json.dumps(chat))
    assert len(messages) == 4
    returns = messages[2]
    assert isinstance(returns, ModelRequest)
    assert [(p.tool_name, p.tool_call_id, p.content) for p in returns.parts if isinstance(p, ToolReturnPart)] == [
        ('read_file', 'call_a', '127.0.0.1 localhost'),
        ('stat', 'call_b', 'size 21'),
    ]


def test_pydantic_ai_json_round_trips() -> None:
    messages = parse_transcript(json.dumps(TRAJECTORY))
    data = serialize_messages(messages)
    assert serialize_messages(parse_transcript(data)) == data


@pytest.mark.parametrize(
    ('payload', 'expected'),
    [
        ('{"messages": [', r'demo\.json: invalid JSON at line 1, column 15'),
        ('{"messages": [\n  {"role": "user", "content": "hi"},\n  {"role": "robot", "content": "x"}]}', 'message 1'),
        ('[{"role": "user", "content": 5}]', 'message 0: content must be'),
        ('[{"role": "tool", "content": "x"}]', 'message 0: a tool message needs'),
        ('{"no": "messages"}', 'needs a "messages" list'),
        ('[{"kind": "request", "parts": [{"part_kind": "nope"}]}]', 'message 0: invalid pydantic-ai message'),
        ('"just a string"', 'expected a JSON list'),
    ],
)
def test_malformed_input_names_file_and_position(payload: str, expected: str) -> None:
    with pytest.raises(TranscriptError, match=expected):
        parse_transcript(payload, source='demo.json')


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match='cannot read'):
        load_transcript(tmp_path / 'absent.json')
