"""A store that refuses every eviction for a while, then answers again: the context grown meanwhile is brought back
under the mark, on both real backends.

The stubs micro-compaction leaves are small; a memento of the whole outputs under them was larger, so after an
outage every eviction 'saved' a negative number of tokens and was skipped for the rest of the run.
"""

from __future__ import annotations

import warnings

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from mementograph import MementoCompaction, MementoWarning
from mementograph._tokens import TokenCounter
from tests.reliability._faults import FaultyStore
from tests.reliability.conftest import RealStore

HIGH_WATER = 3_000
STEPS = 60
REFUSED = 25
"""Evictions refused: the store is out for ~25 requests, and the context grows to ~9x the mark meanwhile."""


def build_log(day: int) -> str:
    """~1,080 tokens, past `micro_min_tokens` (stubbed once old), of many facts (its memento is not small)."""
    return '\n'.join(
        f'2026-05-{day % 28 + 1:02d} run {i}: build-{day} 112 passed, {i % 3} failed in {40 + i} s ünïcødé 数据库 '
        f'path/to/file_{day}.py'
        for i in range(30)
    )


async def test_the_context_comes_back_under_the_mark_after_an_outage(real_store: RealStore) -> None:
    counter = TokenCounter()
    sent: list[int] = []

    def policy(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(counter.count_messages(messages))
        step = len(sent)
        if step > STEPS:
            return ModelResponse(parts=[TextPart('All logs read.')])
        return ModelResponse(parts=[TextPart(f'Reading day {step}.'), ToolCallPart('read', {'day': step})])

    faulty = FaultyStore(real_store.store, 'before', times=REFUSED)
    capability = MementoCompaction(faulty, max_tokens=HIGH_WATER, session_id='outage', namespace=real_store.namespace)
    agent = Agent(FunctionModel(policy), capabilities=[capability])

    @agent.tool_plain
    def read(day: int) -> str:
        """Read one day of the build log."""
        return build_log(day)

    with warnings.catch_warnings():
        warnings.simplefilter('ignore', MementoWarning)  # the outage's, said and tested elsewhere
        await agent.run('Read the build logs.', usage_limits=UsageLimits(request_limit=None))

    assert len(faulty.injections) == REFUSED and max(sent) > 5 * HIGH_WATER  # the outage happened, the context grew
    back = next(i for i, tokens in enumerate(sent) if i > sent.index(max(sent)) and tokens <= HIGH_WATER)
    assert back - sent.index(max(sent)) <= 3  # under the mark again within a few requests of the store's return
    assert max(sent[back:]) <= HIGH_WATER * 1.1  # and it stays there
