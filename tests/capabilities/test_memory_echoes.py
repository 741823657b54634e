"""The memory tools' own answers quote the archive: archived with the conversation, byte for byte, they must not be
found again by what they quoted. A chat assistant recalls an old fact, the chat goes on until that turn is archived
too, and recall by the fact's words finds the turn where it was said, not the one that quoted it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import PrefixTools
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

from mementograph import MementoCompaction
from mementograph._echoes import MEMORY_TOOL_METADATA
from mementograph._messages import messages_sha256, serialize_messages
from mementograph.knowledge_graph.entities import mentions_for, reindex_entities
from mementograph.knowledge_graph.memory import render_block
from mementograph.knowledge_graph.recall import recall
from tests.capabilities.conftest import ALL_BACKENDS, Backend, opened_backend

FACT = 'Ann: I signed up for the kintsugi workshop at the Hollowbrook studio, taught by Ayumi Tanaka.'
QUOTED = ('kintsugi', 'Hollowbrook', 'Tanaka')
"""Words of the fact that only the recall's answer repeats, never the question or the reply around it."""
START = datetime(2023, 5, 1, 9, tzinfo=UTC)


@pytest.fixture(params=ALL_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[Backend]:
    with opened_backend(request, tmp_path, unique_namespace) as opened:
        yield opened


def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Bob answers small talk; asked about the workshop, he calls `recall` first and answers without repeating it."""
    stamp = START + timedelta(minutes=sum(isinstance(m, ModelRequest) for m in messages))
    last = messages[-1]
    if any(isinstance(part, ToolReturnPart) and part.tool_name == 'recall' for part in last.parts):
        return ModelResponse(parts=[TextPart('Bob: Yes, I found it in our earlier chat, you will love it.')])
    asked = next((part.content for part in last.parts if isinstance(part, UserPromptPart)), '')
    if isinstance(asked, str) and 'that workshop' in asked:
        return ModelResponse(parts=[ToolCallPart('recall', {'query': 'workshop signed up'}, tool_call_id='recall_1')])
    return ModelResponse(
        parts=[TextPart('Bob: Noted! Tell me more about it when we meet for dinner.')], timestamp=stamp
    )


_COLOURS = ('red', 'blue', 'green', 'yellow', 'orange', 'purple', 'silver', 'golden', 'brown', 'white')
_PLACES = ('river', 'forest', 'harbour', 'meadow', 'castle', 'canal', 'orchard', 'quarry', 'chapel', 'vineyard')


def _small_talk(turn: int) -> str:
    """A turn of chat without numbers or dates: a memento keeps every one, and they would crowd out the fact above."""
    colour, place = _COLOURS[turn % 10], _PLACES[turn // 10 % 10]
    return (
        f'Ann: I repaired the {colour} bicycle in the garage and oiled its chain, then walked the dog along '
        f'the {place} path; the bakery there sold out of rye bread again.'
    )


async def _chat(backend: Backend, archive_at_run_end: bool) -> tuple[Agent[None, str], list[ModelMessage]]:
    capability: MementoCompaction[None] = MementoCompaction(
        backend.store,
        max_tokens=1_200,
        session_id='chat',
        namespace=backend.namespace,
        archive_at_run_end=archive_at_run_end,
    )
    agent: Agent[None, str] = Agent(FunctionModel(_reply), capabilities=[capability])
    history: list[ModelMessage] = []
    # the first prompt is the task an agent keeps in context: the fact comes after it
    prompts = ['Ann: Hi Bob!', FACT, *map(_small_talk, range(30)), 'Ann: What was that workshop I mentioned?']
    for prompt in [*prompts, *map(_small_talk, range(30, 60))]:
        history = (await agent.run(prompt, message_history=history)).all_messages()
    return agent, history


def _blocks_holding(backend: Backend) -> tuple[str, list[str]]:
    """The block where the fact was said, and the blocks (a turn's, and a micro-compacted part's when the answer
    was large enough to be stubbed in place) that hold the recall answer quoting it, the turn's first."""
    said, quoting = None, []
    for block in backend.store.list_blocks(namespace=backend.namespace, session_id='chat'):
        messages = backend.store.recover_block(block.id, namespace=backend.namespace, session_id='chat').messages
        parts = [part for message in messages for part in message.parts]
        if any(isinstance(p, UserPromptPart) and p.content == FACT for p in parts):
            said = block.id
        if any(isinstance(p, ToolReturnPart) and p.tool_name == 'recall' and 'Hollowbrook' in p.content for p in parts):
            quoting.insert(0 if block.kind == 'block' else len(quoting), block.id)
    assert said is not None and quoting and quoting[0].startswith('blk_'), 'both turns should be archived'
    assert said not in quoting
    return said, quoting


@pytest.mark.parametrize('archive_at_run_end', [False, True], ids=['evicted', 'archived-at-run-ends'])
async def test_recall_finds_where_a_fact_was_said_not_where_a_memory_tool_quoted_it(
    backend: Backend, archive_at_run_end: bool
) -> None:
    """Evicted, the call and its answer make a block of their own; archived at each run's end, the short turn that
    called `recall` waits to be joined with the next one: either way only the block where the fact was said is
    found by it."""
    agent, history = await _chat(backend, archive_at_run_end)
    store, ns = backend.store, backend.namespace
    said, quoting = _blocks_holding(backend)
    quoted = quoting[0]

    hits = recall(store, 'kintsugi Hollowbrook Tanaka', 10, namespace=ns, session_id='chat')
    assert hits and hits[0].block_id == said
    assert not set(quoting) & {hit.block_id for hit in hits}, [(h.block_id, h.reasons) for h in hits]
    for word in QUOTED:  # no searchable view of a block holding the answer has the words it quoted
        found = {hit.id for hit in store.search_text(word, namespace=ns, session_id='chat')}
        assert said in found and not set(quoting) & found, (word, found)
    keys = {entity.key for entity, _ in store.entities_of(quoted, namespace=ns)}
    assert not any(word.lower() in key for key in keys for word in QUOTED), keys
    memento, source = (store.memento_of(b, namespace=ns, session_id='chat') for b in (quoted, said))
    assert memento is not None and source is not None
    if not archive_at_run_end:  # a block of the call and its answer: its memento names the call and what it found
        assert memento.text.startswith('RESULT: The memory tools were called: recall (') and source.id in memento.text
    assert not any(word in memento.text for word in QUOTED), memento.text
    for page in store.list_pages(namespace=ns, session_id='chat'):
        if said not in page.block_ids:
            assert not any(word.lower() in topic.lower() for topic in page.topics for word in QUOTED), page.topics

    # recovered byte for byte, the memory tool's answer included, and shown again by `recover_block`
    recovered = store.recover_block(quoted, namespace=ns, session_id='chat')
    assert messages_sha256(serialize_messages(recovered.messages)) == recovered.record.sha256
    answer = next(
        part for m in recovered.messages for part in m.parts if isinstance(part, ToolReturnPart)
    )  # fmt: skip
    assert answer.metadata == {MEMORY_TOOL_METADATA: 'recall'} and all(word in answer.content for word in QUOTED)
    shown: list[str] = []

    def recover(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            shown.append(str(returns[0].content))
            return ModelResponse(parts=[TextPart('Bob: There it is.')])
        return ModelResponse(parts=[ToolCallPart('recover_block', {'block_id': quoted}, tool_call_id='recover_1')])

    with agent.override(model=FunctionModel(recover)):
        await agent.run('Ann: Show me that turn again.', message_history=history)
    assert 'sha256 verified' in shown[0] and all(word in shown[0] for word in QUOTED)

    # a block archived before the answers were left out keeps the entities it quoted until `reindex`
    store.replace_mentions([quoted], mentions_for(quoted, render_block(recovered.messages)), namespace=ns)
    assert any('kintsugi' in entity.key for entity, _ in store.entities_of(quoted, namespace=ns))
    await reindex_entities(store, namespace=ns, session_id='chat')
    keys = {entity.key for entity, _ in store.entities_of(quoted, namespace=ns)}
    assert not any(word.lower() in key for key in keys for word in QUOTED), keys


NOTICE = 'Recall notice R-2291: the Brisk kettle lid latch can fail; owners get a free replacement lid.'


def _reply_with_two_recalls(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """As `_reply`, but asked about the workshop Bob also looks the kettle up with the application's own `recall`
    tool (a product-recall lookup), the capability's being prefixed `mem_` beside it."""
    last = messages[-1]
    if any(isinstance(part, ToolReturnPart) for part in last.parts):
        return ModelResponse(parts=[TextPart('Bob: Yes, you will love the workshop; ask for your new lid.')])
    asked = next((part.content for part in last.parts if isinstance(part, UserPromptPart)), '')
    if isinstance(asked, str) and 'that workshop' in asked:
        return ModelResponse(
            parts=[
                ToolCallPart('recall', {'product': 'Brisk kettle'}, tool_call_id='product_1'),
                ToolCallPart('mem_recall', {'query': 'workshop signed up'}, tool_call_id='recall_1'),
            ]
        )
    return ModelResponse(parts=[TextPart('Bob: Noted! Tell me more about it when we meet for dinner.')])


async def test_an_application_tool_named_recall_stays_searchable_beside_the_capabilitys(backend: Backend) -> None:
    """An application's own `recall` answers without the mark the capability's toolset sets on its own (here
    prefixed `mem_recall`, the names clashing otherwise): its answers were left out of search by the name alone,
    though they are conversation. Now the block holding both answers is found by the application's and not by
    what the capability's quoted."""
    capability: MementoCompaction[None] = MementoCompaction(
        backend.store, max_tokens=1_200, session_id='chat', namespace=backend.namespace
    )
    agent: Agent[None, str] = Agent(
        FunctionModel(_reply_with_two_recalls), capabilities=[PrefixTools(wrapped=capability, prefix='mem')]
    )

    @agent.tool_plain(name='recall')
    def product_recall(product: str) -> str:
        """Look a product up in the manufacturers' recall notices."""
        return NOTICE if 'kettle' in product.lower() else 'No recall notice.'

    history: list[ModelMessage] = []
    prompts = ['Ann: Hi Bob!', FACT, *map(_small_talk, range(30)), 'Ann: Is my kettle fine? And that workshop?']
    for prompt in [*prompts, *map(_small_talk, range(30, 60))]:
        history = (await agent.run(prompt, message_history=history)).all_messages()

    store, ns = backend.store, backend.namespace
    said = asked = None
    for block in store.list_blocks(namespace=ns, session_id='chat'):
        parts = [p for m in store.recover_block(block.id, namespace=ns, session_id='chat').messages for p in m.parts]
        returns = {p.tool_name: p for p in parts if isinstance(p, ToolReturnPart)}
        if any(isinstance(p, UserPromptPart) and p.content == FACT for p in parts):
            said = block.id
        if 'recall' in returns and block.kind == 'block':
            asked = block.id
            quoted = returns['mem_recall']
            assert quoted.metadata == {MEMORY_TOOL_METADATA: 'recall'} and 'Hollowbrook' in str(quoted.content)
            assert returns['recall'].content == NOTICE and not returns['recall'].metadata
    assert said is not None and asked is not None and said != asked, 'both turns should be archived'

    for word in ('latch', 'R-2291'):  # the application's answer is conversation
        assert asked in {hit.id for hit in store.search_text(word, namespace=ns, session_id='chat')}, word
    hits = recall(store, 'Brisk kettle lid latch', 5, namespace=ns, session_id='chat')
    assert hits and hits[0].block_id == asked, [(h.block_id, h.reasons) for h in hits]
    for word in QUOTED:  # the capability's answer beside it is still left out
        found = {hit.id for hit in store.search_text(word, namespace=ns, session_id='chat')}
        assert said in found and asked not in found, (word, found)
