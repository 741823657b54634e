"""`_values` -- what the two recall reads of a `GraphStore` return (`entity_postings`, `block_info`).

They live apart from the recall logic (this module imports only the schema) so a backend can import them without
importing recall, which itself imports the stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .._schema import EntityRecord, MementoRecord

__all__ = (
    'TEXT_ENOUGH_HITS',
    'TEXT_MAX_DF',
    'TEXT_MAX_TERMS',
    'TEXT_MIN_DOCS',
    'BlockInfo',
    'EntityLookup',
    'EntityPostings',
    'Posting',
)

TEXT_MAX_DF: Final = 2_000
"""Full-text search (`search_text`, both backends) leaves out words found in more documents than this when the query
has rarer ones; a query made only of such words is scored over the `TEXT_MAX_DF` latest documents holding its
rarest word. Why: a full-text index scores every document matching any word (no top-k early exit), so one common
word costs a pass over most of the store, while its BM25 weight is near zero. Only in stores of more than
`TEXT_MIN_DOCS` documents."""
TEXT_MAX_TERMS: Final = 8
"""Words (the rarest first) sent to the full-text index per query."""
TEXT_ENOUGH_HITS: Final = 10
"""A scoped search whose rarer words find fewer than this many of the scope's documents (or `k`, if smaller) is
ranked again on all of the query's words (the words left out may be common only in other scopes, and the only ones
that match here). Past it, the rarer words decide, as they do over a namespace: the second ranking walks every
document of the common words for their IDF (10-17 ms at 100k blocks, most of a session's recall)."""
TEXT_MIN_DOCS: Final = 10_000
"""Below this many indexed documents (blocks and mementos), every word of the query is searched, as always: the
words are cheap there, and the benchmark stores (LoCoMo, LongMemEval) rank exactly as before."""


@dataclass(frozen=True)
class Posting:
    """One `(:EvictedBlock)-[:MENTIONS {count}]->(:Entity)` edge, seen from the entity."""

    block_id: str
    count: int


@dataclass(frozen=True)
class EntityPostings:
    """An entity, how many blocks of its namespace mention it, and the blocks in scope that do."""

    entity: EntityRecord
    blocks: int
    """Blocks (kind `block`) of the namespace that `MENTIONS` it: the document frequency for IDF, counted up to the
    read's `count_limit`."""
    postings: tuple[Posting, ...]
    """Blocks in scope that mention it, most mentions first (then block id), at most the requested `limit`."""


@dataclass(frozen=True)
class EntityLookup:
    """The answer to one `entity_postings` read."""

    total_blocks: int
    """Blocks (kind `block`) in the namespace: the N of IDF."""
    entities: tuple[EntityPostings, ...]
    """Entities found, in key order."""


@dataclass(frozen=True)
class BlockInfo:
    """A block's place in its session without its bytes: position, size, time and its `NEXT` neighbours."""

    id: str
    session_id: str
    seq: int
    first_message: int
    last_message: int
    tokens: int
    started_at: str | None
    previous_id: str | None
    """The block before it in its session (kind `block`, by `seq`): the `(prev)-[:NEXT]->(this)` edge."""
    next_id: str | None
    """The block after it: `(this)-[:NEXT]->(next)`."""
    entities: tuple[tuple[EntityRecord, int], ...] = ()
    """With `block_info(..., entities=True)`: what `entities_of` answers for the block (entities it `MENTIONS`, most
    mentions first), for several blocks in one round trip."""
    memento: MementoRecord | None = None
    """With `block_info(..., mementos=True)`: the memento standing in for the block in scope (the one made of it
    alone, else the first that `SUMMARIZES` it), read in the same round trip rather than one read per hit."""
