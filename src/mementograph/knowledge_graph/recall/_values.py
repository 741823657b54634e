"""`_values` -- what the two recall reads of a `GraphStore` return (`entity_postings`, `block_info`).

They live apart from the recall logic (this module imports only the schema) so a backend can import them without
importing recall, which itself imports the stores.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._schema import EntityRecord

__all__ = ('BlockInfo', 'EntityLookup', 'EntityPostings', 'Posting')


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
