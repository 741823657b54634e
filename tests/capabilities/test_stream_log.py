"""The session log of a streamed run with structured output: the closing request pydantic-ai keeps to the stream.

`Agent.run_stream` ends a structured-output run through `SetFinalResult`, and appends its closing request (the
output tool's `'Final result processed.'` return, with the returns of the response's other tool calls) to the
stream's own copy of the history, after every capability hook of the run: `wrap_run` and `after_run` get the run's
history without it. `MementoCompaction.log_history(result.all_messages())` logs it; a run that continues the
conversation logs it too, and nothing is logged twice either way. `run`, `iter` and `run_stream_events` keep that
request in the run's history, which the capability logs itself.

A structured-output run ends with a request, so the next run's prompt follows a request, and the run after that
gets the two merged into one by pydantic-ai (it merges consecutive requests of a `message_history`): the capability
takes them apart again, or it would log the whole conversation once more from its third run on. A memento stub
beside such a request is never merged into it: its end there is a response.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from mementograph import MementoCompaction, open_store
from mementograph._messages import deserialize_messages, serialize_messages
from mementograph.capabilities._layout import micro_part_of, stub_info
from mementograph.cli import main
from mementograph.knowledge_graph.store import GraphStore, verify_store
from tests.conftest import open_neo4j
from tests.scripted import file_body, is_original, streaming_model


class City(BaseModel):
    name: str
    population: int


@pytest.fixture(params=['memory', 'sqlite', pytest.param('neo4j', marks=pytest.mark.neo4j)])
def store(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[tuple[GraphStore, str]]:
    """A real store of each backend, and the namespace to write in (the Neo4j server is shared)."""
    if request.param == 'neo4j':
        opened = open_neo4j(request.getfixturevalue('neo4j_server'))
    else:
        opened = open_store('memory://' if request.param == 'memory' else f'sqlite://{tmp_path / "memory.db"}')
    try:
        yield opened, unique_namespace
    finally:
        for session in opened.list_sessions(namespace=unique_namespace):
            opened.delete_session(session.id, namespace=unique_namespace)
        opened.close()


def log_of(store: GraphStore, namespace: str, session: str = 's') -> list[ModelMessage]:
    events = [e for e in store.read_events(session, namespace=namespace) if e.kind == 'message']
    assert [e.message_index for e in events] == list(range(len(events)))  # no gap, no position twice
    return [deserialize_messages(e.payload)[0] for e in events]


def same(a: list[ModelMessage], b: list[ModelMessage]) -> bool:
    """Byte for byte, as the log holds messages."""
    return serialize_messages(a) == serialize_messages(b)


def survey_agent(capability: MementoCompaction[None], reads: int = 1) -> Agent[None, City]:
    """Reads `reads` files, then answers with a `City` and, in the same response, a `note` tool call: the closing
    request carries the output tool's return and `note`'s."""
    made = 0

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal made
        made += 1
        if made <= reads:
            return ModelResponse(parts=[ToolCallPart('read_file', {'path': f'm{made}.py'}, tool_call_id=f'r{made}')])
        return ModelResponse(
            parts=[
                ToolCallPart('note', {'text': f'checked {reads} files'}, tool_call_id=f'n{made}'),
                ToolCallPart('final_result', {'name': 'Lagos', 'population': 15_388_000}, tool_call_id=f'f{made}'),
            ]
        )

    agent = Agent(streaming_model(model), output_type=City, capabilities=[capability], end_strategy='exhaustive')

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        return file_body(int(path[1:-3]))

    @agent.tool_plain
    def note(text: str) -> str:
        """Take a note."""
        return f'noted: {text}'

    return agent


async def test_log_history_logs_what_run_stream_kept_to_its_stream(store: tuple[GraphStore, str]) -> None:
    graph, namespace = store
    capability = MementoCompaction(graph, namespace=namespace, max_tokens=100_000, session_id='s')
    agent = survey_agent(capability)
    async with agent.run_stream('Which city is largest?') as result:
        assert await result.get_output() == City(name='Lagos', population=15_388_000)
    history = result.all_messages()
    closing = history[-1]
    assert isinstance(closing, ModelRequest)
    returns = [part.content for part in closing.parts if isinstance(part, ToolReturnPart)]
    assert returns == ['noted: checked 1 files', 'Final result processed.']
    assert same(log_of(graph, namespace), history[:-1])  # what pydantic-ai let the capability see

    assert await capability.log_history(history) == 1
    assert same(log_of(graph, namespace), history)
    assert await capability.log_history(history) == 0  # again: nothing to add

    # the conversation goes on from that history, streamed again and then run: each message logged once
    async with agent.run_stream('And the second largest?', message_history=history) as more:
        await more.get_output()
    await capability.log_history(more.all_messages())
    last = await agent.run('And the third?', message_history=more.all_messages())
    assert same(log_of(graph, namespace), last.all_messages())
    assert verify_store(graph, namespace=namespace, session_id='s').ok


@pytest.mark.parametrize('log_first', [True, False], ids=['log_history', 'continued-only'])
async def test_a_continued_stream_logs_its_closing_request_once(store: tuple[GraphStore, str], log_first: bool) -> None:
    graph, namespace = store
    capability = MementoCompaction(graph, namespace=namespace, max_tokens=100_000, session_id='s')
    agent = Agent(TestModel(), output_type=City, capabilities=[capability])
    async with agent.run_stream('Largest city?') as result:
        await result.get_output()
    if log_first:
        await capability.log_history(result.all_messages())
    after = await agent.run('Next?', message_history=result.all_messages())
    assert same(log_of(graph, namespace), after.all_messages())


async def test_a_compacted_stream_logs_its_originals(store: tuple[GraphStore, str]) -> None:
    """Evictions during the stream's run: the history holds stubs, the log the originals, the closing request after
    them at its own position."""
    graph, namespace = store
    capability = MementoCompaction(graph, namespace=namespace, max_tokens=2_500, session_id='s')
    agent = survey_agent(capability, reads=8)
    async with agent.run_stream('Survey the modules.') as result:
        await result.get_output()
    history = result.all_messages()
    assert not all(is_original(m) for m in history), 'nothing was compacted'
    await capability.log_history(history)
    log = log_of(graph, namespace)
    assert same(log[-1:], history[-1:])
    assert len(log) == 2 * 9 + 1  # the prompt, 9 responses, 8 tool returns, the closing request
    assert verify_store(graph, namespace=namespace, session_id='s').ok


async def test_the_transcript_equals_the_streams_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = f'sqlite://{tmp_path / "memory.db"}'
    capability = MementoCompaction(uri, max_tokens=100_000)  # the session is the conversation's id
    async with survey_agent(capability).run_stream('Which city is largest?') as result:
        await result.get_output()
    history = result.all_messages()
    await capability.log_history(history)
    session = history[-1].conversation_id
    assert session is not None
    assert main(['transcript', '--store', uri, '--session', session, '--json']) == 0
    transcript = json.loads(capsys.readouterr().out)
    assert transcript == json.loads(serialize_messages(history))


def test_log_history_sync_after_run_stream_sync(store: tuple[GraphStore, str]) -> None:
    graph, namespace = store
    capability = MementoCompaction(graph, namespace=namespace, max_tokens=100_000, session_id='s')
    with survey_agent(capability).run_stream_sync('Which city is largest?') as result:
        result.get_output()
    history = result.all_messages()
    assert capability.log_history_sync(history) == 1
    assert same(log_of(graph, namespace), history)


@pytest.mark.parametrize('retention', ['run', 'none'])
async def test_log_history_writes_nothing_for_a_session_not_kept(store: tuple[GraphStore, str], retention: str) -> None:
    graph, namespace = store
    capability = MementoCompaction(
        graph,
        namespace=namespace,
        max_tokens=100_000,
        session_id='s',
        retention=retention,  # type: ignore[arg-type]
    )
    async with survey_agent(capability).run_stream('Which city is largest?') as result:
        await result.get_output()
    assert await capability.log_history(result.all_messages()) == 0
    assert graph.read_events('s', namespace=namespace) == []


async def test_iter_and_run_stream_events_log_the_closing_request_themselves(store: tuple[GraphStore, str]) -> None:
    graph, namespace = store
    iterated = MementoCompaction(graph, namespace=namespace, max_tokens=100_000, session_id='s')
    async with survey_agent(iterated).iter('Which city is largest?') as run:
        async for _ in run:
            pass
    assert run.result is not None
    assert same(log_of(graph, namespace), run.result.all_messages())

    streamed = MementoCompaction(graph, namespace=namespace, max_tokens=100_000, session_id='t')
    async with survey_agent(streamed).run_stream_events('Which city is largest?') as events:
        finished = [event async for event in events][-1]
    assert same(log_of(graph, namespace, 't'), finished.result.all_messages())  # type: ignore[union-attr]


@pytest.mark.parametrize('how', ['run', 'run_stream'])
async def test_a_structured_conversation_carried_on_is_logged_once(store: tuple[GraphStore, str], how: str) -> None:
    graph, namespace = store
    capability = MementoCompaction(graph, namespace=namespace, max_tokens=100_000, session_id='s')
    sent: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(list(messages))
        return ModelResponse(parts=[ToolCallPart('final_result', {'name': f'city {len(sent)}', 'population': 1})])

    agent = Agent(streaming_model(model), output_type=City, capabilities=[capability])
    history: list[ModelMessage] = []
    for turn in range(4):
        if how == 'run':
            history = (await agent.run(f'Question {turn}.', message_history=history)).all_messages()
        else:
            async with agent.run_stream(f'Question {turn}.', message_history=history) as result:
                await result.get_output()
            history = result.all_messages()
            await capability.log_history(history)
    assert same(log_of(graph, namespace), history)  # 4 x (prompt, response, closing request), each once
    assert len(history) == 12
    # the model got what pydantic-ai sends: each earlier closing request merged with the next prompt
    assert [len(messages) for messages in sent] == [1, 3, 5, 7]
    assert not any(isinstance(a, ModelRequest) and isinstance(b, ModelRequest) for a, b in itertools.pairwise(sent[-1]))


async def test_a_compacted_structured_conversation_carried_on_is_logged_once(store: tuple[GraphStore, str]) -> None:
    """Evictions and a redaction hook that is not idempotent (a message redacted twice would not match its log
    entry): the requests taken apart are checked against the log as it holds them."""
    graph, namespace = store
    capability = MementoCompaction(
        graph, namespace=namespace, max_tokens=2_500, session_id='s', redact=lambda text: text.replace('x', 'x+')
    )
    agent = survey_agent(capability, reads=8)
    history: list[ModelMessage] = []
    for turn in range(4):
        history = (await agent.run(f'Survey part {turn}.', message_history=history)).all_messages()
    log = log_of(graph, namespace)
    assert len(log) == (2 * 8 + 3) + 3 * 3  # the first run reads 8 files; then a prompt, an answer, its closing
    assert graph.list_blocks(namespace=namespace, session_id='s'), 'nothing was compacted'
    assert verify_store(graph, namespace=namespace, session_id='s').ok


async def test_a_history_that_only_looks_merged_is_logged_as_a_branch(store: tuple[GraphStore, str]) -> None:
    """A request without a run id (built by hand) that is no merge of the logged requests at its place: the history
    is a branch, logged after the log's end as before."""
    graph, namespace = store
    capability = MementoCompaction(graph, namespace=namespace, max_tokens=100_000, session_id='s')
    agent = Agent(TestModel(), output_type=City, capabilities=[capability])
    first = (await agent.run('Largest city?')).all_messages()
    branch = [*first[:2], ModelRequest(parts=[UserPromptPart('Never mind; the smallest?')])]
    second = (await agent.run('And its population?', message_history=branch)).all_messages()
    log = log_of(graph, namespace)
    assert same(log[: len(first)], first) and same(log[len(first) :], second)


@dataclass
class Arrivals(AbstractCapability[Any]):
    """Outermost: every message of a run as it first appears, before `MementoCompaction` sees it -- the ground truth
    the session log must hold, in order. A request pydantic-ai merged from earlier runs' is no arrival (no run id),
    nor is a stub or a micro-compacted copy."""

    messages: list[ModelMessage] = field(default_factory=list[ModelMessage])
    _seen: set[int] = field(default_factory=set[int])

    def get_ordering(self) -> CapabilityOrdering | None:
        return CapabilityOrdering(position='outermost')

    async def for_run(self, ctx: RunContext[Any]) -> Arrivals:
        return self  # one record across runs

    def observe(self, messages: Sequence[ModelMessage], run_id: str) -> None:
        for index, message in enumerate(messages):
            pending = index == len(messages) - 1 and message.run_id is None  # stamped after the hooks
            if id(message) in self._seen or stub_info(message) is not None or micro_part_of(message) is not None:
                continue  # seen, or made by `MementoCompaction`
            if message.run_id == run_id or pending:
                self._seen.add(id(message))
                self.messages.append(message)  # kept whole: stamped in place, it is serialized as logged

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        self.observe(ctx.messages, ctx.run_id)
        return request_context

    async def after_run(self, ctx: RunContext[Any], *, result: Any) -> Any:
        self.observe(result.all_messages(), ctx.run_id)
        return result


def turns_agent(capabilities: Sequence[AbstractCapability[Any]], reads: Sequence[int]) -> Agent[None, City]:
    """Turn N (a prompt `'Survey part N. ...'`) reads `reads[N]` files, then answers with a `City`: each run ends with
    its closing request, and the next run's prompt follows it."""
    turn, step = 0, 0

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal turn, step
        prompts = [str(p.content) for p in messages[-1].parts if isinstance(p, UserPromptPart)]
        prompt = next((p for p in prompts if p.startswith('Survey part ')), None)
        if prompt is not None:  # its own count: evicted tool returns no longer appear in `messages`
            turn, step = int(prompt.split()[2].rstrip('.')), 0
        step += 1
        if step <= reads[turn]:
            path = f'm{turn * 10 + step}.py'
            return ModelResponse(parts=[ToolCallPart('read_file', {'path': path}, tool_call_id=f'r{turn}_{step}')])
        city = {'name': f'City {turn}', 'population': turn}
        return ModelResponse(parts=[ToolCallPart('final_result', city, tool_call_id=f'f{turn}')])

    agent = Agent(FunctionModel(model), output_type=City, capabilities=list(capabilities))

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        return file_body(int(path[1:-3]))

    return agent


async def test_stubs_beside_closing_requests_keep_the_log_whole(store: tuple[GraphStore, str]) -> None:
    """Long prompts and evictions across four structured-output runs: blocks begin right after a closing request
    (a prompt) and end right before a prompt (a closing request). Their stubs face those requests with a response,
    so pydantic-ai merges none into them: a stub merged into an original request (part stub, part original) took no
    log position the history could be matched by, and the fourth run logged the whole conversation again."""
    graph, namespace = store
    capability = MementoCompaction(graph, namespace=namespace, max_tokens=2_500, session_id='s')
    arrivals = Arrivals()
    reads = (4, 0, 4, 4)
    agent = turns_agent([arrivals, capability], reads)
    histories: list[list[ModelMessage]] = [[]]
    for turn in range(len(reads)):
        prompt = f'Survey part {turn}. Also: ' + 'keep notes on every module. ' * 400
        histories.append((await agent.run(prompt, message_history=histories[-1])).all_messages())
    log = log_of(graph, namespace)
    assert len(log) == sum(2 * n + 3 for n in reads)  # a prompt, reads and returns, the answer, its closing request
    assert same(log, arrivals.messages)  # each once, in order, as it arrived: no branch
    for history in histories:  # pydantic-ai merges consecutive requests: no stub is next to a request
        assert not any(
            isinstance(a, ModelRequest) and isinstance(b, ModelRequest) and (stub_info(a) or stub_info(b))
            for a, b in itertools.pairwise(history)
        )
    blocks = graph.list_blocks(namespace=namespace, session_id='s')
    assert any(b.first_message > sum(2 * n + 3 for n in reads[:3]) for b in blocks), 'the last run archived nothing'
    for block in blocks:
        recovered = graph.recover_block(block.id, namespace=namespace, session_id='s').messages
        assert same(list(recovered), log[block.first_message : block.last_message + 1])
    assert verify_store(graph, namespace=namespace, session_id='s').ok
