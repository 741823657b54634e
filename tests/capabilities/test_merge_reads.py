"""A memento of mementos reads its children in one read (one round trip on Neo4j, not one a child), and what it
wrote recovers whole. On every backend: memory://, a SQLite file, and the shared Neo4j server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mementograph import MementoCompaction
from mementograph.knowledge_graph.store import recover_chain, verify_store
from tests.capabilities.conftest import ALL_BACKENDS, Backend, opened_backend
from tests.counting import CountingStore
from tests.scripted import ScriptedModel, scripted_agent


@pytest.fixture(params=ALL_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[Backend]:
    with opened_backend(request, tmp_path, unique_namespace) as opened:
        yield opened


async def test_a_merge_reads_its_children_at_once(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    counted = CountingStore(store)
    capability = MementoCompaction(counted, namespace=ns, max_tokens=2_000, session_id='s')

    await scripted_agent(ScriptedModel(steps=20), [capability]).run('Fix every module.')

    mementos = {m.id: m for m in store.list_mementos(namespace=ns, session_id='s')}
    merged = [m for m in mementos.values() if m.level > 1]
    assert len(merged) >= 2, 'the run should merge mementos more than once'
    assert counted.calls['get_mementos'] == len(merged)  # one read a merge
    assert counted.calls['get_memento'] == 0  # and no child read alone
    top = max(merged, key=lambda m: m.level)
    under = [block.record.id for block in recover_chain(store, top.id, namespace=ns)]
    leaves: list[str] = []
    pending = [top.id]
    while pending:  # the chain as the mementos declare it, walked record by record
        current = pending.pop(0)
        if current in mementos:
            pending[0:0] = mementos[current].summarizes
        else:
            leaves.append(current)
    assert under == sorted(leaves, key=lambda block_id: store.get_block(block_id, namespace=ns).seq)
    assert verify_store(store, namespace=ns).ok
