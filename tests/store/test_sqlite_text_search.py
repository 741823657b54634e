"""SQLite full-text search above `TEXT_MIN_DOCS`: the bounded document frequencies it keeps per state of the FTS5
index (never stale after a write, by this connection or another), a query of only common words scored under the
rarest of them, not under its first, and a path searched through its token pairs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from mementograph.knowledge_graph import BlockRecord, Eviction
from mementograph.knowledge_graph.recall import _values
from mementograph.knowledge_graph.store import BlockIntegrityError, SqliteStore, _sqlite


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pruning's thresholds at a test's scale (stores of 10,000+ documents otherwise)."""
    monkeypatch.setattr(_values, 'TEXT_MIN_DOCS', 30)
    monkeypatch.setattr(_values, 'TEXT_MAX_DF', 10)


def _block(text: str, session_id: str, seq: int) -> BlockRecord:
    messages = [ModelRequest(parts=[UserPromptPart(text)]), ModelResponse(parts=[TextPart('ok')])]
    return BlockRecord.from_messages(messages, session_id=session_id, seq=seq, tokens=8, text=text)


def _write(store: SqliteStore, session_id: str, texts: list[str]) -> list[BlockRecord]:
    blocks = [_block(text, session_id, seq) for seq, text in enumerate(texts)]
    store.write_eviction(Eviction(session_id=session_id, blocks=tuple(blocks)))
    return blocks


def _ids(store: SqliteStore, query: str, k: int = 5) -> list[str]:
    return [hit.block_ids[0] for hit in store.search_text(query, k=k)]


def test_a_write_by_this_store_is_searched_at_once(tmp_path: Path, small_limits: None) -> None:
    with SqliteStore(tmp_path / 'kg.db') as store:
        _write(store, 'filler', [f'module handler number{i}' for i in range(40)])
        rare = _write(store, 'rare', ['module quokkagamma notes'])
        assert _ids(store, 'quokkagamma module') == [rare[0].id]  # the word's frequency is now known (1)
        # the rare word becomes common (past the cap): the next search must count it again, not reuse 1
        more = _write(store, 'more', [f'quokkagamma filler{i} text' for i in range(12)])
        # scored under the floor: the latest 10 documents holding it, and not the first one (counted as rare, it
        # would be scored over all 13)
        assert set(_ids(store, 'quokkagamma', k=11)) == {block.id for block in more[-10:]}


def test_another_connection_s_write_is_seen(tmp_path: Path, small_limits: None) -> None:
    path = tmp_path / 'kg.db'
    with SqliteStore(path) as reader, SqliteStore(path) as writer:
        _write(writer, 'filler', [f'module handler number{i}' for i in range(40)])
        assert _ids(reader, 'wombatdelta') == []  # its frequency, 0, is now known to the reader
        added = _write(writer, 'added', ['wombatdelta module notes'])
        assert _ids(writer, 'wombatdelta') == [added[0].id]  # the writer indexes the new text itself
        # the reader's index has nothing to add, and its count of 0 is out of date
        assert _ids(reader, 'wombatdelta') == [added[0].id]
        assert _ids(reader, 'wombatdelta module', k=1) == [added[0].id]


def test_another_connection_s_write_is_indexed_by_a_reader_that_found_the_index_current(
    tmp_path: Path, small_limits: None
) -> None:
    """A search skips the catch-up while its connection has seen no commit since the index was current: a commit
    by another connection (which does not search, so indexes nothing) must end the skip."""
    path = tmp_path / 'kg.db'
    with SqliteStore(path) as reader, SqliteStore(path) as writer:
        _write(writer, 'filler', [f'module handler number{i}' for i in range(40)])
        assert _ids(reader, 'module', k=1) != []  # the reader indexed the backlog: current now
        assert _ids(reader, 'numbatzeta') == []
        added = _write(writer, 'added', ['numbatzeta module notes'])
        assert _ids(reader, 'numbatzeta') == [added[0].id]
        more = _write(reader, 'more', ['numbatzeta again'])  # and a write of the reader's own
        assert set(_ids(reader, 'numbatzeta')) == {added[0].id, more[0].id}


def test_a_query_of_hundreds_of_words_is_counted_in_chunks(tmp_path: Path, small_limits: None) -> None:
    """The words' document counts go to SQLite in one statement per 200 (`_text_dfs`): a pasted page of text (600
    distinct words here, 1,202 parameters, past SQLite's old limit of 999 a statement) still finds its rare word."""
    with SqliteStore(tmp_path / 'kg.db') as store:
        _write(store, 'filler', [f'module handler number{i}' for i in range(40)])
        rare = _write(store, 'rare', ['module platypusomega notes'])
        with store._search_lock:  # as an older SQLite (or one built with a lower limit) would have it
            store._search_connection().setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
        words = [f'absentword{i}' for i in range(600)]
        assert _ids(store, ' '.join([*words[:300], 'platypusomega', *words[300:]])) == [rare[0].id]
        assert _ids(store, ' '.join(words)) == []


@pytest.mark.parametrize('min_docs', [30, 10_000], ids=['pruned', 'every-word'])
def test_scores_are_fts5_s_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, min_docs: int) -> None:
    """The ranking comes back from SQLite as one row of text (`_text_rows`), its ranks as 17 significant digits:
    each hit's score must be the very double FTS5's `bm25()` gives, over a namespace and in a session."""
    monkeypatch.setattr(_values, 'TEXT_MIN_DOCS', min_docs)
    with SqliteStore(tmp_path / 'kg.db') as store:
        for session in ('a', 'b'):
            _write(store, session, [f'kestrel {"falcon " * (i % 5)}note{i} {"x" * (i % 7)}' for i in range(25)])
        for session_id in (None, 'a'):
            hits = store.search_text('kestrel falcon note3', k=30, session_id=session_id)
            where = '' if session_id is None else ' AND session_id = ?'
            truth = store._conn.execute(
                f'SELECT item_id, -{_sqlite._TEXT_RANK} AS score FROM text_fts WHERE text_fts MATCH ?{where} '
                'ORDER BY score DESC, rowid LIMIT 30',
                ['"kestrel" OR "falcon" OR "note3"', *([] if session_id is None else [session_id])],
            ).fetchall()
            assert len(truth) >= 25 and len({score for _, score in truth}) > 5
            assert [(hit.id, hit.score) for hit in hits] == [tuple(row) for row in truth]


def test_a_deleted_session_is_not_searched_through_an_old_floor(tmp_path: Path, small_limits: None) -> None:
    with SqliteStore(tmp_path / 'kg.db') as store:
        _write(store, 'filler', [f'padding words number{i}' for i in range(30)])
        early = _write(store, 'early', [f'lemurcommon early{i}' for i in range(12)])
        late = _write(store, 'late', [f'lemurcommon late{i}' for i in range(12)])
        assert set(_ids(store, 'lemurcommon', k=10)) == {block.id for block in late[-10:]}
        # the floor was the 10th latest document of `late`: after it goes, the floor must move back into `early`
        assert store.delete_session('late') > 0
        assert set(_ids(store, 'lemurcommon', k=10)) == {block.id for block in early[-10:]}


def test_common_words_are_scored_under_the_rarest(tmp_path: Path, small_limits: None) -> None:
    with SqliteStore(tmp_path / 'kg.db') as store:
        # `otter` is in 20 documents, all written first; `badger` in all 60, the 40 latest of them without `otter`:
        # both are common (more than 10), and the latest documents holding `badger` (the query's first word) are
        # exactly those without `otter`
        with_otter = _write(store, 'both', [f'badger otter fact{i}' for i in range(20)])
        _write(store, 'badger', [f'badger alone fact{i}' for i in range(40)])
        hits = store.search_text('badger otter', k=5)
        assert len(hits) == 5
        assert {hit.block_ids[0] for hit in hits} <= {block.id for block in with_otter}


def test_a_backlog_is_indexed_in_batches_that_let_other_writers_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first search after many evictions catches the full-text index up one batch per transaction, so another
    process's eviction waits for one batch rather than for the whole backlog, and what a batch indexed stays
    indexed; the ranking is the one a single pass gives."""
    texts = [f'module handler number{i} ' + ('quokka ' * (i % 4)) for i in range(25)]

    def ranking(store: SqliteStore, blocks: list[BlockRecord]) -> list[tuple[str, float]]:
        text_of = {block.id: block.text for block in blocks}
        return [(text_of[hit.block_ids[0]], hit.score) for hit in store.search_text('quokka handler wombat', k=12)]

    with SqliteStore(tmp_path / 'whole.db') as whole:
        written = _write(whole, 'backlog', texts) + _write(whole, 'between', ['wombat notes'])
        expected = ranking(whole, written)

    monkeypatch.setattr(_sqlite, '_TEXT_BATCH', 4)
    monkeypatch.setattr(_sqlite, '_CATCH_UP_PAUSE', 0.001)
    path = tmp_path / 'batched.db'
    with SqliteStore(path) as store, SqliteStore(path) as other:
        written = _write(store, 'backlog', texts)
        assert store._index_text_batch() == 4  # the first batch, committed on its own
        written += _write(other, 'between', ['wombat notes'])  # another connection writes in the middle
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        got = ranking(store, written)
    assert statements.count('COMMIT') >= (len(texts) + 1 - 4) // 4  # the rest, one transaction per batch of four
    assert got == expected and got[0][0] == 'wombat notes'


def test_a_compound_word_is_searched_through_its_token_pairs(tmp_path: Path) -> None:
    """A path or dotted name is the phrase of its token pairs (the `pairs` column): it finds the texts that write it,
    inside a longer path too or joined by other punctuation, and not its words written apart. A hyphenated word is
    the phrase of its words, as prose writes it with or without the hyphen."""
    with SqliteStore(tmp_path / 'kg.db') as store:
        blocks = _write(
            store,
            's',
            [
                'ran python reproduce_issue.py and it failed',
                'we reproduce issue py style bugs',
                'see /testbed/scripts/reproduce_issue.py for the steps',
                'C:\\repo\\reproduce.issue:py is a stream',
                'a stand-up comedy special',
                'a stand up comedy night',
            ],
        )
        ids = [block.id for block in blocks]
        assert set(_ids(store, 'reproduce_issue.py', k=10)) == {ids[0], ids[2], ids[3]}
        assert set(_ids(store, 'scripts/reproduce_issue', k=10)) == {ids[2]}
        assert set(_ids(store, 'issue', k=10)) == set(ids[:4])
        assert set(_ids(store, 'stand-up', k=10)) == {ids[4], ids[5]}


def test_a_block_whose_bytes_were_altered_does_not_stop_every_search(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The full-text catch-up renders each new block from its archived messages; bytes altered on the disk made
    that raise, and every search (the agent's `recall` too) failed with it. The block is indexed from its raw bytes,
    named in a warning, and still never recovered (its sha256 check fails)."""
    from tests.builders import session_history
    from tests.store.conftest import _sqlite_tamper
    from tests.store.test_contract import make_eviction

    store = SqliteStore(tmp_path / 'm.db')
    try:
        blocks = []
        for seq, prefix in enumerate(('tiger', 'omega')):
            eviction, block, _ = make_eviction(
                session_history(1, prefix=prefix), session_id='s', namespace='default', seq=seq
            )
            store.write_eviction(eviction)
            blocks.append(block)
        _sqlite_tamper(store)(blocks[0].id)  # before any search: the catch-up meets it
        with caplog.at_level('WARNING', logger='mementograph'):
            found = {hit.id for hit in store.search_text('omega', k=5)}
        assert blocks[1].id in found
        assert f'block {blocks[0].id} of ' in caplog.text and 'does not decode' in caplog.text
        assert blocks[0].id in {hit.id for hit in store.search_text('tiger', k=5)}  # its words are still found
        with pytest.raises(BlockIntegrityError):
            store.recover_block(blocks[0].id)
    finally:
        store.close()
