"""Recall and the paged index: find archived blocks by entity graph + BM25 (score fusion), with vectors too when
an embedding model is given (`hybrid`), and browse them by page."""

from __future__ import annotations

from ._pages import (
    PAGE_INDEX_HEADER,
    AmbiguousPageError,
    NoSuchPartError,
    PagePolicy,
    block_heading,
    find_page,
    fit_index,
    out_of_range,
    page_header,
    page_index_text,
    page_part,
    page_parts,
    pages_for_eviction,
    retrieve_page,
)
from ._query import QueryKey, QueryPlan, plan_query
from ._recall import (
    DENSE_METHODS,
    MAX_QUERY_CHARS,
    METHODS,
    Fusion,
    Method,
    RecallConfig,
    RecallHit,
    RecallStore,
    ScoredBlock,
    TimeFilterError,
    rank_blocks,
    recall,
)
from ._render import EMPTY_QUERY, render_recall
from ._time_phrases import time_range_in
from ._time_range import TimeRange, parse_time
from ._values import BlockInfo, EntityLookup, EntityPostings, Posting

__all__ = (
    'DENSE_METHODS',
    'EMPTY_QUERY',
    'MAX_QUERY_CHARS',
    'METHODS',
    'PAGE_INDEX_HEADER',
    'AmbiguousPageError',
    'BlockInfo',
    'EntityLookup',
    'EntityPostings',
    'Fusion',
    'Method',
    'NoSuchPartError',
    'PagePolicy',
    'Posting',
    'QueryKey',
    'QueryPlan',
    'RecallConfig',
    'RecallHit',
    'RecallStore',
    'ScoredBlock',
    'TimeFilterError',
    'TimeRange',
    'block_heading',
    'find_page',
    'fit_index',
    'out_of_range',
    'page_header',
    'page_index_text',
    'page_part',
    'page_parts',
    'pages_for_eviction',
    'parse_time',
    'plan_query',
    'rank_blocks',
    'recall',
    'render_recall',
    'retrieve_page',
    'time_range_in',
)
