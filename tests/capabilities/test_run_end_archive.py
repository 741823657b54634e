"""`archive_at_run_end`: a conversation that never passes the high-water mark is archived when its run ends, so a
later conversation recalls it; a later eviction of such a block stubs it with the memento written then (nothing is
compressed or written twice); the live history is never changed; a failing store or compressor is a warning.

On every backend: memory://, a SQLite file, and the shared Neo4j server (under a namespace of the test's own).
"""

from __future__ import annotations

import itertools
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pydantic import BaseModel
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

from mementograph import MementoCompaction, MementoWarning
from mementograph._messages import deserialize_messages, message_text, serialize_messages
from mementograph._tokens import DEFAULT_ENCODING, encoding_for_model
from mementograph.capabilities._layout import stub_info
from mementograph.cli._store_commands import event_records
from mementograph.knowledge_graph.memory import BlockInput, ExtractiveCompressor, LLMCompressor
from mementograph.knowledge_graph.store import GraphStore, verify_store
from tests.capabilities.conftest import ALL_BACKENDS, Backend, opened_backend
from tests.reliability._faults import FaultyStore
from tests.scripted import streaming_model

FACTS = [
    'my dog is called Zebedee and he is a beagle',
    'I moved to Lisbon in March for a job at a bakery',
    'my sister Ottilie plays the cello in an orchestra',
    'I am allergic to hazelnuts, so no pralines for me',
    'our wedding anniversary is on the 14th of October',
    'I drive an old green Volvo estate from 1998',
    'my favourite book is The Left Hand of Darkness',
    'I run the Porto half marathon every November',
    'my daughter Wilhelmina starts school in September',
    'I keep bees on the roof, three hives so far',
]


@pytest.fixture(params=ALL_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[Backend]:
    with opened_backend(request, tmp_path, unique_namespace) as opened:
        yield opened


def _prompt(messages: list[ModelMessage]) -> str:
    request = next(m for m in reversed(messages) if isinstance(m, ModelRequest))
    return ' '.join(str(p.content) for p in request.parts if isinstance(p, UserPromptPart))


def chat_reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """An assistant that answers each message at some length (a chat turn of ~100-200 tokens)."""
    said = _prompt(messages)
    return ModelResponse(
        parts=[
            TextPart(
                f'Thank you for telling me that {said.removeprefix("Remember: ")}. I will keep it in mind when we '
                'talk again, and I can bring it up whenever it helps: plans, gifts, travel, the calendar. '
                'Is there anything else about it you would like me to note down, such as dates or names?'
            )
        ]
    )


async def chat(
    store: GraphStore, namespace: str, prompts: list[str], *, model: FunctionModel | None = None, **settings: object
) -> list[ModelMessage]:
    """One conversation as a chat app runs it: a run per message, each continuing the last (`message_history`)."""
    capability = MementoCompaction(store, namespace=namespace, **settings)  # type: ignore[arg-type]
    agent = Agent(model or FunctionModel(chat_reply), capabilities=[capability])
    history: list[ModelMessage] | None = None
    for prompt in prompts:
        history = (await agent.run(prompt, message_history=history)).all_messages()
    assert history is not None
    return history


def session_of(history: list[ModelMessage]) -> str:
    conversation = history[0].conversation_id if isinstance(history[0], ModelRequest) else None
    assert conversation
    return conversation


def originals(history: list[ModelMessage]) -> list[ModelMessage]:
    return [m for m in history if stub_info(m) is None]


def archive_events(store: GraphStore, session: str, namespace: str) -> list[tuple[str, ...]]:
    return [e.block_ids for e in store.read_events(session, namespace=namespace) if e.kind == 'archive']


def assert_whole(store: GraphStore, session: str, namespace: str) -> None:
    """Verified, no block twice, no two blocks sharing a message, one memento per block."""
    report = verify_store(store, namespace=namespace, session_id=session)
    assert report.ok, report.problems
    blocks = sorted(store.list_blocks(namespace=namespace, session_id=session), key=lambda b: b.first_message)
    assert len({b.id for b in blocks}) == len(blocks)
    assert all(b.last_message < after.first_message for b, after in itertools.pairwise(blocks))
    level_one = [m for m in store.list_mementos(namespace=namespace, session_id=session) if m.level == 1]
    assert sorted(s for m in level_one for s in m.summarizes) == sorted(b.id for b in blocks)


class Recaller:
    """A new conversation's model: `recall(query)`, then `recover_block` of the first hit, then an answer."""

    def __init__(self, query: str) -> None:
        self.query = query
        self.returns: dict[str, str] = {}

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for message in messages:
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    self.returns[part.tool_call_id] = str(part.content)
        if 'recall' not in self.returns:
            return ModelResponse(parts=[ToolCallPart('recall', {'query': self.query}, tool_call_id='recall')])
        if 'recover' not in self.returns:
            found = re.search(r'recover_block\("((?:blk|mem)_[0-9a-f]+)"\)', self.returns['recall'])
            assert found, self.returns['recall']
            return ModelResponse(
                parts=[ToolCallPart('recover_block', {'block_id': found.group(1)}, tool_call_id='recover')]
            )
        return ModelResponse(parts=[TextPart('Found it.')])


async def test_a_short_chat_is_archived_at_its_end_and_recalled_from_a_new_session(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    history = await chat(store, ns, [f'Remember: {fact}.' for fact in FACTS], max_tokens=50_000)
    session = session_of(history)

    # never past the mark: nothing evicted, the history is the run's own, and yet every message is archived
    assert all(stub_info(m) is None for m in history)
    blocks = sorted(store.list_blocks(namespace=ns, session_id=session), key=lambda b: b.first_message)
    assert blocks and blocks[0].first_message == 0 and blocks[-1].last_message == len(history) - 1
    for block in blocks:  # byte for byte what the run's history holds at those positions
        recovered = store.recover_block(block.id, namespace=ns, session_id=session)
        assert serialize_messages(recovered.messages) == serialize_messages(
            history[block.first_message : block.last_message + 1]
        )
    assert [id for ids in archive_events(store, session, ns) for id in ids] == [b.id for b in blocks]
    exported = [r for r in event_records(store, ns, session) if r['kind'] == 'archive']  # `export --events`
    assert [block_id for r in exported for block_id in r['block_ids']] == [b.id for b in blocks]
    assert_whole(store, session, ns)

    # a new conversation (its own session) recalls it
    recaller = Recaller('Zebedee beagle')
    capability = MementoCompaction(store, namespace=ns, max_tokens=50_000, recall_scope='namespace')
    await Agent(FunctionModel(recaller), capabilities=[capability]).run('What is my dog called?')
    assert recaller.returns['recall'].startswith('1. recover_block(')
    assert 'Zebedee' in recaller.returns['recover'] and 'sha256 verified' in recaller.returns['recover']


async def test_a_run_end_archive_then_an_eviction_compresses_nothing_twice(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    compressor = CountingCompressor()
    settings: dict[str, object] = {'max_tokens': 2_500, 'compressor': compressor, 'archive_at_run_end': True}
    first = await chat(store, ns, [f'Remember: {fact}.' for fact in FACTS[:4]], **settings)
    session = session_of(first)
    archived = {b.id for b in store.list_blocks(namespace=ns, session_id=session)}
    assert archived and all(stub_info(m) is None for m in first)
    made = [m.compressor for m in store.list_mementos(namespace=ns, session_id=session)]
    assert len(compressor.texts) == made.count('counting') and made.count('verbatim') == 1  # the first task's

    # the conversation goes on past the mark: the blocks archived at the run ends are evicted as they were
    capability = MementoCompaction(store, namespace=ns, **settings)  # type: ignore[arg-type]
    agent = Agent(FunctionModel(chat_reply), capabilities=[capability])
    history = first
    for fact in FACTS[4:]:
        history = (
            await agent.run(f'Remember: {fact}. ' + 'And one more detail. ' * 60, message_history=history)
        ).all_messages()
    stubbed = {info.target_id for m in history if (info := stub_info(m)) is not None and info.level == 1}
    assert stubbed & archived, 'the eviction should have stubbed blocks archived at a run end'
    assert len(compressor.texts) == len(set(compressor.texts)), 'a block was compressed twice'
    # every archived block's memento is the one written first, and the log names each eviction of them once
    events = [e for e in store.read_events(session, namespace=ns) if e.kind in ('auto', 'manual')]
    evicted = [block_id for e in events for block_id in e.block_ids]
    assert len(evicted) == len(set(evicted)) and stubbed <= set(evicted) | {
        b for m in store.list_mementos(namespace=ns, session_id=session) for b in m.summarizes
    }
    assert_whole(store, session, ns)
    # what the model sees of such a block is its stored memento
    shown: dict[str, str] = {}
    for message in history:
        info = stub_info(message)
        if info is not None and info.target_id in archived:
            shown[info.memento_id] = shown.get(info.memento_id, '') + message_text(message)
    for memento_id, text in shown.items():
        assert store.get_memento(memento_id, namespace=ns, session_id=session).text in text


@dataclass
class CountingCompressor:
    """The extractive compressor, recording the text of every block it is asked to compress (not refinements or
    merges)."""

    inner: ExtractiveCompressor = field(default_factory=ExtractiveCompressor)
    name: str = 'counting'
    target_ratio: float = 0.15
    texts: list[str] = field(default_factory=list[str])

    async def compress(self, block: BlockInput, *, feedback: str | None = None, previous: str | None = None) -> str:
        if previous is None and not block.merges:
            self.texts.append(block.text)
        return await self.inner.compress(block, feedback=feedback, previous=previous)


async def test_off_archives_nothing_below_the_mark(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    history = await chat(
        store, ns, [f'Remember: {fact}.' for fact in FACTS[:3]], max_tokens=50_000, archive_at_run_end=False
    )
    session = session_of(history)
    assert store.list_blocks(namespace=ns, session_id=session) == []
    assert archive_events(store, session, ns) == []
    assert [e.kind for e in store.read_events(session, namespace=ns)] == ['message'] * len(history)


def test_auto_is_on_only_when_archiving_needs_no_model() -> None:
    assert MementoCompaction('memory://')._archives_at_run_end()
    assert MementoCompaction('memory://', compressor=ExtractiveCompressor())._archives_at_run_end()
    assert not MementoCompaction(
        'memory://', compressor=LLMCompressor(FunctionModel(chat_reply))
    )._archives_at_run_end()
    assert MementoCompaction(
        'memory://', compressor=LLMCompressor(FunctionModel(chat_reply)), archive_at_run_end=True
    )._archives_at_run_end()
    assert not MementoCompaction('memory://', retention='run', archive_at_run_end=True)._archives_at_run_end()
    with pytest.raises(TypeError, match='archive_at_run_end'):
        MementoCompaction('memory://', archive_at_run_end='yes')  # type: ignore[arg-type]


async def test_a_deferred_tool_call_is_not_archived(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    from pydantic_ai import DeferredToolRequests

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[TextPart('Noted, Zebedee the beagle. ' * 12)])
        return ModelResponse(parts=[ToolCallPart('book_vet', {'dog': 'Zebedee'}, tool_call_id='vet')])

    capability = MementoCompaction(store, namespace=ns, max_tokens=50_000)
    agent = Agent(FunctionModel(model), capabilities=[capability], output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def book_vet(dog: str) -> str:
        """Book the vet."""
        return f'booked for {dog}'

    first = await agent.run('Remember: my dog is called Zebedee.')
    ask = 'Book him a vet appointment, any weekday morning, at the practice on Rua Augusta. ' * 4  # not small
    result = await agent.run(ask, message_history=first.all_messages())
    assert isinstance(result.output, DeferredToolRequests)
    history = result.all_messages()
    session = session_of(history)
    blocks = store.list_blocks(namespace=ns, session_id=session)
    assert blocks and max(b.last_message for b in blocks) < len(history) - 1  # the pending call stays out
    assert not any('book_vet' in b.messages_json.decode() for b in blocks)
    assert_whole(store, session, ns)


@pytest.mark.parametrize('failing', ['store', 'compressor'])
async def test_a_failure_at_the_run_end_is_a_warning_and_the_log_is_whole(backend: Backend, failing: str) -> None:
    store, ns = backend.store, backend.namespace
    archive = lambda eviction: any(event.kind == 'archive' for event in eviction.events)  # noqa: E731
    faulty = FaultyStore(store, 'inside', times=100, when=archive)  # its transaction fails: nothing is written

    class Refusing(ExtractiveCompressor):
        async def compress(self, block: BlockInput, *, feedback: str | None = None, previous: str | None = None) -> str:
            raise RuntimeError('the compressor is down')

    settings: dict[str, object] = {'max_tokens': 50_000, 'archive_at_run_end': True}
    if failing == 'compressor':
        settings['compressor'] = Refusing()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        history = await chat(
            faulty if failing == 'store' else store,
            ns,
            ['Remember: my dog is Zebedee.', 'Remember: my cat is Mog.'],
            **settings,
        )  # type: ignore[arg-type]
    said = [str(w.message) for w in caught if issubclass(w.category, MementoWarning)]
    assert said and all('the session log holds every message' in s for s in said), said
    assert ('could not archive the run' if failing == 'store' else 'the compressor failed') in said[0]
    session = session_of(history)
    assert history[-1].parts[0].content.startswith('Thank you')  # type: ignore[union-attr]
    # nothing archived but, with the compressor down, the first task (too small to compress: its own memento)
    assert [b.last_message for b in store.list_blocks(namespace=ns, session_id=session)] == (
        [] if failing == 'store' else [0]
    )
    logged = [e for e in store.read_events(session, namespace=ns) if e.kind == 'message']
    assert [deserialize_messages(e.payload)[0] for e in logged] == originals(history)

    # the next run's end archives what this one could not: nothing is lost
    capability = MementoCompaction(store, namespace=ns, max_tokens=50_000)
    await Agent(FunctionModel(chat_reply), capabilities=[capability]).run('And a cat.', message_history=history)
    blocks = store.list_blocks(namespace=ns, session_id=session)
    assert blocks and min(b.first_message for b in blocks) == 0
    assert_whole(store, session, ns)


class Reply(BaseModel):
    text: str


def structured_reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """`chat_reply` through an output tool: the run ends with its closing request (`'Final result processed.'`)."""
    text = chat_reply(messages, info).parts[0].content  # type: ignore[union-attr]
    return ModelResponse(parts=[ToolCallPart('final_result', {'text': text}, tool_call_id=f'reply_{len(messages)}')])


MODEL_NAME = 'gpt-4-turbo'
"""A model whose encoding (`cl100k_base`) counts these chats' blocks otherwise than the default (`o200k_base`)."""


def archived(store: GraphStore, session: str, namespace: str) -> list[tuple[int, int, int]]:
    """Each block's first and last message, and its tokens as counted when it was archived."""
    blocks = store.list_blocks(namespace=namespace, session_id=session)
    return sorted((b.first_message, b.last_message, b.tokens) for b in blocks)


async def test_a_streamed_chat_is_archived_as_a_run_chat_is(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """`run_stream` ends its run when its output has been read: the run's end hooks (`wrap_run`, `after_run`) run as
    the `async with` block exits, and a text-output stream archives there. With structured output the closing
    request reaches only the stream's history, so the last response's output call looks unanswered at the run's
    end; `log_history(result.all_messages())` logs that request and archives what `agent.run` would have: the same
    blocks, their tokens counted with the model's encoding as the run counts them (not the default encoding)."""
    monkeypatch.delenv('MEMENTOGRAPH_ENCODING', raising=False)
    assert encoding_for_model(MODEL_NAME) != DEFAULT_ENCODING
    store, ns = backend.store, backend.namespace
    prompts = [f'Remember: {fact}.' for fact in FACTS[:4]]
    blocks: dict[str, list[tuple[int, int, int]]] = {}
    for how in ('structured run_stream', 'structured run', 'text run_stream'):
        capability = MementoCompaction(store, namespace=ns, max_tokens=50_000)
        structured = how.startswith('structured')
        model = streaming_model(structured_reply if structured else chat_reply, MODEL_NAME)
        agent = Agent(model, capabilities=[capability], output_type=Reply if structured else str)
        history: list[ModelMessage] = []
        for prompt in prompts:
            if how.endswith('run_stream'):
                async with agent.run_stream(prompt, message_history=history) as result:
                    await result.get_output()
                history = result.all_messages()
                if structured:
                    assert await capability.log_history(history) == 1  # its closing request
            else:
                history = (await agent.run(prompt, message_history=history)).all_messages()
        session = session_of(history)
        blocks[how] = archived(store, session, ns)
        assert blocks[how][-1][1] == len(history) - 1, how  # the last turn too
        for block in store.list_blocks(namespace=ns, session_id=session):
            recovered = store.recover_block(block.id, namespace=ns, session_id=session).messages
            assert serialize_messages(recovered) == serialize_messages(
                history[block.first_message : block.last_message + 1]
            )
        assert_whole(store, session, ns)
        if how == 'structured run_stream':  # a new conversation recalls its last turn (before the others exist)
            recaller = Recaller('hazelnuts pralines')
            recalling = MementoCompaction(store, namespace=ns, max_tokens=50_000, recall_scope='namespace')
            await Agent(FunctionModel(recaller), capabilities=[recalling]).run('What am I allergic to?')
            assert 'hazelnuts' in recaller.returns['recover'] and 'sha256 verified' in recaller.returns['recover']
    assert blocks['structured run_stream'] == blocks['structured run']


def structured_stream_sync(capability: MementoCompaction[None], prompts: list[str]) -> list[ModelMessage]:
    """A structured-output chat through `run_stream_sync`, each run's history given to `log_history_sync`."""
    agent = Agent(streaming_model(structured_reply, MODEL_NAME), capabilities=[capability], output_type=Reply)
    history: list[ModelMessage] = []
    for prompt in prompts:
        with agent.run_stream_sync(prompt, message_history=history) as result:
            result.get_output()
        history = result.all_messages()
        assert capability.log_history_sync(history) == 1  # its closing request
    return history


def test_a_sync_streamed_chat_is_archived_as_a_run_chat_is(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """`log_history_sync` after `run_stream_sync` archives as `log_history` does after `run_stream`: the last turn
    too, each block recoverable byte for byte, the same blocks and token counts as `run_sync` archives; called
    again, it logs and archives nothing twice."""
    monkeypatch.delenv('MEMENTOGRAPH_ENCODING', raising=False)
    store, ns = backend.store, backend.namespace
    prompts = [f'Remember: {fact}.' for fact in FACTS[:4]]
    capability = MementoCompaction(store, namespace=ns, max_tokens=50_000)
    history = structured_stream_sync(capability, prompts)
    session = session_of(history)
    blocks = archived(store, session, ns)
    assert blocks[-1][1] == len(history) - 1  # the last turn, which only `log_history_sync` can archive
    for block in store.list_blocks(namespace=ns, session_id=session):
        recovered = store.recover_block(block.id, namespace=ns, session_id=session).messages
        assert serialize_messages(recovered) == serialize_messages(
            history[block.first_message : block.last_message + 1]
        )
    assert_whole(store, session, ns)

    log = [(e.kind, e.sha256, e.message_index, e.block_ids) for e in store.read_events(session, namespace=ns)]
    assert capability.log_history_sync(history) == 0
    assert [(e.kind, e.sha256, e.message_index, e.block_ids) for e in store.read_events(session, namespace=ns)] == log
    assert archived(store, session, ns) == blocks

    ran = MementoCompaction(store, namespace=ns, max_tokens=50_000)
    agent = Agent(streaming_model(structured_reply, MODEL_NAME), capabilities=[ran], output_type=Reply)
    by_run: list[ModelMessage] = []
    for prompt in prompts:
        by_run = agent.run_sync(prompt, message_history=by_run).all_messages()
    assert archived(store, session_of(by_run), ns) == blocks


async def test_log_history_sync_archives_from_a_running_event_loop(backend: Backend) -> None:
    """Called from a coroutine (this thread runs a loop), the archive runs on a loop of its own in a thread:
    no deadlock, and the last turn is archived as from sync code."""
    store, ns = backend.store, backend.namespace
    capability = MementoCompaction(store, namespace=ns, max_tokens=50_000)
    agent = Agent(streaming_model(structured_reply), capabilities=[capability], output_type=Reply)
    history: list[ModelMessage] = []
    for fact in FACTS[:2]:
        async with agent.run_stream(f'Remember: {fact}.', message_history=history) as result:
            await result.get_output()
        history = result.all_messages()
        assert capability.log_history_sync(history) == 1
    session = session_of(history)
    assert archived(store, session, ns)[-1][1] == len(history) - 1
    assert_whole(store, session, ns)


def test_log_history_sync_warns_when_the_archive_fails(backend: Backend) -> None:
    """The compressor failing at the archive is a warning, as at a run's end: the log is whole, the caller gets
    the count of messages logged, and a later call archives what was left."""
    store, ns = backend.store, backend.namespace

    class Refusing(ExtractiveCompressor):
        refuse = True

        async def compress(self, block: BlockInput, *, feedback: str | None = None, previous: str | None = None) -> str:
            if Refusing.refuse:
                raise RuntimeError('the compressor is down')
            return await super().compress(block, feedback=feedback, previous=previous)

    capability = MementoCompaction(store, namespace=ns, max_tokens=50_000, compressor=Refusing())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        history = structured_stream_sync(capability, ['Remember: my dog is Zebedee.'])
    said = [str(w.message) for w in caught if issubclass(w.category, MementoWarning)]
    assert said and all('the compressor failed' in s and 'the session log holds every message' in s for s in said)
    session = session_of(history)
    logged = [e for e in store.read_events(session, namespace=ns) if e.kind == 'message']
    assert [deserialize_messages(e.payload)[0] for e in logged] == history
    assert archived(store, session, ns)[-1][1] < len(history) - 1  # the turn waits, not lost

    Refusing.refuse = False
    assert capability.log_history_sync(history) == 0
    assert archived(store, session, ns)[-1][1] == len(history) - 1
    assert_whole(store, session, ns)
