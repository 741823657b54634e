"""A store of one's own, as docs/custom-stores.md writes one (tests/store/custom.py: no shipped backend's subclass,
delegating to a real store): one lacking protocol members is refused where it is handed over, with the members
named; one given them by the doc's mixin archives, merges and recovers under `MementoCompaction` on every backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mementograph import MementoCompaction, create_agent
from mementograph.knowledge_graph.recall import rank_blocks
from mementograph.knowledge_graph.store import GraphStore, missing_members, open_store
from mementograph.mcp import MemoryTools, create_server
from tests.store.custom import BATCHED_READS, StoreWithoutBatchedReads

RECALL_READS = ('entity_postings', 'block_info', 'mention_keys')


class StoreWithoutRecallReads(StoreWithoutBatchedReads):
    """A `GraphStore` without the reads `recall` ranks with."""

    lacks = RECALL_READS


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[GraphStore]:
    store = open_store(f'sqlite://{tmp_path / "memory.db"}')
    try:
        yield store
    finally:
        store.close()


def test_a_store_lacking_members_is_refused_where_it_is_handed_over_with_them_named(sqlite_store: GraphStore) -> None:
    old = StoreWithoutBatchedReads(sqlite_store)
    assert missing_members(old) == BATCHED_READS
    named = (
        r'^StoreWithoutBatchedReads is not a GraphStore: missing get_blocks, get_mementos \(.*docs/custom-stores\.md\)$'
    )
    with pytest.raises(TypeError, match=named):
        MementoCompaction(old)
    with pytest.raises(TypeError, match=named):
        create_agent('test', store=old)
    with pytest.raises(TypeError, match=named):
        MemoryTools(old)
    with pytest.raises(TypeError, match=named):
        create_server(old)
    with pytest.raises(TypeError, match=named):
        create_agent('test', memento=MementoCompaction(old))

    without_recall = StoreWithoutRecallReads(sqlite_store)
    MementoCompaction(without_recall)  # a GraphStore: archiving works, recall says what it lacks when called
    with pytest.raises(TypeError, match=r'is not a RecallStore: missing entity_postings, block_info, mention_keys \('):
        rank_blocks(without_recall, 'anything')
    assert sqlite_store.stats().blocks == 0  # refused before anything was written


def test_an_object_with_no_store_member_is_told_what_store_takes() -> None:
    with pytest.raises(TypeError, match=r'^store must be a GraphStore, a store URI or None, not dict$'):
        MementoCompaction({})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r'^store must be a GraphStore, not dict$'):
        MemoryTools({})  # type: ignore[arg-type]
