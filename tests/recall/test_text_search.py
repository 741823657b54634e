"""`search_text` word selection and scope on both backends: rarer words first, common ones left out, scope exact."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelRequest, UserPromptPart

from mementograph.knowledge_graph import BlockRecord, Eviction
from mementograph.knowledge_graph.entities import mentions_for
from mementograph.knowledge_graph.recall import _values, recall
from mementograph.knowledge_graph.store import GraphStore, open_store
from mementograph.knowledge_graph.store._base import (
    fts_terms,
    is_prefix_term,
    search_words,
    spaced_ideographs,
    term_pairs,
    token_pairs,
)
from mementograph.knowledge_graph.store._sqlite import _phrase, text_columns
from tests.conftest import open_neo4j


@pytest.fixture(params=['sqlite', 'neo4j'])
def backend(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[tuple[GraphStore, str]]:
    """(store, namespace): a fresh SQLite file, or a namespace of its own on the real Neo4j server."""
    if request.param == 'neo4j':
        store = open_neo4j(request.getfixturevalue('neo4j_server'))
    else:
        store = open_store(f'sqlite://{tmp_path / "text.db"}')
    try:
        yield store, unique_namespace
    finally:
        for namespace in (unique_namespace, f'{unique_namespace}-other'):  # the shared server keeps nothing
            store.delete_session('s1', namespace=namespace)
        store.close()


def write(store: GraphStore, namespace: str, session_id: str, texts: list[str]) -> list[str]:
    """One block per text, in order; their ids."""
    blocks = tuple(
        BlockRecord.from_messages(
            [ModelRequest(parts=[UserPromptPart(content=text)])],
            session_id=session_id,
            seq=i,
            tokens=10,
            text=text,
            namespace=namespace,
        )
        for i, text in enumerate(texts)
    )
    store.write_eviction(Eviction(session_id=session_id, namespace=namespace, blocks=blocks))
    return [block.id for block in blocks]


def test_common_words_are_left_out_when_rarer_ones_exist(
    backend: tuple[GraphStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, namespace = backend
    monkeypatch.setattr(_values, 'TEXT_MAX_DF', 3)  # read at each search: four documents make a word common
    monkeypatch.setattr(_values, 'TEXT_MIN_DOCS', 4)  # and five make a store large
    ids = write(
        store,
        namespace,
        's1',
        [
            'kettle kettle kettle kettle boils water',
            'kettle on the stove',
            'kettle descaling notes',
            'kettle warranty',
            'the zephyr kettle arrived',
        ],
    )
    hits = store.search_text('kettle zephyr', k=10, namespace=namespace)
    # `kettle` is in five documents (over the cap of 3) and `zephyr` in one: only `zephyr` is searched, so the
    # document that repeats `kettle` most does not come back at all
    assert [hit.id for hit in hits] == [ids[4]]
    # a query of only common words still answers, from the latest documents holding its rarest word
    only_common = {hit.id for hit in store.search_text('kettle', k=10, namespace=namespace)}
    assert only_common and only_common <= set(ids)
    assert ids[4] in only_common


def test_scope_is_exact_when_other_namespaces_rank_higher(backend: tuple[GraphStore, str]) -> None:
    store, namespace = backend
    other = f'{namespace}-other'
    # the other namespace holds the best matches; the searched one only weaker ones
    write(store, other, 's1', ['quokka quokka quokka quokka', 'quokka quokka quokka'])
    mine = write(store, namespace, 's1', ['a quokka in the text', 'nothing to see'])
    hits = store.search_text('quokka', k=1, namespace=namespace)
    assert [hit.id for hit in hits] == [mine[0]]
    session_hits = store.search_text('quokka', k=5, namespace=other, session_id='s2')
    assert session_hits == []


def test_an_older_scope_still_finds_its_common_words(
    backend: tuple[GraphStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, namespace = backend
    monkeypatch.setattr(_values, 'TEXT_MAX_DF', 3)
    monkeypatch.setattr(_values, 'TEXT_MIN_DOCS', 4)
    mine = write(store, namespace, 's1', ['an old kettle note'])
    # newer documents of another namespace fill the latest matches of the only (and common) word
    write(store, f'{namespace}-other', 's1', [f'kettle number {i}' for i in range(6)])
    hits = store.search_text('kettle', k=5, namespace=namespace)
    assert [hit.id for hit in hits] == mine


def test_small_stores_search_every_word(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_values, 'TEXT_MAX_DF', 3)  # common by count, but the store is small: nothing is left out
    store = open_store(f'sqlite://{tmp_path / "small.db"}')
    try:
        ids = write(
            store, 'default', 's1', ['kettle one', 'kettle two', 'kettle three', 'kettle four', 'zephyr kettle']
        )
        hits = store.search_text('kettle zephyr', k=10)
        assert hits[0].id == ids[4] and {hit.id for hit in hits} == set(ids)
    finally:
        store.close()


@settings(max_examples=200, deadline=None)
@given(text=st.text(st.characters(max_codepoint=0x24F), max_size=60))
def test_neo4j_indexes_the_words_fts5_reads(text: str) -> None:
    """`search_words` (what Neo4j's full-text index is given) splits a text into the tokens SQLite's `unicode61`
    tokenizer makes of it, so the two backends' searches match the same words. Checked on Latin text: SQLite's
    tables are of Unicode 6.1, where a later letter or symbol is an unassigned code point, which it reads as a
    letter; and combining marks it folds into their letters (`remove_diacritics`), where Lucene keeps them."""
    conn = sqlite3.connect(':memory:')
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'unicode61 remove_diacritics 0')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    conn.execute('INSERT INTO t (x) VALUES (?)', (text,))
    fts5 = [row[0] for row in conn.execute('SELECT term FROM v ORDER BY offset')]
    assert search_words(text).casefold().split() == [term.casefold() for term in fts5]  # case: each folds its own way


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(
        st.one_of(st.characters(max_codepoint=0x24F), st.sampled_from('数据库会議新幹線のをシンカンセン서울에서')),
        max_size=60,
    )
)
def test_chinese_and_japanese_characters_are_words_on_both_backends(text: str) -> None:
    """A run of Han ideographs or Hiragana is one token to FTS5 (a whole sentence) and a token per character to
    Lucene: SQLite indexes `spaced_ideographs(text)`, whose tokens are `search_words(text)`, what Neo4j indexes.
    Katakana and Hangul runs stay whole on both."""
    conn = sqlite3.connect(':memory:')
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'unicode61 remove_diacritics 0')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    conn.execute('INSERT INTO t (x) VALUES (?)', (spaced_ideographs(text),))
    fts5 = [row[0] for row in conn.execute('SELECT term FROM v ORDER BY offset')]
    assert search_words(text).casefold().split() == [term.casefold() for term in fts5]


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.sampled_from('ab1Zq_./-:\\ ,(é数据ファ'), max_size=40))
def test_a_compound_word_is_found_through_its_token_pairs(text: str) -> None:
    """SQLite searches a path or dotted name as the phrase of its token pairs (`token_pairs`, the `pairs` column):
    FTS5 reads each pair as one token, and every query word copied from a text finds the text."""
    conn = sqlite3.connect(':memory:')
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, pairs, tokenize = 'unicode61')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    conn.execute('INSERT INTO t (text, pairs) VALUES (?, ?)', text_columns(text))
    pairs = [row[0] for row in conn.execute("SELECT term FROM v WHERE col = 'pairs' ORDER BY offset")]
    assert pairs == text_columns(text)[1].casefold().split()
    for term in (term for term in fts_terms(text) if search_words(term)):  # a term of no token finds nothing
        assert conn.execute('SELECT count(*) FROM t WHERE t MATCH ?', (_phrase(term),)).fetchone() == (1,), term


def test_only_ascii_words_of_several_tokens_are_searched_by_pairs() -> None:
    assert term_pairs('django/db/models/sql/query.py') == (
        'django\u01c2db db\u01c2models models\u01c2sql sql\u01c2query query\u01c2py'
    )
    assert [term_pairs(term) for term in ('_combine_nd', 'query', 'café.py', '数据', 'high-end')] == [
        'combine\u01c2nd',
        '',
        '',
        '',
        '',
    ]
    assert _phrase('reproduce_issue.py') == 'pairs : "reproduce\u01c2issue issue\u01c2py"'
    # a compound is a run of ASCII letters and digits joined by `._/\:`, not by a space, a hyphen or another letter
    assert token_pairs('run reproduce_issue.py; C:\\a\\b.txt e.g. 10:30, foo(bar) x\u00e9.py self-care').split() == [
        'reproduce\u01c2issue',
        'issue\u01c2py',
        'C\u01c2a',
        'a\u01c2b',
        'b\u01c2txt',
        'e\u01c2g',
        '10\u01c230',
    ]


def test_a_chinese_or_japanese_query_is_searched_by_its_character_pairs() -> None:
    assert fts_terms('数据库') == ['数据', '据库']
    assert fts_terms('使用PostgreSQL数据库') == ['PostgreSQL', '使用', '数据', '据库']
    assert fts_terms('東京の会議 シンカンセン 库') == ['東京', '京の', 'の会', '会議', 'シンカンセン', '库']
    assert fts_terms('ops/deploy.sh über') == ['ops/deploy.sh', 'über']
    # a Korean query word is searched without its particle: `회의가` ("the meeting", subject) finds `회의에서`
    assert fts_terms('회의가 서울에서 나는 고양이') == ['회의', '서울', '나는', '고양']
    # a Korean word carries its particle (`서울에서`, in Seoul): a query word is matched as a word's beginning
    assert [is_prefix_term(term) for term in fts_terms('서울 기차표 서 München 数据')] == [
        True,
        True,
        False,
        False,
        False,
    ]


MULTILINGUAL = [
    '我们决定使用PostgreSQL数据库来存储用户的订单。',
    '明天下午三点开会讨论预算。',
    '東京の会議は来週の月曜日です。新幹線の切符を予約します。',
    'Der Flughafen in München ist geschlossen, wir nehmen den Zug über Nürnberg und buchen eine Übernachtung.',
    "Élodie a inscrit sa fille à l'école Jules-Ferry.",
    'Мы переехали в Новосибирск в прошлом году, зима там долгая.',
    'The deploy script lives in ops/deploy.sh and exits 0.',
    '서울에서 회의가 있습니다. 기차표를 예매하겠습니다.',
]


@pytest.mark.parametrize(
    ('query', 'index'),
    [
        ('数据库', 0),
        ('用户的订单在哪里', 0),
        ('PostgreSQL', 0),
        ('预算', 1),
        ('会議', 2),
        ('新幹線', 2),
        ('München', 3),
        ('über', 3),
        ('Élodie', 4),
        ('école', 4),
        ('Новосибирск', 5),
        ('зима', 5),
        ('deploy.sh', 6),
        ('서울', 7),
        ('기차표', 7),
        ('회의를', 7),
    ],
)
def test_words_of_any_script_are_found_on_both_backends(
    backend: tuple[GraphStore, str], query: str, index: int
) -> None:
    store, namespace = backend
    ids = write(store, namespace, 's1', MULTILINGUAL)
    assert [hit.id for hit in store.search_text(query, k=3, namespace=namespace)][:1] == [ids[index]]


@pytest.mark.parametrize(
    ('query', 'index', 'by_entity'),
    [
        ('数据库', 0, False),
        ('新幹線の切符', 2, False),
        ('PostgreSQL', 0, True),
        ('Nürnberg', 3, True),
        ('über', 3, False),  # a German function word: full text finds it, no entity holds it
        ('Übernachtung', 3, True),
        ('Élodie', 4, True),
        ('école', 4, True),
        ('Новосибирск', 5, True),
        ('зима', 5, True),
        ('서울', 7, True),
        ('회의를', 7, True),  # another particle than the text's `회의가`
    ],
)
def test_recall_finds_words_of_any_script_on_both_backends(
    backend: tuple[GraphStore, str], query: str, index: int, by_entity: bool
) -> None:
    """Chinese and Japanese are found by full text (no entity holds them), and a Korean word by its beginning; a word
    of any alphabet is an entity too, so the entity graph alone finds it (before, a word that did not start with A-Z
    was dropped from the query), a Korean noun whatever particle the query or the text writes onto it."""
    store, namespace = backend
    blocks = [
        BlockRecord.from_messages(
            [ModelRequest(parts=[UserPromptPart(content=text)])],
            session_id='s1',
            seq=i,
            tokens=10,
            text=text,
            namespace=namespace,
        )
        for i, text in enumerate(MULTILINGUAL)
    ]
    mentions = tuple(mention for block in blocks for mention in mentions_for(block.id, block.text))
    store.write_eviction(Eviction(session_id='s1', namespace=namespace, blocks=tuple(blocks), mentions=mentions))
    fused = recall(store, query, k=3, namespace=namespace)
    assert [hit.block_id for hit in fused][:1] == [blocks[index].id]
    graph = recall(store, query, k=3, method='graph', namespace=namespace)
    assert ([hit.block_id for hit in graph][:1] == [blocks[index].id]) is by_entity
