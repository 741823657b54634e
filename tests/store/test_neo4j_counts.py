"""The counts recall reads on Neo4j without counting: each session's `block_count` (summed, the namespace's N) and
each entity's `blocks` (its document frequency), kept by the eviction's write and by `delete_session`. They must
equal what counting the graph gives, after retries, duplicate mentions, parts, concurrent writers and deletes, and
data written before the counters existed must still read right (and be healed by the next write)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from mementograph.knowledge_graph import BlockRecord, EntityRecord, Eviction, MementoRecord, Mention, memento_id_for
from mementograph.knowledge_graph.store import GraphStore, open_store
from mementograph.knowledge_graph.store._neo4j import Neo4jStore
from tests.builders import session_history

pytestmark = pytest.mark.neo4j

ENTITIES = [EntityRecord(key=f'concept:word{i}', name=f'word{i}', kind='concept') for i in range(6)]
KEYS = [entity.key for entity in ENTITIES]


@pytest.fixture
def store(neo4j_store: Neo4jStore) -> Neo4jStore:
    return neo4j_store


def _eviction(ns: str, session: str, seqs: Sequence[int], *, part_seq: int | None = None) -> Eviction:
    """Blocks at `seqs` (and a part), each mentioning some of `ENTITIES` (the same one twice, too), each with a
    memento that mentions the others."""
    blocks: list[BlockRecord] = []
    mementos: list[MementoRecord] = []
    mentions: list[Mention] = []
    for seq in seqs:
        block = BlockRecord.from_messages(
            session_history(1, prefix=f'{session}-{seq}'), session_id=session, namespace=ns, seq=seq, tokens=10
        )
        blocks.append(block)
        memento = MementoRecord(
            id=memento_id_for(ns, session, [block.id]), session_id=session, namespace=ns, text=f'm{seq}', tokens=2,
            summarizes=(block.id,),
        )  # fmt: skip
        mementos.append(memento)
        named = [entity for i, entity in enumerate(ENTITIES) if (seq + i) % 3 == 0]
        mentions += [Mention(source_id=block.id, entity=entity, count=seq + 1) for entity in named]
        mentions += [Mention(source_id=block.id, entity=named[0], count=99)]  # a duplicate: the first one wins
        mentions += [Mention(source_id=memento.id, entity=entity) for entity in ENTITIES if entity not in named]
    if part_seq is not None:
        part = BlockRecord.from_messages(
            session_history(1, prefix=f'{session}-part'), session_id=session, namespace=ns, seq=part_seq, tokens=3,
            kind='part',
        )  # fmt: skip
        blocks.append(part)
        mentions += [Mention(source_id=part.id, entity=entity) for entity in ENTITIES]  # parts are no documents
    return Eviction(
        session_id=session, namespace=ns, blocks=tuple(blocks), mementos=tuple(mementos), mentions=tuple(mentions)
    )


def _counted(store: Neo4jStore, ns: str) -> tuple[int, dict[str, int]]:
    """What counting the graph says: the namespace's blocks, and per entity the blocks mentioning it."""
    total = store.query(
        "MATCH (b:EvictedBlock {namespace: $namespace}) WHERE b.kind = 'block' RETURN count(b) AS n", namespace=ns
    )[0]['n']
    rows = store.query(
        "MATCH (b:EvictedBlock {namespace: $namespace})-[:MENTIONS]->(e:Entity) WHERE b.kind = 'block' "
        'RETURN e.key AS key, count(b) AS n',
        namespace=ns,
    )
    return total, {row['key']: row['n'] for row in rows}


def _kept(store: Neo4jStore, ns: str) -> tuple[int, dict[str, int]]:
    """What the counters say (`entity_postings`, uncapped)."""
    lookup = store.entity_postings(KEYS, namespace=ns, limit=0, count_limit=-1)
    return lookup.total_blocks, {found.entity.key: found.blocks for found in lookup.entities if found.blocks}


def _counters(store: Neo4jStore, ns: str) -> tuple[list[int | None], dict[str, int | None]]:
    sessions = store.query(
        'MATCH (s:Session {namespace: $namespace}) RETURN s.block_count AS n ORDER BY s.id', namespace=ns
    )
    entities = store.query('MATCH (e:Entity {namespace: $namespace}) RETURN e.key AS key, e.blocks AS n', namespace=ns)
    return [row['n'] for row in sessions], {row['key']: row['n'] for row in entities}


def _drop_counters(store: Neo4jStore, ns: str) -> None:
    """Play data written before the counters existed (the test reaches past the API on purpose)."""
    store._driver.execute_query(
        'MATCH (n:Session|Entity {namespace: $ns}) REMOVE n.block_count, n.blocks', ns=ns, database_=store._database
    )


def test_counters_match_counting_after_retries_parts_and_deletes(store: Neo4jStore, unique_namespace: str) -> None:
    ns = unique_namespace
    store.write_eviction(_eviction(ns, 'a', [0, 1, 2], part_seq=3))
    store.write_eviction(_eviction(ns, 'a', [0, 1, 2], part_seq=3))  # a retry adds nothing
    store.write_eviction(_eviction(ns, 'a', [2, 4]))  # one block already there, one new
    store.write_eviction(_eviction(ns, 'b', [0, 1, 5, 6]))
    total, frequencies = _counted(store, ns)
    assert total == 8
    assert _kept(store, ns) == (total, frequencies)
    sessions, entities = _counters(store, ns)
    assert sessions == [4, 4]
    assert all(entities[key] == frequencies.get(key, 0) for key in KEYS)

    store.delete_session('a', namespace=ns)
    total, frequencies = _counted(store, ns)
    assert total == 4
    assert _kept(store, ns) == (total, frequencies)
    assert _counters(store, ns)[0] == [4]
    store.delete_session('b', namespace=ns)
    assert _kept(store, ns) == (0, {})


def test_frequencies_are_capped_at_count_limit(store: Neo4jStore, unique_namespace: str) -> None:
    ns = unique_namespace
    store.write_eviction(_eviction(ns, 'a', range(9)))
    _, frequencies = _counted(store, ns)
    for cap in (1, 2, 5):
        lookup = store.entity_postings(KEYS, namespace=ns, limit=0, count_limit=cap)
        assert {f.entity.key: f.blocks for f in lookup.entities} == {key: min(n, cap) for key, n in frequencies.items()}
    store.delete_session('a', namespace=ns)


def test_data_without_counters_reads_right_and_is_healed_by_the_next_write(
    store: Neo4jStore, unique_namespace: str
) -> None:
    ns = unique_namespace
    store.write_eviction(_eviction(ns, 'a', [0, 1, 2]))
    store.write_eviction(_eviction(ns, 'b', [0, 1]))
    _drop_counters(store, ns)
    assert _counters(store, ns) == ([None, None], dict.fromkeys(KEYS))
    expected = _counted(store, ns)
    assert _kept(store, ns) == expected  # counted, as before the counters

    store.write_eviction(_eviction(ns, 'a', [3, 4]))
    expected = _counted(store, ns)
    assert _kept(store, ns) == expected
    sessions, entities = _counters(store, ns)
    assert sessions == [5, None]  # the session written is counted whole, the other still counted at read time
    touched = {key for key, n in entities.items() if n is not None}
    assert touched  # the entities the new blocks mention carry their whole count again
    assert all(entities[key] == expected[1].get(key, 0) for key in touched)

    store.delete_session('b', namespace=ns)  # an entity without a counter stays without one
    expected = _counted(store, ns)
    assert _kept(store, ns) == expected
    store.delete_session('a', namespace=ns)


def test_concurrent_sessions_of_one_namespace_keep_exact_counts(
    store: Neo4jStore, neo4j_server: dict[str, str], unique_namespace: str
) -> None:
    ns = unique_namespace
    failures: list[BaseException] = []

    def write(session: str) -> None:
        try:
            for start in range(0, 12, 3):  # every session mentions the same entities: writers meet on them
                store.write_eviction(_eviction(ns, session, range(start, start + 3)))
        except BaseException as exc:  # pragma: no cover - reported by the assert below
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(f's{i}',)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    total, frequencies = _counted(store, ns)
    assert total == 8 * 12
    assert _kept(store, ns) == (total, frequencies)
    for i in range(8):
        store.delete_session(f's{i}', namespace=ns)
    assert _kept(store, ns) == (0, {})


def test_same_frequencies_as_the_embedded_store(store: Neo4jStore, unique_namespace: str, tmp_path: Path) -> None:
    ns = unique_namespace
    embedded: GraphStore = open_store(f'sqlite://{tmp_path / "counts.db"}')
    try:
        for eviction in (
            _eviction(ns, 'a', [0, 1, 2], part_seq=3),
            _eviction(ns, 'b', [0, 4]),
            _eviction(ns, 'a', [5]),
        ):
            store.write_eviction(eviction)
            embedded.write_eviction(eviction)
        store.delete_session('b', namespace=ns)
        embedded.delete_session('b', namespace=ns)
        for cap in (2, 10_000):
            ours = store.entity_postings(KEYS, namespace=ns, limit=10, count_limit=cap)
            theirs = embedded.entity_postings(KEYS, namespace=ns, limit=10, count_limit=cap)  # type: ignore[attr-defined]
            assert ours == theirs
    finally:
        embedded.close()
        store.delete_session('a', namespace=ns)
