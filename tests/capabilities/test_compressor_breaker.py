"""A compressor whose provider is down: after `BREAKER_FAILURES` mementos in a row that time out (or fail with the
provider's error), the extractive compressor and the rubric judge write every memento for `compress_cooldown`, at
once -- no block waits for its own `COMPRESS_ATTEMPTS` failed compactions -- then one memento probes the model; a
memento the model makes closes the breaker. Without it, each new block cost up to 3 compactions of
`compress_timeout` before its fallback, the context over its mark all the while."""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import AsyncIterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import (
    ModelAuthenticationError,
    ModelContextWindowExceededError,
    ModelHTTPError,
    ModelRateLimitError,
    ModelRequestRejectedError,
    ModelUnavailableError,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mementograph import MementoBreakerEvent, MementoCompaction, MementoSkippedEvent, MementoWarning, open_store
from mementograph._messages import serialize_messages
from mementograph.capabilities._breaker import BREAKER_FAILURES, is_outage
from mementograph.capabilities._compactor import COMPRESS_ATTEMPTS
from mementograph.knowledge_graph.memory import CompressionError, LLMCompressor
from mementograph.knowledge_graph.store import verify_store
from tests.capabilities.conftest import FILE_BACKENDS, Backend, opened_backend
from tests.scripted import ScriptedModel, is_original, scripted_agent, stub_texts

TIMEOUT = 1.0
"""A hung model's bound. Every call must reach the model within it (the calls are counted): at 0.2 s a loaded
machine (load 25 on 2 cores) timed out a compression while its agent was still being set up."""
COOLDOWN = 60.0
"""Never waited for: the breaker's clock is the test's (`Clock`)."""
RUN_LIMIT = 120.0

Mode = Literal['hang', 'raise']


@pytest.fixture(params=FILE_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[Backend]:
    with opened_backend(request, tmp_path, unique_namespace) as opened:
        yield opened


class Provider:
    """A compressor's model. Down, it never answers (`hang`: until cancelled) or refuses at once (`raise`: an HTTP
    503); up, it answers with a memento draft. Counts its calls."""

    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self.down = True
        self.calls = 0

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        if self.down:
            if self.mode == 'hang':
                await asyncio.Event().wait()
            raise ModelHTTPError.for_category(
                ModelUnavailableError, status_code=503, model_name='compressor', body='service unavailable'
            )
        draft = {'result': 'The module was read and its tests pass.', 'commands': ['pytest -q -> exit 0']}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, draft)])


class Clock:
    """The breaker's clock, moved on by the test: a cool-down passes without waiting for it."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now


@dataclass
class Run:
    output: str
    messages: list[ModelMessage]
    sent: set[bytes]
    """Every original message the model was sent, serialized."""
    warned: list[str]
    breaker: list[MementoBreakerEvent]
    failed: list[str]
    """The reasons of the compactions skipped because a memento failed."""


async def _run(capability: MementoCompaction[None], steps: int, session: str) -> Run:
    """A scripted agent's run in `session`: what it sent the model, its MementoWarnings and breaker events."""
    events: list[MementoBreakerEvent] = []
    failed: list[str] = []

    async def handler(ctx: RunContext[None], stream: AsyncIterable[Any]) -> None:
        async for event in stream:
            if isinstance(event, MementoBreakerEvent):
                events.append(event)
            elif isinstance(event, MementoSkippedEvent) and 'CompressionError' in event.reason:
                failed.append(event.reason)

    model = ScriptedModel(steps=steps)
    agent = scripted_agent(model, [capability])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = await asyncio.wait_for(
            agent.run('Go.', event_stream_handler=handler, conversation_id=session), RUN_LIMIT
        )
    warned = [str(w.message) for w in caught if w.category is MementoWarning]
    sent = {serialize_messages([m]) for seen in model.seen for m in seen if is_original(m)}
    return Run(result.output, result.all_messages(), sent, warned, events, failed)


def _capability(backend: Backend, provider: Provider, clock: Clock, **settings: Any) -> MementoCompaction[None]:
    capability = MementoCompaction(
        backend.store,
        namespace=backend.namespace,
        max_tokens=1_500,
        compressor=LLMCompressor(FunctionModel(provider)),
        # a refusal comes at once: a longer bound keeps a slow first call on a busy machine from timing out first
        compress_timeout=TIMEOUT if provider.mode == 'hang' else 30.0,
        compress_cooldown=COOLDOWN,
        micro_min_tokens=10**9,
        **settings,
    )
    capability._breaker.clock = clock  # the cool-down passes when the test says, without waiting
    return capability


def _assert_recoverable(backend: Backend, run: Run, session: str) -> None:
    """Every evicted block recovers byte for byte the messages the model was sent."""
    store, namespace = backend.store, backend.namespace
    blocks = store.list_blocks(namespace=namespace, session_id=session)
    assert blocks
    for block in blocks:
        recovered = store.recover_block(block.id, namespace=namespace, session_id=session)
        assert all(serialize_messages([m]) in run.sent for m in recovered.messages)
    assert verify_store(store, namespace=namespace, session_id=session).ok


def _compressors(backend: Backend, session: str) -> list[str]:
    mementos = backend.store.list_mementos(namespace=backend.namespace, session_id=session)
    return [m.compressor for m in sorted(mementos, key=lambda m: m.id) if m.level == 1]


@pytest.mark.parametrize('mode', ['hang', 'raise'])
async def test_a_compressor_whose_provider_is_down_is_given_up_on_after_a_few_failures(
    backend: Backend, mode: Mode
) -> None:
    provider = Provider(mode)
    capability = _capability(backend, provider, Clock())
    run = await _run(capability, steps=16, session='down')

    assert run.output.startswith('All 16 modules pass')
    # the model was called until it had failed BREAKER_FAILURES mementos in a row (the compaction that opened the
    # breaker had one more block in flight), never after
    assert BREAKER_FAILURES <= provider.calls <= BREAKER_FAILURES + 1
    opened = [event for event in run.breaker if event.opened]
    assert len(run.breaker) == len(opened) == 1
    assert opened[0].failures >= BREAKER_FAILURES and opened[0].cooldown == COOLDOWN and not opened[0].probe
    why = f'gave no memento within {TIMEOUT:g} s (compress_timeout)' if mode == 'hang' else 'status_code: 503'
    assert opened[0].error is not None and why in opened[0].error and opened[0].model.startswith('llm:')
    # one warning names the error and the cool-down; no block waited for its own fallback
    opening = [m for m in run.warned if 'mementos in a row' in m]
    assert len(opening) == 1 and why in opening[0] and f'for {COOLDOWN:g} s (compress_cooldown)' in opening[0]
    assert not any('times on the block' in m for m in run.warned)
    # the blocks were evicted all the same, each with the fallback's memento, and each recovers byte for byte
    compressors = _compressors(backend, 'down')
    assert len(compressors) >= 8 and set(compressors) == {'extractive'}
    assert len(stub_texts(run.messages)) >= 4
    _assert_recoverable(backend, run, 'down')
    # compactions skipped for a failed memento: only before the breaker opened
    assert len(run.failed) < BREAKER_FAILURES


@pytest.mark.parametrize('mode', ['hang', 'raise'])
async def test_after_the_cooldown_one_probe_then_the_model_writes_the_mementos_again(
    backend: Backend, mode: Mode, caplog: pytest.LogCaptureFixture
) -> None:
    """The breaker is the capability's: a run (or session) after the one that opened it starts with it open."""
    provider, clock = Provider(mode), Clock()
    capability = _capability(backend, provider, clock)
    first = await _run(capability, steps=8, session='down')
    assert [event.opened for event in first.breaker] == [True]
    calls = provider.calls

    # before the cool-down is over, no call at all
    clock.now += COOLDOWN / 2
    early = await _run(capability, steps=8, session='early')
    assert provider.calls == calls and early.breaker == [] and not early.warned
    assert set(_compressors(backend, 'early')) == {'extractive'}

    # the cool-down is over and the provider still down: one probe, which fails; the next wait is twice as long,
    # said in a breaker event and a log line, not another warning
    clock.now += COOLDOWN
    still = await _run(capability, steps=8, session='still-down')
    assert provider.calls == calls + 1
    assert [(e.opened, e.probe, e.cooldown) for e in still.breaker] == [(True, True, 2 * COOLDOWN)]
    assert not any('mementos in a row' in m for m in still.warned)
    assert set(_compressors(backend, 'still-down')) == {'extractive'}
    _assert_recoverable(backend, still, 'still-down')

    # the provider is back: after the longer cool-down the probe is made, the breaker closes, the model writes on
    provider.down = False
    capability.compress_timeout = 30.0  # answering, on a busy machine, may take longer than the hang's short bound
    clock.now += 2 * COOLDOWN
    with caplog.at_level(logging.WARNING, logger='mementograph'):
        back = await _run(capability, steps=8, session='back')
    assert [(e.opened, e.error) for e in back.breaker] == [(False, None)]
    assert sum('made a memento again' in r.getMessage() for r in caplog.records) == 1
    compressors = _compressors(backend, 'back')
    assert len(compressors) >= 3 and all(c.startswith('llm:') for c in compressors)
    assert not back.warned and back.failed == []
    _assert_recoverable(backend, back, 'back')


async def test_the_run_end_archive_goes_through_the_same_breaker(tmp_path: Path) -> None:
    """A chat under its mark, a run per message, archived at each run's end (`archive_at_run_end`): the failures
    of the runs' ends count together, and once the breaker opened the blocks are archived at once."""
    backend = Backend(open_store(f'sqlite://{tmp_path / "m.db"}'), 'default')
    provider = Provider('raise')
    capability = _capability(backend, provider, Clock(), archive_at_run_end=True)
    agent = Agent(FunctionModel(_chat_reply), capabilities=[capability])
    history: list[ModelMessage] | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        for prompt in _PROMPTS:
            history = (await agent.run(prompt, message_history=history)).all_messages()
    warned = [str(w.message) for w in caught if w.category is MementoWarning]
    assert history is not None

    # the run ends archive through the same breaker: after it opened, every later run end archived its blocks
    # with the fallback's mementos, and the model was not called again
    assert BREAKER_FAILURES <= provider.calls <= BREAKER_FAILURES + 1
    assert sum('mementos in a row' in m for m in warned) == 1
    opened_at = next(i for i, m in enumerate(warned) if 'mementos in a row' in m)
    assert not any('blocks left to archive later' in m for m in warned[opened_at + 1 :])
    session = history[0].conversation_id
    assert session is not None
    blocks = backend.store.list_blocks(session_id=session)
    mementos = [m for m in backend.store.list_mementos(session_id=session) if m.level == 1]
    assert len(blocks) == len(mementos) >= len(_PROMPTS) - 1
    assert {m.compressor for m in mementos} <= {'extractive', 'verbatim'}
    logged = {serialize_messages([m]) for m in history}
    for block in blocks:
        assert all(serialize_messages([m]) in logged for m in backend.store.recover_block(block.id).messages)
    assert verify_store(backend.store).ok


_PROMPTS = [
    'Remember: my dog is called Zebedee and he is a beagle who loves the beach in winter.',
    'Remember: I moved to Lisbon in March for a job at a bakery near the river.',
    'Remember: my sister Ottilie plays the cello in an orchestra in Vienna.',
    'Remember: I am allergic to hazelnuts, so no pralines or nougat for me.',
    'Remember: our wedding anniversary is on the 14th of October, in Porto.',
    'Remember: I drive an old green Volvo estate from 1998 with 400,000 km on it.',
    'Remember: my favourite book is The Left Hand of Darkness by Ursula K. Le Guin.',
    'Remember: I keep bees on the roof, three hives so far, and sell the honey.',
]


def _chat_reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    from pydantic_ai.messages import TextPart

    return ModelResponse(
        parts=[
            TextPart(
                'Thank you for telling me that. I will keep it in mind when we talk again, and I can bring it up '
                'whenever it helps: plans, gifts, travel, the calendar. Is there anything else about it you would '
                'like me to note down, such as dates or names?'
            )
        ]
    )


async def test_a_refusal_of_the_block_itself_leaves_the_breaker_closed(tmp_path: Path) -> None:
    """A provider that rejects a request answered it: that block's own fallback covers it, the breaker stays
    closed and every block is tried with the model."""
    calls = 0

    async def rejects(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        raise ModelHTTPError.for_category(ModelContextWindowExceededError, status_code=400, model_name='compressor')

    store = open_store(f'sqlite://{tmp_path / "m.db"}')
    capability = MementoCompaction(
        store, max_tokens=1_500, compressor=LLMCompressor(FunctionModel(rejects)), micro_min_tokens=10**9
    )
    run = await _run(capability, steps=8, session='s')
    assert run.breaker == [] and not any('mementos in a row' in m for m in run.warned)
    assert sum('failed 3 times on the block at message' in m for m in run.warned) == 1
    assert calls >= 2 * COMPRESS_ATTEMPTS  # more than one block was given to the model
    assert set(_compressors(Backend(store, 'default'), 's')) == {'extractive'}


def _caused(error: BaseException) -> CompressionError:
    try:
        raise CompressionError(f'llm failed: {type(error).__name__}: {error}') from error
    except CompressionError as exc:
        return exc


@pytest.mark.parametrize(
    ('error', 'outage'),
    [
        (CompressionError('gave no memento within 120 s (compress_timeout)'), False),  # the cause says, not the text
        (_caused(TimeoutError('no memento within 120 s')), True),
        (_caused(ConnectionRefusedError('connection refused')), True),
        (_caused(ModelHTTPError.for_category(ModelUnavailableError, status_code=503, model_name='m')), True),
        (_caused(ModelHTTPError.for_category(ModelRateLimitError, status_code=429, model_name='m')), True),
        (_caused(ModelHTTPError.for_category(ModelAuthenticationError, status_code=401, model_name='m')), True),
        (_caused(ModelHTTPError(502, 'm')), True),
        (_caused(ModelHTTPError(418, 'm')), False),
        (_caused(ModelHTTPError.for_category(ModelRequestRejectedError, status_code=400, model_name='m')), False),
        (_caused(ModelContextWindowExceededError('m', 'too long')), False),
        (_caused(UnexpectedModelBehavior('Exceeded maximum retries for output validation')), False),
        (CompressionError('llm: the memento has 90 tokens, not fewer than its block (80)'), False),
        (_caused(ValueError('a bug of a custom compressor')), False),
    ],
)
def test_which_failures_say_the_model_is_down(error: BaseException, outage: bool) -> None:
    assert is_outage(error) is outage
