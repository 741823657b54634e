"""The read-only check every backend applies before a query goes anywhere (no database needed)."""

from __future__ import annotations

import pytest

from mementograph.knowledge_graph.store import QueryError, ReadOnlyViolationError
from mementograph.knowledge_graph.store._cypher import check_read_only, prepare_query, scoped_params, tokenize

REFUSED = {
    'create': 'CREATE (n:Memento {id: 1})',
    'create-lower-case': 'match (n) cReAtE (m)',
    'merge': "MERGE (n:Entity {id: 'x'})",
    'set': 'MATCH (n:Memento) SET n.verified = true',
    'set-plus': 'MATCH (n:Memento) SET n += {verified: true}',
    'remove': 'MATCH (n:Memento) REMOVE n.text',
    'delete': 'MATCH (n:Memento) DELETE n',
    'detach-delete': 'MATCH (n) DETACH DELETE n',
    'drop': 'DROP INDEX mementograph_text',
    'foreach': 'MATCH (n) FOREACH (x IN [1] | SET n.x = x)',
    'load-csv': "LOAD CSV FROM 'file:///etc/passwd' AS line RETURN line",
    'load-csv-lower': "load csv with headers from 'https://example.com/x.csv' AS line RETURN line",
    'call-dbms': 'CALL dbms.components()',
    'call-dbms-quoted': 'CALL `dbms`.`listConfig`() YIELD name RETURN name',
    'call-dbms-kill': "CALL dbms.killConnection('bolt-1')",
    'call-db-create': "CALL db.createLabel('Evil')",
    'call-db-clear-caches': 'CALL db.clearQueryCaches()',
    'call-tx-metadata': 'CALL tx.setMetaData({a: 1})',
    'apoc-create': "CALL apoc.create.node(['X'], {})",
    'apoc-periodic': "CALL apoc.periodic.iterate('MATCH (n) RETURN n', 'DETACH DELETE n', {})",
    'apoc-cypher-function': "RETURN apoc.cypher.runFirstColumnSingle('MATCH (n) RETURN n', {}) AS x",
    'apoc-load': "CALL apoc.load.json('file:///etc/hosts')",
    'in-transactions': 'MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS',
    'read-body-in-transactions': 'CALL { MATCH (n) RETURN n } IN TRANSACTIONS OF 10 ROWS RETURN n',
    'concurrent-transactions': 'CALL { MATCH (n) RETURN n } IN 2 CONCURRENT TRANSACTIONS RETURN n',
    'write-in-subquery': 'MATCH (n) CALL { CREATE (m:X) } RETURN n',
    'use-database': 'USE system MATCH (n) RETURN n',
    'use-in-subquery': 'CALL { USE system MATCH (n) RETURN n } RETURN n',
    'alter-user': "ALTER USER neo4j SET PASSWORD 'x'",
    'grant': 'GRANT ROLE admin TO bob',
    'terminate': "TERMINATE TRANSACTIONS 'neo4j-transaction-1'",
    'start-database': 'START DATABASE neo4j',
    'stop-database': 'STOP DATABASE neo4j',
    'after-comment': '/* read */ MATCH (n) // only reading\nSET n.x = 1',
}

ALLOWED = {
    'string-with-create': "MATCH (m:Memento) WHERE m.text CONTAINS 'CREATE TABLE' RETURN m.id",
    'double-quoted-delete': 'MATCH (m:Memento) WHERE m.text = "DELETE everything; DROP" RETURN m.id',
    'escaped-quote': "MATCH (m) WHERE m.text = 'it\\'s a MERGE' RETURN m.id",
    'line-comment': '// CREATE (n)\nMATCH (n:Memento) RETURN n.id',
    'block-comment': '/* DETACH DELETE n */ MATCH (n:Memento) RETURN n.id',
    'property-keys': 'MATCH (n:Memento) RETURN n.set, n.delete, n.create, n.merge',
    'labels-and-types': 'MATCH (n:Merge)-[:REMOVE]->(m:Drop) RETURN m',
    'map-keys': 'RETURN {create: 1, set: 2, delete: 3} AS m',
    'map-projection': 'MATCH (n:Memento) RETURN n {.set, .create} AS m',
    'quoted-names': 'MATCH (`create`:`SET`) RETURN `create`.`delete`',
    'parameters': 'MATCH (n:Memento) WHERE n.id = $create OR n.id = $set RETURN n.id',
    'fulltext': "CALL db.index.fulltext.queryNodes('mementograph_text', 'pytest') YIELD node, score RETURN node.id",
    'labels-procedure': 'CALL db.labels() YIELD label RETURN label',
    'plain-subquery': 'CALL { MATCH (n:Memento) RETURN n } RETURN n.id',
    'scoped-subquery': 'MATCH (s:Session) CALL (s) { MATCH (b:EvictedBlock {session_id: s.id}) RETURN count(b) AS n } RETURN n',
    'show-indexes': 'SHOW INDEXES',
    'trailing-semicolon': 'MATCH (n:Memento) RETURN n.id;',
    'var-length': 'MATCH (m:Memento)-[:SUMMARIZES*1..8]->(b:EvictedBlock) RETURN b.id',
    'in-list': 'MATCH (n:Memento) WHERE n.id IN [1, 2] RETURN n',
}


@pytest.mark.parametrize('cypher', REFUSED.values(), ids=REFUSED.keys())
def test_writes_and_admin_are_refused_before_sending(cypher: str) -> None:
    with pytest.raises(ReadOnlyViolationError, match='read-only'):
        prepare_query(cypher)


@pytest.mark.parametrize('cypher', ALLOWED.values(), ids=ALLOWED.keys())
def test_reads_pass_the_check(cypher: str) -> None:
    prepare_query(cypher)


def test_refusal_says_what_and_where() -> None:
    with pytest.raises(ReadOnlyViolationError, match=r'SET clause at line 2, column 3'):
        check_read_only('MATCH (n)\n  SET n.x = 1')
    with pytest.raises(ReadOnlyViolationError, match=r'procedure or function dbms\.components'):
        check_read_only('CALL dbms.components()')


def test_several_statements_are_refused() -> None:
    with pytest.raises(QueryError, match='one statement per query'):
        prepare_query('MATCH (n) RETURN n; MATCH (m) RETURN m')


def test_trailing_semicolon_is_stripped() -> None:
    text, tokens = prepare_query('MATCH (n) RETURN n ;  ')
    assert text.rstrip() == 'MATCH (n) RETURN n' and tokens[-1].text == 'n'


@pytest.mark.parametrize(
    ('cypher', 'message'),
    [
        ("MATCH (n) WHERE n.x = 'abc RETURN n", r'unterminated string literal starting at line 1, column 23'),
        ('MATCH (`n) RETURN n', 'unterminated `quoted name`'),
        ('MATCH (n) /* RETURN n', 'unterminated /\\* comment'),
        ('   ', 'empty query'),
        ('// just a comment', 'only comments'),
    ],
)
def test_malformed_queries_fail_with_a_position(cypher: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        prepare_query(cypher)


def test_tokens_keep_strings_and_names_whole() -> None:
    tokens = tokenize("MATCH (b)-[:NEXT*1..3]->(c) WHERE b.text = 'a \\'CREATE\\' b' RETURN $p, `x y`")
    kinds = {(t.kind, t.value) for t in tokens}
    assert ('string', "a 'CREATE' b") in kinds and ('param', 'p') in kinds and ('quoted', 'x y') in kinds
    assert [t.text for t in tokens if t.kind == 'number'] == ['1', '3']


def test_scope_parameters_are_always_defined() -> None:
    assert scoped_params(None, session_id=None, namespace=None) == {'namespace': 'default', 'session_id': None}
    assert scoped_params({'k': 1}, session_id='s', namespace='ns') == {'k': 1, 'namespace': 'ns', 'session_id': 's'}
    assert scoped_params({'namespace': 'mine'}, session_id=None, namespace=None)['namespace'] == 'mine'


def test_conflicting_scope_and_odd_values_are_refused() -> None:
    with pytest.raises(QueryError, match=r'\$namespace is given both'):
        scoped_params({'namespace': 'a'}, session_id=None, namespace='b')
    with pytest.raises(QueryError, match=r'parameter \$x has a object'):
        scoped_params({'x': object()}, session_id=None, namespace=None)
    with pytest.raises(QueryError, match='map keys must be strings'):
        scoped_params({'x': {1: 'a'}}, session_id=None, namespace=None)
