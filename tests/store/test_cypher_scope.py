"""The scope check: a query over session memory cannot read another namespace (or, pinned, another session).

Unit tests of `check_scope` need no database; the Neo4j tests write the same known data into two fresh namespaces
of the shared server and prove both halves of the guarantee there: every refused query is refused before it
reaches the server (a closed store still refuses it), and no accepted query returns a record of the other
namespace, or, pinned to a session, of another session.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mementograph.knowledge_graph.store import QueryError, ReadOnlyViolationError, open_store
from mementograph.knowledge_graph.store._cypher import EXAMPLE_QUERIES, ScopeViolationError, check_scope
from mementograph.knowledge_graph.store._neo4j import Neo4jStore
from tests.conftest import neo4j_uri_with_auth
from tests.mcp_server._client import error, in_process, ok
from tests.store.test_cypher_examples import APP, Known, example_params, write_known_data

NS = '{namespace: $namespace}'

ACCEPTED = {
    'map': 'MATCH (b:EvictedBlock {namespace: $namespace}) RETURN b.id',
    'label-less': 'MATCH (n {namespace: $namespace}) RETURN n',
    'where': 'MATCH (n) WHERE n.namespace = $namespace RETURN n',
    'where-reversed': 'MATCH (n) WHERE $namespace = n.namespace AND n.kind = "block" RETURN n',
    'one-scoped-node-per-path': 'MATCH (a)-[:MENTIONS]->(e:Entity {namespace: $namespace})<-[:MENTIONS]-(b) RETURN a, b',
    'shared-variable-joins-paths': f'MATCH (a {NS})-->(b), (b)-->(c), (d)-->(c) RETURN d',
    'where-scopes-second-path': 'MATCH (a {namespace: $namespace}), (b) WHERE b.namespace = $namespace RETURN b',
    'bound-earlier': f'MATCH (a {NS}) MATCH (a)-[*1..3]-(b) RETURN DISTINCT b',
    'optional-match': f'MATCH (s:Session {NS}) OPTIONAL MATCH (s)<-[:IN_SESSION]-(b) RETURN s, b',
    'namespace-of-a-read-node': f'MATCH (s:Session {NS}) MATCH (b {{namespace: s.namespace}}) RETURN b',
    'with-keeps': f'MATCH (a {NS}) WITH a, count(*) AS c MATCH (a)-->(b) RETURN b, c',
    'with-alias': f'MATCH (a {NS}) WITH a AS x MATCH (x)-->(b) RETURN b',
    'with-star': f'MATCH (a {NS}) WITH * MATCH (a)-->(b) RETURN b',
    'count-subquery': f'MATCH (b {NS}) RETURN COUNT {{ (b)-[:NEXT]->() }} AS out',
    'exists-subquery': f'MATCH (b {NS}) WHERE EXISTS {{ MATCH (b)-->(:Entity) }} RETURN b',
    'collect-subquery': f'MATCH (b {NS}) RETURN COLLECT {{ MATCH (b)<-[:SUMMARIZES]-(m) RETURN m.id }} AS ms',
    'subquery-own-scope': f'MATCH (b {NS}) RETURN COUNT {{ MATCH (x {NS}) RETURN x }} AS total',
    'pattern-comprehension': f'MATCH (b {NS}) RETURN [(b)-[:MENTIONS]->(e) | e.key] AS keys',
    'pattern-comprehension-where': 'MATCH (b {namespace: $namespace}) RETURN [(b)-->(e) WHERE e.x > 1 | e] AS es',
    'pattern-predicate': f'MATCH (b {NS}) WHERE (b)-[:MENTIONS]->(:Entity) RETURN b',
    'not-pattern-predicate': f'MATCH (b {NS}) WHERE NOT(b)-->() RETURN b',
    'union': f'MATCH (m:Memento {NS}) RETURN m.id AS id UNION ALL MATCH (e:Entity {NS}) RETURN e.id AS id',
    'call-scope-clause': f'MATCH (a {NS}) CALL (a) {{ MATCH (a)--(b) RETURN b }} RETURN b',
    'call-importing-with': f'MATCH (a {NS}) CALL {{ WITH a MATCH (a)--(b) RETURN b }} RETURN b',
    'call-returns-bound': f'CALL () {{ MATCH (a {NS}) RETURN a }} MATCH (a)-->(b) RETURN b',
    'unwind-bound': f'MATCH (a {NS}) WITH collect(a) AS nodes UNWIND nodes AS n MATCH (n)--(m) RETURN m',
    'relationship-bound': f'MATCH (a {NS})-[r]->() WITH r MATCH (x)-[r]->(y) RETURN x, y',
    'list-comprehension': f'MATCH p = (a:EvictedBlock {NS})-[:NEXT*]->() RETURN [n IN nodes(p) WHERE (n)-->() | n.id] AS ids',
    'quantifier-function': f'MATCH p = (a:EvictedBlock {NS})-[:NEXT*]->() WHERE all(n IN nodes(p) WHERE (n)--()) RETURN p',
    'reduce': f'MATCH p = (a:EvictedBlock {NS})-[:NEXT*]->() RETURN reduce(t = 0, n IN nodes(p) | t + n.tokens) AS tokens',
    'shortest-path': f'MATCH (a:EvictedBlock {NS}), (b:Entity {NS}) MATCH p = shortestPath((a)-[*..4]-(b)) RETURN p',
    'shortest-selector': f'MATCH SHORTEST 1 (a:EvictedBlock {NS})-[:NEXT]->+(b) RETURN b',
    'quantified-relationship': f'MATCH (a:EvictedBlock {NS})-[:NEXT]->{{1,2}}(b) RETURN b',
    'label-expression': f'MATCH (x:EvictedBlock|Memento {NS})-[:MENTIONS|SUMMARIZES]->(y) RETURN y',
    'inline-where': 'MATCH (x:Memento WHERE x.namespace = $namespace) RETURN x',
    'backtick-key': 'MATCH (n {`namespace`: $namespace}) RETURN n',
    'backtick-parameter': 'MATCH (n {namespace: $`namespace`}) RETURN n',
    'backtick-variable': 'MATCH (`my node` {namespace: $namespace})-->(`x`) RETURN `x`',
    'fulltext': "CALL db.index.fulltext.queryNodes('mementograph_text', $q) YIELD node, score "
    'WHERE node.namespace = $namespace RETURN node.id, score',
    'fulltext-alias': "CALL db.index.fulltext.queryNodes('mementograph_text', $q) YIELD node AS hit "
    'WHERE hit.namespace = $namespace AND hit.tokens > 0 RETURN hit.id',
    'no-patterns': 'UNWIND range(1, 3) AS x RETURN x, $namespace AS ns',
    'built-in-dotted-functions': f"MATCH (n {NS}) RETURN date.truncate('day', date()), duration.between(date(), date())",
    'string-says-match': "MATCH (m:Memento {namespace: $namespace}) WHERE m.text <> 'MATCH (n) RETURN n' RETURN m",
}

REFUSED = {
    'no-namespace': 'MATCH (b:EvictedBlock) RETURN b.id',
    'label-less': 'MATCH (n) RETURN n',
    'second-path-unscoped': f'MATCH (a {NS}), (b) RETURN b',
    'optional-match-unscoped': f'MATCH (a {NS}) OPTIONAL MATCH (b:Entity) RETURN b',
    'count-subquery-new-node': f'MATCH (a {NS}) RETURN COUNT {{ (n) }} AS all',
    'exists-subquery-new-node': f'MATCH (a {NS}) WHERE EXISTS {{ MATCH (n:Memento) }} RETURN a',
    'collect-subquery-new-node': f'MATCH (a {NS}) RETURN COLLECT {{ MATCH (m:Memento) RETURN m.id }} AS ids',
    'pattern-comprehension-new-node': f'MATCH (a {NS}) RETURN [(x)-[:MENTIONS]->(e) | e.key] AS keys',
    'pattern-predicate-anonymous': f'MATCH (a {NS}) WHERE NOT(:Entity)--(:Memento) RETURN a',
    'predicate-in-function-call': f'MATCH (a {NS}) RETURN size((:Entity)<--(:Memento)) AS n',
    'union-branch': f'MATCH (a {NS}) RETURN a.id AS id UNION MATCH (b:Memento) RETURN b.id AS id',
    'call-does-not-import': f'MATCH (a {NS}) CALL {{ MATCH (a)-->(b) RETURN b }} RETURN b',
    'call-scope-clause-omits': f'MATCH (a {NS}), (c {NS}) CALL (c) {{ MATCH (a)-->(b) RETURN b }} RETURN b',
    'with-drops-variable': f'MATCH (a {NS}) WITH count(*) AS c MATCH (a) RETURN a',
    'subquery-with-drops': f'MATCH (a {NS}) RETURN COUNT {{ WITH 1 AS x MATCH (a) RETURN a }} AS n',
    'comment-is-not-scope': 'MATCH (n /* {namespace: $namespace} */) RETURN n',
    'line-comment-is-not-scope': 'MATCH (n) // WHERE n.namespace = $namespace\nRETURN n',
    'string-is-not-scope': "MATCH (n {x: '{namespace: $namespace}'}) RETURN n",
    'where-in-string': "MATCH (n) WHERE 'n.namespace = $namespace' <> '' RETURN n",
    'other-parameter': 'MATCH (n {namespace: $ns}) RETURN n',
    'parameter-case': 'MATCH (n {namespace: $Namespace}) RETURN n',
    'key-case': 'MATCH (n {Namespace: $namespace}) RETURN n',
    'duplicate-key': "MATCH (n {namespace: $namespace, namespace: 'other'}) RETURN n",
    'computed-value': "MATCH (n {namespace: $namespace + ''}) RETURN n",
    'map-parameter': 'MATCH (n $props) RETURN n',
    'namespace-of-a-map': "WITH {namespace: 'other'} AS m MATCH (n {namespace: m.namespace}) RETURN n",
    'namespace-of-a-parameter': 'WITH $m AS m MATCH (n {namespace: m.namespace}) RETURN n',
    'where-or': 'MATCH (n) WHERE n.namespace = $namespace OR n.kind = "block" RETURN n',
    'where-not': 'MATCH (n) WHERE NOT n.namespace <> $namespace RETURN n',
    'where-with-clause': 'MATCH (n) WITH n WHERE n.namespace = $namespace RETURN n',
    'relationship-map': 'MATCH (a)-[r {namespace: $namespace}]->(b) RETURN b',
    'procedure': 'CALL db.labels() YIELD label RETURN label',
    'standalone-fulltext': "CALL db.index.fulltext.queryNodes('mementograph_text', 'x')",
    'fulltext-unfiltered': "CALL db.index.fulltext.queryNodes('mementograph_text', 'x') YIELD node RETURN node.id",
    'fulltext-or': "CALL db.index.fulltext.queryNodes('mementograph_text', 'x') YIELD node "
    'WHERE node.namespace = $namespace OR true RETURN node.id',
    'fulltext-yield-star': "CALL db.index.fulltext.queryNodes('mementograph_text', 'x') YIELD * RETURN node.id",
    'user-function': f'MATCH (n {NS}) RETURN apoc.node.degree(n) AS d',
    'unknown-dotted-function': f'MATCH (n {NS}) RETURN db.nameFromElementId(elementId(n)) AS d',
}

UNPARSED = {
    'show': 'SHOW TRANSACTIONS',
    'explain': f'EXPLAIN MATCH (n {NS}) RETURN n',
    'quantified-path-pattern': f'MATCH (a {NS}) ((x)-->(y)){{1,3}} (b) RETURN b',
    'string-property-key': "MATCH (n {'namespace': $namespace}) RETURN n",
    'unbalanced': 'MATCH (n RETURN n',
    'clause-after-return': f'MATCH (n {NS}) RETURN n MATCH (m) RETURN m',
}


@pytest.mark.parametrize('example', EXAMPLE_QUERIES, ids=lambda example: example.name)
def test_every_readme_query_is_scoped(example: Any) -> None:
    check_scope(example.cypher)


@pytest.mark.parametrize('name', ACCEPTED)
def test_accepted(name: str) -> None:
    check_scope(ACCEPTED[name])


@pytest.mark.parametrize('name', REFUSED)
def test_refused(name: str) -> None:
    with pytest.raises(ScopeViolationError) as caught:
        check_scope(REFUSED[name])
    assert caught.value.understood
    assert isinstance(caught.value, QueryError) and not isinstance(caught.value, ReadOnlyViolationError)


@pytest.mark.parametrize('name', UNPARSED)
def test_what_the_checker_cannot_read_is_refused(name: str) -> None:
    with pytest.raises(ScopeViolationError, match='cannot check that this query stays in its scope') as caught:
        check_scope(UNPARSED[name])
    assert not caught.value.understood


def test_the_message_says_where_and_what_to_add() -> None:
    with pytest.raises(ScopeViolationError) as caught:
        check_scope(f'MATCH (a {NS})\nMATCH (a)-->(b), (c:Memento)\nRETURN c')
    message = str(caught.value)
    assert 'line 2, column 18' in message and 'other namespaces' in message
    assert '{namespace: $namespace}' in message
    with pytest.raises(ScopeViolationError, match=r'procedure db\.labels.*YIELD node, score WHERE node\.namespace'):
        check_scope(REFUSED['procedure'])
    with pytest.raises(ScopeViolationError, match=r'function apoc\.node\.degree\(\).*built-in functions only'):
        check_scope(REFUSED['user-function'])


def test_writes_are_still_refused_as_writes() -> None:
    with pytest.raises(ReadOnlyViolationError):
        check_scope('MATCH (n) DETACH DELETE n')
    with pytest.raises(ReadOnlyViolationError):
        check_scope(f'MATCH (n {NS}) SET n.x = 1')


SESSION_ACCEPTED = {
    'pinned': 'MATCH (m:Memento {namespace: $namespace, session_id: $session_id}) RETURN m',
    'pinned-by-where': 'MATCH (b:EvictedBlock) WHERE b.session_id = $session_id RETURN b.id',
    'session-node': 'MATCH (s:Session {id: $session_id})<-[:IN_SESSION]-(x) RETURN x',
    'session-node-id': 'MATCH (s:Session {id: $session_id}) MATCH (b {session_id: s.id}) RETURN b',
    'preserving-types': 'MATCH (p:Page {session_id: $session_id})-[:CONTAINS]->(b)<-[:SUMMARIZES*1..4]-(m) RETURN m',
    'next-chain': 'MATCH (b {session_id: $session_id})-[:NEXT*1..3]->(c)-[:IN_SESSION]->(s) RETURN c, s',
    'entity-one-hop': 'MATCH (b {session_id: $session_id})-[r:MENTIONS]->(e:Entity) RETURN e.key, r.count',
    'entity-back-to-pinned': 'MATCH (b {session_id: $session_id})-[:MENTIONS]->(e)<-[:MENTIONS]-'
    '(o:Memento {session_id: $session_id}) RETURN o',
    'carried-through-with': 'MATCH (b {session_id: $session_id}) WITH b AS x MATCH (x)-[:NEXT]->(y) RETURN y',
    'fulltext': "CALL db.index.fulltext.queryNodes('mementograph_text', $q) YIELD node "
    'WHERE node.session_id = $session_id RETURN node.id',
    'no-patterns': 'RETURN $session_id AS s',
}

SESSION_REFUSED = {
    'namespace-wide': 'MATCH (m:Memento {namespace: $namespace}) RETURN m',
    'entities-of-the-namespace': 'MATCH (e:Entity {namespace: $namespace}) RETURN e.key',
    'second-hop-from-entity': 'MATCH (b {session_id: $session_id})-[:MENTIONS]->(e)<-[:MENTIONS]-(o) RETURN o',
    'entity-carried-on': 'MATCH (b {session_id: $session_id})-[:MENTIONS]->(e) WITH e MATCH (e)--(x) RETURN x',
    'untyped-variable-length': 'MATCH (b {session_id: $session_id})-[*1..3]-(c {session_id: $session_id}) RETURN c',
    'mentions-variable-length': 'MATCH (b {session_id: $session_id})-[:NEXT|MENTIONS*1..2]-(c) RETURN c',
    'id-without-session-label': 'MATCH (s {id: $session_id})<-[:IN_SESSION]-(x) RETURN x',
    'other-session-parameter': 'MATCH (m:Memento {session_id: $other}) RETURN m',
    'value-is-not-in-session': 'MATCH (b {session_id: $session_id}) UNWIND [b] AS x MATCH (x)-[:MENTIONS]->(e) '
    'MATCH (e)<-[:MENTIONS]-(y) RETURN y',
    'union-weakest-branch': 'CALL () { MATCH (b {session_id: $session_id}) RETURN b AS x UNION '
    'MATCH (b {session_id: $session_id})-[:MENTIONS]->(e) RETURN e AS x } MATCH (x)-[:MENTIONS]-(y) RETURN y',
    'fulltext-namespace-only': "CALL db.index.fulltext.queryNodes('mementograph_text', 'x') YIELD node "
    'WHERE node.namespace = $namespace RETURN node.id',
    'count-of-other-sessions': 'MATCH (b {session_id: $session_id}) RETURN COUNT { (x:EvictedBlock) } AS all',
}


@pytest.mark.parametrize('name', SESSION_ACCEPTED)
def test_session_accepted(name: str) -> None:
    check_scope(SESSION_ACCEPTED[name], namespace=False, session=True)


@pytest.mark.parametrize('name', SESSION_REFUSED)
def test_session_refused(name: str) -> None:
    with pytest.raises(ScopeViolationError) as caught:
        check_scope(SESSION_REFUSED[name], namespace=False, session=True)
    assert caught.value.understood


def test_session_scope_of_the_readme_queries() -> None:
    """Pinned to a session, the two per-session README queries run; the namespace-wide ones are refused."""
    allowed = set()
    for example in EXAMPLE_QUERIES:
        try:
            check_scope(example.cypher, session=True)
        except ScopeViolationError as refusal:
            assert 'pinned session' in str(refusal) and '{session_id: $session_id}' in str(refusal)
        else:
            allowed.add(example.name)
    assert allowed == {'recent_mementos', 'page_blocks'}


# -- property tests ---------------------------------------------------------------------------------------------

_VARIABLES = ('a', 'b', 'c', 'd', None)


@dataclass(frozen=True)
class _GeneratedNode:
    var: str | None
    scoped: bool
    label: str | None

    def text(self) -> str:
        label = f':{self.label}' if self.label else ''
        props = (
            ' {namespace: $namespace}' if self.scoped else " {kind: 'block'}" if self.label == 'EvictedBlock' else ''
        )
        return f'({self.var or ""}{label}{props})'


_nodes = st.builds(
    _GeneratedNode,
    var=st.sampled_from(_VARIABLES),
    scoped=st.booleans(),
    label=st.sampled_from((None, 'EvictedBlock', 'Memento', 'Entity', 'Session', 'Page')),
)
_rels = st.sampled_from(('-->', '<--', '--', '-[:MENTIONS]->', '<-[:SUMMARIZES*1..3]-', '-[r:NEXT]->', '-[*0..2]-'))
_paths = st.lists(st.tuples(_nodes, _rels), min_size=1, max_size=3)


def _pattern_text(paths: list[list[tuple[_GeneratedNode, str]]]) -> str:
    texts = []
    for path in paths:
        parts = []
        for position, (node, rel) in enumerate(path):
            parts.append(node.text())
            if position < len(path) - 1:
                parts.append(rel)
        texts.append(''.join(parts))
    return ', '.join(texts)


def _expected_scoped(paths: list[list[tuple[_GeneratedNode, str]]], where_var: str | None) -> bool:
    """The reference rule, worked out independently: paths joined by shared variables form components; each
    needs a scoped node (a `{namespace: $namespace}` map, or the variable the WHERE pins)."""
    components: list[set[str]] = []  # sets of variable names, or a unique marker per anonymous node
    scoped_components: list[bool] = []
    for index, path in enumerate(paths):
        names = {node.var or f'#{index}.{position}' for position, (node, _) in enumerate(path)}
        scoped = any(node.scoped or (node.var is not None and node.var == where_var) for node, _ in path)
        merged = [i for i, component in enumerate(components) if component & names]
        for i in sorted(merged, reverse=True):
            names |= components.pop(i)
            scoped = scoped_components.pop(i) or scoped
        components.append(names)
        scoped_components.append(scoped)
    return all(scoped_components)


def _relationship_vars_unique(paths: list[list[tuple[_GeneratedNode, str]]]) -> bool:
    return sum(rel == '-[r:NEXT]->' for path in paths for _, rel in path[:-1]) <= 1


@settings(max_examples=300, deadline=None)
@given(paths=st.lists(_paths, min_size=1, max_size=3), where=st.sampled_from((None, 'a', 'b', 'c', 'd')))
def test_generated_patterns_follow_the_rule(paths: list[list[tuple[_GeneratedNode, str]]], where: str | None) -> None:
    pattern = _pattern_text(paths)
    where_clause = f' WHERE {where}.namespace = $namespace' if where else ''
    query = f'MATCH {pattern}{where_clause} RETURN count(*) AS n'
    expected = _expected_scoped(paths, where)
    try:
        check_scope(query)
    except ScopeViolationError as refusal:
        assert refusal.understood, (query, str(refusal))
        assert not expected, (query, str(refusal))
    else:
        assert expected, query


_VOCABULARY = (
    'MATCH', 'OPTIONAL', 'WITH', 'RETURN', 'UNWIND', 'CALL', 'UNION', 'WHERE', 'AND', 'OR', 'NOT', 'IN', 'AS',
    'COUNT', 'EXISTS', 'COLLECT', 'YIELD', 'CASE', 'WHEN', 'THEN', 'END', 'STARTS', 'a', 'b', 'n', 'namespace',
    '$namespace', '$session_id', 'x.namespace', '(', ')', '[', ']', '{', '}', ':', ',', '.', '=', '-', '->', '<-',
    '|', '*', '+', '..', '1', "'s'", 'shortestPath', 'reduce', 'db.labels', 'Session', 'id', 'session_id',
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(words=st.lists(st.sampled_from(_VOCABULARY), min_size=1, max_size=30), session=st.booleans())
def test_any_token_soup_is_checked_or_refused_never_crashes(words: list[str], session: bool) -> None:
    """Fail closed: whatever the text, the checker answers (accept, or refuse with a QueryError), never crashes."""
    try:
        check_scope(' '.join(words), session=session)
    except QueryError as refusal:  # anything else (IndexError, KeyError…) fails the test
        assert re.search(r'line \d+, column \d+|at the end', str(refusal)), str(refusal)  # and it says where


# -- on the real server -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TwoNamespaces:
    uri: str
    mine: str
    theirs: str
    known: Known
    their_ids: frozenset[str]
    """Every id, uid and key of the other namespace's records (the same data, so only these tell them apart)."""
    beta_ids: frozenset[str]
    """Ids of session `beta` in my namespace (for the session tests, pinned to `alpha`)."""


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _namespaced(value: Any) -> Iterator[dict[str, Any]]:
    """Every node (as a dict) inside a row that carries a namespace."""
    if isinstance(value, dict):
        if 'namespace' in value:
            yield value
        for item in value.values():
            yield from _namespaced(item)
    elif isinstance(value, list):
        for item in value:
            yield from _namespaced(item)


@pytest.fixture(scope='module')
def two(neo4j_server: dict[str, str]) -> Iterator[TwoNamespaces]:
    uri = neo4j_uri_with_auth(neo4j_server)
    mine, theirs = (f'test-scope-{uuid.uuid4().hex[:10]}' for _ in range(2))
    store = open_store(uri)
    assert isinstance(store, Neo4jStore)
    try:
        known = write_known_data(store, mine)
        write_known_data(store, theirs)
        store.search_text('beta', namespace=mine)  # waits until the full-text index holds both
        # ids, event uids and session keys tell the namespaces apart (session ids and entity keys are shared)
        every = (
            'MATCH (n {namespace: $namespace}) '
            'RETURN CASE WHEN n:Session THEN n.key WHEN n:Event THEN n.uid ELSE n.id END AS id'
        )
        theirs_rows = store.query(every, namespace=theirs)
        their_ids = {row['id'] for row in theirs_rows}
        assert len(their_ids) == len(theirs_rows)
        beta = 'MATCH (n {namespace: $namespace, session_id: $session_id}) RETURN coalesce(n.id, n.uid) AS id'
        beta_ids = {row['id'] for row in store.query(beta, namespace=mine, session_id='beta')}
        assert len(their_ids) == 18 and len(beta_ids) == 2  # 5 blocks, 5 mementos, 2 pages, 4 entities, 2 sessions
        yield TwoNamespaces(uri, mine, theirs, known, frozenset(their_ids), frozenset(beta_ids))
    finally:
        for namespace in (mine, theirs):
            for session in ('alpha', 'beta'):
                store.delete_session(session, namespace=namespace)
        store.close()


@pytest.fixture
def store(two: TwoNamespaces) -> Iterator[Neo4jStore]:
    opened = open_store(two.uri)
    assert isinstance(opened, Neo4jStore)
    try:
        yield opened
    finally:
        opened.close()


def _assert_mine(rows: list[dict[str, Any]], two: TwoNamespaces, query: str) -> None:
    for row in rows:
        leaked = set(_strings(row)) & two.their_ids
        assert not leaked, (query, leaked)
        for node in _namespaced(row):
            assert node['namespace'] == two.mine, (query, node)


NEO4J_PARAMS = {'q': 'beta', 'entity': APP.key, 'page': 1}


@pytest.mark.neo4j
@pytest.mark.parametrize('name', [*ACCEPTED, *(f'example:{e.name}' for e in EXAMPLE_QUERIES)])
def test_accepted_queries_never_return_another_namespace(store: Neo4jStore, two: TwoNamespaces, name: str) -> None:
    if name.startswith('example:'):
        example = next(e for e in EXAMPLE_QUERIES if f'example:{e.name}' == name)
        query, params = example.cypher, {**NEO4J_PARAMS, **example_params(example, two.known)}
    else:
        query, params = ACCEPTED[name], NEO4J_PARAMS
    used = {key: value for key, value in params.items() if f'${key}' in query}
    rows = store.query(query, used, namespace=two.mine, session_id='alpha', limit=5000)
    _assert_mine(rows, two, query)


@pytest.mark.neo4j
def test_accepted_queries_do_read_their_namespace(store: Neo4jStore, two: TwoNamespaces) -> None:
    """The guarantee is not vacuous: the scoped queries find the namespace's records, whole."""
    rows = store.query('MATCH (n {namespace: $namespace}) RETURN n', namespace=two.mine)
    assert len(rows) == len(two.their_ids)  # the same data in both namespaces, so as many nodes
    linked = store.query(ACCEPTED['collect-subquery'], namespace=two.mine)
    assert sum(len(row['ms']) for row in linked) >= 5
    hits = store.query(ACCEPTED['fulltext'], {'q': 'beta'}, namespace=two.mine)
    assert two.known.blocks['c0'].id in {row['node.id'] for row in hits}


@pytest.mark.neo4j
@pytest.mark.parametrize('name', REFUSED)
def test_refused_queries_never_reach_the_server(two: TwoNamespaces, name: str) -> None:
    """A closed store cannot reach the server, so its refusal proves the check ran before anything was sent."""
    closed = open_store(two.uri)
    closed.close()
    with pytest.raises(ScopeViolationError) as caught:
        closed.query(REFUSED[name], {'props': {}, 'ns': two.mine, 'm': {}}, namespace=two.mine)
    assert caught.value.understood


LEAKING = {
    'id-lookup': 'MATCH (m:Memento {id: $id}) RETURN m.id AS id',
    'second-path': 'MATCH (a:Session {namespace: $namespace}), (m:Memento {id: $id}) RETURN m.id AS id',
    'union-branch': 'MATCH (a:Session {namespace: $namespace}) RETURN a.key AS id UNION MATCH (m {id: $id}) RETURN m.id AS id',
    'call-does-not-import': 'MATCH (a:Session {namespace: $namespace}) CALL () { MATCH (m {id: $id}) RETURN m } '
    'RETURN DISTINCT m.id AS id',
    'with-drops-variable': 'MATCH (m {namespace: $namespace}) WITH count(*) AS c MATCH (m {id: $id}) RETURN m.id AS id',
    'count-subquery': 'MATCH (s:Session {namespace: $namespace}) RETURN COLLECT { MATCH (m {id: $id}) RETURN m.id } AS id',
}


@pytest.mark.neo4j
@pytest.mark.parametrize('name', LEAKING)
def test_what_the_check_stops_is_a_real_leak(store: Neo4jStore, two: TwoNamespaces, name: str) -> None:
    """Run straight through the driver, each of these finds a memento of the other namespace by its id; the store
    refuses every one of them before sending it."""
    theirs = next(value for value in two.their_ids if value.startswith('mem_'))
    driver = store._driver  # reaching past the API on purpose: this is what an unchecked query does
    records, _, _ = driver.execute_query(LEAKING[name], namespace=two.mine, id=theirs, database_=store._database)
    assert theirs in set(_strings([dict(record) for record in records]))
    with pytest.raises(ScopeViolationError):
        store.query(LEAKING[name], {'id': theirs}, namespace=two.mine)


@pytest.mark.neo4j
def test_an_unreadable_query_gets_the_server_syntax_error(store: Neo4jStore, two: TwoNamespaces) -> None:
    query = f'MATCH (b:EvictedBlock {NS})\nMATCH (c RETURN c'
    position = rf'line 2, column 10 \(offset: {query.index("RETURN")}\)'  # where the user wrote it, not EXPLAIN
    with pytest.raises(QueryError, match=rf'Cypher syntax error: .*{position}') as caught:
        store.query(query, namespace=two.mine)
    assert not isinstance(caught.value, ScopeViolationError)
    with pytest.raises(ScopeViolationError, match='cannot check') as refused:  # valid Cypher, but not readable here
        store.query(UNPARSED['quantified-path-pattern'], namespace=two.mine)
    assert not refused.value.understood


SESSION_ON_NEO4J = {
    'pinned': 'MATCH (m:Memento {namespace: $namespace, session_id: $session_id}) RETURN m',
    'pinned-by-where': 'MATCH (b:EvictedBlock) WHERE b.namespace = $namespace AND b.session_id = $session_id RETURN b',
    'session-node': 'MATCH (s:Session {namespace: $namespace, id: $session_id})<-[:IN_SESSION]-(x) RETURN s, x',
    'session-node-id': 'MATCH (s:Session {namespace: $namespace, id: $session_id}) '
    'MATCH (b {namespace: s.namespace, session_id: s.id}) RETURN b',
    'preserving-types': 'MATCH (p:Page {namespace: $namespace, session_id: $session_id})-[:CONTAINS]->(b)'
    '<-[:SUMMARIZES*1..4]-(m) RETURN p, b, m',
    'next-chain': 'MATCH (b {namespace: $namespace, session_id: $session_id})-[:NEXT*1..3]->(c)-[:IN_SESSION]->(s) '
    'RETURN b, c, s',
    'entity-one-hop': 'MATCH (b {namespace: $namespace, session_id: $session_id})-[r:MENTIONS]->(e:Entity) '
    'RETURN b, r, e',
    'fulltext': "CALL db.index.fulltext.queryNodes('mementograph_text', 'block') YIELD node "
    'WHERE node.namespace = $namespace AND node.session_id = $session_id RETURN node',
    'recent-mementos': EXAMPLE_QUERIES[0].cypher,
    'page-blocks': EXAMPLE_QUERIES[3].cypher,
}


@pytest.mark.neo4j
@pytest.mark.parametrize('name', SESSION_ON_NEO4J)
def test_pinned_session_queries_stay_in_the_session(store: Neo4jStore, two: TwoNamespaces, name: str) -> None:
    """What the MCP server does when it serves one session: the session check, then the store's own."""
    query = SESSION_ON_NEO4J[name]
    check_scope(query, namespace=False, session=True)
    rows = store.query(query, {'page': 1} if '$page' in query else {}, namespace=two.mine, session_id='alpha')
    assert rows, query
    _assert_mine(rows, two, query)
    for row in rows:
        assert not set(_strings(row)) & two.beta_ids, (query, row)
        for node in _namespaced(row):
            assert node.get('session_id', 'alpha') == 'alpha', (query, node)


@pytest.mark.neo4j
def test_the_session_check_leaves_the_namespace_to_the_store(store: Neo4jStore, two: TwoNamespaces) -> None:
    query = SESSION_ACCEPTED['pinned-by-where']  # in the session, but in which namespace?
    check_scope(query, namespace=False, session=True)
    with pytest.raises(ScopeViolationError, match='other namespaces'):
        store.query(query, namespace=two.mine, session_id='alpha')


@pytest.mark.neo4j
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(paths=st.lists(_paths, min_size=1, max_size=2), where=st.sampled_from((None, 'a', 'b')))
def test_generated_accepted_queries_stay_in_the_namespace(
    store: Neo4jStore, two: TwoNamespaces, paths: list[list[tuple[_GeneratedNode, str]]], where: str | None
) -> None:
    names = sorted({node.var for path in paths for node, _ in path if node.var})
    where = where if where in names else None
    assume(_relationship_vars_unique(paths) and _expected_scoped(paths, where))
    where_clause = f' WHERE {where}.namespace = $namespace' if where else ''
    columns = ', '.join(names) if names else 'count(*) AS n'
    query = f'MATCH {_pattern_text(paths)}{where_clause} RETURN {columns} LIMIT 300'
    check_scope(query)  # the reference rule says it is scoped, so the checker takes it
    _assert_mine(store.query(query, namespace=two.mine, limit=300), two, query)


# -- through the MCP server -----------------------------------------------------------------------------------------


@pytest.mark.neo4j
async def test_mcp_pinned_to_a_session_on_neo4j(two: TwoNamespaces) -> None:
    async with in_process(two.uri, namespace=two.mine, session_id='alpha') as client:
        refused = error(await client.call_tool('query_memory', {'cypher': EXAMPLE_QUERIES[4].cypher}))
        assert 'Refused' in refused and "session 'alpha'" in refused and '{session_id: $session_id}' in refused
        cypher = 'MATCH (b:EvictedBlock {namespace: $namespace, session_id: $session_id}) RETURN b.id AS id'
        rows = json.loads(ok(await client.call_tool('query_memory', {'cypher': cypher})))['rows']
        assert rows and not {row['id'] for row in rows} & two.beta_ids
    async with in_process(two.uri, namespace=two.mine) as client:  # unpinned: the whole namespace, nothing more
        refused = error(await client.call_tool('query_memory', {'cypher': 'MATCH (b:EvictedBlock) RETURN b.id'}))
        assert 'Refused' in refused and '{namespace: $namespace}' in refused
        answer = json.loads(ok(await client.call_tool('query_memory', {'cypher': EXAMPLE_QUERIES[4].cypher})))
        assert answer['row_count'] == 4


async def test_mcp_pinned_to_a_session_on_the_embedded_store(tmp_path: Path) -> None:
    uri = f'sqlite://{tmp_path / "memory.db"}'
    writer = open_store(uri)
    try:
        known = write_known_data(writer, 'default')
    finally:
        writer.close()
    beta = {known.blocks['c0'].id, known.mementos['mc0'].id}
    async with in_process(uri, session_id='alpha') as client:
        refused = error(await client.call_tool('query_memory', {'cypher': 'MATCH (b:EvictedBlock) RETURN b.id'}))
        assert 'Refused' in refused and 'pinned session' in refused
        cypher = 'MATCH (b:EvictedBlock) WHERE b.session_id = $session_id RETURN b.id AS id'
        rows = json.loads(ok(await client.call_tool('query_memory', {'cypher': cypher})))['rows']
        assert len(rows) == 4 and not {row['id'] for row in rows} & beta
        entities = 'MATCH (m:Memento {session_id: $session_id})-[:MENTIONS]->(e:Entity) RETURN e.key AS key'
        assert json.loads(ok(await client.call_tool('query_memory', {'cypher': entities})))['rows'] == [
            {'key': 'command:make'}
        ]
    async with in_process(uri) as client:  # unpinned, the embedded view is the namespace: no pattern rule there
        answer = json.loads(
            ok(await client.call_tool('query_memory', {'cypher': 'MATCH (b:EvictedBlock) RETURN b.id'}))
        )
        assert answer['row_count'] == 5
