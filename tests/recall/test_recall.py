"""`recall`: exact, normalised and fuzzy entity matches, co-mentions, NEXT, BM25, fusion, time ranges, backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from mementograph.eval import IngestedDialogue
from mementograph.knowledge_graph import BlockRecord, Eviction
from mementograph.knowledge_graph.recall import (
    MAX_QUERY_CHARS,
    RecallConfig,
    TimeRange,
    plan_query,
    rank_blocks,
    recall,
    render_recall,
    time_range_in,
)
from mementograph.knowledge_graph.store import GraphStore, StoreUnavailableError, open_store
from tests.builders import session_history
from tests.recall.conftest import DAY2


def turns_of(ingested: IngestedDialogue, block_id: str) -> tuple[str, ...]:
    return next(block.turn_ids for block in ingested.blocks if block.block_id == block_id)


def block_with(ingested: IngestedDialogue, turn_id: str) -> str:
    return next(block.block_id for block in ingested.blocks if turn_id in block.turn_ids)


@pytest.fixture
def store(ingested: IngestedDialogue) -> GraphStore:
    from mementograph.eval import DialogueIngestor

    store = open_store('memory://')
    DialogueIngestor.replay(store, ingested)
    return store


def test_query_plan_reads_words_as_names_concepts_and_symbols() -> None:
    plan = plan_query('what did caroline research about TypeError in base.py?')
    keys = {key.key for key in plan.keys}
    assert {'name:caroline', 'concept:research', 'err:typeerror', 'file:base.py'} <= keys
    groups = {key.group for key in plan.keys if key.text.lower() == 'caroline'}
    assert len(groups) == 1  # every reading of one word is one group
    assert 'what' not in plan.terms and 'caroline' in plan.terms


def test_recall_finds_by_entities_with_memento_and_reasons(store: GraphStore, ingested: IngestedDialogue) -> None:
    hits = recall(store, 'What did Caroline research about adoption agencies?', 3, session_id='conv-1')
    assert hits
    top = hits[0]
    assert 'S1:4' in turns_of(ingested, top.block_id)
    assert top.memento_id is not None and top.memento
    assert top.block_ids == (top.block_id,)
    assert any('adoption' in m for m in top.matched)
    assert top.started_at is not None and top.started_at.startswith('2023-05-08')
    assert render_recall(hits, 'q').startswith('1. recover_block("mem_')


def test_normalised_and_fuzzy_matches(store: GraphStore, ingested: IngestedDialogue) -> None:
    camping = block_with(ingested, 'S2:4')
    graph = rank_blocks(store, 'camped', method='graph', session_id='conv-1')  # inflection: camp, camping
    assert camping in [b.block_id for b in graph[:3]]
    fuzzy = rank_blocks(store, 'dinosaurz', method='graph', session_id='conv-1')  # a typo
    assert fuzzy and fuzzy[0].block_id == block_with(ingested, 'S1:7')
    assert any('fuzzy' in m for m in fuzzy[0].matched)
    lower = rank_blocks(store, 'typeerror querysets', method='graph', session_id='conv-1')
    assert lower[0].block_id == block_with(ingested, 'S2:0')


def test_next_neighbours_and_co_mentions_extend_the_entity_hits(store: GraphStore, ingested: IngestedDialogue) -> None:
    ranking = rank_blocks(store, 'Rainbow Families', method='graph', session_id='conv-1')
    direct = block_with(ingested, 'S1:6')
    assert ranking[0].block_id == direct
    others = {b.block_id: b for b in ranking[1:]}
    assert others, 'the NEXT neighbour of the hit is recalled too'
    assert any(reason.startswith(('NEXT of', 'co-mention of')) for b in others.values() for reason in b.reasons)
    no_hops = rank_blocks(
        store, 'Rainbow Families', method='graph', session_id='conv-1', config=RecallConfig(next_weight=0, co_weight=0)
    )
    assert [b.block_id for b in no_hops] == [direct]


def test_bm25_and_fused_methods(store: GraphStore, ingested: IngestedDialogue) -> None:
    target = block_with(ingested, 'S2:2')
    bm25 = rank_blocks(store, 'passed QuerySet.filter', method='bm25', session_id='conv-1')
    assert bm25[0].block_id == target and any(r.startswith('bm25 rank') for r in bm25[0].reasons)
    # reached through its memento too, a block names its best full-text rank once
    assert all(sum(r.startswith('bm25 rank') for r in b.reasons) == 1 for b in bm25)
    fused = rank_blocks(store, 'passed QuerySet.filter', method='fused', session_id='conv-1')
    assert fused[0].block_id == target
    assert rank_blocks(store, 'the of and', method='fused', session_id='conv-1') == []


class SearchDown:
    """A real store whose full-text search fails (as a lost connection would)."""

    def __init__(self, inner: GraphStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def search_text(self, *args: object, **kwargs: object) -> list[object]:
        raise StoreUnavailableError('full-text index unreachable')


def test_a_failing_search_fails_a_fused_recall_with_the_store_error(store: GraphStore) -> None:
    """The search runs in a worker thread beside the graph reads: its failure reaches the caller, typed."""
    failing = SearchDown(store)
    with pytest.raises(StoreUnavailableError, match='full-text index unreachable'):
        rank_blocks(failing, 'passed QuerySet.filter', method='fused', session_id='conv-1')  # type: ignore[arg-type]
    graph = rank_blocks(failing, 'passed QuerySet.filter', method='graph', session_id='conv-1')  # type: ignore[arg-type]
    assert graph == rank_blocks(store, 'passed QuerySet.filter', method='graph', session_id='conv-1') and graph


@pytest.mark.parametrize('query', ['camping with the kids at the lake', 'Caroline adoption agencies Boston'])
def test_fusion_sums_max_normalised_scores_or_reciprocal_ranks(store: GraphStore, query: str) -> None:
    """`fused` is exactly its two rankings combined: by default each one's scores over its best, summed (a block far
    ahead in one ranking stays ahead); with `fusion='rrf'`, `1 / (rrf_k + rank)` summed."""
    plain = RecallConfig(bm25_next=False)  # the full-text ranking inside `fused` is then the `bm25` method's
    graph = rank_blocks(store, query, method='graph', session_id='conv-1', config=plain)
    text = rank_blocks(store, query, method='bm25', session_id='conv-1', config=plain)
    assert graph and text and {b.block_id for b in graph} != {b.block_id for b in text}
    expected: dict[str, float] = {}
    for ranking in (graph, text):
        for block in ranking:
            expected[block.block_id] = expected.get(block.block_id, 0.0) + block.score / ranking[0].score
    fused = rank_blocks(store, query, method='fused', session_id='conv-1', config=plain)
    assert {b.block_id: pytest.approx(b.score) for b in fused} == expected
    assert [b.score for b in fused] == sorted((b.score for b in fused), reverse=True)

    rrf = RecallConfig(bm25_next=False, fusion='rrf', rrf_k=60)
    by_rank: dict[str, float] = {}
    for ranking in (graph, text):
        for rank, block in enumerate(ranking, start=1):
            by_rank[block.block_id] = by_rank.get(block.block_id, 0.0) + 1 / (60 + rank)
    fused_rrf = rank_blocks(store, query, method='fused', session_id='conv-1', config=rrf)
    assert {b.block_id: pytest.approx(b.score) for b in fused_rrf} == by_rank


def test_time_range_filters(store: GraphStore, ingested: IngestedDialogue) -> None:
    everything = rank_blocks(
        store, 'Caroline', method='graph', session_id='conv-1', config=RecallConfig(max_df_share=1)
    )
    later = rank_blocks(
        store, 'Caroline', method='graph', session_id='conv-1', since=DAY2, config=RecallConfig(max_df_share=1)
    )
    earlier = rank_blocks(
        store, 'Caroline', method='graph', session_id='conv-1', until='2023-06-01T00:00:00+00:00',
        config=RecallConfig(max_df_share=1),
    )  # fmt: skip
    assert later and earlier and len(later) + len(earlier) == len(everything)
    assert all(turns_of(ingested, b.block_id)[0].startswith('S2') for b in later)
    assert all(turns_of(ingested, b.block_id)[0].startswith('S1') for b in earlier)


def test_an_unreadable_time_filter_is_an_error_not_a_dropped_filter(store: GraphStore) -> None:
    with pytest.raises(ValueError, match="since: cannot read 'last tuesday'"):
        rank_blocks(store, 'Caroline', session_id='conv-1', since='last tuesday')
    with pytest.raises(ValueError, match='until: cannot read'):
        recall(store, 'Caroline', session_id='conv-1', until='soon')


def test_time_ranges_named_in_a_query() -> None:
    now = datetime(2023, 5, 20, 12, 0, tzinfo=UTC)
    march = time_range_in('How many doctor appointments did I go to in March?', now)
    assert march is not None and march.contains(datetime(2023, 3, 15, tzinfo=UTC))
    assert not march.contains(datetime(2023, 4, 15, tzinfo=UTC))
    ago = time_range_in('the museum I visited two months ago', now)
    assert ago is not None and ago.contains(datetime(2023, 3, 21, tzinfo=UTC))
    assert time_range_in('what is my favourite colour', now) is None
    assert TimeRange().contains(None) and not TimeRange(since=now).contains(None)


@pytest.mark.parametrize(
    ('query', 'inside', 'outside'),
    [
        ('Was habe ich im März gekocht?', datetime(2023, 3, 15), datetime(2023, 4, 15)),
        ("Qu'ai-je fait en mars 2022 ?", datetime(2022, 3, 15), datetime(2023, 3, 15)),
        ('¿Qué compré ayer?', datetime(2023, 5, 19, 9), datetime(2023, 5, 10)),
        ('Cosa ho fatto oggi?', datetime(2023, 5, 20, 9), datetime(2023, 5, 17)),
        ('O que fiz na semana passada?', datetime(2023, 5, 12), datetime(2023, 4, 1)),
        ('Wat deed ik vorige maand?', datetime(2023, 4, 10), datetime(2023, 1, 10)),
        ('Vad gjorde jag förra året?', datetime(2022, 6, 1), datetime(2020, 6, 1)),
        ('Что я делал в марте?', datetime(2023, 3, 15), datetime(2023, 5, 15)),
        ('Co robiłem w marcu?', datetime(2023, 3, 15), datetime(2023, 5, 15)),
        ('Welches Museum habe ich vor 2 Wochen besucht?', datetime(2023, 5, 6), datetime(2023, 5, 18)),
        ('Quel musée ai-je visité il y a 3 mois ?', datetime(2023, 2, 20), datetime(2023, 5, 1)),
        ('Что я купил 3 дня назад?', datetime(2023, 5, 17), datetime(2023, 5, 10)),
        ('我昨天买了什么？', datetime(2023, 5, 19, 9), datetime(2023, 5, 10)),
        ('先月は何を読みましたか', datetime(2023, 4, 10), datetime(2023, 1, 10)),
    ],
)
def test_time_ranges_named_in_other_languages(query: str, inside: datetime, outside: datetime) -> None:
    found = time_range_in(query, datetime(2023, 5, 20, 12, 0, tzinfo=UTC))
    assert found is not None
    assert found.contains(inside.replace(tzinfo=UTC)) and not found.contains(outside.replace(tzinfo=UTC))


@pytest.mark.parametrize(
    ('query', 'now', 'month'),
    [
        ('what did I cook last May?', datetime(2024, 3, 10), (2023, 5)),  # the latest May before this month
        ('what did I cook last may', datetime(2024, 6, 10), (2024, 5)),
        ('what did we plan last May', datetime(2024, 5, 10), (2023, 5)),  # said in May: a year ago
        ('last may, when we met', datetime(2024, 3, 10), (2023, 5)),
        ('the trip last may was long', datetime(2024, 3, 10), (2023, 5)),
        ('the gift I bought last December', datetime(2024, 1, 5), (2023, 12)),
        ('What happened this May?', datetime(2024, 3, 10), (2024, 5)),  # May of this year
        ('what did we do this may', datetime(2024, 8, 1), (2024, 5)),
        ('the recital this June', datetime(2024, 6, 20), (2024, 6)),
        ('last May 2021', datetime(2024, 3, 10), (2021, 5)),
        ('in May', datetime(2024, 3, 10), (2023, 5)),  # unchanged: the latest May up to now
        ('this past March', datetime(2024, 5, 10), (2024, 3)),  # as `last`
        ('this past May', datetime(2024, 5, 10), (2023, 5)),
        ('over the past March', datetime(2024, 5, 10), (2024, 3)),
        ('March of 2021', datetime(2024, 5, 10), (2021, 3)),  # a year named, anywhere
        ("March '21", datetime(2024, 5, 10), (2021, 3)),
        ('in May of 2021', datetime(2024, 5, 10), (2021, 5)),
        ('the trip in May of \u201921', datetime(2024, 5, 10), (2021, 5)),
        ('May 2021 was busy', datetime(2024, 5, 10), (2021, 5)),
        ('in may 2021', datetime(2024, 5, 10), (2021, 5)),
        ('in March last year', datetime(2024, 5, 10), (2023, 3)),  # not the latest March: March 2024
        ('the March of last year', datetime(2024, 5, 10), (2023, 3)),
        ('what did we do in May this year', datetime(2024, 3, 10), (2024, 5)),
        ('what may I have missed', datetime(2024, 3, 10), None),  # the verb
        ('this may be the cause', datetime(2024, 3, 10), None),
        ('This may take a while', datetime(2024, 3, 10), None),
        ('the last may have failed', datetime(2024, 3, 10), None),
        ('this may in fact be it', datetime(2024, 3, 10), None),
        ('this may or may not help', datetime(2024, 3, 10), None),
        ('what may 2021 bring', datetime(2024, 3, 10), None),  # the verbs before a bare year
        ('they march 2000 miles', datetime(2024, 3, 10), None),
        ('we may this year decide', datetime(2024, 3, 10), None),
        ('we march on', datetime(2024, 3, 10), None),
        ('the past may have been hard', datetime(2024, 3, 10), None),
    ],
)
def test_last_and_this_month_name_the_month(query: str, now: datetime, month: tuple[int, int] | None) -> None:
    """ "last May" named no range (only "in May" did); "may" the verb must not name one."""
    found = time_range_in(query, now.replace(tzinfo=UTC))
    if month is None:
        assert found is None
        return
    year, number = month
    assert found is not None and found.since is not None and found.until is not None
    start = datetime(year, number, 1, tzinfo=UTC)
    assert found.contains(start) and found.contains(start.replace(day=28))
    assert (start - found.since).days == 1 and found.until - start <= timedelta(days=32 + 1)
    assert not found.contains(start - timedelta(days=3)) and not found.contains(start + timedelta(days=35))


@pytest.mark.parametrize(
    ('query', 'now', 'season'),
    [
        ('what did we do last summer?', datetime(2024, 7, 10), (2023, 6)),  # said in summer: a year ago
        ('the hike last summer', datetime(2024, 10, 10), (2024, 6)),  # the latest summer before this season
        ('last spring', datetime(2024, 4, 1), (2023, 3)),
        ('last spring', datetime(2024, 6, 1), (2024, 3)),
        ('the trip last autumn', datetime(2024, 3, 10), (2023, 9)),
        ('what did I plant last fall', datetime(2024, 3, 10), (2023, 9)),
        ('last winter', datetime(2024, 1, 15), (2022, 12)),  # in winter: the one before it
        ('last winter', datetime(2024, 3, 1), (2023, 12)),  # December to February, across the new year
        ('last winter', datetime(2024, 12, 1), (2023, 12)),
        ('What happened this winter?', datetime(2024, 1, 15), (2023, 12)),  # the one in progress
        ('this winter', datetime(2024, 2, 29), (2023, 12)),
        ('this winter', datetime(2024, 12, 5), (2024, 12)),
        ('this winter', datetime(2024, 11, 5), (2023, 12)),  # the one that has begun: it ended in February
        ('this summer', datetime(2024, 3, 10), (2024, 6)),  # this year's
        ('this summer', datetime(2024, 10, 10), (2024, 6)),
        ('what did we do this fall', datetime(2024, 11, 1), (2024, 9)),
        ('This Fall we moved', datetime(2024, 11, 1), (2024, 9)),
        ('this fall, we moved', datetime(2024, 11, 1), (2024, 9)),
        ('did this fall apart', datetime(2024, 11, 1), None),  # the verb
        ('the last summer we had together', datetime(2024, 11, 1), None),  # the final one
        # `this past`: as `last`
        ('this past summer', datetime(2024, 10, 10), (2024, 6)),
        ('what did we do this past summer', datetime(2024, 7, 10), (2023, 6)),
        ('over the past winter', datetime(2024, 4, 1), (2023, 12)),
        ('this past fall', datetime(2025, 1, 10), (2024, 9)),
        # `in (the) summer`: the latest that has begun, the one in progress included (as `in March`)
        ('what did we do in summer?', datetime(2024, 7, 10), (2024, 6)),
        ('in the summer', datetime(2024, 3, 10), (2023, 6)),
        ('What did Caroline do during the summer?', datetime(2024, 10, 10), (2024, 6)),
        ('in the Summer', datetime(2024, 10, 10), (2024, 6)),
        ('in the summer with the kids', datetime(2024, 10, 10), (2024, 6)),
        ('in summer, we moved', datetime(2024, 10, 10), (2024, 6)),
        ('over the summer I read a lot', datetime(2024, 10, 10), (2024, 6)),
        ('in the winter', datetime(2024, 1, 15), (2023, 12)),  # in progress, across the new year
        ('in winter', datetime(2024, 12, 1), (2024, 12)),
        ('in winter', datetime(2024, 11, 5), (2023, 12)),
        ('in the fall', datetime(2024, 8, 31), (2023, 9)),
        # a year named: that year's, whatever comes before
        ('in summer 2021', datetime(2024, 11, 1), (2021, 6)),
        ('the summer of 2021', datetime(2024, 11, 1), (2021, 6)),
        ("the summer of '21", datetime(2024, 11, 1), (2021, 6)),
        ('the summer of \u201921', datetime(2024, 11, 1), (2021, 6)),
        ("summer of '99", datetime(2024, 11, 1), (1999, 6)),  # the latest year ending so
        ('last summer 2021', datetime(2024, 11, 1), (2021, 6)),
        ('this summer 2021', datetime(2024, 11, 1), (2021, 6)),
        ('Summer 2021 trip', datetime(2024, 11, 1), (2021, 6)),
        ('in fall 2021', datetime(2024, 11, 1), (2021, 9)),
        ('winter 2021', datetime(2024, 11, 1), (2020, 12)),  # its January and February: as `this winter` in 2021
        ('the winter of 2021/22', datetime(2024, 11, 1), (2021, 12)),
        ('winter 2021-2022', datetime(2024, 11, 1), (2021, 12)),
        ('the summer of last year', datetime(2024, 11, 1), (2023, 6)),
        ('in the summer last year', datetime(2024, 11, 1), (2023, 6)),
        ('the fall of this year', datetime(2024, 11, 1), (2024, 9)),
        ('the fall last year', datetime(2024, 11, 1), (2023, 9)),
        ('the winter of last year', datetime(2024, 11, 1), (2022, 12)),  # its January and February: 2023's
        # not time: a person, a kind of thing, something else's season, the verb
        ('did Caroline confide in Summer', datetime(2024, 11, 1), None),
        ('what did Caroline do with Summer', datetime(2024, 11, 1), None),
        ('what did the kids do in summer camp', datetime(2024, 11, 1), None),
        ('the kids loved summer camp', datetime(2024, 11, 1), None),
        ('in the summer of my life', datetime(2024, 11, 1), None),
        ('during the Winter Olympics', datetime(2024, 11, 1), None),
        ('interested in fall colors', datetime(2024, 11, 1), None),
        ('did sales fall 2021 units', datetime(2024, 11, 1), None),
        ('early summer vegetables', datetime(2024, 11, 1), None),
        ('did sales fall this year', datetime(2024, 11, 1), None),
    ],
)
def test_last_and_this_season_name_the_season(query: str, now: datetime, season: tuple[int, int] | None) -> None:
    """ "last summer", "this winter", "in the summer", "summer of 2021" named no range; seasons are the northern
    meteorological ones, relative to when the query is asked as months are."""
    found = time_range_in(query, now.replace(tzinfo=UTC))
    if season is None:
        assert found is None
        return
    year, month = season
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month + 3 > 12), (month + 2) % 12 + 1, 1, tzinfo=UTC)
    assert found == TimeRange(start - timedelta(days=1), end + timedelta(days=1))


@pytest.mark.parametrize(
    ('query', 'now', 'months'),
    [
        ('in early summer', datetime(2024, 10, 10), (2024, 6, 2)),  # June and July
        ('in late summer', datetime(2024, 10, 10), (2024, 7, 2)),  # July and August
        ('in the late summer of 2021', datetime(2024, 10, 10), (2021, 7, 2)),
        ('in early-spring 2020', datetime(2024, 10, 10), (2020, 3, 2)),
        ('early last winter', datetime(2024, 6, 1), (2023, 12, 2)),  # December and January
        ('late last winter', datetime(2024, 6, 1), (2024, 1, 2)),
        ('last late winter', datetime(2024, 6, 1), (2024, 1, 2)),
        ('in late winter', datetime(2024, 1, 15), (2024, 1, 2)),  # the winter in progress, begun in 2023
        ('in the early winter', datetime(2025, 2, 1), (2024, 12, 2)),
    ],
)
def test_early_and_late_name_two_months_of_the_season(query: str, now: datetime, months: tuple[int, int, int]) -> None:
    year, month, count = months
    start = datetime(year, month, 1, tzinfo=UTC)
    after = year * 12 + month - 1 + count
    end = datetime(after // 12, after % 12 + 1, 1, tzinfo=UTC)
    assert time_range_in(query, now.replace(tzinfo=UTC)) == TimeRange(
        start - timedelta(days=1), end + timedelta(days=1)
    )


@pytest.mark.parametrize(
    ('query', 'now', 'days'),
    [
        ('in early March', datetime(2024, 5, 20), ((2024, 3, 1), (2024, 3, 11))),  # the first ten days
        ('in mid-March', datetime(2024, 5, 20), ((2024, 3, 11), (2024, 3, 21))),  # the 11th to the 20th
        ('in mid March', datetime(2024, 5, 20), ((2024, 3, 11), (2024, 3, 21))),
        ('mid-March', datetime(2024, 5, 20), ((2024, 3, 11), (2024, 3, 21))),  # no preposition needed
        ('what did we plant mid may', datetime(2024, 5, 20), ((2024, 5, 11), (2024, 5, 21))),
        ('early-June', datetime(2024, 5, 20), ((2023, 6, 1), (2023, 6, 11))),  # the latest June up to now
        ('in late May 2021', datetime(2024, 5, 20), ((2021, 5, 21), (2021, 6, 1))),  # the 21st to its end
        ('in late February', datetime(2024, 5, 20), ((2024, 2, 21), (2024, 3, 1))),
        ('during early March of 2021', datetime(2024, 5, 20), ((2021, 3, 1), (2021, 3, 11))),
        ("late March '21", datetime(2024, 5, 20), ((2021, 3, 21), (2021, 4, 1))),
        ('early last March', datetime(2024, 5, 20), ((2024, 3, 1), (2024, 3, 11))),
        ('early last May', datetime(2024, 5, 20), ((2023, 5, 1), (2023, 5, 11))),
        ('late this May', datetime(2024, 3, 20), ((2024, 5, 21), (2024, 6, 1))),
        ('this late may', datetime(2024, 3, 20), ((2024, 5, 21), (2024, 6, 1))),
        ('mid-last December', datetime(2024, 3, 20), ((2023, 12, 11), (2023, 12, 21))),
        ('late this past March', datetime(2024, 3, 20), ((2023, 3, 21), (2023, 4, 1))),
    ],
)
def test_early_mid_and_late_name_ten_days_of_the_month(
    query: str, now: datetime, days: tuple[tuple[int, int, int], tuple[int, int, int]]
) -> None:
    """`in early March` named all March; a part of a month is its first ten days, the 11th to the 20th, or the 21st
    to its end, with a day's slack on each side as every range."""
    first, after = (datetime(*day, tzinfo=UTC) for day in days)
    assert time_range_in(query, now.replace(tzinfo=UTC)) == TimeRange(
        first - timedelta(days=1), after + timedelta(days=1)
    )


@pytest.mark.parametrize(
    ('query', 'now', 'start'),
    [
        ('since March', datetime(2024, 5, 20), datetime(2024, 3, 1)),  # March named only March
        ('what changed since May 2021', datetime(2024, 5, 20), datetime(2021, 5, 1)),
        ('since mid-March', datetime(2024, 5, 20), datetime(2024, 3, 11)),
        ('since early last May', datetime(2024, 5, 20), datetime(2023, 5, 1)),
        ('since this past March', datetime(2024, 5, 20), datetime(2024, 3, 1)),
        ('since summer', datetime(2024, 10, 10), datetime(2024, 6, 1)),  # the latest that has begun
        ('what did I read since the summer?', datetime(2024, 5, 20), datetime(2023, 6, 1)),
        ('since last winter', datetime(2024, 5, 20), datetime(2023, 12, 1)),
        ('since late summer 2021', datetime(2024, 5, 20), datetime(2021, 7, 1)),
        ('since the summer of last year', datetime(2024, 10, 10), datetime(2023, 6, 1)),
    ],
)
def test_since_a_month_or_a_season_names_its_start_on(query: str, now: datetime, start: datetime) -> None:
    assert time_range_in(query, now.replace(tzinfo=UTC)) == TimeRange(start.replace(tzinfo=UTC) - timedelta(days=1))


@pytest.mark.parametrize(
    'query', ['since summer camp', 'since the summer of my life', 'ever since Summer left', 'early may be better']
)
def test_since_or_a_part_names_no_month_or_season_in_other_words(query: str) -> None:
    assert time_range_in(query, datetime(2024, 5, 20, tzinfo=UTC)) is None


@pytest.mark.parametrize(
    ('query', 'now', 'expected'),
    [
        ('spring last winter', datetime.min, None),  # December of year 0
        ('this winter', datetime.min, None),
        ('last summer', datetime.min, None),
        ('this spring', datetime.min, (datetime(1, 2, 28), datetime(1, 6, 2))),
        ('this winter', datetime.max, (datetime(9999, 11, 30), None)),  # open past the calendar's end
        ('last autumn', datetime.max, (datetime(9999, 8, 31), datetime(9999, 12, 2))),
        ('in the winter', datetime.min, None),
        ('in the spring', datetime.min, None),  # the latest up to 1 January of year 1 began in year 0
        ('in the winter', datetime.max, (datetime(9999, 11, 30), None)),
        ('in late winter', datetime.max, None),  # January 10000
        ("the summer of '21", datetime.max, (datetime(9921, 5, 31), datetime(9921, 9, 2))),
        ("the summer of '21", datetime.min, None),  # year -79
        ('winter 2021/22', datetime.min, (datetime(2021, 11, 30), datetime(2022, 3, 2))),  # a year is no relative
        ('in late December', datetime.max, (datetime(9999, 12, 20), None)),
        ('mid-December', datetime.max, (datetime(9999, 12, 10), datetime(9999, 12, 22))),
        ('in early January', datetime.min, (None, datetime(1, 1, 12))),  # open before the calendar's start
        ('since January', datetime.min, None),  # from before the calendar on: no range
        ('since the summer', datetime.min, None),  # that of year 0
        ('the summer of last year', datetime.max, (datetime(9998, 5, 31), datetime(9998, 9, 2))),
        ('the winter of this year', datetime.min, None),  # from December of year 0
        ("March '21", datetime.min, None),
        ('since the winter', datetime.max, (datetime(9999, 11, 30), None)),
        ('the summer of this year', datetime.max, (datetime(9999, 5, 31), datetime(9999, 9, 2))),
    ],
)
def test_a_season_at_either_end_of_the_calendar(
    query: str, now: datetime, expected: tuple[datetime | None, datetime | None] | None
) -> None:
    found = time_range_in(query, now.replace(tzinfo=UTC))
    if expected is None:
        assert found is None
        return
    since, until = (None if end is None else end.replace(tzinfo=UTC) for end in expected)
    assert found == TimeRange(since, until)


@pytest.mark.parametrize(
    ('query', 'now', 'expected'),
    [
        ('last week', datetime(2024, 3, 10), (datetime(2024, 2, 24), datetime(2024, 3, 9))),
        ('last month', datetime(2024, 3, 10), (datetime(2024, 1, 10), datetime(2024, 3, 9))),
        ('last year', datetime(2024, 3, 10), (datetime(2022, 3, 11), datetime(2024, 3, 9))),
        ('3 days ago', datetime(2024, 3, 10, 12), (datetime(2024, 3, 6, 13), datetime(2024, 3, 8, 11))),
        ('two weeks ago', datetime(2024, 3, 10, 12), (datetime(2024, 2, 22, 13), datetime(2024, 2, 28, 11))),
    ],
)
def test_relative_spans_in_a_query(query: str, now: datetime, expected: tuple[datetime, datetime]) -> None:
    found = time_range_in(query, now.replace(tzinfo=UTC))
    assert found is not None
    inside, last = (moment.replace(tzinfo=UTC) for moment in expected)
    assert found.contains(inside) and found.contains(last)
    assert not found.contains(inside - timedelta(days=2)) and not found.contains(last + timedelta(days=2))


@pytest.mark.parametrize(
    ('query', 'asked', 'sitting'),
    [
        ('Caroline last May', datetime(2024, 3, 1, tzinfo=UTC), '2023-05'),
        ('Caroline last June', datetime(2024, 3, 1, tzinfo=UTC), '2023-06'),
        ('Caroline this June', datetime(2023, 12, 1, tzinfo=UTC), '2023-06'),
        ('Caroline last spring', datetime(2024, 3, 1, tzinfo=UTC), '2023-05'),
        ('Caroline last summer', datetime(2024, 3, 1, tzinfo=UTC), '2023-06'),
        ('Caroline this summer', datetime(2023, 12, 1, tzinfo=UTC), '2023-06'),
        ('Caroline in the summer', datetime(2023, 12, 1, tzinfo=UTC), '2023-06'),
        ('Caroline this past summer', datetime(2023, 12, 1, tzinfo=UTC), '2023-06'),
        ("Caroline in the summer of '23", datetime(2025, 3, 1, tzinfo=UTC), '2023-06'),
        ('Caroline in late spring', datetime(2023, 12, 1, tzinfo=UTC), '2023-05'),
        ('Caroline in early summer 2023', datetime(2025, 3, 1, tzinfo=UTC), '2023-06'),
        ('Caroline in early May', datetime(2023, 12, 1, tzinfo=UTC), '2023-05'),
        ('Caroline mid-June', datetime(2023, 12, 1, tzinfo=UTC), '2023-06'),
        ('Caroline in late June 2023', datetime(2025, 3, 1, tzinfo=UTC), '2023-06'),
        ('Caroline this past May', datetime(2023, 12, 1, tzinfo=UTC), '2023-05'),
        ("Caroline in May of '23", datetime(2025, 3, 1, tzinfo=UTC), '2023-05'),
        ('Caroline since the summer', datetime(2023, 12, 1, tzinfo=UTC), '2023-06'),
        ('Caroline in the summer of last year', datetime(2024, 3, 1, tzinfo=UTC), '2023-06'),
    ],
)
def test_recall_prefers_the_month_last_or_this_names(
    filled: tuple[GraphStore, str], query: str, asked: datetime, sitting: str
) -> None:
    """Through `recall` on every backend: the sittings are 8 May and 20 June 2023 (`small_dialogue`); a season too."""
    store, namespace = filled
    config = RecallConfig(max_df_share=1, prefer_boost=10.0)
    hits = recall(store, query, 3, method='graph', namespace=namespace, session_id='conv-1', now=asked, config=config)
    assert hits and hits[0].started_at is not None and hits[0].started_at.startswith(sitting)
    assert 'in the time range' in hits[0].reasons


def test_recall_reads_no_month_in_may_the_verb_or_in_a_may_long_past(filled: tuple[GraphStore, str]) -> None:
    store, namespace = filled
    config = RecallConfig(max_df_share=1, prefer_boost=10.0)
    for query, asked in (
        ('this may be Caroline', datetime(2023, 7, 1, tzinfo=UTC)),  # May 2023 holds a sitting
        ('Caroline last May', datetime(2023, 5, 20, tzinfo=UTC)),  # May 2022: nothing then
        ('Caroline in late May', datetime(2023, 7, 1, tzinfo=UTC)),  # the sitting was on the 8th
        ('Caroline in early June', datetime(2023, 7, 1, tzinfo=UTC)),  # and the other on the 20th
    ):
        hits = recall(store, query, 5, method='graph', namespace=namespace, session_id='conv-1', now=asked,
                      config=config)  # fmt: skip
        assert hits and not any('in the time range' in hit.reasons for hit in hits), query


def test_recall_reads_no_season_in_a_name_or_a_kind_of_thing(filled: tuple[GraphStore, str]) -> None:
    store, namespace = filled
    config = RecallConfig(max_df_share=1, prefer_boost=10.0)
    asked = datetime(2023, 12, 1, tzinfo=UTC)  # the summer of 2023 holds a sitting
    for query in ('did Caroline confide in Summer', 'Caroline in summer camp', 'Caroline with Summer'):
        hits = recall(store, query, 5, method='graph', namespace=namespace, session_id='conv-1', now=asked,
                      config=config)  # fmt: skip
        assert hits and not any('in the time range' in hit.reasons for hit in hits), query


def test_an_english_word_that_is_a_month_elsewhere_names_no_range() -> None:
    assert time_range_in('is there life in mars', datetime(2023, 5, 20, tzinfo=UTC)) is None


def test_scope_is_the_session_unless_widened(store: GraphStore) -> None:
    assert rank_blocks(store, 'adoption agencies', session_id='another-session') == []
    assert rank_blocks(store, 'adoption agencies', session_id=None)


def test_same_ranking_on_every_backend(filled: tuple[GraphStore, str], ingested: IngestedDialogue) -> None:
    """The graph ranking is Python over protocol reads: identical on every backend by construction."""
    backend, namespace = filled
    reference = open_store('memory://')
    try:
        from mementograph.eval import DialogueIngestor

        DialogueIngestor.replay(reference, ingested)
        for query in ('What did Caroline research?', 'camping in the mountains', 'TypeError base.py', 'dinosaurz'):
            expected = [
                (b.block_id, round(b.score, 9))
                for b in rank_blocks(reference, query, method='graph', session_id='conv-1')
            ]
            got = rank_blocks(backend, query, method='graph', namespace=namespace, session_id='conv-1')
            if namespace == 'default':
                assert [(b.block_id, round(b.score, 9)) for b in got] == expected
            else:  # another namespace: same shape of ranking (ids are namespaced)
                assert [round(b.score, 9) for b in got] == [score for _, score in expected]
            hits = recall(backend, query, 3, namespace=namespace, session_id='conv-1')
            assert len(hits) == min(3, len(expected))
    finally:
        reference.close()


@pytest.mark.parametrize(
    'now',
    [
        datetime.min.replace(tzinfo=UTC),
        datetime.max.replace(tzinfo=UTC),
        datetime.min.replace(tzinfo=timezone(timedelta(hours=5))),
        datetime.max.replace(tzinfo=timezone(timedelta(hours=-5))),
    ],
    ids=['min', 'max', 'min+05', 'max-05'],
)
def test_a_time_at_either_end_of_the_calendar_is_a_time_like_any_other(
    filled: tuple[GraphStore, str], now: datetime
) -> None:
    """A query's relative time read against `datetime.min` or `max` (a message's timestamp, a caller's `now`): every
    range that would reach past the calendar is open at that end, or no range, never `OverflowError`."""
    backend, namespace = filled
    for query in (
        'What did Caroline do yesterday?',
        'adoption agencies today',
        'Caroline in March',
        'camping last month',
        'painting three years ago',
        'support group in the past 2 weeks',
        'Was hat Caroline vor 3 Tagen gemacht?',
    ):
        hits = recall(backend, query, 3, namespace=namespace, session_id='conv-1', now=now)
        assert hits, query  # a range prefers, it never excludes
    everything = rank_blocks(backend, 'Caroline', namespace=namespace, session_id='conv-1')
    bounded = rank_blocks(
        backend,
        'Caroline',
        namespace=namespace,
        session_id='conv-1',
        since=now.replace(year=1, month=1, day=1),
        until=datetime.max.replace(tzinfo=UTC),
    )
    assert [b.block_id for b in bounded] == [b.block_id for b in everything]


def test_a_preferred_time_range_reorders_without_excluding(store: GraphStore, ingested: IngestedDialogue) -> None:
    config = RecallConfig(max_df_share=1, prefer_boost=10.0)
    plain = rank_blocks(store, 'Caroline', method='graph', session_id='conv-1', config=config)
    preferred = rank_blocks(
        store, 'Caroline', method='graph', session_id='conv-1', prefer=TimeRange(since=DAY2), config=config
    )
    assert {b.block_id for b in preferred} == {b.block_id for b in plain}
    assert turns_of(ingested, preferred[0].block_id)[0].startswith('S2')
    assert 'in the time range' in preferred[0].reasons


def test_a_time_range_named_in_the_query_is_preferred_given_when_it_is_asked(
    store: GraphStore, ingested: IngestedDialogue
) -> None:
    config = RecallConfig(max_df_share=1, prefer_boost=10.0)
    asked = datetime(2023, 7, 1, 12, 0, tzinfo=UTC)
    plain = rank_blocks(store, 'Caroline in June', method='graph', session_id='conv-1', config=config)
    assert not any('in the time range' in b.reasons for b in plain)  # no clock: nothing to be relative to
    for query, sitting in (('Caroline in June', 'S2'), ('Caroline in May', 'S1')):
        ranked = rank_blocks(store, query, method='graph', session_id='conv-1', now=asked, config=config)
        assert {b.block_id for b in ranked} == {b.block_id for b in plain}  # preferred, never excluded
        assert turns_of(ingested, ranked[0].block_id)[0].startswith(sitting)
        assert 'in the time range' in ranked[0].reasons
    explicit = rank_blocks(
        store, 'Caroline in May', method='graph', session_id='conv-1', now=asked, prefer=TimeRange(since=DAY2),
        config=config,
    )  # fmt: skip
    assert turns_of(ingested, explicit[0].block_id)[0].startswith('S2')  # an explicit range wins
    hits = recall(store, 'Caroline in May', 1, session_id='conv-1', now='2023-07-01', config=config)
    assert turns_of(ingested, hits[0].block_id)[0].startswith('S1')


def test_recall_by_a_functions_name_finds_the_block_that_read_it(tmp_path: Path) -> None:
    from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

    from mementograph.knowledge_graph import BlockRecord, Eviction
    from mementograph.knowledge_graph.entities import mentions_for
    from mementograph.knowledge_graph.memory import render_block

    from .test_entities import LISTING

    def block(seq: int, path: str, content: str) -> tuple[BlockRecord, str]:
        messages = [
            ModelResponse(parts=[ToolCallPart('read_file', {'path': path}, tool_call_id=f'c{seq}')]),
            ModelRequest(parts=[ToolReturnPart('read_file', content, tool_call_id=f'c{seq}')]),
        ]
        text = render_block(messages)
        return BlockRecord.from_messages(messages, session_id='s', seq=seq, tokens=100, text=text), text

    read, read_text = block(0, 'shop/cart.py', LISTING)  # `apply_discount` is defined, never said
    other, other_text = block(1, 'shop/notes.md', 'Discounts apply at checkout.\nCarts are kept for a day.\n' * 3)
    with open_store(f'sqlite:///{tmp_path / "m.db"}') as store:
        store.write_eviction(
            Eviction(
                session_id='s',
                blocks=(read, other),
                mentions=(*mentions_for(read.id, read_text), *mentions_for(other.id, other_text)),
            )
        )
        hits = rank_blocks(store, 'apply_discount', method='graph', session_id='s')
    assert hits[0].block_id == read.id and hits[0].matched == ('apply_discount (exact)',)
    assert all(not hit.matched for hit in hits[1:])  # the other file is reached only as its NEXT neighbour


def test_blocks_that_tie_in_full_text_share_its_rank_and_show_their_score(tmp_path: Path) -> None:
    """Blocks of the same text tie; the ranking orders them by id, so a `bm25 rank` taken from the search's own
    listing order contradicted the order shown, and a score of 2e-06 was printed as 0.000."""
    store = open_store(f'sqlite://{tmp_path / "m.db"}')
    blocks = tuple(
        BlockRecord.from_messages(session_history(1), session_id='s', seq=i, tokens=5, text='') for i in range(4)
    )
    store.write_eviction(Eviction(session_id='s', blocks=blocks))
    hits = recall(store, 'check', 4, method='bm25', session_id=None)
    assert len(hits) == 4 and len({hit.score for hit in hits}) == 1
    assert [hit.reasons for hit in hits] == [('bm25 rank 1',)] * 4
    shown = render_recall(hits, 'check')
    assert f'score {hits[0].score:.3g}' in shown and 'score 0.000' not in shown


def test_a_pasted_log_as_the_query_is_read_up_to_its_cap(tmp_path: Path) -> None:
    """What lies past `MAX_QUERY_CHARS` cannot change the ranking, and an empty answer does not echo it whole."""
    store = open_store(f'sqlite://{tmp_path / "m.db"}')
    blocks = tuple(
        BlockRecord.from_messages(session_history(1, prefix=prefix), session_id='s', seq=i, tokens=5, text='')
        for i, prefix in enumerate(('turn', 'zebra'))
    )
    store.write_eviction(Eviction(session_id='s', blocks=blocks))
    head = 'turn ' + 'x' * (MAX_QUERY_CHARS - 5)
    assert [b.block_id for b in rank_blocks(store, head, method='bm25', session_id=None)] == [blocks[0].id]
    pasted = head + ' zebra' * 5_000  # the second block's word, past the cap only
    assert [b.block_id for b in rank_blocks(store, pasted, method='bm25', session_id=None)] == [blocks[0].id]
    assert blocks[1].id in [b.block_id for b in rank_blocks(store, 'turn zebra', method='bm25', session_id=None)]
    answer = render_recall([], 'nothing here ' * 1_000)
    assert len(answer) < 300
