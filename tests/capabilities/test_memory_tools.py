"""The memory tools as a model calls them: what they search (`recall_scope`), time filters, and answers sized to
the mark."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ToolCallPart, ToolReturnPart

from mementograph import MementoCompaction, open_store
from mementograph._tokens import TokenCounter
from mementograph.knowledge_graph.store import GraphStore
from tests.scripted import ScriptedModel, scripted_agent


@pytest.fixture
def store(tmp_path: Path) -> GraphStore:
    return open_store(f'sqlite:///{tmp_path / "memory.db"}')


def answers(messages: list[ModelMessage]) -> dict[str, str]:
    return {
        part.tool_call_id: str(part.content)
        for message in messages
        for part in getattr(message, 'parts', [])
        if isinstance(part, ToolReturnPart)
    }


async def ask(store: GraphStore, calls: list[ToolCallPart], **settings: object) -> dict[str, str]:
    """A new conversation (its own session) that only calls the memory tools, with what each answered."""
    model = ScriptedModel(steps=0, extra_calls=calls)
    capability = MementoCompaction(store, max_tokens=2_500, **settings)  # type: ignore[arg-type]
    result = await scripted_agent(model, [capability]).run('What did we do before?')
    return answers(result.all_messages())


async def test_recall_scope_namespace_finds_what_earlier_conversations_archived(store: GraphStore) -> None:
    await scripted_agent(ScriptedModel(steps=10), [MementoCompaction(store, max_tokens=2_500)]).run('Fix modules.')
    archived = store.list_blocks()
    assert archived, 'the first conversation should have archived blocks'
    page = store.list_pages(session_id=archived[0].session_id)[0]
    calls = [
        ToolCallPart('recall', {'query': 'src/app/module_0.py'}, tool_call_id='recall'),
        ToolCallPart('recover_block', {'block_id': archived[0].id}, tool_call_id='recover'),
        ToolCallPart('retrieve_page', {'page_id': page.id}, tool_call_id='page'),
        ToolCallPart('recover_block', {'block_id': page.id}, tool_call_id='page_as_block'),
    ]

    alone = await ask(store, calls)  # the default: this conversation's own archive, which is empty
    assert alone['recall'].startswith('Nothing archived matches')
    assert alone['recover'].startswith(f"No archived block '{archived[0].id}' in this session")
    assert alone['page'].startswith(f"No page '{page.id}'")
    assert (
        alone['page_as_block']
        == f'\'{page.id}\' is a page of the memory index: read it with retrieve_page("{page.id}").'
    )

    shared = await ask(store, calls, recall_scope='namespace')
    assert shared['recall'].startswith('1. recover_block(') and 'module_0.py (exact)' in shared['recall']
    assert f'[block {archived[0].id}: messages ' in shared['recover']
    started = archived[0].started_at
    assert started and f', from {started[:16]}, sha256 verified]' in shared['recover']  # a "yesterday" can be dated
    assert f', from {started[:16]}]' in shared['page']
    assert shared['page'].startswith(f'[page {page.number}') and archived[0].id in shared['page']

    other = await ask(store, calls, recall_scope='namespace', namespace='someone-else')
    assert other['recall'].startswith('Nothing archived matches')  # the namespace still keeps memories apart


async def test_recall_takes_a_time_range(store: GraphStore) -> None:
    capability = MementoCompaction(store, max_tokens=2_500, session_id='s')
    await scripted_agent(ScriptedModel(steps=10), [capability]).run('Fix modules.')
    model = ScriptedModel(steps=0)
    model.extra_calls = [
        ToolCallPart('recall', {'query': 'src/app/module_0.py', 'since': '2000-01-01'}, tool_call_id='past'),
        ToolCallPart('recall', {'query': 'src/app/module_0.py', 'since': '2999-01-01'}, tool_call_id='future'),
        ToolCallPart('recall', {'query': 'src/app/module_0.py', 'until': 'next Tuesday-ish'}, tool_call_id='bad'),
    ]
    second = await scripted_agent(model, [capability]).run('Since when?', message_history=[])
    said = answers(second.all_messages())
    assert 'module_0.py (exact)' in said['past']
    assert said['future'].startswith('Nothing archived since 2999-01-01 matches')
    assert 'until' in said['bad'] and 'ISO' in said['bad']  # the model is told what to send, the run goes on


async def test_retrieve_page_is_sized_to_the_mark(store: GraphStore) -> None:
    capability = MementoCompaction(store, max_tokens=2_500, session_id='s')
    await scripted_agent(ScriptedModel(steps=12), [capability]).run('Fix modules.')
    page = store.list_pages(session_id='s')[0]
    model = ScriptedModel(steps=0, extra_calls=[ToolCallPart('retrieve_page', {'page_id': page.id}, tool_call_id='p')])
    second = await scripted_agent(model, [capability]).run('Show page one.', message_history=[])
    text = answers(second.all_messages())['p']
    assert text.startswith(f'[page {page.number}') and 'part 1 of ' in text  # more than one part at this mark
    body = text.split('\n\n', 1)[1]  # under the header (and the page's summary)
    assert TokenCounter().count_text(body) <= 2_500 // 4  # a quarter of the mark: 3,000 tokens before
