"""The extractive path on real blocks of the shared mini-swe-agent trajectories (skipped when the data is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mementograph._tokens import TokenCounter
from mementograph._transcripts import load_transcript
from mementograph.knowledge_graph.memory import (
    BlockInput,
    MementoEngine,
    RubricJudge,
    critical_facts,
    render_block,
    segment_blocks,
)
from mementograph.knowledge_graph.memory._regions import parse_regions
from tests.conftest import shared_data

COUNTER = TokenCounter()
SAMPLES = ('astropy__astropy-13236', 'django__django-11138', 'sympy__sympy-15345')


def trajectory(name: str) -> Path:
    return shared_data('agent_trajectories', f'{name}.traj.json')


@pytest.mark.parametrize('name', SAMPLES)
async def test_real_blocks_get_verified_verbatim_mementos(name: str) -> None:
    messages = load_transcript(trajectory(name))
    segments = segment_blocks(messages, COUNTER)
    assert segments[0].start == 0 and segments[-1].end == len(messages)
    engine = MementoEngine(counter=COUNTER)
    complete = [segment for segment in segments if segment.complete]
    assert len(complete) >= 5
    total = kept = 0
    for segment in complete:
        block = BlockInput.from_messages(messages[segment.start : segment.end], COUNTER)
        result = await engine.make_memento(block)
        assert result.verified, (segment, result.feedback)
        assert result.tokens < block.tokens
        total, kept = total + result.facts_total, kept + result.facts_kept
        # every must-keep fact is there (no deduction) and nothing is invented
        verdict = RubricJudge(counter=COUNTER).check(block, result.text)
        assert verdict.dimensions['deductions'] == 0.0 and verdict.invented == (), (segment, verdict.feedback)
    assert kept / total >= 0.98


def test_text_protocol_segments_keep_action_and_observation_together() -> None:
    messages = load_transcript(trajectory(SAMPLES[0]), bash_tools=False)
    segments = segment_blocks(messages, COUNTER)
    starts = {segment.start for segment in segments}
    for index, message in enumerate(messages):
        text = str(getattr(message.parts[0], 'content', ''))
        if text.startswith('<returncode>'):
            assert index not in starts, f'observation {index} separated from its action'


def test_both_protocols_cover_the_same_history() -> None:
    tools = load_transcript(trajectory(SAMPLES[1]))
    text = load_transcript(trajectory(SAMPLES[1]), bash_tools=False)
    assert len(tools) == len(text)
    assert segment_blocks(tools, COUNTER)[-1].end == segment_blocks(text, COUNTER)[-1].end == len(tools)


def test_cached_region_facts_equal_a_fresh_reading() -> None:
    """Facts read through the region cache are exactly those of reading every region afresh, for every block of
    a real trajectory, read twice (the second time from the cache)."""
    from mementograph.knowledge_graph.memory import _facts

    messages = load_transcript(trajectory(SAMPLES[0]))
    texts = [render_block(messages[b.start : b.end]) for b in segment_blocks(messages, COUNTER)]
    hits = _facts._region_adds.cache_info().hits
    for _ in range(2):
        for text in texts:
            fresh = _facts._Collector()
            for region in parse_regions(text):
                _facts._READERS[_facts._reader_of(region)](region.text, fresh)  # no cache on this path
            assert critical_facts(text) == fresh.facts
            _facts._cached_facts.cache_clear()  # the whole-text cache must not answer for the regions
    assert len(texts) > 10 and _facts._region_adds.cache_info().hits > hits
