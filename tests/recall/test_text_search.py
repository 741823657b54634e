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
from mementograph.knowledge_graph.recall import _values
from mementograph.knowledge_graph.store import GraphStore, open_store
from mementograph.knowledge_graph.store._base import search_words
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
