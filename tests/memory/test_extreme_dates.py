"""Timestamps at the ends of the calendar (`datetime.min` / `max`, as a message may carry them): anchors that would
fall outside it are left off, and the compressor and judge never raise `OverflowError` (every try did, so such a
block could never be evicted)."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from mementograph._tokens import TokenCounter
from mementograph.knowledge_graph.memory import BlockInput, MementoEngine, TimeZone, render_block
from mementograph.knowledge_graph.memory._dates import anchor_text
from mementograph.knowledge_graph.recall import time_range_in

EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)
ZONES: tuple[TimeZone, ...] = (None, 'local', ZoneInfo('America/Los_Angeles'), ZoneInfo('Pacific/Kiritimati'))
"""UTC, the machine's, 8 hours west (`datetime.min` in UTC is before year 1 there) and 14 east."""

# every kind of rule: days, weeks, weekends, months, years, weekdays, counts, and other languages' forms
SAID = (
    'Yesterday I met Anna at the lake, and the day before yesterday we planned the trip.',
    'Tomorrow we hike again, the day after tomorrow we rest; this weekend we cook and next week we swim.',
    'Last month I painted, next month I sail, last year I ran a marathon and next year I will run another one.',
    'Last Saturday I baked bread; three days ago I fixed the bike; two weeks ago I moved house.',
    'Five months ago I changed jobs, and ten years ago I lived in Berlin, where gestern it rained.',
    'Vor 3 Tagen waren wir dort, il y a 2 mois aussi, и 3 дня назад тоже; 我们昨天讨论了.',
)


def _block(stamp: datetime, zone: TimeZone) -> BlockInput:
    messages = []
    for index, text in enumerate(SAID):
        if index % 2 == 0:
            messages.append(ModelRequest(parts=[UserPromptPart(f'Caroline: {text}', timestamp=stamp)]))
        else:
            messages.append(ModelResponse(parts=[TextPart(f'Melanie: {text}')], timestamp=stamp))
    text = render_block(messages)
    return BlockInput(messages=tuple(messages), text=text, tokens=TokenCounter().count_text(text), zone=zone)


@pytest.mark.parametrize(
    ('text', 'when', 'expected'),
    [
        ('yesterday', date.min, 'yesterday'),
        ('the day before yesterday', date.min, 'the day before yesterday'),
        ('today', date.min, 'today (1 January 1)'),
        ('tomorrow', date.min, 'tomorrow (2 January 1)'),
        ('last month', date.min, 'last month'),
        ('last year', date.min, 'last year'),
        ('three years ago', date.min, 'three years ago'),
        ('3 days ago', date.min, '3 days ago'),
        ('gestern', date.min, 'gestern'),
        ('Vor 3 Tagen', date.min, 'Vor 3 Tagen'),
        ('il y a 2 mois', date.min, 'il y a 2 mois'),
        ('tomorrow', date.max, 'tomorrow'),
        ('the day after tomorrow', date.max, 'the day after tomorrow'),
        ('yesterday', date.max, 'yesterday (30 December 9999)'),
        ('next month', date.max, 'next month'),
        ('next year', date.max, 'next year'),
        ('nächstes Jahr', date.max, 'nächstes Jahr'),
        ('last year', date.max, 'last year (9998)'),
    ],
)
def test_no_anchor_past_either_end_of_the_calendar(text: str, when: date, expected: str) -> None:
    assert anchor_text(text, when) == expected


@pytest.mark.parametrize(
    'stamp', [EARLIEST, LATEST, datetime.min, datetime.max], ids=['min', 'max', 'min-naive', 'max-naive']
)
@pytest.mark.parametrize('zone', ZONES, ids=['utc', 'local', 'los-angeles', 'kiritimati'])
async def test_a_block_said_at_either_end_of_the_calendar_is_compressed(stamp: datetime, zone: TimeZone) -> None:
    result = await MementoEngine().make_memento(_block(stamp, zone))
    assert result.text and result.tokens < _block(stamp, zone).tokens
    assert result.score is not None  # the rubric judged it (its anchors are the compressor's)


_OFFSETS = st.sampled_from([UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12)), None])
_EDGES = st.one_of(
    st.datetimes(max_value=datetime(1, 2, 1)),
    st.datetimes(min_value=datetime(9999, 12, 1)),
    st.datetimes(),
)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(moment=_EDGES, offset=_OFFSETS, zone=st.sampled_from(ZONES))
def test_any_timestamp_compresses_and_any_now_names_a_range(
    moment: datetime, offset: tzinfo | None, zone: TimeZone
) -> None:
    stamp = moment.replace(tzinfo=offset)
    result = asyncio.run(MementoEngine().make_memento(_block(stamp, zone)))
    assert result.text
    for query in (
        'what did I do yesterday',
        'and today?',
        'in March',
        'in december 9999',
        'in march 0000',
        'last week',
        'last winter',
        'this winter',
        'in the winter',
        'in late winter',
        "the winter of '21",
        'winter 9999/00',
        'in early January',
        'in late December',
        'mid-December',
        'since January',
        'since the summer',
        'since the winter',
        'early last May',
        "March '21",
        'December of 9999',
        'the summer of last year',
        'the winter of this year',
        'last year',
        'three years ago',
        '999999999 years ago',
        'in the past 5 months',
        'vor 3 Tagen',
        'il y a 2 mois',
        'вчера',
    ):
        found = time_range_in(query, stamp)
        if found is not None and found.since is not None and found.until is not None:
            assert found.since <= found.until, (query, stamp)
