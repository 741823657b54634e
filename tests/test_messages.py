"""Exact serialization of messages: what pydantic-ai cannot write is escaped, or refused, never altered."""

from __future__ import annotations

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from mementograph._messages import deserialize_messages, message_text, serialize_messages


def test_lone_surrogates_round_trip_through_escaped_json() -> None:
    messages: list[ModelMessage] = [ModelRequest(parts=[ToolReturnPart('cat', 'a \udcff b \u00e9', tool_call_id='c')])]
    data = serialize_messages(messages)
    assert data.isascii() and b'\\udcff' in data
    assert deserialize_messages(data) == messages
    assert serialize_messages(deserialize_messages(data)) == data
    assert message_text(messages[0]) == 'a \ufffd b \u00e9'


def test_text_without_surrogates_keeps_pydantic_ais_own_bytes() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[ToolReturnPart('cat', 'caf\u00e9 \U0001f680', tool_call_id='c')])
    ]
    assert '\u00e9 \U0001f680'.encode() in serialize_messages(messages)  # not escaped: the usual form


def test_a_surrogate_in_a_dict_key_is_refused_not_altered() -> None:
    messages: list[ModelMessage] = [ModelResponse(parts=[ToolCallPart('f', {'k\udcff': 1}, tool_call_id='c')])]
    with pytest.raises(ValueError, match='cannot be archived exactly'):
        serialize_messages(messages)


def test_replacement_characters_of_the_text_itself_are_kept() -> None:
    messages: list[ModelMessage] = [ModelResponse(parts=[ToolCallPart('f', {'k\ufffd': 'v\ufffd'}, tool_call_id='c')])]
    assert deserialize_messages(serialize_messages(messages)) == messages
