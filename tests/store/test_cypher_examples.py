"""The README's Cypher queries, run on known data: every one against Neo4j, the embedded subset on SQLite/memory.

The same data goes into every backend and the same query text runs on each, so where the embedded store answers,
it answers exactly what Neo4j answers; where it cannot, it says the query needs Neo4j.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mementograph.knowledge_graph import (
    BlockRecord,
    EntityRecord,
    Eviction,
    MementoRecord,
    Mention,
    PageRecord,
    memento_id_for,
    page_id_for,
)
from mementograph.knowledge_graph.store import GraphStore, QueryError, UnsupportedQueryError
from mementograph.knowledge_graph.store._cypher import EXAMPLE_QUERIES, ExampleQuery
from mementograph.knowledge_graph.store._neo4j import Neo4jStore
from tests.builders import session_history
from tests.store.conftest import Backend

APP = EntityRecord(key='file:src/app.py', name='src/app.py', kind='file')
PYTEST = EntityRecord(key='command:pytest', name='pytest', kind='command')
KEY_ERROR = EntityRecord(key='error:KeyError', name='KeyError', kind='error')
MAKE = EntityRecord(key='command:make', name='make', kind='command')


@dataclass
class Known:
    """Ids of what `write_known_data` wrote."""

    blocks: dict[str, BlockRecord]
    mementos: dict[str, MementoRecord]


def _block(ns: str, session: str, seq: int, tokens: int, prefix: str, kind: str = 'block') -> BlockRecord:
    return BlockRecord.from_messages(
        session_history(1, prefix=prefix), session_id=session, namespace=ns, seq=seq, tokens=tokens,
        kind=kind, text=f'{prefix} block',  # type: ignore[arg-type]
    )  # fmt: skip


def _memento(ns: str, session: str, targets: list[str], text: str, tokens: int, *, verified: bool,
             score: float | None, level: int = 1) -> MementoRecord:  # fmt: skip
    return MementoRecord(
        id=memento_id_for(ns, session, targets), session_id=session, namespace=ns, text=text, tokens=tokens,
        summarizes=tuple(targets), score=score, verified=verified, iterations=1, compressor='extractive', level=level,
    )  # fmt: skip


def write_known_data(store: GraphStore, ns: str) -> Known:
    """Two sessions: `alpha` (three blocks, a stubbed part, three mementos and one memento of two of them, two pages)
    and `beta` (one large block). Entities are mentioned so that co-occurrence has a clear answer."""
    b0, b1, b2 = (
        _block(ns, 'alpha', 0, 120, 'zero'),
        _block(ns, 'alpha', 4, 300, 'one'),
        _block(ns, 'alpha', 8, 80, 'two'),
    )
    part = _block(ns, 'alpha', 5, 500, 'part', kind='part')
    c0 = _block(ns, 'beta', 0, 1000, 'beta')
    m0 = _memento(ns, 'alpha', [b0.id], 'read src/app.py', 10, verified=True, score=9.0)
    m1 = _memento(ns, 'alpha', [b1.id], 'KeyError in src/app.py', 20, verified=False, score=6.5)
    m2 = _memento(ns, 'alpha', [b2.id], 'pytest passes', 8, verified=True, score=8.5)
    top = _memento(ns, 'alpha', [m0.id, m1.id], 'app.py fixed', 5, verified=False, score=None, level=2)
    mc0 = _memento(ns, 'beta', [c0.id], 'beta work', 50, verified=False, score=4.0)
    page1 = PageRecord(
        id=page_id_for(ns, 'alpha', 1), session_id='alpha', namespace=ns, number=1, first_turn=0, last_turn=7,
        summary='src/app.py', topics=('src/app.py',), block_ids=(b0.id, b1.id),
    )  # fmt: skip
    page2 = PageRecord(
        id=page_id_for(ns, 'alpha', 2), session_id='alpha', namespace=ns, number=2, first_turn=8, last_turn=11,
        summary='tests', topics=('pytest',), block_ids=(b2.id,),
    )  # fmt: skip
    alpha, beta = {'session_id': 'alpha', 'namespace': ns}, {'session_id': 'beta', 'namespace': ns}
    for scope, blocks, mementos, pages, mentions in [
        (alpha, (b0,), (m0,), (page1,), (Mention(b0.id, APP, 3), Mention(b0.id, PYTEST, 1), Mention(m0.id, MAKE, 1))),
        (alpha, (b1, part), (m1,), (page1,), (Mention(b1.id, APP, 1), Mention(b1.id, KEY_ERROR, 2))),
        (alpha, (b2,), (m2,), (page2,), (Mention(b2.id, PYTEST, 2),)),
        (alpha, (), (top,), (), ()),
        (beta, (c0,), (mc0,), (), (Mention(c0.id, APP, 5), Mention(c0.id, KEY_ERROR, 1))),
    ]:
        store.write_eviction(
            Eviction(
                session_id=scope['session_id'], namespace=scope['namespace'], blocks=blocks, mementos=mementos,
                pages=pages, mentions=mentions,
            )
        )  # fmt: skip
    return Known(
        blocks={'b0': b0, 'b1': b1, 'b2': b2, 'part': part, 'c0': c0},
        mementos={'m0': m0, 'm1': m1, 'm2': m2, 'top': top, 'mc0': mc0},
    )


def expected_rows(name: str, known: Known) -> list[dict[str, Any]]:
    """What each README query must return on the known data (worked out by hand, not by running it)."""
    b, m = known.blocks, known.mementos
    unverified = sorted([('alpha', m['m1']), ('alpha', m['top']), ('beta', m['mc0'])], key=lambda p: (p[0], p[1].id))
    table: dict[str, list[dict[str, Any]]] = {
        'recent_mementos': [
            {'memento': x.id, 'text': x.text, 'tokens': x.tokens, 'verified': x.verified}
            for x in (m['top'], m['m2'], m['m1'], m['m0'])
        ],
        'blocks_mentioning': [
            {'block': b['c0'].id, 'session': 'beta', 'seq': 0, 'mentions': 5},
            {'block': b['b0'].id, 'session': 'alpha', 'seq': 0, 'mentions': 3},
            {'block': b['b1'].id, 'session': 'alpha', 'seq': 4, 'mentions': 1},
        ],
        'co_occurring_entities': [{'entity': 'error:KeyError', 'blocks': 2}, {'entity': 'command:pytest', 'blocks': 1}],
        'page_blocks': [
            {'block': x.id, 'first_message': x.first_message, 'last_message': x.last_message, 'tokens': x.tokens}
            for x in (b['b0'], b['b1'])
        ],
        'largest_blocks': [
            {'block': x.id, 'session': x.session_id, 'tokens': x.tokens} for x in (b['c0'], b['b1'], b['b0'], b['b2'])
        ],
        'unverified_mementos': [
            {'memento': x.id, 'session': session, 'score': x.score, 'level': x.level} for session, x in unverified
        ],
        'tokens_saved': [
            {'session': 'beta', 'block_tokens': 1000, 'memento_tokens': 50, 'saved': 950},
            {'session': 'alpha', 'block_tokens': 500, 'memento_tokens': 38, 'saved': 462},
        ],
        'memento_chain': [{'block': x.id, 'seq': x.seq, 'tokens': x.tokens} for x in (b['b0'], b['b1'])],
    }
    return table[name]


def example_params(example: ExampleQuery, known: Known) -> dict[str, Any]:
    values = {'entity': APP.key, 'page': 1, 'memento': known.mementos['top'].id}
    return {name: values[name] for name in example.params}


@pytest.fixture
def known(backend: Backend) -> Known:
    return write_known_data(backend.store, backend.namespace)


def test_the_readme_shows_at_least_eight_queries() -> None:
    assert len(EXAMPLE_QUERIES) >= 8
    assert len({example.name for example in EXAMPLE_QUERIES}) == len(EXAMPLE_QUERIES)


@pytest.mark.parametrize('example', EXAMPLE_QUERIES, ids=lambda example: example.name)
def test_readme_query(backend: Backend, known: Known, example: ExampleQuery) -> None:
    store, ns = backend.store, backend.namespace
    on_neo4j = isinstance(store, Neo4jStore)
    params = example_params(example, known)
    if not on_neo4j and not example.embedded:
        # the clause it lacks, as the README says, not a later consequence of it (ORDER BY over unjoined MATCHes)
        with pytest.raises(UnsupportedQueryError, match=r'^(OPTIONAL|WITH) at line \d+.*Neo4j backend'):
            store.query(example.cypher, params, namespace=ns, session_id='alpha')
        return

    rows = store.query(example.cypher, params, namespace=ns, session_id='alpha')

    assert rows == expected_rows(example.name, known)


@pytest.mark.parametrize('backend', ['neo4j'], indirect=True)
def test_tokens_saved_agrees_with_stats(backend: Backend, known: Known) -> None:
    example = next(e for e in EXAMPLE_QUERIES if e.name == 'tokens_saved')
    rows = backend.store.query(example.cypher, namespace=backend.namespace)
    for row in rows:
        assert row['saved'] == backend.store.stats(namespace=backend.namespace, session_id=row['session']).tokens_saved


@pytest.mark.parametrize('document', ['docs/cypher.md', 'README.md'])
def test_docs_show_the_queries_the_tests_run(document: str) -> None:
    docs = (Path(__file__).resolve().parents[2] / document).read_text(encoding='utf-8')
    for example in EXAMPLE_QUERIES:
        assert f'```cypher\n{example.cypher}\n```' in docs, example.name


def test_aggregates_see_every_match_on_both_backends(backend: Backend, known: Known) -> None:
    """A count is over every match, whatever the row cap or the query's LIMIT (the embedded store once counted the
    first few matches); over no match it is 0; a variable reused in a second MATCH keeps its label."""
    store, ns = backend.store, backend.namespace

    def one(cypher: str, **kwargs: Any) -> Any:
        rows = store.query(cypher, namespace=ns, **kwargs)
        assert len(rows) == 1, rows
        return rows[0]['n']

    mementos = one('MATCH (m:Memento {namespace: $namespace}) RETURN count(m) AS n')
    blocks = one('MATCH (b:EvictedBlock {namespace: $namespace}) RETURN count(b) AS n')
    assert (mementos, blocks) == (len(known.mementos), len(known.blocks))
    pairs = (
        'MATCH (m:Memento {namespace: $namespace}) MATCH (b:EvictedBlock {namespace: $namespace}) RETURN count(m) AS n'
    )
    assert one(pairs, limit=3) == mementos * blocks
    assert one('MATCH (m:Memento {namespace: $namespace}) RETURN count(m) AS n LIMIT 1') == mementos
    assert one('MATCH (m:Memento {namespace: $namespace, level: 99}) RETURN count(m) AS n') == 0
    assert store.query(
        'MATCH (m:Memento {namespace: $namespace, level: 99}) RETURN count(m) AS n, collect(m.id) AS ids', namespace=ns
    ) == [{'n': 0, 'ids': []}]
    assert (
        store.query(
            'MATCH (m:Memento {namespace: $namespace, level: 99}) RETURN m.id AS id, count(m) AS n', namespace=ns
        )
        == []
    )
    one_pattern = one('MATCH (b:EvictedBlock {namespace: $namespace})-[:MENTIONS]->(e:Entity) RETURN count(e) AS n')
    two_clauses = (
        'MATCH (b:EvictedBlock {namespace: $namespace}) MATCH (b)-[:MENTIONS]->(e:Entity) RETURN count(e) AS n'
    )
    assert one(two_clauses) == one_pattern > 0
    # an unaliased aggregate is named as written, whether or not anything matched
    assert store.query('MATCH (m:Memento {namespace: $namespace}) RETURN count(m)', namespace=ns) == [
        {'count(m)': mementos}
    ]
    nothing = 'MATCH (m:Memento {namespace: $namespace, level: 99}) RETURN count(m), max(m.score)'
    assert store.query(nothing, namespace=ns) == [{'count(m)': 0, 'max(m.score)': None}]


def test_string_operators_answer_alike_on_both_backends(backend: Backend, known: Known) -> None:
    """`STARTS WITH` and `ENDS WITH` are string operators, not the `WITH` clause the embedded store refuses (it
    refused them, though its message lists them as supported)."""
    store, ns = backend.store, backend.namespace

    def ids(where: str) -> list[str]:
        cypher = f'MATCH (m:Memento {{namespace: $namespace}}) WHERE {where} RETURN m.id AS id ORDER BY id'
        return [row['id'] for row in store.query(cypher, namespace=ns, params={'p': 'app'})]

    def wanted(test: Callable[[str], bool]) -> list[str]:
        return sorted(m.id for m in known.mementos.values() if test(m.text))

    assert ids("m.text STARTS WITH 'KeyError'") == wanted(lambda text: text.startswith('KeyError')) != []
    assert ids('m.text STARTS WITH $p') == wanted(lambda text: text.startswith('app')) != []
    assert ids("m.text ENDS WITH 'src/app.py'") == wanted(lambda text: text.endswith('src/app.py')) != []
    assert (
        ids("NOT m.text ENDS WITH 'app.py' AND m.text STARTS WITH 'p'")
        == wanted(lambda text: not text.endswith('app.py') and text.startswith('p'))
        != []
    )


def test_count_star_answers_alike_on_both_backends(backend: Backend, known: Known) -> None:
    """`count(*)`, which grand-cypher cannot parse, counts a node variable of the query on the embedded store."""
    store, ns = backend.store, backend.namespace
    blocks = len(known.blocks)
    assert store.query('MATCH (b:EvictedBlock {namespace: $namespace}) RETURN count(*)', namespace=ns) == [
        {'count(*)': blocks}
    ]
    by_kind = store.query(
        'MATCH (b:EvictedBlock {namespace: $namespace}) RETURN b.kind AS kind, count(*) AS n ORDER BY kind',
        namespace=ns,
    )
    assert by_kind == [
        {'kind': kind, 'n': sum(1 for b in known.blocks.values() if b.kind == kind)}
        for kind in sorted({b.kind for b in known.blocks.values()})
    ]
    assert len(by_kind) == 2  # blocks and parts
    pairs = 'MATCH (b:EvictedBlock {namespace: $namespace})-[:MENTIONS]->(e:Entity) RETURN count(*) AS n, count(b) AS m'
    [row] = store.query(pairs, namespace=ns)
    assert row['n'] == row['m'] > 0
    none = 'MATCH (m:Memento {namespace: $namespace, level: 99}) RETURN count(*) AS n'
    assert store.query(none, namespace=ns) == [{'n': 0}]


def test_ordering_matches_that_share_no_variable_needs_neo4j(backend: Backend, known: Known) -> None:
    cypher = (
        'MATCH (m:Memento {namespace: $namespace}) MATCH (b:EvictedBlock {namespace: $namespace}) '
        'RETURN m.id AS m, b.id AS b ORDER BY m, b LIMIT 1'
    )
    if isinstance(backend.store, Neo4jStore):
        first = min(known.mementos.values(), key=lambda x: x.id).id, min(known.blocks.values(), key=lambda x: x.id).id
        assert backend.store.query(cypher, namespace=backend.namespace) == [{'m': first[0], 'b': first[1]}]
    else:
        with pytest.raises(UnsupportedQueryError, match='ORDER BY over MATCH clauses that share no variable'):
            backend.store.query(cypher, namespace=backend.namespace)


@pytest.mark.parametrize('bound', ['LIMIT $n', 'SKIP $n'])
@pytest.mark.parametrize('value', [-1, '1', True])
def test_skip_and_limit_take_whole_numbers(backend: Backend, known: Known, bound: str, value: object) -> None:
    cypher = f'MATCH (m:Memento {{namespace: $namespace}}) RETURN DISTINCT m.level {bound}'
    with pytest.raises(QueryError):
        backend.store.query(cypher, {'n': value}, namespace=backend.namespace)


@pytest.mark.parametrize(
    ('arguments', 'message'),
    [
        ({'limit': 0}, 'the row limit must be a whole number of rows, 1 or more, not 0'),
        ({'limit': -1}, 'the row limit must be a whole number of rows, 1 or more, not -1'),
        ({'timeout': 0}, 'the timeout must be a positive number of seconds, not 0'),
        ({'timeout': '5'}, "the timeout must be a positive number of seconds, not '5'"),
        ({'params': ['x']}, 'params must map parameter names to values, not a list'),
    ],
)
def test_query_arguments_are_checked_alike_on_both_backends(
    backend: Backend, known: Known, arguments: dict[str, Any], message: str
) -> None:
    cypher = 'MATCH (m:Memento {namespace: $namespace}) RETURN m.id AS id'
    with pytest.raises(QueryError, match=f'^{re.escape(message)}$'):
        backend.store.query(cypher, namespace=backend.namespace, **arguments)
    assert len(backend.store.query(cypher, namespace=backend.namespace, limit=1_000)) == len(known.mementos)


def test_nulls_answer_alike_on_both_backends(backend: Backend, known: Known) -> None:
    """A missing property is null, as Cypher has it: comparisons with it drop the row, negated or not, and
    aggregates skip it (the embedded store counted it, averaged it as 0 and took infinity for its minimum)."""
    store, ns = backend.store, backend.namespace
    scores = [m.score for m in known.mementos.values() if m.score is not None]
    assert len(scores) == len(known.mementos) - 1  # `top` has none

    def count(where: str) -> int:
        rows = store.query(
            f'MATCH (m:Memento {{namespace: $namespace}}) WHERE {where} RETURN count(m) AS n',
            namespace=ns,
            params={'p': '5'},
        )
        return int(rows[0]['n'])

    assert count('m.score <> 100') == len(scores)
    assert count('NOT m.score IN [9.0]') == sum(score != 9.0 for score in scores)
    assert count('NOT m.score > 5') == sum(score <= 5 for score in scores) == 1
    assert count('m.score IS NULL') == 1
    summary = 'RETURN count(m.score) AS n, sum(m.score) AS total, avg(m.score) AS mean, min(m.score) AS lo'
    assert store.query(f'MATCH (m:Memento {{namespace: $namespace}}) {summary}', namespace=ns) == [
        {'n': len(scores), 'total': sum(scores), 'mean': sum(scores) / len(scores), 'lo': min(scores)}
    ]
    assert store.query(f'MATCH (m:Memento {{namespace: $namespace, level: 2}}) {summary}', namespace=ns) == [
        {'n': 0, 'total': 0, 'mean': None, 'lo': None}
    ]
    ordered = store.query(
        'MATCH (m:Memento {namespace: $namespace}) RETURN m.score AS score ORDER BY m.score DESC', namespace=ns
    )
    assert [row['score'] for row in ordered] == [None, *sorted(scores, reverse=True)]  # nulls first descending
    assert count('m.tokens >= $p') == 0  # a number against text compares as null (it raised on the embedded store)

    def smaller(op: str) -> int:
        cypher = (
            'MATCH (m:Memento {namespace: $namespace})-[:SUMMARIZES]->(b:EvictedBlock) '
            f'WHERE m.tokens {op} b.tokens RETURN count(m) AS n'
        )
        return int(store.query(cypher, namespace=ns)[0]['n'])

    assert (smaller('<'), smaller('>')) == (4, 0)  # every block's memento is smaller, property against property


def test_a_query_of_several_match_clauses_is_cut_after_its_where(backend: Backend, known: Known) -> None:
    """grand-cypher cut each MATCH clause's matches at the query's LIMIT before WHERE joined them: no rows."""
    rows = backend.store.query(
        "MATCH (s:Session {namespace: $namespace, id: 'beta'}) "
        'MATCH (b:EvictedBlock {namespace: $namespace})-[r:MENTIONS]->(e:Entity) '
        "WHERE b.session_id = 'beta' AND r.count > 2 RETURN e.key AS key LIMIT 1",
        namespace=backend.namespace,
    )
    assert rows == [{'key': APP.key}]


def test_a_relationship_without_a_direction_is_answered_or_refused(backend: Backend, known: Known) -> None:
    """grand-cypher matches `-[:MENTIONS]-` to nothing; the embedded store says so instead of answering 0."""
    store, ns = backend.store, backend.namespace
    undirected = 'MATCH (e:Entity {namespace: $namespace, key: $key})-[:MENTIONS]-(b:EvictedBlock) RETURN count(b) AS n'
    directed = 'MATCH (b:EvictedBlock {namespace: $namespace})-[:MENTIONS]->(e:Entity {key: $key}) RETURN count(b) AS n'
    mentioning = store.query(directed, namespace=ns, params={'key': APP.key})
    assert mentioning == [{'n': 3}]  # b0, b1 and c0
    if isinstance(store, Neo4jStore):
        assert store.query(undirected, namespace=ns, params={'key': APP.key}) == mentioning
    else:
        with pytest.raises(UnsupportedQueryError, match=r'a relationship without a direction .* line 1, column 52'):
            store.query(undirected, namespace=ns, params={'key': APP.key})
        with pytest.raises(UnsupportedQueryError, match='DISTINCT inside an aggregate'):
            store.query('MATCH (e:Entity {namespace: $namespace}) RETURN count(DISTINCT e) AS n', namespace=ns)


def test_a_stubbed_part_has_its_text_on_both_backends(backend: Backend, known: Known) -> None:
    rows = backend.store.query(
        "MATCH (b:EvictedBlock {namespace: $namespace}) WHERE b.text CONTAINS 'part' RETURN b.id AS id, b.kind AS kind",
        namespace=backend.namespace,
    )
    assert {'id': known.blocks['part'].id, 'kind': 'part'} in rows
