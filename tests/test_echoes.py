"""`searchable_messages`: which parts are the memory tools' own calls and answers, by name, by prefix or by the mark
the capability's toolset sets on its answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mementograph import MementoCompaction, open_store
from mementograph._echoes import MEMORY_TOOL_METADATA, echo_note, is_memory_tool, searchable_messages
from mementograph._messages import serialize_messages
from mementograph.knowledge_graph.memory import render_block


@pytest.mark.parametrize(
    ('name', 'memory'),
    [
        ('recall', True),
        ('recover_block', True),
        ('retrieve_page', True),
        ('compact_context', True),
        ('query_memory', True),
        ('mementograph_recall', True),  # an MCP toolset's `tool_prefix`
        ('mcp__mementograph__recover_block', True),  # a Claude Code transcript
        ('mcp__mementograph__stats', True),
        ('stats', False),  # too common a name to claim without the prefix
        ('recall_notes', False),
        ('my_recall', False),
        ('read_file', False),
        ('', False),
        (None, False),
    ],
)
def test_memory_tools_are_known_by_name(name: str | None, memory: bool) -> None:
    assert is_memory_tool(name) is memory


def _history() -> list[ModelMessage]:
    """A turn that reads a file and recalls, under a name the application gave the tool (`mem_recall`), which only
    its answer's mark tells; then a recall the model called with wrong arguments."""
    return [
        ModelRequest(parts=[UserPromptPart('Which studio was it? Check the notes too.')]),
        ModelResponse(
            parts=[
                TextPart('Let me look.'),
                ToolCallPart('mem_recall', {'query': 'studio'}, tool_call_id='r1'),
                ToolCallPart('read_file', {'path': 'notes.md'}, tool_call_id='f1'),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart(
                    'mem_recall',
                    '1. recover_block("mem_0123456789abcdef01234567") Ann: the Hollowbrook studio.',
                    tool_call_id='r1',
                    metadata={MEMORY_TOOL_METADATA: 'recall'},
                ),
                ToolReturnPart('read_file', 'notes: bring the glue', tool_call_id='f1'),
            ]
        ),
        ModelResponse(parts=[ToolCallPart('recall', {'k': 'many'}, tool_call_id='r2')]),
        ModelRequest(parts=[ToolReturnPart('recall', 'k: not a number', tool_call_id='r2', outcome='retried')]),
        ModelResponse(parts=[TextPart('The glue is in the notes.')]),
    ]


def test_searchable_messages_leave_out_the_memory_tools_calls_and_answers_only() -> None:
    history = _history()
    archived = serialize_messages(history)
    searchable = searchable_messages(history)

    text = render_block(searchable)
    assert 'Hollowbrook' not in text and 'studio"' not in text and 'not a number' not in text
    assert 'Which studio was it?' in text and 'Let me look.' in text  # what was said stays
    assert 'notes: bring the glue' in text and 'notes.md' in text  # other tools' calls and answers stay
    assert len(searchable) == 4  # the response and the request holding only the bad recall are left out
    assert serialize_messages(history) == archived  # the messages themselves are not changed
    plain = [ModelRequest(parts=[UserPromptPart('hi')]), ModelResponse(parts=[TextPart('hello')])]
    assert searchable_messages(plain) is plain  # nothing to leave out: the same list, rendered as it always was


def test_echo_note_names_the_tools_and_the_ids_their_answers_named() -> None:
    assert echo_note(_history()) == 'The memory tools were called: mem_recall (mem_0123456789abcdef01234567); recall.'
    assert echo_note([ModelRequest(parts=[UserPromptPart('hi')])]) == ''


async def test_the_toolsets_answers_are_marked_under_any_name(tmp_path: Path) -> None:
    """A toolset the application prefixed still marks its answers, so their blocks still leave them out."""
    store = open_store(f'sqlite://{tmp_path / "memory.db"}')
    capability: MementoCompaction[None] = MementoCompaction(store, session_id='s')
    toolset = capability.get_toolset()
    assert toolset is not None

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if isinstance(messages[-1].parts[0], ToolReturnPart):
            return ModelResponse(parts=[TextPart('Nothing yet.')])
        return ModelResponse(parts=[ToolCallPart('mem_recall', {'query': 'studio'}, tool_call_id='r1')])

    agent: Agent[None, str] = Agent(FunctionModel(model), toolsets=[toolset.prefixed('mem')])
    messages = (await agent.run('Which studio?')).all_messages()
    store.close()

    [answer] = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert answer.tool_name == 'mem_recall' and answer.metadata == {MEMORY_TOOL_METADATA: 'recall'}
    assert str(answer.content).startswith('Nothing archived matches')
    assert 'mem_recall' not in render_block(searchable_messages(messages))
    assert 'Which studio?' in render_block(searchable_messages(messages))


def _product_recall(answer: ToolReturnPart) -> list[ModelMessage]:
    """An application's own `recall` tool (a product-recall lookup) called beside the capability's, which the
    application prefixed (`mem_recall`, its answer marked), and `answer` to the application's call."""
    return [
        ModelRequest(parts=[UserPromptPart('Is my Brisk kettle affected? And where did I buy it?')]),
        ModelResponse(
            parts=[
                ToolCallPart('recall', {'product': 'Brisk kettle'}, tool_call_id='p1'),
                ToolCallPart('mem_recall', {'query': 'kettle bought'}, tool_call_id='m1'),
            ]
        ),
        ModelRequest(
            parts=[
                answer,
                ToolReturnPart(
                    'mem_recall',
                    '1. recover_block("mem_0123456789abcdef01234567") Ann: bought it at the Hollowbrook market.',
                    tool_call_id='m1',
                    metadata={MEMORY_TOOL_METADATA: 'recall'},
                ),
            ]
        ),
        ModelResponse(parts=[TextPart('Yes: ask for the free replacement lid.')]),
    ]


def test_an_application_tool_named_like_a_memory_tool_is_conversation() -> None:
    """Its answers carry no mark and name no archived item: they were left out of search by the name alone, though
    they are what the conversation was about. The capability's own answer beside them is still left out."""
    notice = 'Recall notice R-2291: the Brisk kettle lid latch can fail; owners get a free replacement lid.'
    history = _product_recall(ToolReturnPart('recall', notice, tool_call_id='p1'))
    text = render_block(searchable_messages(history))
    assert 'lid latch can fail' in text and 'Brisk kettle' in text  # the application's call and answer
    assert 'Hollowbrook' not in text and 'kettle bought' not in text  # the marked memory tool's
    assert echo_note(history) == 'The memory tools were called: mem_recall (mem_0123456789abcdef01234567).'


@pytest.mark.parametrize(
    'answer',
    [
        # archived before the toolset marked its answers, or an MCP server's answer (no metadata reaches the client)
        ToolReturnPart('recall', '1. recover_block("blk_0123456789abcdef01234567") the lid latch', tool_call_id='p1'),
        ToolReturnPart(
            'retrieve_page', '[block blk_0123456789abcdef01234567: messages 3-5] lid latch', tool_call_id='p1'
        ),
        # refused before any tool ran: no mark could be set, so the name tells
        ToolReturnPart('recall', 'product: the lid latch is not a field', tool_call_id='p1', outcome='retried'),
    ],
    ids=['quoting-the-archive', 'a-page-quoting-the-archive', 'retried'],
)
def test_an_unmarked_answer_under_a_memory_tools_name_is_an_echo_where_the_mark_cannot_be(
    answer: ToolReturnPart,
) -> None:
    history = _product_recall(answer)
    history[1].parts[0] = ToolCallPart(answer.tool_name, {'product': 'Brisk kettle'}, tool_call_id='p1')
    text = render_block(searchable_messages(history))
    assert 'lid latch' not in text and 'product' not in text and 'Hollowbrook' not in text  # calls and answers
    assert 'Is my Brisk kettle affected?' in text and 'free replacement lid' in text  # the prompt and reply stay
