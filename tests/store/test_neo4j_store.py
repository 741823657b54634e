"""What the contract suite does not reach on Neo4j: the NEXT chain, concurrent writers of one session, schema
setup, and the graph the embedded view mirrors."""

from __future__ import annotations

import threading

import pytest

from mementograph.knowledge_graph import BlockRecord, EntityRecord, Eviction, Mention, SessionEvent
from mementograph.knowledge_graph.store import open_store
from mementograph.knowledge_graph.store._neo4j import FULLTEXT_INDEX, Neo4jStore
from tests.builders import ret, session_history, user
from tests.conftest import open_neo4j
from tests.store.test_contract import make_eviction

pytestmark = pytest.mark.neo4j

CHAIN = (
    'MATCH (a:EvictedBlock {namespace: $namespace, session_id: $session_id})-[:NEXT]->(b:EvictedBlock) '
    'RETURN a.seq AS a, b.seq AS b ORDER BY a'
)


@pytest.fixture
def store(neo4j_store: Neo4jStore) -> Neo4jStore:
    return neo4j_store


def _block(ns: str, seq: int, kind: str = 'block', session: str = 's') -> BlockRecord:
    return BlockRecord.from_messages(
        session_history(1, prefix=f'b{seq}'), session_id=session, namespace=ns, seq=seq, tokens=seq + 1,
        kind=kind,  # type: ignore[arg-type]
    )  # fmt: skip


def _write(store: Neo4jStore, ns: str, *blocks: BlockRecord) -> None:
    store.write_eviction(Eviction(session_id=blocks[0].session_id, namespace=ns, blocks=blocks))


def test_next_chain_is_spliced_in_seq_order(store: Neo4jStore, unique_namespace: str) -> None:
    ns = unique_namespace
    _write(store, ns, _block(ns, 8))
    _write(store, ns, _block(ns, 0))
    _write(store, ns, _block(ns, 4), _block(ns, 5, kind='part'))  # between two, and a part that is no link
    _write(store, ns, _block(ns, 16), _block(ns, 12), _block(ns, 2))  # after, and one more in between
    expected = [{'a': 0, 'b': 2}, {'a': 2, 'b': 4}, {'a': 4, 'b': 8}, {'a': 8, 'b': 12}, {'a': 12, 'b': 16}]

    assert store.query(CHAIN, namespace=ns, session_id='s') == expected
    _write(store, ns, _block(ns, 4), _block(ns, 16))  # a retried write changes nothing
    assert store.query(CHAIN, namespace=ns, session_id='s') == expected
    # recall reads a block's neighbours off these edges: they are the nearest blocks by seq, as on SQLite
    ids = {seq: _block(ns, seq).id for seq in (0, 2, 4, 8, 12, 16)}
    infos = store.block_info(list(ids.values()), namespace=ns)
    neighbours = [(ids[0], None, ids[2]), (ids[2], ids[0], ids[4]), (ids[4], ids[2], ids[8]),
                  (ids[8], ids[4], ids[12]), (ids[12], ids[8], ids[16]), (ids[16], ids[12], None)]  # fmt: skip
    assert [(info.id, info.previous_id, info.next_id) for info in infos] == neighbours
    out_degrees = store.query(
        'MATCH (b:EvictedBlock {namespace: $namespace}) RETURN COUNT { (b)-[:NEXT]->() } AS out', namespace=ns
    )
    assert max(row['out'] for row in out_degrees) == 1


def test_embedded_view_has_the_same_chain(store: Neo4jStore, unique_namespace: str) -> None:
    ns = unique_namespace
    blocks = [_block(ns, seq) for seq in (12, 0, 20, 4)]
    embedded = open_store('memory://')
    try:
        for block in blocks:
            _write(store, ns, block)
            _write(embedded, ns, block)  # type: ignore[arg-type]
        assert store.query(CHAIN, namespace=ns, session_id='s') == embedded.query(CHAIN, namespace=ns, session_id='s')
    finally:
        embedded.close()


def test_concurrent_appends_to_one_session_get_gap_free_seqs(store: Neo4jStore, unique_namespace: str) -> None:
    ns = unique_namespace
    messages = [user(f'message {i}', i) for i in range(60)]
    events = [SessionEvent.for_message(m, session_id='busy', namespace=ns, index=i) for i, m in enumerate(messages)]
    failures: list[BaseException] = []

    def append(chunk: list[SessionEvent]) -> None:
        try:
            for event in chunk:
                store.append_events([event])
        except BaseException as exc:
            failures.append(exc)

    # four writers, each the same 60 events in a different order: every event must land exactly once
    orders = [events, events[::-1], events[30:] + events[:30], events[::2] + events[1::2]]
    threads = [threading.Thread(target=append, args=(order,)) for order in orders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert not failures
    log = store.read_events('busy', namespace=ns)
    assert [e.seq for e in log] == list(range(60))
    assert sorted(e.message_index for e in log if e.message_index is not None) == list(range(60))
    assert store.last_message_index('busy', namespace=ns) == 59


def test_concurrent_evictions_of_one_session_keep_one_chain(store: Neo4jStore, unique_namespace: str) -> None:
    ns = unique_namespace
    failures: list[BaseException] = []

    def evict(seqs: range) -> None:
        try:
            for seq in seqs:
                _write(store, ns, _block(ns, seq))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=evict, args=(range(start, 40, 4),)) for start in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert not failures
    assert store.query(CHAIN, namespace=ns, session_id='s') == [{'a': i, 'b': i + 1} for i in range(39)]


def test_schema_setup_is_idempotent(store: Neo4jStore, neo4j_server: dict[str, str]) -> None:
    store.ensure_schema()
    open_neo4j(neo4j_server).close()
    names = {row['name'] for row in store._driver.execute_query('SHOW INDEXES YIELD name RETURN name').records}
    assert {FULLTEXT_INDEX, 'mementograph_block_id', 'mementograph_block_order', 'mementograph_event_uid'} <= names


def test_full_text_index_is_eventually_consistent_and_holds_the_scope(store: Neo4jStore) -> None:
    """A synchronous full-text index costs ~8 ms per eviction commit, and one without the namespace and session
    makes a search read other scopes' matches; schema setup replaces one left by older code."""
    records = store._driver.execute_query(
        'SHOW INDEXES YIELD name, options, properties WHERE name = $name RETURN options, properties',
        name=FULLTEXT_INDEX,
    ).records
    assert len(records) == 1
    assert records[0]['options']['indexConfig']['fulltext.eventually_consistent'] is True
    assert records[0]['properties'] == ['words', 'namespace', 'session_id']


def test_schema_setup_gives_an_older_versions_records_their_words(
    store: Neo4jStore, neo4j_server: dict[str, str], unique_namespace: str
) -> None:
    """A store written by a version whose full-text index read `text` as Lucene splits it: setup gives its blocks
    and mementos their `words` before the index over them replaces the old one, so `DeleteQuery` finds
    `sql.DeleteQuery(model)` written back then."""
    ns = unique_namespace
    eviction, block, memento = make_eviction(
        session_history(1), session_id='s', namespace=ns, memento_text='calls sql.DeleteQuery(model) on delete'
    )
    store.write_eviction(eviction)
    driver = store._driver  # plays the older version's schema and records
    driver.execute_query('MATCH (n:EvictedBlock|Memento {namespace: $ns}) REMOVE n.words', ns=ns)
    driver.execute_query(f'DROP INDEX {FULLTEXT_INDEX}')
    driver.execute_query(
        f'CREATE FULLTEXT INDEX {FULLTEXT_INDEX} FOR (n:Memento|EvictedBlock) ON EACH [n.text, n.namespace, '
        'n.session_id] OPTIONS {indexConfig: {`fulltext.eventually_consistent`: true}}'
    )
    driver.execute_query('CALL db.awaitIndexes(300)')
    assert store.search_text('DeleteQuery', namespace=ns) == []

    upgraded = open_neo4j(neo4j_server)  # opening runs schema setup
    try:
        assert [hit.id for hit in upgraded.search_text('DeleteQuery', namespace=ns)] == [memento.id]
        missing = upgraded.query(
            'MATCH (n:EvictedBlock|Memento {namespace: $namespace}) WHERE n.words IS NULL RETURN count(n) AS n',
            namespace=ns,
        )
        assert missing == [{'n': 0}]
        assert upgraded.recover_block(block.id, namespace=ns).record.sha256 == block.sha256
    finally:
        upgraded.close()
    properties = driver.execute_query(
        'SHOW INDEXES YIELD name, properties WHERE name = $name RETURN properties', name=FULLTEXT_INDEX
    ).records[0]['properties']
    assert properties == ['words', 'namespace', 'session_id']


def test_delete_session_keeps_shared_entities(store: Neo4jStore, unique_namespace: str) -> None:
    ns = unique_namespace
    shared = EntityRecord(key='file:shared.py', name='shared.py', kind='file')
    only_a = EntityRecord(key='file:a.py', name='a.py', kind='file')
    ev_a, block_a, _ = make_eviction(session_history(1), session_id='a', namespace=ns)
    ev_b, block_b, _ = make_eviction(session_history(1, prefix='b'), session_id='b', namespace=ns)
    store.write_eviction(Eviction(session_id='a', namespace=ns, blocks=ev_a.blocks, mentions=(
        Mention(block_a.id, shared), Mention(block_a.id, only_a))))  # fmt: skip
    store.write_eviction(
        Eviction(session_id='b', namespace=ns, blocks=ev_b.blocks, mentions=(Mention(block_b.id, shared),))
    )

    store.delete_session('a', namespace=ns)

    keys = store.query('MATCH (e:Entity {namespace: $namespace}) RETURN e.key AS key ORDER BY key', namespace=ns)
    assert keys == [{'key': 'file:shared.py'}]
    assert [e.key for e, _ in store.entities_of(block_b.id, namespace=ns)] == ['file:shared.py']


def test_a_megabyte_block_round_trips_exactly(store: Neo4jStore, unique_namespace: str) -> None:
    huge = ''.join(chr(0x20 + (i * 7919) % 0x2FF0) for i in range(300_000))
    big = [*session_history(1)[:2], ret('bash', huge, 'c0', 2)]
    eviction, block, _ = make_eviction(big, session_id='big', namespace=unique_namespace)
    store.write_eviction(eviction)
    recovered = store.recover_block(block.id, namespace=unique_namespace)
    assert recovered.record.messages_json == block.messages_json and len(block.messages_json) > 600_000
