"""`Neo4jStore.query`: read-only for real, parameters only, plain rows, bounded rows and time, clear errors."""

from __future__ import annotations

import argparse
import json

import pytest

from mementograph.cli import _query
from mementograph.knowledge_graph.store import QueryError, ReadOnlyViolationError
from mementograph.knowledge_graph.store import _neo4j as neo4j_module
from mementograph.knowledge_graph.store._neo4j import Neo4jStore
from tests.store.test_cypher_examples import APP, Known, write_known_data
from tests.store.test_cypher_lexer import REFUSED

pytestmark = pytest.mark.neo4j


@pytest.fixture
def store(neo4j_store: Neo4jStore) -> Neo4jStore:
    return neo4j_store


@pytest.fixture
def known(store: Neo4jStore, unique_namespace: str) -> Known:
    return write_known_data(store, unique_namespace)


@pytest.mark.parametrize(
    'name', ['call-dbms', 'load-csv', 'create', 'detach-delete', 'in-transactions', 'use-database']
)
def test_refused_queries_never_reach_the_server(store: Neo4jStore, name: str) -> None:
    with pytest.raises(ReadOnlyViolationError, match='read-only'):
        store.query(REFUSED[name])


def test_the_server_refuses_writes_too(
    store: Neo4jStore, unique_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turn the lexer off: the READ transaction alone still stops a write."""
    monkeypatch.setattr(neo4j_module, 'prepare_query', lambda cypher: (cypher, []))
    with pytest.raises(ReadOnlyViolationError, match='server refused a write'):
        store.query('CREATE (:Memento {namespace: $namespace, id: "sneaky"})', namespace=unique_namespace)
    monkeypatch.undo()
    assert store.query('MATCH (m:Memento {namespace: $namespace}) RETURN m', namespace=unique_namespace) == []


def test_string_literals_may_say_create(store: Neo4jStore, known: Known, unique_namespace: str) -> None:
    rows = store.query(
        "MATCH (m:Memento {namespace: $namespace}) WHERE m.text <> 'CREATE (n) DETACH DELETE n' RETURN count(m) AS n",
        namespace=unique_namespace,
    )
    assert rows == [{'n': 5}]


def test_syntax_error_names_the_position(store: Neo4jStore) -> None:
    with pytest.raises(QueryError, match=r'Cypher syntax error: .*line 1, column 10') as caught:
        store.query('MATCH (n RETURN n')
    assert not isinstance(caught.value, ReadOnlyViolationError)


def test_row_limit(store: Neo4jStore) -> None:
    assert len(store.query('UNWIND range(1, 20) AS x RETURN x', limit=20)) == 20
    with pytest.raises(QueryError, match='more than 10 rows; add LIMIT to the query, or raise the row limit'):
        store.query('UNWIND range(1, 20) AS x RETURN x', limit=10)


def test_default_row_limit_is_1000(store: Neo4jStore) -> None:
    assert len(store.query('UNWIND range(1, 1000) AS x RETURN x')) == 1000
    with pytest.raises(QueryError, match='more than 1000 rows'):
        store.query('UNWIND range(1, 1001) AS x RETURN x')


def test_timeout(store: Neo4jStore) -> None:
    # Ten billion rows through a filter the planner cannot fold (a bare count over range(1, 100000000) ends in
    # under a second once the server is warm, so it cannot prove a timeout).
    endless = (
        'UNWIND range(1, 100000) AS a UNWIND range(1, 100000) AS b WITH a, b WHERE (a * b) % 7 = 3 RETURN count(*)'
    )
    with pytest.raises(QueryError, match=r'longer than its 1 s timeout'):
        store.query(endless, timeout=1)


def test_missing_parameter(store: Neo4jStore) -> None:
    with pytest.raises(QueryError, match='nope'):
        store.query('RETURN $nope AS x')


def test_scope_parameters_are_always_there(store: Neo4jStore) -> None:
    assert store.query('RETURN $namespace AS ns, $session_id AS sid') == [{'ns': 'default', 'sid': None}]
    assert store.query('RETURN $namespace AS ns, $session_id AS sid', namespace='n', session_id='s') == [
        {'ns': 'n', 'sid': 's'}
    ]


def test_parameter_values_are_not_syntax(store: Neo4jStore, known: Known, unique_namespace: str) -> None:
    hostile = "x'}) DETACH DELETE b //"
    assert (
        store.query(
            'MATCH (b:EvictedBlock {namespace: $namespace, id: $id}) RETURN b.id',
            {'id': hostile},
            namespace=unique_namespace,
        )
        == []
    )
    assert len(store.list_blocks(namespace=unique_namespace, kind=None)) == 5


def test_values_come_back_as_plain_python(store: Neo4jStore, known: Known, unique_namespace: str) -> None:
    top = known.mementos['top']
    rows = store.query(
        'MATCH p = (m:Memento {namespace: $namespace, id: $id})-[r:SUMMARIZES]->(t:Memento) '
        "RETURN m, r, p, datetime('2026-01-02T03:04:05Z') AS at, date('2026-01-02') AS day, duration('P1D') AS span, "
        'point({x: 1, y: 2}) AS here ORDER BY r.position LIMIT 1',
        {'id': top.id},
        namespace=unique_namespace,
    )
    row = rows[0]
    assert row['m']['id'] == top.id and row['m']['summarizes'] == list(top.summarizes) and row['m']['level'] == 2
    assert row['r'] == {'position': 0}
    assert [item.get('id') for item in row['p']] == [top.id, None, top.summarizes[0]]
    assert (row['at'], row['day'], row['span']) == ('2026-01-02T03:04:05+00:00', '2026-01-02', 'P1D')
    assert row['here'] == {'srid': 7203, 'coordinates': [1.0, 2.0]}
    block = known.blocks['b0']
    raw = store.query(
        'MATCH (b:EvictedBlock {namespace: $namespace, id: $id}) RETURN b.messages_json AS data',
        {'id': block.id},
        namespace=unique_namespace,
    )
    assert raw == [{'data': block.messages_json}]


def test_fulltext_procedure_is_allowed(store: Neo4jStore, known: Known, unique_namespace: str) -> None:
    store.search_text('beta', namespace=unique_namespace)  # waits for the eventually consistent index
    rows = store.query(
        "CALL db.index.fulltext.queryNodes('mementograph_text', 'beta') YIELD node, score "
        'WHERE node.namespace = $namespace RETURN node.id AS id ORDER BY score DESC',
        namespace=unique_namespace,
    )
    assert known.blocks['c0'].id in {row['id'] for row in rows}


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog='mementograph')
    commands = parser.add_subparsers(dest='command', required=True)
    _query.register(commands)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def test_cli_query_on_neo4j(
    store: Neo4jStore, known: Known, unique_namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cypher = (
        'MATCH (b:EvictedBlock {namespace: $namespace})-[r:MENTIONS]->(:Entity {key: $entity}) '
        'RETURN b.id AS block, r.count AS mentions ORDER BY mentions DESC'
    )
    argv = ['query', cypher, '--store', store.uri, '--namespace', unique_namespace, '--param', f'entity={APP.key}']

    assert _cli([*argv, '--json']) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row['mentions'] for row in rows] == [5, 3, 1]

    assert _cli(argv) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].split() == ['block', 'mentions'] and '(3 rows)' in text

    with pytest.raises(QueryError, match='more than 2 rows'):
        _cli([*argv, '--limit', '2'])


def test_the_two_neo4j_only_doc_queries(store: Neo4jStore, known: Known, unique_namespace: str) -> None:
    store.search_text('beta', namespace=unique_namespace)  # waits for the eventually consistent index
    hits = store.query(
        "CALL db.index.fulltext.queryNodes('mementograph_text', $q) YIELD node, score\n"
        'WHERE node.namespace = $namespace\n'
        'RETURN node.id AS id, labels(node)[0] AS label, score ORDER BY score DESC LIMIT 10',
        {'q': 'beta'},
        namespace=unique_namespace,
    )
    assert {(hit['id'], hit['label']) for hit in hits} >= {(known.blocks['c0'].id, 'EvictedBlock')}
    after = store.query(
        'MATCH (b:EvictedBlock {namespace: $namespace, id: $block})-[:NEXT*1..3]->(n)<-[:SUMMARIZES]-(m:Memento)\n'
        'RETURN n.seq AS seq, m.text AS memento ORDER BY seq',
        {'block': known.blocks['b0'].id},
        namespace=unique_namespace,
    )
    assert after == [{'seq': 4, 'memento': 'KeyError in src/app.py'}, {'seq': 8, 'memento': 'pytest passes'}]
