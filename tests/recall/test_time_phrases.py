"""Time phrases in a query (`time_range_in`) where a month's name is something else: a person (`confide in May`,
`August said`) or the march one joins; and where it stays the month (`in May`, `since May`, `this March`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mementograph.knowledge_graph.recall import RecallConfig, TimeRange, recall, time_range_in
from mementograph.knowledge_graph.store import GraphStore

NOW = datetime(2024, 11, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def month(year: int, number: int) -> TimeRange:
    """The month with a day's slack on each side, as `time_range_in` names it."""
    after = datetime(year + (number == 12), number % 12 + 1, 1, tzinfo=UTC)
    return TimeRange(datetime(year, number, 1, tzinfo=UTC) - DAY, after + DAY)


def since(year: int, number: int) -> TimeRange:
    return TimeRange(datetime(year, number, 1, tzinfo=UTC) - DAY)


LAST_YEAR = time_range_in('last year', NOW)


@pytest.mark.parametrize(
    ('query', 'expected'),
    [
        # a person: a capitalised given name after a word a person follows, or before a verb a person does
        ('did Caroline confide in May', None),
        ('who did I confide in June about', None),
        ('when did I confide in May', None),  # a question about time, but the person is plain
        ('ever since August left', None),
        ('since May said she would move', None),
        ('since June told me about it', None),
        ('what did I tell June this year', None),  # `this year` alone names no range
        ('what did I do with May last year', LAST_YEAR),  # the year, not May of it
        ('confided in April last year', LAST_YEAR),
        # the month: after `in`, `since`, with a year in digits or a part, lower-case, or before another word
        ('what did I do in May?', month(2024, 5)),
        ('in May 2021', month(2021, 5)),
        ('since May', since(2024, 5)),
        ('since May, what changed', since(2024, 5)),
        ('since June started', since(2024, 6)),  # a month starts too
        ('what did I tell June in March', month(2024, 3)),  # the person and the month
        ('from March to May last year', month(2023, 5)),  # `to` after a month: a span's end
        ('compare with May 2021', month(2021, 5)),
        ('in May with the kids', month(2024, 5)),
        ('did I confide in early May', TimeRange(datetime(2024, 4, 30, tzinfo=UTC), datetime(2024, 5, 12, tzinfo=UTC))),
        ('since may left', since(2024, 5)),  # lower-case: no name
        ('August 2021', month(2021, 8)),
    ],
)
def test_a_month_that_is_a_given_name_is_a_person_where_a_person_would_be(
    query: str, expected: TimeRange | None
) -> None:
    """`confide in May`, `since August left` named the month; `in May`, `since May` must still."""
    assert time_range_in(query, NOW) == expected


@pytest.mark.parametrize(
    ('query', 'expected'),
    [
        # the protest or the verb
        ('will you join this march?', None),
        ('what did we do this march', None),  # in doubt, and not a question about time
        ('when did this march start', None),  # a verb follows: the march started
        ('the last march we went on', None),  # the final march
        ('our last march', None),
        # the month
        ('when did we move this march', month(2024, 3)),  # a question about time
        ('this march, when we met', month(2024, 3)),
        ('will you join this March?', month(2024, 3)),  # capitalised
        ('what did we do this March', month(2024, 3)),
        ('the trip last march', month(2024, 3)),
        ('this past march', month(2024, 3)),
        ('what did we do in march', month(2024, 3)),
    ],
)
def test_lower_case_this_march_is_the_month_only_in_a_question_about_time(
    query: str, expected: TimeRange | None
) -> None:
    """`this march` ("will you join this march?") and `the last march` named March."""
    assert time_range_in(query, NOW) == expected


def test_recall_reads_no_month_in_a_person_named_may_or_june(filled: tuple[GraphStore, str]) -> None:
    """Through `recall` on every backend: the sittings are 8 May and 20 June 2023 (`small_dialogue`)."""
    store, namespace = filled
    config = RecallConfig(max_df_share=1, prefer_boost=10.0)
    asked = datetime(2023, 12, 1, tzinfo=UTC)
    for query in ('did Caroline confide in May', 'ever since June left, what did Caroline research'):
        hits = recall(store, query, 5, method='graph', namespace=namespace, session_id='conv-1', now=asked,
                      config=config)  # fmt: skip
        assert hits and not any('in the time range' in hit.reasons for hit in hits), query
    hits = recall(store, 'what did Caroline do in June', 5, method='graph', namespace=namespace, session_id='conv-1',
                  now=asked, config=config)  # fmt: skip
    assert hits[0].started_at is not None and hits[0].started_at.startswith('2023-06')
    assert 'in the time range' in hits[0].reasons
