"""A compressor or judge whose model never answers: each block's memento is bounded by `compress_timeout`, the
attempt counts as a failed compaction (no eviction, a warning, a skipped event), the extractive compressor and the
rubric judge take over -- for every block once `BREAKER_FAILURES` mementos in a row timed out (`_breaker`, and
`test_compressor_breaker.py`), for one block after `COMPRESS_ATTEMPTS` on it -- and the call given up on is
cancelled, never read."""

from __future__ import annotations

import asyncio
import re
import threading
import time
import warnings
from collections.abc import AsyncIterable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mementograph import MementoCompaction, MementoSkippedEvent, MementoWarning, open_store
from mementograph.capabilities._breaker import BREAKER_FAILURES
from mementograph.capabilities._compactor import COMPRESS_ATTEMPTS
from mementograph.knowledge_graph.memory import LLMCompressor, LLMJudge
from mementograph.knowledge_graph.store import GraphStore, verify_store
from tests.scripted import ScriptedModel, scripted_agent, stub_texts

TIMEOUT = 1.0
"""Every call must reach the model within it (the calls are counted): at 0.2 s a loaded machine timed out a
compression while its agent was still being set up."""
RUN_LIMIT = 60.0
"""A run that takes longer hangs: without the bound it would wait for ever."""


@pytest.fixture
def store(tmp_path: Path) -> GraphStore:
    return open_store(f'sqlite://{tmp_path / "m.db"}')


class NeverAnswers:
    """A model function that waits for ever (until cancelled), counting its calls and their cancellations."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError('unreachable')


async def _run(capability: MementoCompaction[None], steps: int) -> tuple[Any, list[str], list[str]]:
    """Run a scripted agent (failing, not hanging, past `RUN_LIMIT`); its output, the MementoWarnings and the skipped
    events' reasons."""
    reasons: list[str] = []

    async def events(ctx: RunContext[None], stream: AsyncIterable[Any]) -> None:
        async for event in stream:
            if isinstance(event, MementoSkippedEvent):
                reasons.append(event.reason)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = await asyncio.wait_for(
            scripted_agent(ScriptedModel(steps=steps), [capability]).run('Go.', event_stream_handler=events),
            RUN_LIMIT,
        )
    warned = [str(w.message) for w in caught if w.category is MementoWarning]
    return result, warned, reasons


def _pending_compressions() -> list[asyncio.Task[Any]]:
    return [
        task
        for task in asyncio.all_tasks()
        if not task.done() and 'make_memento' in getattr(task.get_coro(), '__qualname__', '')
    ]


async def test_a_compressor_that_never_answers_is_given_up_on_and_the_run_goes_on(store: GraphStore) -> None:
    never = NeverAnswers()
    compressor = LLMCompressor(FunctionModel(never))
    capability = MementoCompaction(
        store, max_tokens=1_500, compressor=compressor, compress_timeout=TIMEOUT, micro_min_tokens=10**9
    )
    result, warned, reasons = await _run(capability, steps=6)

    assert result.output.startswith('All 6 modules pass')
    # one warning names the bound; every timed-out compaction is a skipped event saying so
    bounded = f'gave no memento within {TIMEOUT:g} s (compress_timeout)'
    assert sum(m.startswith('mementograph: compaction failed: ') and bounded in m for m in warned) == 1
    assert 1 <= sum(bounded in reason for reason in reasons) < BREAKER_FAILURES
    # no eviction until the third timeout in a row, then the extractive compressor wrote every memento
    assert sum(f'failed {BREAKER_FAILURES} mementos in a row' in m and bounded in m for m in warned) == 1
    mementos = store.list_mementos()
    assert mementos and {m.compressor for m in mementos} == {'extractive'} and stub_texts(result.all_messages())
    assert verify_store(store).ok
    # every model call given up on was cancelled; none is still running, none spent or recorded anything
    assert never.started >= BREAKER_FAILURES and never.cancelled == never.started
    assert _pending_compressions() == [] and compressor.tokens_spent == 0


async def test_a_judge_that_never_answers_gives_way_to_the_rubric(store: GraphStore) -> None:
    """The fallback needs no model at all: with the judge the one hanging, extractive mementos alone would time out
    as well, for good."""
    never = NeverAnswers()
    capability = MementoCompaction(
        store, max_tokens=1_500, judge=LLMJudge(FunctionModel(never)), compress_timeout=TIMEOUT, micro_min_tokens=10**9
    )
    result, warned, reasons = await _run(capability, steps=6)

    assert result.output.startswith('All 6 modules pass')
    assert sum('compress_timeout' in reason for reason in reasons) >= 1
    opened = [m for m in warned if 'mementos in a row' in m]
    assert len(opened) == 1 and 'the extractive compressor and the rubric judge (no model) write' in opened[0]
    assert store.list_mementos() and stub_texts(result.all_messages())
    assert {m.compressor for m in store.list_mementos()} == {'extractive'}
    assert never.cancelled == never.started >= BREAKER_FAILURES
    assert _pending_compressions() == []


class NeverMerges(NeverAnswers):
    """Answers a block's compression with a memento draft; never answers a merge of mementos (the block it is given
    is made of the drafts' `RESULT:` lines)."""

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = ''.join(str(getattr(part, 'content', '')) for message in messages for part in message.parts)
        if re.search(r'<block tokens="\d+">\nRESULT:', prompt):
            return await super().__call__(messages, info)
        draft = {'result': 'The module was read and its tests pass.', 'commands': ['pytest -q -> exit 0']}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, draft)])


async def test_merging_mementos_with_a_compressor_that_never_answers_falls_back_too(store: GraphStore) -> None:
    """Merges are bounded and fall back the same way: else every compaction with mementos over their share would
    time out at its merge, and the context would never be compacted again. (A model that answers no memento at all
    is given up on for every memento, merges included, by the breaker: `test_compressor_breaker.py`.)"""
    never = NeverMerges()
    # a longer bound: the blocks' compressions must not time out on a busy machine (the breaker would take them)
    capability = MementoCompaction(
        store, max_tokens=2_000, compressor=LLMCompressor(FunctionModel(never)), compress_timeout=1.0
    )
    result, warned, _ = await _run(capability, steps=20)

    assert result.output.startswith('All 20 modules pass')
    assert never.started >= COMPRESS_ATTEMPTS  # the merges given to the model
    merged = [m for m in store.list_mementos() if m.level >= 2]
    assert merged and {m.compressor for m in merged} == {'extractive'}
    assert {m.compressor for m in store.list_mementos() if m.level == 1} == {'llm:function:NeverMerges:'}
    # a merge that timed out kept its compaction's eviction (committed already), and said so
    assert any(m.startswith('mementograph: merging mementos failed: CompressionError: ') for m in warned)
    assert verify_store(store).ok
    assert never.cancelled == never.started and _pending_compressions() == []


class SlowInAThread:
    """A plain `def` model function (pydantic-ai runs it in a worker thread, which cancellation cannot stop) that
    answers after `seconds`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.answered = threading.Event()

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        time.sleep(self.seconds)
        self.answered.set()
        return ModelResponse(parts=[])


async def test_an_answer_after_the_timeout_is_dropped(store: GraphStore) -> None:
    slow = SlowInAThread(seconds=TIMEOUT + 1.0)
    compressor = LLMCompressor(FunctionModel(slow))
    capability = MementoCompaction(
        store, max_tokens=1_500, compressor=compressor, compress_timeout=TIMEOUT, micro_min_tokens=10**9
    )
    result, _, reasons = await _run(capability, steps=3)
    assert result.output.startswith('All 3 modules pass')
    assert any('compress_timeout' in reason for reason in reasons)
    before = (store.stats().mementos, store.stats().events)

    await asyncio.sleep(slow.seconds + 0.5)  # the thread answers now: nothing may take it in
    assert slow.answered.is_set()
    assert _pending_compressions() == [] and compressor.tokens_spent == 0
    assert (store.stats().mementos, store.stats().events) == before
    assert all(m.compressor == 'extractive' for m in store.list_mementos())
