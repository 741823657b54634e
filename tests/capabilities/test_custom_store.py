"""A store of one's own, as docs/custom-stores.md writes one (tests/store/custom.py: no shipped backend's subclass,
delegating to a real store): one lacking protocol members is refused where it is handed over, with the members
named; one given them by the doc's mixin archives, merges and recovers under `MementoCompaction` on every backend."""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from mementograph import MementoCompaction, create_agent
from mementograph.knowledge_graph.recall import rank_blocks
from mementograph.knowledge_graph.store import GraphStore, missing_members, open_store, recover_chain, verify_store
from mementograph.mcp import MemoryTools, create_server
from tests.capabilities.conftest import ALL_BACKENDS, Backend, opened_backend
from tests.conftest import REPO
from tests.scripted import ScriptedModel, scripted_agent
from tests.store.custom import BATCHED_READS, OneByOneReads, StoreWithoutBatchedReads, UpgradedStore

DOC = REPO / 'docs' / 'custom-stores.md'
RECALL_READS = ('entity_postings', 'block_info', 'mention_keys')


class StoreWithoutRecallReads(StoreWithoutBatchedReads):
    """A `GraphStore` without the reads `recall` ranks with."""

    lacks = RECALL_READS


class CountedUpgradedStore(UpgradedStore):
    """The doc's store, counting the calls that reach the store it delegates to."""

    def __init__(self, inner: GraphStore) -> None:
        super().__init__(inner)
        self.calls: Counter[str] = Counter()

    def on_call(self, name: str) -> None:
        self.calls[name] += 1


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


def test_the_docs_mixin_is_the_one_the_contract_suite_runs() -> None:
    text = DOC.read_text(encoding='utf-8')
    assert inspect.getsource(OneByOneReads) in text
    assert '](docs/custom-stores.md)' in (REPO / 'README.md').read_text(encoding='utf-8')


@pytest.fixture(params=ALL_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[Backend]:
    with opened_backend(request, tmp_path, unique_namespace) as opened:
        yield opened


async def test_a_store_of_ones_own_archives_merges_and_recovers_in_an_agents_run(backend: Backend) -> None:
    ns = backend.namespace
    custom = CountedUpgradedStore(backend.store)
    capability = MementoCompaction(custom, namespace=ns, max_tokens=2_000, session_id='s')

    result = await scripted_agent(ScriptedModel(steps=20), [capability]).run('Fix every module.')

    assert result.output
    mementos = custom.list_mementos(namespace=ns, session_id='s')
    merged = [m for m in mementos if m.level > 1]
    assert len(merged) >= 2, 'the run should merge mementos more than once'
    assert custom.calls['get_memento'] >= sum(len(m.summarizes) for m in merged)  # the mixin read each child
    top = max(merged, key=lambda m: m.level)
    recovered = recover_chain(custom, top.id, namespace=ns)  # its blocks through the mixin's get_blocks
    assert recovered and all(block.record.session_id == 's' for block in recovered)
    assert [b.record.id for b in recovered] == [b.record.id for b in recover_chain(backend.store, top.id, namespace=ns)]
    assert verify_store(custom, namespace=ns).ok
