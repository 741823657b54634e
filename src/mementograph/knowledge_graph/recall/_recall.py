"""`_recall` -- find archived blocks for a query: entity graph traversal fused with BM25 by rank fusion.

Methods (each a ranking of blocks):

- `graph`: the query's entities matched exactly, normalised and fuzzily against `Entity` keys; each block scores
  `sum over query groups of max over matched keys of weight * idf * saturate(count)` over its `MENTIONS` edges
  (BM25's term weighting, on entities instead of words). Then two hops: entities the best blocks co-mention
  (named things only: files, symbols, names, terms, dates) pull in other blocks that mention them, and a share of
  each block's score flows to its `NEXT` neighbours (an answer often sits one block after its question).
- `bm25`: the store's full-text index (SQLite FTS5 / Neo4j full-text) over blocks and mementos, by block.
- `fused`: the two fused, the default: each ranking's scores divided by its best, summed (`RecallConfig.fusion`;
  reciprocal rank fusion, `1 / (60 + rank)` summed, is the other choice).
- `dense` and `hybrid` (only with a dense index, `dense=`, built with an embedding model): blocks by cosine
  similarity of their text to the query, and `fused` with that ranking as a third, lighter member. Words catch
  names, numbers and paths; vectors catch paraphrase ("destress" -> "pottery ... like therapy").

All of it is Python over three protocol reads (`entity_postings`, `block_info`, which also answers `entities_of`
and `memento_of` for many blocks at once, and `mention_keys`, the entity keys alone) plus `search_text`, so the
`graph` ranking is identical on every backend by construction; `bm25` (and so `fused`) can differ only as far as
the backends' full-text scoring does. Latency is round trips on Neo4j and rows read on SQLite: a `fused` recall
makes ~9 reads, each bounded (postings and frequencies capped, full text over the rarer words), so it grows little
with the store.
"""

from __future__ import annotations

import heapq
import math
import threading
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Final, Literal, Protocol, cast

from ..._daemon import DaemonExecutor
from .._schema import DEFAULT_NAMESPACE
from ..entities import entity_key
from ..store import GraphStore, TextHit
from ..store._conform import require_members
from ._query import QueryKey, QueryPlan, plan_query
from ._time_phrases import time_range_in
from ._time_range import TimeRange, parse_time
from ._values import BlockInfo, EntityLookup

if TYPE_CHECKING:
    from ..dense import DenseRanker

__all__ = (
    'DENSE_METHODS',
    'METHODS',
    'Fusion',
    'Method',
    'RecallConfig',
    'RecallHit',
    'RecallStore',
    'ScoredBlock',
    'rank_blocks',
    'recall',
)

Method = Literal['graph', 'bm25', 'fused', 'dense', 'hybrid']
Fusion = Literal['score', 'rrf']
METHODS: Final[tuple[Method, ...]] = ('graph', 'bm25', 'fused')
"""The methods that need no embedding model."""
DENSE_METHODS: Final[tuple[Method, ...]] = ('dense', 'hybrid')
"""The methods that need a dense index (`rank_blocks(dense=...)`)."""
MAX_QUERY_CHARS: Final = 2_000
"""A recall query is read up to this many characters. A model pasting a whole log into `recall` made each query
cost seconds (400 kB: 45 s), past the store timeout, while the rest of its run waited; a question, a few names or
an error message fit well within it."""
_NAMED_CLASSES: Final = frozenset({'file', 'sym', 'cmd', 'err', 'url', 'num', 'ver', 'date', 'name', 'term'})


class RecallStore(GraphStore, Protocol):
    """A `GraphStore` with the three recall reads (every backend implements them; see `_values`)."""

    def entity_postings(
        self,
        keys: Sequence[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        prefix: bool = False,
        limit: int = 200,
        max_entities: int = 64,
        count_limit: int = 10_000,
        count_total: bool = True,
    ) -> EntityLookup:
        """Entities by key (or key prefix), each with its document frequency and the blocks in scope mentioning it.

        Args:
            keys: entity keys (`class:value`, see `entities.entity_key`); with `prefix`, key prefixes.
            namespace: entities and blocks of this namespace only.
            session_id: postings only from blocks of this session (`None`: the whole namespace). Document
                frequencies and `total_blocks` are always namespace-wide.
            prefix: match keys starting with each of `keys` (at most `max_entities` per prefix, in key order).
            limit: postings per entity, most mentions first, then block id (0: document frequencies only).
            max_entities: cap on the entities one prefix may match.
            count_limit: document frequencies are counted up to this (an entity more common than that is
                reported as `count_limit`: it is too common to single anything out, and counting it exactly is what
                would make the read slow at scale).
            count_total: whether to count the namespace's blocks (`total_blocks`; 0 when not): a caller that
                already knows it spares the count (a scan of the namespace's blocks on Neo4j).
        """
        ...

    def block_info(
        self,
        block_ids: Sequence[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        mementos: bool = False,
        entities: bool = False,
        entity_classes: Collection[str] | None = None,
    ) -> list[BlockInfo]:
        """Position, size, time and `NEXT` neighbours of blocks (kind `block`), without their bytes.

        Ids not found in scope are left out; the result follows the order of `block_ids` (duplicates once). With
        `mementos`, each also carries its memento (`BlockInfo.memento`): what `recall` shows for a hit; with
        `entities`, what it `MENTIONS` (`BlockInfo.entities`, as `entities_of`): the second hop's seeds, only those
        whose key is of one of `entity_classes` when given (`file` for `file:app.py`).
        """
        ...

    def mention_keys(
        self,
        block_ids: Sequence[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        entity_classes: Collection[str] | None = None,
    ) -> dict[str, tuple[tuple[str, int], ...]]:
        """What each block in scope `MENTIONS`, as `(entity key, count)`, most mentions first, then by key.

        `block_info(..., entities=True)` without the entities' names and kinds, nor the blocks' positions: the
        second hop reads its seeds' entities only to weigh them by key, and a large seed mentions ~500 named
        entities (on SQLite, joining each with its entity row was most of the read). Blocks out of scope, or
        mentioning nothing asked for, are left out.
        """
        ...


@dataclass(frozen=True)
class RecallConfig:
    """Knobs of the ranking. The defaults are structural choices, not fitted to any benchmark's questions."""

    postings_limit: int = 200
    """Blocks read per matched entity (most mentions first)."""
    max_df_share: float = 0.5
    """Entities mentioned by more than this share of the namespace's blocks are not traversed (their IDF is ~0)."""
    max_df: int = 1_000
    """Nor are entities mentioned by more blocks than this: they cannot single out ten blocks, and reading their
    postings is what would make recall slow at scale (full text still sees the words). On Neo4j at 100k blocks,
    1,000 against 2,000 took fused recall from ~39 / 70 to ~33 / 50 ms (p50 / p95, load 3); LoCoMo and LongMemEval
    rank the same (pooled oracle fused recall_all@5 0.719 -> 0.722)."""
    text_max_df_share: float = 0.2
    """Words whose concept more than this share of the namespace's blocks mention are left out of the full-text
    query (dynamic stop words: BM25 gives them almost no weight, and they make it read most of the index)."""
    max_candidates: int = 1_000
    """Blocks kept per ranking before fusion."""
    fuzzy_min_ratio: float = 0.8
    """Similarity (difflib ratio) a fuzzy candidate key must reach."""
    fuzzy_weight: float = 0.6
    k1: float = 1.2
    """Saturation of repeated mentions, as in BM25."""
    seeds: int = 3
    """Best blocks whose co-mentioned entities are followed (second hop)."""
    co_candidates: int = 8
    """Co-mentioned entities (most supported first) whose frequency is looked up."""
    co_entities: int = 3
    co_weight: float = 0.3
    next_weight: float = 0.2
    """Share of a block's score given to each `NEXT` neighbour. With score fusion both rankings spread over `NEXT`
    and their shares add up in `fused`; 0.2 (was 0.3 under rank fusion) ranks LoCoMo's evidence higher at R@5 and
    R@10 and loses nothing on LongMemEval."""
    next_blocks: int = 30
    """Best blocks whose neighbours receive that share."""
    fusion: Fusion = 'score'
    """How `fused` combines the two rankings. `score`: each block's scores summed, each ranking's divided by its best
    (CombSUM over max-normalised scores), so a block far ahead in one ranking stays ahead; `rrf`: reciprocal rank
    fusion, `1 / (rrf_k + rank)` summed, which keeps only the order and lets a block that one ranking barely found
    tie with one the other ranking is sure of. `score` measured better on LoCoMo and pooled LongMemEval (see
    BENCHMARKS.md)."""
    rrf_k: int = 60
    graph_weight: float = 1.0
    """Weight of the graph ranking in the fusion (the full-text ranking weighs 1)."""
    prefer_boost: float = 1.0
    """Score multiplier `1 + prefer_boost` for blocks inside a preferred time range (`prefer=`)."""
    prefer_candidates: int = 300
    """Best blocks whose times are read to apply a preferred range."""
    bm25_next: bool = True
    """For `fused`: the full-text ranking also spreads a share of its scores over `NEXT` before the fusion, so the
    two rankings agree on what a neighbourhood is (the `bm25` method itself stays plain full text)."""
    bm25_candidates: int = 100
    """Full-text hits read (mementos and blocks), before they are folded into blocks."""
    dense_candidates: int = 200
    """Nearest blocks read from the dense index."""
    dense_weight: float = 0.5
    """Weight of the dense ranking in `hybrid` (graph and full text weigh as in `fused`). Its scores are the cosine
    minus the median cosine of the candidates, so only what stands out of the crowd counts: every text is somewhat
    similar to every other."""


@dataclass(frozen=True)
class ScoredBlock:
    """A block in a ranking, with why it is there."""

    block_id: str
    score: float
    matched: tuple[str, ...] = ()
    """Entities matched (`name (how)`)."""
    reasons: tuple[str, ...] = ()
    """How the block was reached (`entity name:x`, `co-mention of name:y`, `NEXT of blk_...`, `bm25 rank 3`)."""


@dataclass(frozen=True)
class RecallHit:
    """A recalled block and the memento that stands in for it."""

    block_id: str
    session_id: str
    score: float
    memento_id: str | None
    memento: str
    """The memento's text ('' when the block has none)."""
    block_ids: tuple[str, ...]
    """What to pass to `recover_block`: the block (or the blocks the memento summarizes)."""
    matched: tuple[str, ...]
    reasons: tuple[str, ...]
    started_at: str | None = None


@dataclass
class _Acc:
    score: float = 0.0
    matched: dict[str, None] = field(default_factory=dict[str, None])
    reasons: dict[str, None] = field(default_factory=dict[str, None])


def _idf(df: int, total: int) -> float:
    return math.log(1.0 + (max(total, df) - df + 0.5) / (df + 0.5))


def _saturate(count: int, k1: float) -> float:
    return count * (k1 + 1.0) / (count + k1)


def _lookup(
    store: RecallStore,
    keys: Sequence[str],
    *,
    namespace: str,
    session_id: str | None,
    prefix: bool = False,
    limit: int,
    count_limit: int = 10_000,
    count_total: bool = False,
) -> EntityLookup:
    if not keys:
        return EntityLookup(total_blocks=0, entities=())
    return store.entity_postings(
        keys,
        namespace=namespace,
        session_id=session_id,
        prefix=prefix,
        limit=limit,
        count_limit=count_limit,
        count_total=count_total,
    )


@dataclass
class _Analysis:
    """What the store says about a query's keys: which exist, how common they are, which to traverse."""

    total: int = 0
    dfs: dict[str, int] = field(default_factory=dict[str, int])
    wanted: dict[str, tuple[QueryKey, float]] = field(default_factory=dict[str, tuple[QueryKey, float]])


def _analyse(
    store: RecallStore, plan: QueryPlan, *, namespace: str, session_id: str | None, config: RecallConfig
) -> _Analysis:
    """One read for the exact and normalised keys, one for fuzzy candidates (prefixes), none for postings yet."""
    analysis = _Analysis()
    term_keys = [key for term in plan.terms for key in _term_keys(term)]
    keys = list(dict.fromkeys([*(k.key for k in plan.keys), *term_keys]))
    # frequencies counted just past `max_df`, the cap traversal needs (and, up to 10k blocks, `text_max_df_share`:
    # above that, `search_text` caps common words itself); counting a common word further made the read slow at scale
    count_limit = config.max_df + 1
    exact = _lookup(  # the one read that counts the namespace's blocks (the N of IDF)
        store, keys, namespace=namespace, session_id=session_id, limit=0, count_limit=count_limit, count_total=True
    )
    analysis.total = exact.total_blocks
    by_key = {k.key: k for k in plan.keys}
    for found in exact.entities:
        analysis.dfs[found.entity.key] = found.blocks
        query_key = by_key.get(found.entity.key)
        if query_key is not None and found.blocks:
            analysis.wanted[found.entity.key] = (query_key, 1.0)
    if plan.fuzzy:
        # frequencies too (stored counts on both backends, no counting): a match too common to traverse gets no
        # postings read below (reading a 100k-block entity's postings cost ~300 ms on Neo4j, to be dropped)
        candidates = _lookup(
            store,
            [k.key for k in plan.fuzzy],
            namespace=namespace,
            session_id=session_id,
            prefix=True,
            limit=0,
            count_limit=count_limit,
        )
        for found in candidates.entities:
            cls, _, entity_value = found.entity.key.partition(':')
            if found.entity.key in analysis.wanted or not found.blocks or cls not in ('concept', 'name', 'sym'):
                continue
            for fuzzy in plan.fuzzy:
                if not found.entity.key.startswith(fuzzy.key) or entity_value == fuzzy.text:
                    continue
                if SequenceMatcher(None, entity_value, fuzzy.text).ratio() >= config.fuzzy_min_ratio:
                    analysis.wanted[found.entity.key] = (fuzzy, config.fuzzy_weight)
                    analysis.dfs.setdefault(found.entity.key, found.blocks)  # capped as the exact keys' are
                    break
    return analysis


def _traversable(df: int, total: int, config: RecallConfig) -> bool:
    return 0 < df <= config.max_df and (total == 0 or df <= max(1, config.max_df_share * total))


def _graph(
    store: RecallStore,
    plan: QueryPlan,
    analysis: _Analysis,
    *,
    namespace: str,
    session_id: str | None,
    config: RecallConfig,
) -> dict[str, _Acc]:
    """First hop (query entities), second hop (co-mentions), then `NEXT` propagation."""
    acc: dict[str, _Acc] = defaultdict(_Acc)
    total = analysis.total
    wanted = analysis.wanted
    usable = [key for key in wanted if key not in analysis.dfs or _traversable(analysis.dfs[key], total, config)]
    if not usable:
        return acc
    lookup = _lookup(
        store,
        usable,
        namespace=namespace,
        session_id=session_id,
        limit=config.postings_limit,
        count_limit=config.max_df + 1,  # a fuzzy match more common than that is dropped below; no need to count on
    )
    # a block counts the best key of each query group once
    group_best: dict[tuple[str, int], tuple[float, str]] = {}
    for found in lookup.entities:
        if not _traversable(found.blocks, total, config):
            continue  # a fuzzy match turned out to be too common
        query_key, weight = wanted[found.entity.key]
        idf = _idf(found.blocks, total)
        label = f'{found.entity.name} ({query_key.how if weight == 1.0 else "fuzzy"})'
        for posting in found.postings:
            value = weight * idf * _saturate(posting.count, config.k1)
            slot = (posting.block_id, query_key.group)
            if value > group_best.get(slot, (0.0, ''))[0]:
                group_best[slot] = (value, label)
    for (block_id, _), (value, label) in group_best.items():
        entry = acc[block_id]
        entry.score += value
        entry.matched[label] = None
        entry.reasons[f'entity {label}'] = None
    if not acc:
        return acc
    _co_mentions(store, acc, set(wanted), total, namespace=namespace, session_id=session_id, config=config)
    return acc  # `NEXT` propagation follows in `_propagate_next`, with the full-text ranking's (one read for both)


def _co_mentions(
    store: RecallStore,
    acc: dict[str, _Acc],
    matched_keys: set[str],
    total: int,
    *,
    namespace: str,
    session_id: str | None,
    config: RecallConfig,
) -> None:
    """Second hop: named entities the best blocks mention (besides the query's) lead to other blocks."""
    if config.seeds <= 0 or config.co_entities <= 0:
        return
    seeds = heapq.nsmallest(config.seeds, acc, key=lambda block_id: (-acc[block_id].score, block_id))
    top = acc[seeds[0]].score or 1.0
    support: dict[str, float] = defaultdict(float)
    # the named entities only, filtered by the store: half of an agent trace's mentions are plain words (`concept`)
    named = store.mention_keys(seeds, namespace=namespace, session_id=session_id, entity_classes=_NAMED_CLASSES)
    for seed in seeds:
        share = acc[seed].score / top
        for key, _count in named.get(seed, ()):
            if key not in matched_keys:
                support[key] += share
    if not support:
        return
    candidates = heapq.nsmallest(config.co_candidates, support, key=lambda key: (-support[key], key))
    lookup = _lookup(
        store, candidates, namespace=namespace, session_id=session_id, limit=0, count_limit=config.max_df + 1
    )
    ranked = sorted(
        (
            (support[f.entity.key] * _idf(f.blocks, total), f.entity.key)
            for f in lookup.entities
            if f.blocks > 1 and _traversable(f.blocks, total, config)
        ),
        reverse=True,
    )[: config.co_entities]
    if not ranked:
        return
    chosen = {key: value for value, key in ranked}
    names = {f.entity.key: f.entity.name for f in lookup.entities}
    postings = _lookup(
        store,
        list(chosen),
        namespace=namespace,
        session_id=session_id,
        limit=config.postings_limit,
        count_limit=config.max_df + 1,
    )
    norm = max(chosen.values()) or 1.0
    for found in postings.entities:
        share = chosen[found.entity.key] / norm
        idf = _idf(found.blocks, total)
        for posting in found.postings:
            entry = acc[posting.block_id]
            entry.score += config.co_weight * share * idf * _saturate(posting.count, config.k1)
            entry.reasons[f'co-mention of {names[found.entity.key]}'] = None


def _propagate_next(
    store: RecallStore,
    accs: Sequence[dict[str, _Acc]],
    *,
    namespace: str,
    session_id: str | None,
    config: RecallConfig,
) -> None:
    """In each ranking, a share of each top block's score flows to its `NEXT` neighbours (before and after it).

    The neighbours of every ranking's top blocks are read at once: one round trip, however many rankings.
    """
    if config.next_weight <= 0 or config.next_blocks <= 0 or not accs:
        return
    tops = [
        heapq.nsmallest(config.next_blocks, acc, key=lambda block_id: (-acc[block_id].score, block_id)) for acc in accs
    ]
    wanted = list(dict.fromkeys(block_id for top in tops for block_id in top))
    infos = {info.id: info for info in store.block_info(wanted, namespace=namespace, session_id=session_id)}
    for acc, top in zip(accs, tops, strict=True):
        flows: dict[str, float] = defaultdict(float)
        sources: dict[str, str] = {}
        for block_id in top:
            info = infos.get(block_id)
            if info is None:
                continue
            base = acc[block_id].score
            for neighbour in (info.previous_id, info.next_id):
                if neighbour is not None:
                    flows[neighbour] += config.next_weight * base
                    sources.setdefault(neighbour, block_id)
        for neighbour, value in flows.items():
            entry = acc[neighbour]
            entry.score += value
            entry.reasons[f'NEXT of {sources[neighbour]}'] = None


def _term_keys(term: str) -> tuple[str, ...]:
    """The keys whose frequency tells how common a search word is (as a plain word, as a name)."""
    return (entity_key('concept', term), entity_key('name', term))


def _text_terms(plan: QueryPlan, analysis: _Analysis | None, config: RecallConfig) -> list[str]:
    """The query's words minus those (nearly) every block mentions; never all of them."""
    if analysis is None or analysis.total < 20:
        return list(plan.terms)
    limit = config.text_max_df_share * analysis.total

    def df(term: str) -> int:
        return max((analysis.dfs.get(key, 0) for key in _term_keys(term)), default=0)

    kept = [term for term in plan.terms if df(term) <= limit]
    if not kept and plan.terms:
        kept = [min(plan.terms, key=df)]
    return kept


def _bm25(
    store: GraphStore,
    plan: QueryPlan,
    analysis: _Analysis | None,
    *,
    namespace: str,
    session_id: str | None,
    config: RecallConfig,
) -> dict[str, _Acc]:
    acc: dict[str, _Acc] = defaultdict(_Acc)
    terms = _text_terms(plan, analysis, config)
    if not terms:
        return acc
    hits: list[TextHit] = store.search_text(
        ' '.join(terms), k=config.bm25_candidates, namespace=namespace, session_id=session_id
    )
    rank, previous = 0, None
    for position, hit in enumerate(hits, start=1):
        if hit.score != previous:  # hits that tie share a rank: the ranking orders them by block id, not as listed
            rank, previous = position, hit.score
        for block_id in hit.block_ids:
            if not block_id.startswith('blk_'):
                continue
            entry = acc[block_id]
            if not entry.reasons:  # its best hit (a block is also reached through its memento, further down)
                entry.reasons[f'bm25 rank {rank}'] = None
            entry.score = max(entry.score, hit.score)
    return acc


def _dense(ranker: DenseRanker, query: str, *, namespace: str, session_id: str | None, config: RecallConfig
           ) -> dict[str, _Acc]:  # fmt: skip
    acc: dict[str, _Acc] = defaultdict(_Acc)
    nearest = ranker.rank_dense(query, namespace=namespace, session_id=session_id, limit=config.dense_candidates)
    if not nearest:
        return acc
    median = sorted(score for _, score in nearest)[len(nearest) // 2]
    for rank, (block_id, score) in enumerate(nearest, start=1):
        if score > median or rank == 1:
            entry = acc[block_id]
            entry.score = max(score - median, 1e-6)
            entry.reasons[f'dense rank {rank} (cosine {score:.2f})'] = None
    return acc


_Ranking = list[tuple[str, _Acc]]
"""A ranking before it is shown: `(block_id, accumulator)`, best first. `ScoredBlock`s are built only for the blocks
a ranking or a fusion keeps (most of ~1,000 candidates are cut; building each cost more than ranking it)."""


def _ranked(acc: dict[str, _Acc], limit: int | None = None) -> _Ranking:
    items = [(block_id, entry) for block_id, entry in acc.items() if entry.score > 0]
    key: Callable[[tuple[str, _Acc]], tuple[float, str]] = lambda item: (-item[1].score, item[0])  # noqa: E731
    if limit is not None and len(items) > 4 * limit:
        return heapq.nsmallest(limit, items, key=key)
    # a heap of 1,000 (`max_candidates`) over ~1,500 candidates compares in Python: 5x what the sort costs in C
    return sorted(items, key=key)[:limit]


def _scored(ranking: _Ranking) -> list[ScoredBlock]:
    return [
        ScoredBlock(block_id, entry.score, tuple(entry.matched), tuple(entry.reasons)) for block_id, entry in ranking
    ]


def _fuse(
    rankings: Sequence[_Ranking],
    k: int,
    weights: Sequence[float],
    limit: int | None = None,
    fusion: Fusion = 'score',
) -> list[ScoredBlock]:
    """Score (max-normalised CombSUM) or reciprocal rank fusion; the reasons of only the blocks kept are merged (most
    are cut when `limit` is set)."""
    scores: dict[str, float] = defaultdict(float)
    for ranking, weight in zip(rankings, weights, strict=False):
        top = ranking[0][1].score if ranking else 0.0
        for rank, (block_id, entry) in enumerate(ranking, start=1):
            if fusion == 'score':
                scores[block_id] += weight * entry.score / top if top > 0 else 0.0
            else:
                scores[block_id] += weight / (k + rank)
    key: Callable[[tuple[str, float]], tuple[float, str]] = lambda item: (-item[1], item[0])  # noqa: E731
    items = [item for item in scores.items() if item[1] > 0]
    order = sorted(items, key=key) if limit is None or len(items) <= limit else heapq.nsmallest(limit, items, key=key)
    by_id = [dict(ranking) for ranking in rankings]
    fused: list[ScoredBlock] = []
    for block_id, score in order:
        matched: dict[str, None] = {}
        reasons: dict[str, None] = {}
        for entries in by_id:
            found = entries.get(block_id)
            if found is not None:
                matched.update(found.matched)
                reasons.update(found.reasons)
        fused.append(ScoredBlock(block_id, score, tuple(matched), tuple(reasons)))
    return fused


def _in_time(
    store: RecallStore,
    ranking: list[ScoredBlock],
    window: TimeRange,
    *,
    namespace: str,
    session_id: str | None,
) -> list[ScoredBlock]:
    infos = {
        info.id: info
        for info in store.block_info([b.block_id for b in ranking], namespace=namespace, session_id=session_id)
    }
    return [
        block
        for block in ranking
        if block.block_id in infos and window.contains(parse_time(infos[block.block_id].started_at))
    ]


class TimeFilterError(ValueError):
    """A time filter that cannot be read, or a range that holds no time (`since` not before `until`)."""


def _time_filter(name: str, value: str | datetime | None) -> datetime | None:
    """A user's time filter, parsed; unreadable text is an error rather than a filter silently dropped."""
    parsed = parse_time(value)
    if parsed is None and isinstance(value, str) and value.strip():
        raise TimeFilterError(
            f'{name}: cannot read {value!r} as a time; use ISO-8601, e.g. 2026-05-20 or 2026-05-20T14:30'
        )
    return parsed


def _time_window(since: str | datetime | None, until: str | datetime | None) -> TimeRange:
    window = TimeRange(_time_filter('since', since), _time_filter('until', until))
    if window.since is not None and window.until is not None and not window.contains(window.since):
        # an empty range would answer "nothing found", as if nothing matched
        raise TimeFilterError(f'since ({since}) is not before until ({until}): the range holds no time')
    return window


def rank_blocks(
    store: GraphStore,
    query: str,
    *,
    method: Method = 'fused',
    namespace: str = DEFAULT_NAMESPACE,
    session_id: str | None = None,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
    prefer: TimeRange | None = None,
    now: datetime | str | None = None,
    config: RecallConfig | None = None,
    limit: int | None = None,
    dense: DenseRanker | None = None,
) -> list[ScoredBlock]:
    """Every block the method finds for `query`, best first (the ranking `recall` cuts at k).

    Args:
        store: a store with the recall reads (`entity_postings`, `block_info`).
        query: free text.
        method: `graph`, `bm25`, `fused`, or with `dense`: `dense` or `hybrid`.
        namespace: where to look.
        session_id: one session, or `None` for every session of the namespace.
        since: keep blocks that started at or after this time (ISO-8601 text or datetime).
        until: keep blocks that started before this time.
        prefer: a time range to favour without excluding anything (e.g. "in March" in the query, see
            `time_range_in`): blocks inside it score `1 + prefer_boost` times more.
        now: when the query is asked. A time range the query names relative to it ("in March", "two weeks ago",
            "last month": `time_range_in`) is then preferred, as `prefer` would (which wins when given): "what did
            I bake in the past two weeks" means those two weeks, and only the asker's clock says which they are.
        config: ranking knobs.
        limit: the best `limit` blocks only (`None`: every block found); the same blocks as cutting the full
            ranking, without building the tail nobody reads.
        dense: a dense index over the scope's blocks (`DenseIndex`), for the methods `dense` and `hybrid`.
    """
    config = config or RecallConfig()
    query = query[:MAX_QUERY_CHARS]
    if method in DENSE_METHODS and dense is None:
        raise ValueError(f'method {method!r} needs a dense index (dense=DenseIndex(embedding model))')
    window = _time_window(since, until)
    if prefer is None and (asked := _time_filter('now', now)) is not None:
        prefer = time_range_in(query, asked)
    plan = plan_query(query)
    recall_store = _recall_store(store)
    accs: list[dict[str, _Acc]] = []
    weights: list[float] = []
    if method == 'dense' and dense is not None:
        accs.append(_dense(dense, query, namespace=namespace, session_id=session_id, config=config))
        return _finish(recall_store, accs, weights, window, prefer, namespace, session_id, config, limit)
    analysis = _analyse(recall_store, plan, namespace=namespace, session_id=session_id, config=config)
    spread: list[dict[str, _Acc]] = []  # the rankings whose scores flow over `NEXT`
    searching: Future[dict[str, _Acc]] | None = None
    embedding: Future[dict[str, _Acc]] | None = None
    fusing = method in ('fused', 'hybrid')
    if fusing:  # the full-text search runs beside the graph reads (a round trip, or FTS5 in C)
        searching = _background().submit(
            _bm25, store, plan, analysis, namespace=namespace, session_id=session_id, config=config
        )
    if method == 'hybrid' and dense is not None:  # and so does the query's embedding (onnxruntime, or a request)
        embedding = _background().submit(
            _dense, dense, query, namespace=namespace, session_id=session_id, config=config
        )
    if method in ('graph', 'fused', 'hybrid'):
        try:
            graph = _graph(recall_store, plan, analysis, namespace=namespace, session_id=session_id, config=config)
        except BaseException:
            for running in (searching, embedding):
                if running is not None and not running.cancel():
                    running.exception()  # the work must not outlive the call that started it
            raise
        accs.append(graph)
        weights.append(config.graph_weight)
        if graph:
            spread.append(graph)
    if method in ('bm25', 'fused', 'hybrid'):
        if searching is not None:
            text = searching.result()
        else:
            text = _bm25(store, plan, analysis, namespace=namespace, session_id=session_id, config=config)
        accs.append(text)
        weights.append(1.0)
        if fusing and config.bm25_next and text:
            spread.append(text)
    _propagate_next(recall_store, spread, namespace=namespace, session_id=session_id, config=config)
    if embedding is not None:
        accs.append(embedding.result())
        weights.append(config.dense_weight)
    return _finish(recall_store, accs, weights, window, prefer, namespace, session_id, config, limit)


def _finish(
    recall_store: RecallStore,
    accs: Sequence[dict[str, _Acc]],
    weights: Sequence[float],
    window: TimeRange,
    prefer: TimeRange | None,
    namespace: str,
    session_id: str | None,
    config: RecallConfig,
    limit: int | None,
) -> list[ScoredBlock]:
    """Rankings fused (when more than one), then the time filter and the preferred range applied, then cut."""
    rankings = [_ranked(acc, config.max_candidates) for acc in accs]
    bounded = [window.since, window.until, *(() if prefer is None else (prefer.since, prefer.until))]
    cut = limit if all(moment is None for moment in bounded) else None  # time filters reorder: cut after them
    if len(rankings) == 1:
        ranking = _scored(rankings[0] if cut is None else rankings[0][:cut])
    else:
        ranking = _fuse(rankings, config.rrf_k, weights, cut, config.fusion)
    if window.since is not None or window.until is not None:
        ranking = _in_time(recall_store, ranking, window, namespace=namespace, session_id=session_id)
    if prefer is not None and (prefer.since is not None or prefer.until is not None) and ranking:
        ranking = _prefer(recall_store, ranking, prefer, namespace=namespace, session_id=session_id, config=config)
    return ranking if limit is None else ranking[:limit]


def _prefer(
    store: RecallStore,
    ranking: list[ScoredBlock],
    window: TimeRange,
    *,
    namespace: str,
    session_id: str | None,
    config: RecallConfig,
) -> list[ScoredBlock]:
    head = ranking[: config.prefer_candidates]
    infos = {
        info.id: info
        for info in store.block_info([b.block_id for b in head], namespace=namespace, session_id=session_id)
    }
    boosted = [
        ScoredBlock(b.block_id, b.score * (1.0 + config.prefer_boost), b.matched, (*b.reasons, 'in the time range'))
        if b.block_id in infos and window.contains(parse_time(infos[b.block_id].started_at))
        else b
        for b in head
    ]
    boosted.sort(key=lambda b: (-b.score, b.block_id))
    return boosted + ranking[config.prefer_candidates :]


_pool: DaemonExecutor | None = None
_pool_lock = threading.Lock()


def _background() -> DaemonExecutor:
    """Threads for the full-text half of fused recalls (stores are thread-safe: the `GraphStore` contract), daemons
    so that a search stuck on a store that stopped answering does not keep the process from exiting."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = DaemonExecutor(max_workers=4, name='mementograph-recall')
        return _pool


def _recall_store(store: GraphStore) -> RecallStore:
    require_members(store, RecallStore)
    return cast(RecallStore, store)


def recall(
    store: GraphStore,
    query: str,
    k: int = 10,
    *,
    method: Method = 'fused',
    namespace: str = DEFAULT_NAMESPACE,
    session_id: str | None = None,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
    now: datetime | str | None = None,
    config: RecallConfig | None = None,
    dense: DenseRanker | None = None,
) -> list[RecallHit]:
    """The `k` best archived blocks for `query`, each with its memento, score and the reason it was found.

    This is what the `recall` tool and `mementograph recall` call. Scope is one session unless `session_id` is
    `None` (the whole namespace). With `now` (when the query is asked), a time range the query names ("in March",
    "two weeks ago") is preferred (see `rank_blocks`). `dense` (a `DenseIndex`) enables `dense` and `hybrid`.
    """
    limit = max(0, k)
    for deeper in (False, True):
        ranking = rank_blocks(
            store,
            query,
            method=method,
            namespace=namespace,
            session_id=session_id,
            since=since,
            until=until,
            now=now,
            config=config,
            limit=limit,
            dense=dense,
        )
        hits = _without_copies(store, _hits(store, ranking, namespace, session_id), namespace)
        if deeper or len(hits) >= k or len(ranking) < limit:  # enough, or the ranking has no more to give
            break
        limit = 2 * limit  # copies took places: rank deeper once (only a branched history has copies)
    return hits[: max(0, k)]


def _hits(store: GraphStore, ranking: Sequence[ScoredBlock], namespace: str, session_id: str | None) -> list[RecallHit]:
    if not ranking:
        return []
    infos = {
        info.id: info
        for info in _recall_store(store).block_info(
            [b.block_id for b in ranking], namespace=namespace, session_id=session_id, mementos=True
        )
    }  # the hits' mementos come with their infos: one read for all of them, not one (or two) per hit
    hits: list[RecallHit] = []
    for block in ranking:
        info = infos.get(block.block_id)
        memento = (
            info.memento
            if info is not None
            else store.memento_of(block.block_id, namespace=namespace, session_id=session_id)
        )
        hits.append(
            RecallHit(
                block_id=block.block_id,
                session_id=info.session_id if info is not None else (session_id or ''),
                score=block.score,
                memento_id=None if memento is None else memento.id,
                memento='' if memento is None else memento.text,
                block_ids=(block.block_id,) if memento is None else memento.summarizes,
                matched=block.matched,
                reasons=block.reasons,
                started_at=None if info is None else info.started_at,
            )
        )
    return hits


def _without_copies(store: GraphStore, hits: list[RecallHit], namespace: str) -> list[RecallHit]:
    """`hits` less the later copies of a block in one session: a branch of a conversation (a retried or regenerated
    turn) archives the messages it shares with the first branch again, under new ids, and both copies would rank
    alike. A copy holds the same bytes (its sha256), so it is also summarized by a memento of the same text: only
    hits of one session whose mementos read alike are compared, by the sha256 of their blocks."""
    by_text: dict[tuple[str, str], list[RecallHit]] = defaultdict(list)
    for hit in hits:
        if hit.memento and hit.block_ids == (hit.block_id,):  # a memento of one block, as a copy's is
            by_text[hit.session_id, hit.memento].append(hit)
    copies: set[str] = set()
    for alike in by_text.values():
        if len(alike) < 2:
            continue
        seen: set[str] = set()
        for hit in alike:  # in rank order: the best-ranked copy stays
            sha256 = store.get_block(hit.block_id, namespace=namespace).sha256
            if sha256 in seen:
                copies.add(hit.block_id)
            seen.add(sha256)
    return [hit for hit in hits if hit.block_id not in copies] if copies else hits
