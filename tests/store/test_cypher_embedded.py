"""Cypher on the embedded store: the grand-cypher subset over its networkx view, and plain refusals outside it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mementograph.knowledge_graph import Eviction
from mementograph.knowledge_graph.store import (
    QueryError,
    ReadOnlyViolationError,
    SqliteStore,
    UnsupportedQueryError,
    open_store,
)
from tests.builders import session_history
from tests.store.test_contract import make_eviction
from tests.store.test_cypher_examples import Known, write_known_data


@pytest.fixture(params=['memory', 'sqlite'])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqliteStore]:
    opened = open_store('memory://' if request.param == 'memory' else f'sqlite://{tmp_path / "m.db"}')
    assert isinstance(opened, SqliteStore)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def known(store: SqliteStore, unique_namespace: str) -> Known:
    return write_known_data(store, unique_namespace)


@pytest.mark.parametrize(
    ('cypher', 'what'),
    [
        ('MATCH (m:Memento) OPTIONAL MATCH (m)-[:SUMMARIZES]->(b) RETURN m.id', 'OPTIONAL'),
        ('MATCH (m:Memento) WITH m RETURN m.id', 'WITH'),
        ('UNWIND [1, 2] AS x RETURN x', 'UNWIND'),
        ('CALL { MATCH (m:Memento) RETURN m } RETURN m.id', 'CALL'),
        ('MATCH (m:Memento) RETURN m.id UNION MATCH (b:EvictedBlock) RETURN b.id', 'UNION'),
        ('MATCH (m:Memento) RETURN CASE WHEN m.verified THEN 1 ELSE 0 END AS v', 'CASE'),
        ('MATCH (m:Memento) RETURN labels(m)', r'function labels\(\)'),
        ('MATCH p = (m:Memento)-[:SUMMARIZES]->(b) RETURN length(p)', r'function length\(\)'),
        ('MATCH (m:Memento) RETURN m.tokens * 2 AS double', 'cannot run this query'),
        ('MATCH (m:Memento) RETURN m.id LIMIT', r'cannot run this query \(at its end: '),  # no "line -1"
        ('MATCH (m:Memento) RETURN COUNT { (m)-->() } AS n', 'COUNT'),
        ('MATCH (b:EvictedBlock) RETURN DISTINCT b.kind AS kind', 'DISTINCT with AS'),
        ('MATCH (:Memento) RETURN count(*)', r'count\(\*\) without a node variable'),
        ('MATCH (m:Memento) RETURN count(*), count(m)', r'count\(\*\) without a node variable it does not also count'),
    ],
)
def test_queries_outside_the_subset_say_they_need_neo4j(
    store: SqliteStore, known: Known, unique_namespace: str, cypher: str, what: str
) -> None:
    with pytest.raises(UnsupportedQueryError, match=what) as caught:
        store.query(cypher, namespace=unique_namespace)
    assert 'Neo4j backend' in str(caught.value)


def test_writes_are_refused_before_the_subset_check(store: SqliteStore, unique_namespace: str) -> None:
    with pytest.raises(ReadOnlyViolationError):
        store.query('OPTIONAL MATCH (n) DETACH DELETE n', namespace=unique_namespace)


def test_row_limit(store: SqliteStore, known: Known, unique_namespace: str) -> None:
    cypher = 'MATCH (b:EvictedBlock {namespace: $namespace}) RETURN b.id AS id ORDER BY id'
    assert len(store.query(cypher, namespace=unique_namespace, limit=5)) == 5
    with pytest.raises(QueryError, match='more than 4 rows; add LIMIT'):
        store.query(cypher, namespace=unique_namespace, limit=4)


def test_timeout(store: SqliteStore, known: Known, unique_namespace: str) -> None:
    every_triple = 'MATCH (a) MATCH (b) MATCH (c) RETURN a.id, b.id, c.id'  # ~6,000 rows, well over 0.1 s
    with pytest.raises(QueryError, match=r'longer than its 0.005 s timeout'):
        store.query(every_triple, namespace=unique_namespace, timeout=0.005, limit=10**6)


def test_missing_parameter(store: SqliteStore, unique_namespace: str) -> None:
    with pytest.raises(QueryError, match=r'parameter \$nope at line 1, column 37 is not given'):
        store.query('MATCH (b:EvictedBlock) WHERE b.id = $nope RETURN b.id', namespace=unique_namespace)


def test_parameter_values_are_never_read_as_syntax(store: SqliteStore, known: Known, unique_namespace: str) -> None:
    hostile = 'x"}) MATCH (n) RETURN n.id // \\'
    rows = store.query(
        'MATCH (b:EvictedBlock {id: $id}) RETURN b.id AS id', {'id': hostile}, namespace=unique_namespace
    )
    assert rows == []
    real = known.blocks['b0'].id
    assert store.query(
        'MATCH (b:EvictedBlock {id: $id}) RETURN b.id AS id', {'id': real}, namespace=unique_namespace
    ) == [{'id': real}]


def test_the_view_holds_one_namespace(store: SqliteStore, known: Known, unique_namespace: str) -> None:
    other = unique_namespace + '-other'
    eviction, _, _ = make_eviction(session_history(1), session_id='x', namespace=other)
    store.write_eviction(eviction)

    mine = store.query('MATCH (b:EvictedBlock) RETURN b.namespace AS ns', namespace=unique_namespace)
    theirs = store.query('MATCH (b:EvictedBlock) RETURN b.namespace AS ns', namespace=other)

    assert {row['ns'] for row in mine} == {unique_namespace} and len(mine) == 5
    assert theirs == [{'ns': other}]


def test_the_view_follows_writes(store: SqliteStore, known: Known, unique_namespace: str) -> None:
    count = "MATCH (b:EvictedBlock {namespace: $namespace, kind: 'block'}) RETURN count(b) AS n"
    assert store.query(count, namespace=unique_namespace) == [{'n': 4}]
    eviction, _, _ = make_eviction(
        session_history(1, prefix='late'), session_id='alpha', namespace=unique_namespace, seq=40
    )
    store.write_eviction(eviction)
    assert store.query(count, namespace=unique_namespace) == [{'n': 5}]


def test_nodes_come_back_as_plain_property_dicts(store: SqliteStore, known: Known, unique_namespace: str) -> None:
    block = known.blocks['b0']
    rows = store.query('MATCH (b:EvictedBlock {id: $id}) RETURN b', {'id': block.id}, namespace=unique_namespace)
    node = rows[0]['b']
    assert node['id'] == block.id and node['sha256'] == block.sha256 and node['seq'] == 0
    assert '__labels__' not in node and 'messages_json' not in node  # the archived bytes stay in SQLite


def test_next_chain_follows_seq_and_skips_parts(store: SqliteStore, known: Known, unique_namespace: str) -> None:
    rows = store.query(
        "MATCH (a:EvictedBlock {session_id: 'alpha'})-[:NEXT]->(b:EvictedBlock) RETURN a.seq AS a, b.seq AS b ORDER BY a",
        namespace=unique_namespace,
    )
    assert rows == [{'a': 0, 'b': 4}, {'a': 4, 'b': 8}]


def test_single_quoted_strings_and_lower_case_aggregates(
    store: SqliteStore, known: Known, unique_namespace: str
) -> None:
    rows = store.query(
        "MATCH (m:Memento {session_id: 'alpha'}) WHERE m.text CONTAINS 'app.py' RETURN count(m) AS n",
        namespace=unique_namespace,
    )
    assert rows == [{'n': 3}]


def test_an_empty_eviction_namespace_answers_nothing(store: SqliteStore, unique_namespace: str) -> None:
    store.write_eviction(Eviction(session_id='s', namespace=unique_namespace))
    assert store.query('MATCH (b:EvictedBlock) RETURN b.id', namespace=unique_namespace) == []


def test_a_block_text_filter_finds_the_block(store: SqliteStore, unique_namespace: str) -> None:
    """Blocks keep no text on their row; the view used to show `''`, so `b.text CONTAINS ...` matched nothing."""
    eviction, block, _ = make_eviction(session_history(2), session_id='s', namespace=unique_namespace)
    store.write_eviction(eviction)
    other, _, _ = make_eviction(session_history(1, prefix='zebra'), session_id='t', namespace=unique_namespace)
    store.write_eviction(other)
    cypher = 'MATCH (b:EvictedBlock) WHERE b.text CONTAINS $path RETURN b.id AS id'
    assert store.query(cypher, namespace=unique_namespace, params={'path': 'src/mod_1.py'}) == [{'id': block.id}]
    assert store.query(cypher, namespace=unique_namespace, params={'path': 'nowhere.py'}) == []
