"""`SqliteStore` -- the embedded default: SQLite (WAL) is the source of truth, FTS5 gives BM25.

`memory://` is the same store over an in-memory SQLite database: one code path, identical behaviour, nothing on
disk. The networkx traversal view is built from these tables on demand (`graph()`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import sqlite3
import threading
import time
import zlib
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .._schema import (
    DEFAULT_NAMESPACE,
    BlockKind,
    BlockRecord,
    EntityRecord,
    Eviction,
    MementoRecord,
    Mention,
    PageRecord,
    SessionEvent,
    SessionRecord,
    StoreStats,
    entity_id_for,
)
from ._base import (
    block_not_found,
    branch_events,
    check_block,
    check_mention_sources,
    check_page,
    fts_terms,
    is_prefix_term,
    log_conflict,
    missing_sources,
    now_iso,
    spaced_ideographs,
    term_pairs,
    token_pairs,
)
from ._errors import (
    MementoNotFoundError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreUnavailableError,
    UnsupportedQueryError,
)
from ._protocol import BlockLink, GraphLinks, MementoLink, PageLink, RecoveredBlock, TextHit

if TYPE_CHECKING:  # recall reads (section at the end of SqliteStore); a runtime import would be circular
    from ..recall._values import BlockInfo, EntityLookup

__all__ = ('SqliteStore',)

logger = logging.getLogger('mementograph')

FORMAT: Final = 'mementograph-sqlite-10'
"""Written to `meta`. Format 1 files (a `summarizes` link table, eager entity index), format 2 files (a
`page_blocks` table, every eviction's mentions in `mention_queue`), format 3 files (no `entities.blocks` count)
format 4 files (no `scope` in the full-text index), format 5 files (no `vectors` table), format 6 files (no
block ids in `blocks_scope`), format 7 files (Chinese and Japanese text indexed as whole runs), format 8 files
(no `pairs` column in the full-text index) and format 9 files (the memory tools' calls and answers indexed with
their blocks) are migrated in place at open."""
DEFAULT_BUSY_TIMEOUT: Final = 5.0

_CORRUPT_CODES: Final = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
"""SQLite's primary result codes for a damaged file: "database disk image is malformed", "file is not a database"."""

_DISK_ALMOST_FULL: Final = 1 << 20
"""Free bytes under which a failed SQLite write is put down to a full disk: SQLite reports running out of space as
`SQLITE_FULL` on a page write, but as a bare "disk I/O error" when it grows the `-shm` file at open or syncs."""

_INTEGRITY_FINDINGS: Final = 100
"""At most this many lines of `PRAGMA integrity_check` in `check_storage`: enough to show what is damaged."""

_WAL_SIZE_LIMIT: Final = 64 * 1024 * 1024
"""Bytes the WAL file is cut back to once it is checkpointed and starts over. A large transaction (the entity
index's sort: about 1 GB at 100k blocks) grows the WAL to its size, and SQLite would otherwise keep that disk
space until the last connection closes; steady evictions checkpoint every ~4 MB and never reach the limit."""

_MENTIONS_ENTITY_INDEX: Final = (
    'CREATE INDEX IF NOT EXISTS mentions_entity ON mentions (entity_id, count DESC, source_id)'
)
_MENTIONS_ENTITY_INDEX_EXISTS: Final = "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'mentions_entity'"

_RECOUNT: Final = (
    'UPDATE entities SET blocks = (SELECT count(*) FROM mentions m WHERE m.entity_id = entities.id '
    "AND m.source_id >= 'blk_' AND m.source_id < 'blk`')"
)
"""Every entity's `blocks` (its document frequency: the `mentions` rows from blocks, ids `blk_...`, not from
mementos), counted afresh from the by-entity index: the migration from format 3. From then on the entity index's
writers keep it: `_apply_mentions` adds what it indexes, `delete_session` takes off what it deletes."""

_PAGE_BLOCKS_TRIGGERS: Final = """
CREATE TRIGGER IF NOT EXISTS page_blocks_insert INSTEAD OF INSERT ON page_blocks BEGIN
    UPDATE pages SET members_json = json_patch(json_object(NEW.block_id, NEW.position), members_json)
    WHERE id = NEW.page_id;
END;
CREATE TRIGGER IF NOT EXISTS page_blocks_delete INSTEAD OF DELETE ON page_blocks BEGIN
    UPDATE pages SET members_json = (SELECT json_group_object(key, value) FROM json_each(members_json)
    WHERE key != OLD.block_id) WHERE id = OLD.page_id;
END;
CREATE TRIGGER IF NOT EXISTS page_blocks_update INSTEAD OF UPDATE ON page_blocks BEGIN
    UPDATE pages SET members_json = (SELECT json_group_object(key, value) FROM json_each(members_json)
    WHERE key != OLD.block_id) WHERE id = OLD.page_id;
    UPDATE pages SET members_json = json_patch(members_json, json_object(NEW.block_id, NEW.position))
    WHERE id = NEW.page_id;
END;
"""
"""`page_blocks` stays writable as the table it was (repair tools, tests that damage a page on purpose): a row
written, deleted or changed through it is a member written, deleted or changed on its page row. Kept out of
`_SCHEMA`, which is split on `;`."""

# Why this shape: an eviction sits on the agent's request path, and its cost is the B-tree pages its commit
# writes to the WAL. So a link is stored on a row the eviction writes anyway (SUMMARIZES: the memento's
# `summarizes_json` and, reversed for `memento_of`, the target's `memento_id` / `parent_id`), large columns come
# last (reading the small ones never walks their overflow pages), and the indexes only searches need -- FTS5 and
# the entity postings -- are built at the first read that needs them, from `rid` marks. Format 3 drops two more
# records per eviction: the eviction's queued mentions ride in its first new block row (`blocks.mentions`; only an
# eviction that writes no new block uses `mention_queue`), and a page's members are a JSON object on the page row
# (`members_json`, block id -> position; `page_blocks` is a view of it). Measured and not taken: a WITHOUT ROWID
# `mementos` (keyed by id, or by scope with a unique id) writes more pages than rowid table + two indexes, because
# index B-trees split half-full where a rowid table appends (and mementos overflow an index leaf sooner).
_VECTORS_TABLE: Final = """
CREATE TABLE IF NOT EXISTS vectors (
    model TEXT NOT NULL, block_id TEXT NOT NULL, namespace TEXT NOT NULL, session_id TEXT NOT NULL,
    data BLOB NOT NULL, PRIMARY KEY (model, block_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS vectors_scope ON vectors (model, namespace, session_id)
"""
"""Format 6: block embeddings by model (dense recall), derived data deleted with their session."""
_SCHEMA: Final = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    namespace TEXT NOT NULL, id TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (namespace, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blocks (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    first_message INTEGER NOT NULL,
    last_message INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    started_at TEXT,
    created_at TEXT NOT NULL,
    memento_id TEXT,
    text TEXT NOT NULL,
    messages_json BLOB NOT NULL,
    mentions BLOB
);
CREATE INDEX IF NOT EXISTS blocks_scope ON blocks (namespace, session_id, kind, seq, id);
CREATE TABLE IF NOT EXISTS mementos (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL,
    session_id TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    score REAL,
    verified INTEGER NOT NULL,
    iterations INTEGER NOT NULL,
    compressor TEXT NOT NULL,
    level INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    parent_id TEXT,
    summarizes_json TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS mementos_scope ON mementos (namespace, session_id, rid);
CREATE VIEW IF NOT EXISTS summarizes (memento_id, target_id, position) AS
    SELECT m.id, t.value, t.key FROM mementos m, json_each(m.summarizes_json) t;
CREATE TABLE IF NOT EXISTS mention_queue (
    rid INTEGER PRIMARY KEY, namespace TEXT NOT NULL, data BLOB NOT NULL, after_rid INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS entities (
    id TEXT PRIMARY KEY, namespace TEXT NOT NULL, key TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
    blocks INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS mentions (
    source_id TEXT NOT NULL, entity_id TEXT NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (source_id, entity_id)
) WITHOUT ROWID;
"""
    + _MENTIONS_ENTITY_INDEX
    + """;
CREATE TABLE IF NOT EXISTS pages (
    id TEXT PRIMARY KEY, namespace TEXT NOT NULL, session_id TEXT NOT NULL, number INTEGER NOT NULL,
    first_turn INTEGER NOT NULL, last_turn INTEGER NOT NULL, summary TEXT NOT NULL, topics_json TEXT NOT NULL,
    members_json TEXT NOT NULL DEFAULT '{}'
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS pages_scope ON pages (namespace, session_id, number);
CREATE VIEW IF NOT EXISTS page_blocks (page_id, block_id, position) AS
    SELECT p.id, t.key, t.value FROM pages p, json_each(p.members_json) t;
CREATE TABLE IF NOT EXISTS events (
    namespace TEXT NOT NULL, session_id TEXT NOT NULL, seq INTEGER NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL,
    message_index INTEGER, sha256 TEXT NOT NULL, payload BLOB NOT NULL, block_ids_json TEXT NOT NULL,
    created_at TEXT NOT NULL, PRIMARY KEY (namespace, session_id, seq), UNIQUE (namespace, session_id, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS events_messages ON events (namespace, session_id, message_index)
    WHERE message_index IS NOT NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS text_fts USING fts5 (
    item_id UNINDEXED, namespace UNINDEXED, session_id UNINDEXED, scope, text, pairs, tokenize = 'unicode61'
);
"""
    + _VECTORS_TABLE
    + ';\n'
)

_BLOCK_COLUMNS: Final = (
    'id, session_id, namespace, seq, first_message, last_message, tokens, sha256, messages_json, kind, text, started_at'
)
_MEMENTO_COLUMNS: Final = (
    'id, session_id, namespace, text, tokens, score, verified, iterations, compressor, level, summarizes_json'
)
_IDS_PER_STATEMENT: Final = 500
"""Ids one `get_blocks` / `get_mementos` statement looks up (a bound parameter each, well under SQLite's limit)."""
_FORMAT_1: Final = 'mementograph-sqlite-1'
_FORMAT_2: Final = 'mementograph-sqlite-2'
_FORMAT_3: Final = 'mementograph-sqlite-3'
_FORMAT_4: Final = 'mementograph-sqlite-4'
_FORMAT_5: Final = 'mementograph-sqlite-5'
_FORMAT_6: Final = 'mementograph-sqlite-6'
_FORMAT_7: Final = 'mementograph-sqlite-7'
_FORMAT_8: Final = 'mementograph-sqlite-8'
_FORMAT_9: Final = 'mementograph-sqlite-9'
_OLD_FORMATS: Final = (
    _FORMAT_1, _FORMAT_2, _FORMAT_3, _FORMAT_4, _FORMAT_5, _FORMAT_6, _FORMAT_7, _FORMAT_8, _FORMAT_9,
)  # fmt: skip
_TEXT_RANK: Final = 'bm25(text_fts, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0)'
"""BM25 over the `text` and `pairs` columns: the scope tokens a scoped query adds score nothing."""
_TEXT_CONTENT: Final = '(SELECT id AS rowid, c0 AS item_id, c1 AS namespace, c2 AS session_id FROM text_fts_content)'
"""The small columns of full-text documents, read off FTS5's own content table (`text_fts_content`: `id`, then the
columns in declared order as `c0`, `c1`, ...), a plain B-tree looked up by rowid. Joining ranked hits with
`text_fts` itself sets up an FTS5 cursor per hit: at 100,000 blocks a search of 100 hits took ~1 ms (p50) to ~4 ms
(p95) more that way, on the same results."""
_TEXT_SCOPE_SHARE: Final = 4
"""A namespace holding at most 1/this of the file's documents, and at most this many times `TEXT_MAX_DF`, is
searched by intersecting the query with its scope token, as a session is; a larger one through the whole file's
matches (see `_TEXT_SCOPE_DEPTH`)."""
_TEXT_SCOPE_DEPTH: Final = 2
"""A search in a large namespace first ranks the whole file's matches this many times `k` deep and keeps those in
the namespace; it asks FTS5 for the namespace's own only when other namespaces crowd them."""
_TEXT_FLOOR_SPAN: Final = 4
"""A query of only common words (each in more than `TEXT_MAX_DF` documents) is scored under its rarest word, told
apart by counting up to this many times `TEXT_MAX_DF` (the first word of the query when they all exceed that)."""
_TOKEN_BREAK: Final = re.compile(r'[\W_]+(?=[^\W_])')
"""Where a phrase breaks into one more `unicode61` token: a separator, its opening quote too, then a letter or digit."""
_TEXT_MEMO_SIZE: Final = 8_192
"""Phrase figures kept per state of the full-text index (`SqliteStore._text_memo`); past it, the memo starts over."""


def _view(name: str) -> str:
    """The `CREATE VIEW` statement of `_SCHEMA` named `name`."""
    return next(s for s in _SCHEMA.split(';') if f'CREATE VIEW IF NOT EXISTS {name} ' in s)


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f'PRAGMA table_xinfo({table})')}


def _migrate_from_1(conn: sqlite3.Connection) -> None:
    """Rewrite a format-1 file as format 2, inside the caller's transaction (all of it or none of it); the caller
    then takes it on to format 4 (`_migrate_from_2`, `_migrate_from_3`).

    Blocks and mementos are copied into the new column order with their `rid`s, so the full-text marks in `meta`
    stay valid; each target's `memento_id` / `parent_id` is the first memento (by `rid`) of its namespace that
    summarized it, which is what `memento_of` read from the old link table. The entity index was already built.
    """
    conn.execute('DROP INDEX blocks_scope')
    conn.execute('DROP INDEX mementos_scope')
    conn.execute('DROP INDEX events_messages')
    conn.execute('ALTER TABLE blocks RENAME TO blocks_v1')
    conn.execute('ALTER TABLE mementos RENAME TO mementos_v1')
    # statement by statement: executescript would commit the caller's transaction
    for statement in _SCHEMA.split(';'):
        if statement.strip() and 'CREATE VIEW' not in statement:  # `page_blocks` is still a table here
            conn.execute(statement)
    first_memento = (
        '(SELECT s.memento_id FROM summarizes_v1 s JOIN mementos_v1 m ON m.id = s.memento_id '
        'WHERE s.target_id = {alias}.id AND m.namespace = {alias}.namespace ORDER BY m.rid LIMIT 1)'
    )
    conn.execute('ALTER TABLE summarizes RENAME TO summarizes_v1')
    conn.execute(
        'INSERT INTO blocks (rid, id, namespace, session_id, seq, kind, first_message, last_message, tokens, sha256, '
        'started_at, created_at, memento_id, text, messages_json) '
        'SELECT b.rid, b.id, b.namespace, b.session_id, b.seq, b.kind, b.first_message, b.last_message, b.tokens, '
        f'b.sha256, b.started_at, b.created_at, {first_memento.format(alias="b")}, b.text, b.messages_json '
        'FROM blocks_v1 b ORDER BY b.rid'
    )
    targets: dict[str, list[str]] = {}
    for memento_id, target_id in conn.execute(
        'SELECT memento_id, target_id FROM summarizes_v1 ORDER BY memento_id, position'
    ):
        targets.setdefault(memento_id, []).append(target_id)
    old = conn.execute(
        'SELECT p.rid, p.id, p.namespace, p.session_id, p.tokens, p.score, p.verified, p.iterations, p.compressor, '
        f'p.level, p.created_at, {first_memento.format(alias="p")}, p.text FROM mementos_v1 p ORDER BY p.rid'
    )
    while rows := old.fetchmany(1000):
        conn.executemany(
            'INSERT INTO mementos (rid, id, namespace, session_id, tokens, score, verified, iterations, compressor, '
            'level, created_at, parent_id, summarizes_json, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
            [(*row[:12], json.dumps(targets.get(row[1], [])), row[12]) for row in rows],
        )
    for table in ('blocks_v1', 'mementos_v1', 'summarizes_v1'):
        conn.execute(f'DROP TABLE {table}')
    conn.execute(_view('summarizes'))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (_FORMAT_2,))


def _migrate_from_2(conn: sqlite3.Connection) -> None:
    """Take a format-2 file to format 3, inside the caller's transaction: no row is copied but the pages'; the
    caller then takes it to format 4 (`_migrate_from_3`).

    The new columns are added last, where a fresh file has them. Old blocks have no `mentions` (theirs are in the
    queue, read before any newer block's: `after_rid` 0), so the blocks mark starts past them.
    """
    if 'mentions' not in _columns(conn, 'blocks'):  # a format-1 file's blocks were rebuilt with it
        conn.execute('ALTER TABLE blocks ADD COLUMN mentions BLOB')
    if 'after_rid' not in _columns(conn, 'mention_queue'):
        conn.execute('ALTER TABLE mention_queue ADD COLUMN after_rid INTEGER NOT NULL DEFAULT 0')
    conn.execute("ALTER TABLE pages ADD COLUMN members_json TEXT NOT NULL DEFAULT '{}'")
    conn.execute(
        'UPDATE pages SET members_json = (SELECT json_group_object(b.block_id, b.position) FROM page_blocks b '
        'WHERE b.page_id = pages.id) WHERE id IN (SELECT page_id FROM page_blocks)'
    )
    conn.execute('DROP TABLE page_blocks')
    conn.execute(_view('page_blocks').replace(' IF NOT EXISTS', ''))  # a name taken fails the migration
    for trigger in _PAGE_BLOCKS_TRIGGERS.split('END;')[:-1]:
        conn.execute(trigger.replace(' IF NOT EXISTS', '') + 'END;')
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('mentions_blocks', (SELECT coalesce(max(rid), 0) FROM blocks))"
    )
    conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (_FORMAT_3,))


def _migrate_from_3(conn: sqlite3.Connection) -> None:
    """Take a format-3 file to format 4, inside the caller's transaction: each entity's document frequency
    (`entities.blocks`) counted once from the by-entity index (one pass over it).

    Mentions still pending (past the mark, or queued) are not in `mentions` yet: `_apply_mentions` counts them
    when it indexes them.
    """
    if 'blocks' not in _columns(conn, 'entities'):
        conn.execute('ALTER TABLE entities ADD COLUMN blocks INTEGER NOT NULL DEFAULT 0')
    conn.execute(_RECOUNT)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (_FORMAT_4,))


def _new_text_index(conn: sqlite3.Connection) -> None:
    """Drop the full-text index and make it empty as `_SCHEMA` has it, its marks reset: derived data, which the
    first search indexes again from the archived blocks and mementos."""
    conn.execute('DROP TABLE IF EXISTS text_fts')
    conn.execute(next(s for s in _SCHEMA.split(';') if 'CREATE VIRTUAL TABLE IF NOT EXISTS text_fts' in s))
    conn.execute("DELETE FROM meta WHERE key IN ('fts_blocks', 'fts_mementos')")


def _migrate_from_4(conn: sqlite3.Connection) -> None:
    """Take a format-4 file to format 5, inside the caller's transaction: the full-text index is dropped and made
    again with its `scope` column and the small columns first. It is derived data: the first search after the
    upgrade indexes every block and memento again, from the `fts_*` marks reset to 0 (at 100k blocks, ~20 s once).
    """
    _new_text_index(conn)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (_FORMAT_5,))


def _migrate_from_5(conn: sqlite3.Connection) -> None:
    """Take a format-5 file to format 6, inside the caller's transaction: an empty `vectors` table."""
    for statement in _VECTORS_TABLE.split(';'):
        if statement.strip():
            conn.execute(statement)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (_FORMAT_6,))


def _migrate_from_6(conn: sqlite3.Connection) -> None:
    """Take a format-6 file to format 7, inside the caller's transaction: the blocks' scope index holds their ids
    too, so a session's block ids (what recall filters an entity's postings with) and a block's neighbours are
    read off the index alone, not off ~1,000 scattered block rows (rebuilt once: at 100k blocks 1 s warm, 18 s
    from a cold disk)."""
    if 'id' not in {row[2] for row in conn.execute('PRAGMA index_info(blocks_scope)')}:
        conn.execute('DROP INDEX IF EXISTS blocks_scope')
        conn.execute(next(s for s in _SCHEMA.split(';') if 'CREATE INDEX IF NOT EXISTS blocks_scope' in s))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (_FORMAT_7,))


def _migrate_from_8(conn: sqlite3.Connection) -> None:
    """Take a format-7 or 8 file to format 9, inside the caller's transaction: the full-text index is dropped and
    made again with its `pairs` column (`token_pairs`), which a search for a path or a dotted name reads instead of
    walking the documents of each of its common tokens. Derived data, as in `_migrate_from_4`: the first search
    after the upgrade indexes every block and memento again (at 100k blocks, 78 s once here), with each Han
    ideograph and Hiragana character a word (`spaced_ideographs`), which format 7 did not do."""
    _new_text_index(conn)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (_FORMAT_9,))


def _migrate_from_9(conn: sqlite3.Connection) -> None:
    """Take a format-9 file to format 10, inside the caller's transaction: a block's full-text row no longer holds
    the memory tools' calls and answers (`searchable_messages`), which quote the archive. Only the rows that name a
    memory tool (a call is indexed as `recall({...})`) are candidates; their blocks are read, and those holding such
    a call are indexed again under the same rowid. The other rows, the mementos' and the blocks not indexed yet
    (indexed the new way in their turn) are left as they are, so the upgrade costs a read of the candidates only.
    """
    from ..._echoes import MEMORY_TOOLS, searchable_messages  # pydantic-ai: only for this upgrade
    from ..._messages import deserialize_messages, message_text

    names = ' OR '.join(f'"{name.replace("_", " ")}"' for name in sorted({*MEMORY_TOOLS, 'mementograph'}))
    candidates = conn.execute(
        'SELECT rowid, item_id, namespace, session_id FROM text_fts WHERE text_fts MATCH ? '
        "AND (item_id LIKE 'blk!_%' ESCAPE '!' OR item_id LIKE 'prt!_%' ESCAPE '!')",
        (f'text : ({names})',),
    ).fetchall()
    for rowid, item, namespace, session in candidates:
        row = conn.execute('SELECT messages_json FROM blocks WHERE id = ?', (item,)).fetchone()
        if row is None:
            continue
        try:
            messages = deserialize_messages(_stored_bytes(row[0]))
        except ValueError:  # altered bytes: left as indexed (`mementograph verify` names the block)
            continue
        searchable = searchable_messages(messages)
        if searchable is messages:
            continue
        text = '\n'.join(map(message_text, searchable))
        conn.execute('DELETE FROM text_fts WHERE rowid = ?', (rowid,))
        conn.execute(
            'INSERT INTO text_fts (rowid, item_id, namespace, session_id, scope, text, pairs) '
            'VALUES (?, ?, ?, ?, ?, ?, ?)',
            (rowid, item, namespace, session, _scope_tokens(namespace, session), *text_columns(text)),
        )
    conn.execute("UPDATE meta SET value = ? WHERE key = 'format'", (FORMAT,))


def _scope_token(namespace: str, session_id: str | None = None) -> str:
    """The full-text token that stands for a namespace (`n...`) or a session of it (`s...`): one `unicode61` token
    (letters and digits), so FTS5 can intersect a query with a scope instead of reading every match's columns."""
    parts = (namespace,) if session_id is None else (namespace, session_id)
    digest = hashlib.sha256('\x1f'.join(parts).encode('utf-8', 'surrogatepass')).hexdigest()[:16]
    return ('n' if session_id is None else 's') + digest


def _scope_tokens(namespace: str, session_id: str) -> str:
    """The `scope` column of a document: its namespace's token and its session's."""
    return f'{_scope_token(namespace)} {_scope_token(namespace, session_id)}'


_ID_BATCH: Final = 500
"""Ids bound per `IN (...)` list: far under SQLite's bound-parameter limit, few statements for a long list."""
_QUEUE_BATCH: Final = 500
"""Evictions (block rows or `mention_queue` rows) whose mentions are indexed per transaction."""
_TEXT_BATCH: Final = 2_000
"""Mementos and blocks the full-text index takes in per transaction when it catches up (~1 s of work here; 4,000
until the `pairs` column made each document cost ~1.8x as much to index)."""
_CATCH_UP_PAUSE: Final = 0.1
"""Seconds an index catch-up (full text, entities) lets the write lock go between full batches: SQLite's busy
handler retries a waiting writer at least every 100 ms, so the pause lets it in (a lock let go for an instant
starved it: measured here). A catch-up of one batch, the usual case, never pauses."""
_REBUILD_QUEUE_ROWS: Final = 1000
"""A backlog this long may be worth rebuilding the by-entity index for (`_index_mentions`)."""
_REBUILD_BATCHES: Final = 4
"""`_QUEUE_BATCH`es per transaction while the by-entity index is rebuilt: with no index to keep, a batch is ~0.5 s
of work, so another writer waits ~2 s at most, not the whole rebuild."""
_INSERT_SESSION: Final = 'INSERT OR IGNORE INTO sessions (namespace, id, created_at) VALUES (?, ?, ?)'
_INSERT_BLOCK: Final = (
    'INSERT INTO blocks (id, namespace, session_id, seq, kind, first_message, last_message, tokens, sha256, '
    'started_at, created_at, memento_id, text, messages_json, mentions) '
    'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING'
)
_QUEUE_MENTIONS: Final = (
    'INSERT INTO mention_queue (namespace, data, after_rid) VALUES (?, ?, (SELECT coalesce(max(rid), 0) FROM blocks))'
)
_UPSERT_PAGE: Final = (
    'INSERT INTO pages (id, namespace, session_id, number, first_turn, last_turn, summary, topics_json, members_json) '
    'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET '
    + ', '.join(
        f"{column} = CASE pages.summary WHEN '' THEN excluded.{column} ELSE pages.{column} END"
        for column in ('first_turn', 'last_turn', 'summary', 'topics_json')
    )
    + ', members_json = json_patch(excluded.members_json, pages.members_json)'  # a member keeps its first position
)
"""A page is written open (empty summary) and extended until it closes; once closed, it keeps the turns, summary
and topics it closed with: a record computed by another run from the page as it was before (the same blocks, a
prefix of them, a memento of its own) neither reopens it nor rewrites its line of the index."""
_INSERT_TEXT: Final = (
    'INSERT INTO text_fts (item_id, namespace, session_id, scope, text, pairs) VALUES (?, ?, ?, ?, ?, ?)'
)
_MENTIONS_MARK: Final = 'mentions_blocks'
"""`meta` key: the `rid` of the last block whose `mentions` are in the entity index."""
_INSERT_MEMENTO: Final = (
    'INSERT INTO mementos (id, namespace, session_id, tokens, score, verified, iterations, compressor, level, '
    'created_at, parent_id, summarizes_json, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) '
    'ON CONFLICT (id) DO NOTHING'
)

_LINK_BLOCK: Final = 'UPDATE blocks SET memento_id = ? WHERE id = ? AND namespace = ? AND memento_id IS NULL'
_LINK_MEMENTO: Final = 'UPDATE mementos SET parent_id = ? WHERE id = ? AND namespace = ? AND parent_id IS NULL'


_FIELDS: Final = b'\x02'
"""First byte of the field encoding of mentions; the JSON encoding (format 2's queue rows) is a bare zlib stream."""


def _encode_mentions(mentions: Sequence[Mention]) -> bytes:
    """An eviction's `MENTIONS` in order, compressed (entity names repeat: ~8 KB becomes ~1.5 KB on the page).

    Encoding sits on the eviction path (~120 mentions a block), so the usual form is five NUL-separated fields a
    mention, `source_id` left empty when it repeats the previous one: a join is a fraction of a `json.dumps`. A
    string holding NUL itself (or an empty source id) cannot be told apart in it, so then the JSON form is used.
    """
    fields: list[str] = []
    source = None
    for mention in mentions:
        entity = mention.entity
        if mention.source_id == source:
            fields += ('', entity.key, entity.name, entity.kind, str(mention.count))
        else:
            source = mention.source_id
            # an empty source id would read as a repeat: a NUL in its place sends the eviction to JSON below
            fields += (source or '\x00', entity.key, entity.name, entity.kind, str(mention.count))
    text = '\x00'.join(fields)
    if text.count('\x00') == len(fields) - 1:
        return _FIELDS + zlib.compress(text.encode('utf-8', 'surrogatepass'), 1)
    return _encode_mentions_json(mentions)


def _encode_mentions_json(mentions: Sequence[Mention]) -> bytes:
    """Grouped by source: `[[source_id, key, name, kind, count, key, ...], ...]`, as format 2 queued them."""
    groups: list[list[str | int]] = []
    group: list[str | int] = []
    source = None
    for mention in mentions:
        if mention.source_id != source:
            source = mention.source_id
            group = [source]
            groups.append(group)
        entity = mention.entity
        group += (entity.key, entity.name, entity.kind, mention.count)
    return zlib.compress(json.dumps(groups, separators=(',', ':')).encode(), 1)


def _decode_mentions(data: bytes) -> Iterator[tuple[str, str, str, str, int]]:
    """`(source_id, key, name, kind, count)` of an eviction's encoded mentions, in the order they were written."""
    if data[:1] == _FIELDS:
        fields = zlib.decompress(data[1:]).decode('utf-8', 'surrogatepass').split('\x00')
        source = ''
        for i in range(0, len(fields), 5):
            source = fields[i] or source
            yield source, fields[i + 1], fields[i + 2], fields[i + 3], int(fields[i + 4])
        return
    for group in json.loads(zlib.decompress(data)):
        source_id = group[0]
        for i in range(1, len(group), 4):
            yield source_id, group[i], group[i + 1], group[i + 2], group[i + 3]


_entity_record: Final = lru_cache(maxsize=65_536)(EntityRecord)
"""`EntityRecord(key, name, kind)` (positional), built once per distinct value: a recall reads ~450 entity rows
(its seeds' entities), and building a frozen dataclass costs several times a cache hit."""


def _version(conn: sqlite3.Connection) -> tuple[int, int]:
    """Rows this connection changed and commits other connections made: the same twice, nothing was written
    between (a check that a derived index is still current, in one statement instead of a few)."""
    return conn.total_changes, conn.execute('PRAGMA data_version').fetchone()[0]


_KEY: Final = itemgetter(0)
_COUNT: Final = itemgetter(1)
_MEMBERS_PAGE: Final = 256
"""Postings `_members_only` reads at a time."""
_MEMBERS_MAX: Final = 20_000
"""Blocks of a session whose ids `SqliteStore._session_members` keeps (~2 MB); a larger session is joined."""


def _postings(conn: sqlite3.Connection, query: str, params: Sequence[Any]) -> list[tuple[str, int]]:
    """`(source_id, count)` rows of a postings `query`, most mentions first (`_json_rows`)."""
    rows = [(source_id, count) for source_id, count in _json_rows(conn, query, params, 'source_id, count')]
    rows.sort(key=lambda row: (-row[1], row[0]))
    return rows


def _members_only(
    conn: sqlite3.Connection, entity_id: str, members: frozenset[str], limit: int
) -> list[tuple[str, int]]:
    """An entity's first `limit` block postings among `members`, most mentions first: the by-entity index read in
    pages of `_MEMBERS_PAGE`, each a seek past the last posting read, up to the page that completes them."""
    blocks = "entity_id = ? AND source_id >= 'blk_' AND source_id < 'blk`'"
    kept: list[tuple[str, int]] = []
    page = _postings(
        conn,
        f'SELECT source_id, count FROM mentions WHERE {blocks} ORDER BY count DESC, source_id LIMIT ?',
        (entity_id, _MEMBERS_PAGE),
    )
    while True:
        kept += [(source_id, count) for source_id, count in page if source_id in members]
        if len(kept) >= limit or len(page) < _MEMBERS_PAGE:
            return kept[:limit]
        last_id, last_count = page[-1]
        # the rest of the last count's postings, then the lower counts: two seeks on the index, no rescan
        page = _postings(
            conn,
            f'SELECT * FROM (SELECT source_id, count FROM mentions WHERE {blocks} AND count = ? AND source_id > ? '
            f'ORDER BY source_id LIMIT ?) UNION ALL SELECT * FROM (SELECT source_id, count FROM mentions WHERE '
            f'{blocks} AND count < ? ORDER BY count DESC, source_id LIMIT ?)',
            (entity_id, last_count, last_id, _MEMBERS_PAGE, entity_id, last_count, _MEMBERS_PAGE),
        )[:_MEMBERS_PAGE]


def text_columns(text: str) -> tuple[str, str]:
    """A document's `text` and `pairs` columns: its words as FTS5 should split them (`spaced_ideographs`), and the
    token pairs of its compound words (`token_pairs`) in that form (`配置config.yaml` is `配 置 config.yaml`)."""
    spaced = spaced_ideographs(text)
    return spaced, token_pairs(spaced)


def _phrase(term: str) -> str:
    """A search term as an FTS5 phrase: a compound word's as the phrase of its token pairs (`token_pairs`)."""
    if pairs := term_pairs(term):
        return f'pairs : "{pairs}"'
    return '"' + spaced_ideographs(term).replace('"', '""') + ('" *' if is_prefix_term(term) else '"')


def _text_df(conn: sqlite3.Connection, memo: dict[tuple[str, str, int], int], phrase: str, cap: int) -> int:
    """The documents holding an FTS5 `phrase`, counted up to `cap + 1` (a bounded read), from `memo` if known."""
    return _text_dfs(conn, memo, [(phrase, cap)])[0]


def _text_dfs(
    conn: sqlite3.Connection, memo: dict[tuple[str, str, int], int], wanted: Sequence[tuple[str, int]]
) -> list[int]:
    """`_text_df` of each `(phrase, cap)`, those not in `memo` counted in one statement (per 200): one step, where a
    count each was a return to the GIL each, waited for while the graph half of a recall runs Python
    (`_text_rows`)."""
    missing = list(dict.fromkeys(('df', phrase, cap) for phrase, cap in wanted if ('df', phrase, cap) not in memo))
    for start in range(0, len(missing), 200):
        chunk = missing[start : start + 200]
        count = '(SELECT count(*) FROM (SELECT 1 FROM text_fts WHERE text_fts MATCH ? LIMIT ?))'
        counts = conn.execute(
            f'SELECT {", ".join([count] * len(chunk))}',
            [value for _, phrase, cap in chunk for value in (phrase, cap + 1)],
        ).fetchone()
        memo.update(zip(chunk, counts, strict=True))
    return [memo['df', phrase, cap] for phrase, cap in wanted]


def _last_message_index(conn: sqlite3.Connection, namespace: str, session_id: str) -> int:
    """The highest `message_index` in a session's log, or -1."""
    row = conn.execute(
        'SELECT max(message_index) FROM events WHERE namespace = ? AND session_id = ? '
        'AND message_index IS NOT NULL',  # the condition lets the (partial) events_messages index answer
        (namespace, session_id),
    ).fetchone()
    return -1 if row[0] is None else int(row[0])


_TextRow = tuple[int, float, str | None, str | None]
"""A ranked full-text document: rowid, FTS5 rank (lower is better), item id (`None`: out of scope), and what the
item summarizes when it is a memento (its `summarizes_json`)."""


def _scoped_text(
    conn: sqlite3.Connection, match: str, namespace: str, session_id: str | None, k: int
) -> list[_TextRow]:
    """The best `k` documents of a namespace or session matching `match` (`_text_rows`)."""
    where, params = _scope_sql(namespace, session_id, 't.')  # a hash collision of scope tokens is ruled out here
    return _text_rows(
        conn,
        f'SELECT r.rowid AS rowid, r.rank AS rank, t.item_id AS item_id FROM (SELECT rowid, {_TEXT_RANK} AS rank '
        f'FROM text_fts WHERE text_fts MATCH ?) r JOIN {_TEXT_CONTENT} t ON t.rowid = r.rowid AND {where} '
        'ORDER BY r.rank, r.rowid LIMIT ?',
        [f'scope:{_scope_token(namespace, session_id)} AND ({match})', *params, k],
    )


def _text_rows(conn: sqlite3.Connection, ranked: str, params: Sequence[Any]) -> list[_TextRow]:
    """The rows of `ranked` (`SELECT rowid, rank, item_id ...`), with each memento's blocks, as one result row.

    A fused recall runs its search in a thread beside the graph reads, and a thread coming back from SQLite waits
    for the GIL until the other lets it go, up to the switch interval (5 ms) when the other is running Python. Read
    row by row, a search stepped ~400 times (a ranking 200 deep, its scope, its mementos); on its own with a
    Python-bound thread beside it, the same search took ~50 times as long. One aggregate row is one step. The ranks
    travel as 17 significant digits (`%!.17g`), which give back the same doubles (checked on SQLite 3.40 and 3.51
    for random values from 1e-30 to 1e30; FTS5's ranks stay in that range, its IDF floored at 1e-6).
    """
    row = conn.execute(
        "SELECT json_group_array(json_array(hit.rowid, printf('%!.17g', hit.rank), hit.item_id, CASE WHEN "
        "substr(hit.item_id, 1, 4) = 'mem_' THEN (SELECT m.summarizes_json FROM mementos m WHERE m.id = hit.item_id) "
        f'END)) FROM ({ranked}) AS hit',
        params,
    ).fetchone()
    rows = [(int(rowid), float(rank), item_id, summarizes) for rowid, rank, item_id, summarizes in json.loads(row[0])]
    rows.sort(key=lambda r: (r[1], r[0]))  # an aggregate's order is not promised
    return rows


def _json_rows(conn: sqlite3.Connection, query: str, params: Sequence[Any], columns: str) -> list[list[Any]]:
    """The rows of `query` (its `columns`, named in its select list) as one JSON array: one step for SQLite.

    Fetched row by row, every row is a step that lets the GIL go and takes it back, and the recall reads run in two
    threads at once (`_text_rows`): 1,758 mention rows read in 4.2 ms alone took 12.5 ms beside another thread
    fetching rows, 5.6 ms as one array. The array's order is not promised: callers that need one sort.
    """
    text = conn.execute(f'SELECT json_group_array(json_array({columns})) FROM ({query})', params).fetchone()[0]
    rows: list[list[Any]] = json.loads(text)
    return rows


def _entity_ranges(namespace: str, entity_classes: Collection[str] | None) -> tuple[str, list[str]]:
    """A condition on `m.entity_id` that keeps the mentions of a namespace's entities of these classes (`None`: of
    any class), and its parameters. An entity id is the namespace's prefix and the entity's key
    (`namespace:class:value`), so a class is a range of ids: read off the mentions, with no entity row joined."""
    prefix = entity_id_for(namespace, '')
    bounds = (
        [(prefix, prefix + '\U0010ffff')]
        if entity_classes is None
        else [(f'{prefix}{cls}:', f'{prefix}{cls};') for cls in sorted(entity_classes)]
    )
    condition = ' OR '.join(['m.entity_id >= ? AND m.entity_id < ?'] * len(bounds)) or '0'
    return condition, [bound for pair in bounds for bound in pair]


def _summarized(summarizes_json: str | None) -> tuple[str, ...]:
    """The block ids a memento hit summarizes (none if the memento is gone)."""
    return () if summarizes_json is None else tuple(json.loads(summarizes_json))


def _rarest(
    conn: sqlite3.Connection,
    memo: dict[tuple[str, str, int], int],
    phrases: Sequence[str],
    indexes: list[int],
    cap: int,
) -> int:
    """The index of the phrase in fewest documents (counted up to `cap`; the first index on a tie).

    The one-token phrases are counted first, and each count stops at the fewest documents found so far: a phrase of
    several common tokens costs a walk over the documents holding them all, shorter the sooner it stops.
    """
    best_df, best = cap + 1, min(indexes)
    for index in sorted(indexes, key=lambda i: (len(_TOKEN_BREAK.findall(phrases[i])), i)):
        df = _text_df(conn, memo, phrases[index], min(cap, best_df))
        if (df, index) < (best_df, best):
            best_df, best = df, index
    return best


def _read_only_hint(exc: BaseException) -> str:
    """Why a reader writes, when the file is read-only to this process: evictions leave the full-text and entity
    indexing to the first read that needs it, and that read writes the indexes once."""
    if 'readonly' not in str(exc):
        return ''
    return (
        '. The file is read-only to this process, and a first read brings its search indexes up to date (once): read '
        'it once as a user who can write it (e.g. `mementograph stats --store ...`), or make it writable'
    )


def _primary_code(exc: BaseException) -> int | None:
    """The primary SQLite result code of an error SQLite raised (`None` for one raised by Python code)."""
    code = getattr(exc, 'sqlite_errorcode', None)
    return code & 0xFF if isinstance(code, int) else None


def _stored_bytes(value: object) -> bytes:
    """A block's stored messages as bytes. The column is a BLOB; a file edited by another tool may hold text there
    (read as its UTF-8 bytes) or anything else (read as no bytes), and the sha256 check then says whether it is
    still the archived block, instead of a crash."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return value.encode('utf-8', 'surrogatepass') if isinstance(value, str) else b''


def _block(row: sqlite3.Row) -> BlockRecord:
    return BlockRecord(
        id=row['id'],
        session_id=row['session_id'],
        namespace=row['namespace'],
        seq=row['seq'],
        first_message=row['first_message'],
        last_message=row['last_message'],
        tokens=row['tokens'],
        sha256=row['sha256'],
        messages_json=_stored_bytes(row['messages_json']),
        kind=row['kind'],
        text=row['text'],
        started_at=row['started_at'],
    )


def _scope_sql(namespace: str | None, session_id: str | None, prefix: str = '') -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if namespace is not None:
        clauses.append(f'{prefix}namespace = ?')
        params.append(namespace)
    if session_id is not None:
        clauses.append(f'{prefix}session_id = ?')
        params.append(session_id)
    return (' AND '.join(clauses) or '1 = 1'), params


def _block_scope_sql(namespace: str, session_id: str | None, kind: BlockKind | None) -> tuple[str, list[Any]]:
    """`_scope_sql` for blocks, of one kind unless `kind` is `None`."""
    where, params = _scope_sql(namespace, session_id)
    if kind is not None:
        where += ' AND kind = ?'
        params.append(kind)
    return where, params


class SqliteStore:
    """Graph store on one SQLite file (or in memory).

    Block text is not stored: the full-text index renders it from the archived messages, lazily, at the first
    search after an eviction (`BlockRecord.text` reads back empty); entity mentions likewise wait, encoded on the
    eviction's block row (or in `mention_queue`), until the first entity read. One eviction is one `BEGIN IMMEDIATE ... COMMIT` transaction; WAL
    with `synchronous=FULL` syncs the commit to the disk before `COMMIT` returns, so a process killed, or a machine
    losing power, after it loses nothing and one killed before leaves nothing: the block leaves the live context
    only once its archive is on the disk (`NORMAL` would leave the last commits to the OS's writeback). Another process writing the same file is waited for up to `busy_timeout` seconds, then `StoreBusyError`
    names the file.
    """

    def __init__(self, path: str | Path | None, *, uri: str | None = None, busy_timeout: float = DEFAULT_BUSY_TIMEOUT):
        """Open (and create if needed) the store.

        Args:
            path: the database file, or `None` for a private in-memory database.
            uri: the URI to report as `uri`.
            busy_timeout: seconds to wait for another writer before `StoreBusyError`.
        """
        self._path = None if path is None else Path(path).expanduser()
        self._uri = uri or ('memory://' if self._path is None else f'sqlite://{self._path}')
        self._busy_timeout = busy_timeout
        self._lock = threading.RLock()
        self._conn = self._connect()
        self._file_identity = self._identity()
        self._search_lock = threading.Lock()
        self._search_conn: sqlite3.Connection | None = None
        # derived state, current while `_version` (this connection's changes, others' commits) stays the same
        self._mentions_current: tuple[int, int] | None = None
        self._text_current: tuple[int, int] | None = None
        self._text_seen: int | None = None  # the search connection's `data_version` when the index was current
        self._graph_cache: tuple[tuple[str, int, int], Any] | None = None
        self._total_blocks_cache: tuple[tuple[str, int, int], int] | None = None
        self._members_cache: dict[tuple[str, str, int, int], frozenset[str] | None] = {}
        # full-text figures (bounded document frequencies, floors) for one state of the FTS5 index: see `_text_memo`
        self._text_memo_state: tuple[bytes, int] | None = None
        self._text_memo_values: dict[tuple[str, str, int], int] = {}

    # -- connection -------------------------------------------------------------------------------------------

    def _where(self) -> str:
        return 'the in-memory store' if self._path is None else str(self._path)

    def _corrupt(self, message: str, exc: BaseException) -> StoreError:
        """`StoreCorruptError` when SQLite found the file damaged, else `StoreUnavailableError`, with `message`."""
        if _primary_code(exc) in _CORRUPT_CODES:
            return StoreCorruptError(message, path=self._where())
        return StoreUnavailableError(message)

    def _disk_full(self, exc: BaseException) -> str:
        """What to add to the message of a failed call when a full disk is why (else ''): SQLite's own words are
        "database or disk is full" or only "disk I/O error", and neither names the file or says what to do."""
        code = _primary_code(exc)
        if self._path is None or code not in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR):
            return ''
        try:
            free: int | None = shutil.disk_usage(self._path.parent).free
        except OSError:
            free = None
        if free is not None and free < _DISK_ALMOST_FULL:
            return (
                f'; the disk holding {self._path} is full ({free:,} bytes free): free space on it, or move the store '
                'to another disk, and retry'
            )
        if code == sqlite3.SQLITE_FULL:
            now = '' if free is None else f' ({free:,} bytes free now)'
            return (
                f'; the disk holding {self._path} was full{now}, or the file reached its page limit (PRAGMA '
                'max_page_count): free space on it and retry'
            )
        return ''

    def _connect(self) -> sqlite3.Connection:
        if self._path is None:
            target = ':memory:'
        else:
            if self._path.is_dir():
                raise StoreUnavailableError(f'{self._path} is a directory, not a SQLite database file')
            try:
                self._path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreUnavailableError(f'cannot create the directory for {self._path}: {exc}') from exc
            target = str(self._path)
        try:
            conn = sqlite3.connect(target, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f'cannot open {self._where()}: {exc}') from exc
        conn.row_factory = sqlite3.Row
        try:
            self._set_up(conn)
        except sqlite3.OperationalError as exc:
            conn.close()
            if 'locked' in str(exc) or 'busy' in str(exc):
                raise StoreBusyError(self._busy_message()) from exc
            if full := self._disk_full(exc):
                raise StoreUnavailableError(f'cannot use {self._where()}: {exc}{full}') from exc
            if self._path is not None and not os.access(self._path.parent, os.W_OK):
                raise StoreUnavailableError(
                    f'cannot use {self._where()}: {exc}; the store writes its -wal and -shm files beside the database '
                    f'(even to read it), and {self._path.parent} is read-only: copy the file to a writable directory'
                ) from exc
            raise StoreUnavailableError(f'cannot use {self._where()}: {exc}') from exc
        except StoreError:
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise self._corrupt(
                f'{self._where()} is not a mementograph SQLite database, or it is corrupt ({exc}); '
                'move it aside or choose another --store',
                exc,
            ) from exc
        return conn

    def _set_up(self, conn: sqlite3.Connection) -> None:
        """Pragmas and schema, tried again within the busy timeout while another process is setting up the same
        new file: switching a new file to WAL, or the first reads racing its schema's creation, get SQLITE_BUSY at
        once, without SQLite's busy handler."""
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                self._file_format(conn)  # another application's file is refused before WAL would change it for good
                conn.execute('PRAGMA journal_mode = WAL')
                conn.execute(
                    'PRAGMA synchronous = FULL'
                )  # a commit reaches the disk before the block leaves the context
                conn.execute('PRAGMA cache_size = -65536')  # 64 MiB: index pages stay hot at 100k blocks
                conn.execute('PRAGMA secure_delete = ON')  # deleted rows are zeroed, not left readable in the file
                conn.execute(f'PRAGMA journal_size_limit = {_WAL_SIZE_LIMIT}')
                self._init_schema(conn)
                return
            except sqlite3.OperationalError as exc:
                if not ('locked' in str(exc) or 'busy' in str(exc)) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    @staticmethod
    def _file_format(conn: sqlite3.Connection) -> str | None:
        """The file's mementograph format, `None` for a new (empty) file; `sqlite3.DatabaseError` for another
        application's file. Reads only, so a file that is refused is left as it was."""
        # one statement, so one snapshot: another process creating the schema between two reads would make the
        # file look like another application's
        tables, has_meta = conn.execute(
            "SELECT count(*), coalesce(sum(name = 'meta'), 0) FROM sqlite_master WHERE type = 'table'"
        ).fetchone()
        if not has_meta and tables:
            raise sqlite3.DatabaseError('it holds tables of another application')
        if not has_meta:
            return None
        fmt = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if fmt is None or not str(fmt[0]).startswith('mementograph-sqlite-'):
            raise sqlite3.DatabaseError(f'unknown format {fmt[0] if fmt else None!r}, expected {FORMAT!r}')
        return str(fmt[0])

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        fmt = self._file_format(conn)
        if fmt in _OLD_FORMATS:
            self._migrate(conn, fmt)
            return
        if fmt is not None and fmt != FORMAT:
            raise StoreUnavailableError(
                f'{self._where()} holds format {fmt!r}, which a newer mementograph wrote (this one reads '
                f'{FORMAT!r} and migrates {", ".join(map(repr, reversed(_OLD_FORMATS)))}); '
                'upgrade mementograph or choose another --store'
            )
        if fmt is not None:
            return
        # executescript commits any open transaction first, so the whole setup is one script.
        try:
            conn.executescript(
                f"BEGIN IMMEDIATE;\n{_SCHEMA}\n{_PAGE_BLOCKS_TRIGGERS}\nINSERT OR IGNORE INTO meta (key, value) VALUES ('format', '{FORMAT}');\nCOMMIT;"
            )
        except BaseException:
            if conn.in_transaction:
                conn.execute('ROLLBACK')
            raise

    def _migrate(self, conn: sqlite3.Connection, old: str) -> None:
        """Migrate a format-1 to 9 file in one transaction: a failure (or a kill) leaves it as it was, whole."""
        conn.execute('BEGIN IMMEDIATE')
        try:
            fmt = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            # another process may have migrated it while we waited
            if fmt is not None and fmt[0] == _FORMAT_1:
                _migrate_from_1(conn)
            if fmt is not None and fmt[0] in (_FORMAT_1, _FORMAT_2):
                _migrate_from_2(conn)
            if fmt is not None and fmt[0] in (_FORMAT_1, _FORMAT_2, _FORMAT_3):
                _migrate_from_3(conn)
            if fmt is not None and fmt[0] in (_FORMAT_1, _FORMAT_2, _FORMAT_3, _FORMAT_4):
                _migrate_from_4(conn)
            if fmt is not None and fmt[0] in (_FORMAT_1, _FORMAT_2, _FORMAT_3, _FORMAT_4, _FORMAT_5):
                _migrate_from_5(conn)
            if fmt is not None and fmt[0] in _OLD_FORMATS[:6]:
                _migrate_from_6(conn)
            if fmt is not None and fmt[0] in _OLD_FORMATS[:8]:
                _migrate_from_8(conn)
            if fmt is not None and fmt[0] in _OLD_FORMATS:
                _migrate_from_9(conn)
            conn.execute('COMMIT')
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute('ROLLBACK')
            if isinstance(exc, sqlite3.Error):
                raise type(exc)(f'migrating it from {old!r} to {FORMAT!r} failed, nothing changed: {exc}') from exc
            raise

    def _busy_message(self) -> str:
        return (
            f'{self._where()} is locked by another writer and stayed locked for {self._busy_timeout:g} s; '
            'retry when it finishes, or raise the wait with ?busy_timeout=SECONDS in the store URI'
        )

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._read_errors():
            yield self._conn

    @contextmanager
    def _read_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            if 'locked' in str(exc) or 'busy' in str(exc):
                raise StoreBusyError(self._busy_message()) from exc
            raise StoreUnavailableError(f'reading {self._where()} failed: {exc}{self._disk_full(exc)}') from exc
        except sqlite3.ProgrammingError as exc:  # a misuse, e.g. a closed store: not the file's fault
            raise StoreUnavailableError(f'reading {self._where()} failed: {exc}') from exc
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(f'{self._where()} is corrupt or unreadable: {exc}', exc) from exc

    @contextmanager
    def _search(self) -> Iterator[sqlite3.Connection]:
        """The connection full-text searches run on: a second, read-only one for a file store, in one read
        transaction (one snapshot for the search's few statements).

        FTS5 scores in C with the GIL released, so on its own connection a search overlaps the graph reads `recall`
        makes meanwhile on the main one (WAL lets readers run beside each other and beside a writer). An in-memory
        database has only the one connection.
        """
        if self._path is None:
            with self._read() as conn:
                yield conn
            return
        with self._search_lock, self._read_errors():
            conn = self._search_connection()
            conn.execute('BEGIN')
            try:
                yield conn
            finally:
                conn.execute('COMMIT')

    def _search_connection(self) -> sqlite3.Connection:
        """The file store's search connection, opened on first use (hold `_search_lock`)."""
        if self._search_conn is None:
            conn = sqlite3.connect(
                str(self._path), timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute('PRAGMA query_only = ON')
            conn.execute('PRAGMA cache_size = -65536')
            self._search_conn = conn
        return self._search_conn

    def _index_text_for_search(self) -> None:
        """`_index_text`, skipped while the search connection has seen no commit since the index was current.

        `_index_text` asks the main connection, under the lock the graph reads hold: a fused recall's search, in a
        thread beside them, waited there for a read to finish (3.7 ms a recall on average at 100k blocks, up to
        24). The search connection's `data_version` changes with every commit of another connection, this
        process's main one included, and it is read before the check, so a commit made during the check is seen
        by the next search.
        """
        if self._path is None:
            self._index_text()
            return
        with self._search_lock, self._read_errors():
            seen = self._search_connection().execute('PRAGMA data_version').fetchone()[0]
        if seen != self._text_seen:
            self._index_text()
            self._text_seen = seen

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            self._check_file_identity()
            try:
                conn.execute('BEGIN IMMEDIATE')
            except sqlite3.OperationalError as exc:
                if 'locked' in str(exc) or 'busy' in str(exc):
                    raise StoreBusyError(self._busy_message()) from exc
                raise StoreUnavailableError(
                    f'cannot write {self._where()}: {exc}{_read_only_hint(exc)}{self._disk_full(exc)}'
                ) from exc
            except sqlite3.ProgrammingError as exc:  # a misuse, e.g. a closed store: not the file's fault
                raise StoreUnavailableError(f'cannot write {self._where()}, nothing was written: {exc}') from exc
            try:
                yield conn
                conn.execute('COMMIT')
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute('ROLLBACK')
                if isinstance(exc, StoreError):
                    raise
                if isinstance(exc, sqlite3.OperationalError) and ('locked' in str(exc) or 'busy' in str(exc)):
                    raise StoreBusyError(self._busy_message()) from exc
                if isinstance(exc, sqlite3.Error):
                    raise self._corrupt(
                        f'writing {self._where()} failed, nothing was written: '
                        f'{exc}{_read_only_hint(exc)}{self._disk_full(exc)}',
                        exc,
                    ) from exc
                raise

    def _identity(self) -> tuple[int, int] | None:
        """The database file's `(device, inode)` (`None` in memory, or when it cannot be read)."""
        if self._path is None:
            return None
        try:
            found = os.stat(self._path)
        except OSError:
            return None
        return found.st_dev, found.st_ino

    def file_replaced(self) -> bool:
        """Whether the file at the store's path is no longer the one it opened (deleted, or replaced: restored from
        a backup, moved aside): the store then refuses to write, and the path must be opened again."""
        return self._file_identity is not None and self._identity() != self._file_identity

    def _check_file_identity(self) -> None:
        """Refuse to write once the file was deleted or replaced under the open connection: SQLite would go on
        writing to the unlinked file, and every eviction after that would vanish when the store is closed."""
        if self.file_replaced():
            raise StoreUnavailableError(
                f'{self._path} was deleted or replaced while this store had it open; nothing was written. '
                'Open the store again (a new run, or open_store) to write to the file now at that path.'
            )

    @property
    def uri(self) -> str:
        return self._uri

    @property
    def path(self) -> Path | None:
        """The database file, or `None` in memory."""
        return self._path

    def close(self) -> None:
        with self._search_lock:
            if self._search_conn is not None:
                self._search_conn.close()
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f'SqliteStore({self._uri!r})'

    # -- writes -----------------------------------------------------------------------------------------------

    def write_eviction(self, eviction: Eviction) -> None:
        """One transaction; see the schema notes for why each link lives where it does.

        `SUMMARIZES` is the memento's `summarizes_json`; reversed, it is the target's `memento_id` (a block) or
        `parent_id` (a memento): the first memento of the namespace written with the target present, as on
        Neo4j, where the edge exists only if the target did. `MENTIONS`, encoded, ride in the eviction's first new
        block row (else a `mention_queue` row placed after the last block) and reach the entity index at the next
        read that needs it, in write order, with the same first-write-wins outcome.
        """
        created = now_iso()
        ns, sid = eviction.namespace, eviction.session_id
        first: dict[str, str] = {}  # target id -> the first memento of this eviction that summarizes it
        for memento in eviction.mementos:
            for target in memento.summarizes:
                first.setdefault(target, memento.id)
        queued = _encode_mentions(eviction.mentions) if eviction.mentions else None
        with self._write() as conn:
            conn.execute(_INSERT_SESSION, (ns, sid, created))
            linked: set[str] = set()  # targets whose row this eviction wrote, with its pointer
            for block in eviction.blocks:
                if conn.execute(
                    _INSERT_BLOCK,
                    (
                        block.id, ns, sid, block.seq, block.kind, block.first_message, block.last_message,
                        block.tokens, block.sha256, block.started_at, created, first.get(block.id), '',
                        block.messages_json, queued,
                    ),
                ).rowcount:  # fmt: skip
                    linked.add(block.id)
                    queued = None  # on this row now
            for memento in eviction.mementos:
                if conn.execute(
                    _INSERT_MEMENTO,
                    (
                        memento.id, ns, sid, memento.tokens, memento.score, int(memento.verified), memento.iterations,
                        memento.compressor, memento.level, created, first.get(memento.id),
                        json.dumps(list(memento.summarizes)), memento.text,
                    ),
                ).rowcount:  # fmt: skip
                    linked.add(memento.id)
            for target, memento_id in first.items():
                if target not in linked:  # written earlier: it keeps the memento it already has, if any
                    link = (memento_id, target, ns)
                    if not conn.execute(_LINK_BLOCK, link).rowcount:
                        conn.execute(_LINK_MEMENTO, link)
            if queued is not None:  # no new block row to carry them (a retry, or mementos only)
                conn.execute(_QUEUE_MENTIONS, (ns, queued))
            for page in eviction.pages:
                members: dict[str, int] = {}
                for pos, block_id in enumerate(page.block_ids):
                    members.setdefault(block_id, pos)
                conn.execute(
                    _UPSERT_PAGE,
                    (
                        page.id, ns, sid, page.number, page.first_turn, page.last_turn, page.summary,
                        json.dumps(list(page.topics)), json.dumps(members),
                    ),
                )  # fmt: skip
                held = conn.execute('SELECT members_json FROM pages WHERE id = ?', (page.id,)).fetchone()[0]
                check_page(page, json.loads(held))  # raised inside the transaction: rolled back
            self._insert_events(conn, eviction.events, created)

    def append_events(self, events: Sequence[SessionEvent]) -> None:
        if not events:
            return
        created = now_iso()
        with self._write() as conn:
            for ns, sid in {(event.namespace, event.session_id) for event in events}:
                conn.execute(_INSERT_SESSION, (ns, sid, created))
            for event in self._insert_events(conn, events, created):
                if event.kind != 'message':
                    continue
                row = conn.execute(
                    'SELECT sha256 FROM events WHERE namespace = ? AND session_id = ? AND key = ?',
                    (event.namespace, event.session_id, event.key),
                ).fetchone()
                if row is not None and row[0] != event.sha256:  # raised inside the transaction: rolled back
                    raise log_conflict(event)

    def append_branch(self, events: Sequence[SessionEvent]) -> int:
        if not events:
            raise ValueError('append_branch needs at least one event')
        created = now_iso()
        first = events[0]
        branch_events(events, -1)  # checked before the write lock is taken
        with self._write() as conn:
            conn.execute(_INSERT_SESSION, (first.namespace, first.session_id, created))
            placed = branch_events(events, _last_message_index(conn, first.namespace, first.session_id))
            self._insert_events(conn, placed, created)
        return placed[0].message_index or 0

    @staticmethod
    def _insert_events(conn: sqlite3.Connection, events: Sequence[SessionEvent], created: str) -> list[SessionEvent]:
        """Insert the events the log does not hold (by key); returns those it held already."""
        held: list[SessionEvent] = []
        # One statement per event: the next `seq` and the duplicate check (same key: already logged) in SQL.
        for event in events:
            cursor = conn.execute(
                'INSERT INTO events (namespace, session_id, seq, key, kind, message_index, sha256, payload, '
                'block_ids_json, created_at) SELECT ?1, ?2, coalesce(max(seq), -1) + 1, ?3, ?4, ?5, ?6, ?7, ?8, ?9 '
                'FROM events WHERE namespace = ?1 AND session_id = ?2 '
                'ON CONFLICT (namespace, session_id, key) DO NOTHING',
                (
                    event.namespace, event.session_id, event.key, event.kind, event.message_index, event.sha256,
                    event.payload, json.dumps(list(event.block_ids)), event.created_at or created,
                ),
            )  # fmt: skip
            if cursor.rowcount == 0:
                held.append(event)
        return held

    def delete_session(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> int:
        scope = (namespace, session_id)
        self._index_mentions()  # queued mentions of the session become rows the delete below can find
        with self._write() as conn:
            ids = [
                row[0]
                for row in conn.execute(
                    'SELECT id FROM blocks WHERE namespace = ? AND session_id = ? '
                    'UNION ALL SELECT id FROM mementos WHERE namespace = ? AND session_id = ?',
                    scope * 2,
                )
            ]
            page_ids = [
                row[0] for row in conn.execute('SELECT id FROM pages WHERE namespace = ? AND session_id = ?', scope)
            ]
            removed = 0
            dropped: Counter[str] = Counter()  # block mentions deleted, by entity: off their document frequencies
            for chunk_start in range(0, len(ids), 500):
                chunk = ids[chunk_start : chunk_start + 500]
                marks = ','.join('?' * len(chunk))
                dropped.update(
                    dict(
                        conn.execute(
                            f'SELECT entity_id, count(*) FROM mentions WHERE source_id IN ({marks}) '
                            "AND source_id >= 'blk_' AND source_id < 'blk`' GROUP BY entity_id",
                            chunk,
                        ).fetchall()
                    )
                )
                removed += conn.execute(f'DELETE FROM mentions WHERE source_id IN ({marks})', chunk).rowcount
            # the session's documents through its scope token: no read of every document's columns
            conn.execute(
                'DELETE FROM text_fts WHERE rowid IN (SELECT rowid FROM text_fts WHERE text_fts MATCH ? '
                'AND namespace = ? AND session_id = ?)',
                (f'scope:{_scope_token(namespace, session_id)}', namespace, session_id),
            )
            for page_id in page_ids:  # CONTAINS edges: they go with their page row
                removed += conn.execute('SELECT count(*) FROM page_blocks WHERE page_id = ?', (page_id,)).fetchone()[0]
            for table in ('blocks', 'mementos', 'pages', 'events', 'vectors'):
                removed += conn.execute(f'DELETE FROM {table} WHERE namespace = ? AND session_id = ?', scope).rowcount
            # SQLite hands the highest `rid`s out again once their rows are gone: a mark above the new top would
            # skip the next rows, so it comes down to it (every row left below it was indexed)
            for key, table in (('fts_blocks', 'blocks'), (_MENTIONS_MARK, 'blocks'), ('fts_mementos', 'mementos')):
                conn.execute(
                    f'UPDATE meta SET value = min(CAST(value AS INTEGER), (SELECT coalesce(max(rid), 0) FROM {table})) '
                    'WHERE key = ?',
                    (key,),
                )
            conn.executemany(
                'UPDATE entities SET blocks = blocks - ? WHERE id = ?', [(dropped[key], key) for key in sorted(dropped)]
            )
            removed += conn.execute('DELETE FROM sessions WHERE namespace = ? AND id = ?', scope).rowcount
            removed += conn.execute(
                'DELETE FROM entities WHERE namespace = ? AND id NOT IN (SELECT entity_id FROM mentions)', (namespace,)
            ).rowcount
        if removed:
            self._scrub()
        return removed

    def _scrub(self) -> None:
        """After a delete, leave no trace of the deleted text in the files (issue 8, `forget`): FTS5 keeps deleted
        terms in its index segments until they are merged, and the WAL keeps old page images until checkpointed
        (`secure_delete`, set at open, zeroes the freed pages themselves)."""
        with self._write() as conn:
            conn.execute("INSERT INTO text_fts (text_fts) VALUES ('optimize')")
        with self._read() as conn:
            conn.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchall()

    # -- reads ------------------------------------------------------------------------------------------------

    def _stored_json(self, value: object, what: str) -> Any:
        """A JSON column the store wrote: one that no longer decodes was damaged on the disk (a zeroed overflow
        page reads back as NUL bytes, which SQLite cannot tell from data)."""
        try:
            return json.loads(value)  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise StoreCorruptError(
                f'{self._where()} is corrupt: a value it stored ({what}) no longer decodes: {exc}',
                path=self._where(),
            ) from exc

    def read_events(
        self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE, since_seq: int = 0
    ) -> list[SessionEvent]:
        with self._read() as conn:
            rows = conn.execute(
                'SELECT * FROM events WHERE namespace = ? AND session_id = ? AND seq >= ? ORDER BY seq',
                (namespace, session_id, since_seq),
            ).fetchall()
        return [
            SessionEvent(
                session_id=row['session_id'],
                namespace=row['namespace'],
                seq=row['seq'],
                kind=row['kind'],
                payload=bytes(row['payload']),
                sha256=row['sha256'],
                message_index=row['message_index'],
                block_ids=tuple(self._stored_json(row['block_ids_json'], f'the block ids of event {row["seq"]}')),
                created_at=row['created_at'],
            )
            for row in rows
        ]

    def last_message_index(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> int:
        with self._read() as conn:
            return _last_message_index(conn, namespace, session_id)

    def message_indices_of(self, session_id: str, sha256: str, *, namespace: str = DEFAULT_NAMESPACE) -> list[int]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT message_index FROM events WHERE namespace = ? AND session_id = ? AND kind = 'message' "
                'AND sha256 = ? ORDER BY message_index DESC',
                (namespace, session_id, sha256),
            ).fetchall()
        return [int(row[0]) for row in rows]

    def get_block(
        self, block_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> BlockRecord:
        where, params = _scope_sql(namespace, session_id)
        with self._read() as conn:
            row = conn.execute(
                f'SELECT {_BLOCK_COLUMNS} FROM blocks WHERE id = ? AND {where}', [block_id, *params]
            ).fetchone()
        if row is None:
            raise block_not_found(block_id, namespace, session_id)
        return _block(row)

    def recover_block(
        self, block_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> RecoveredBlock:
        return check_block(self.get_block(block_id, namespace=namespace, session_id=session_id))

    def _mementos(self, where: str, params: Sequence[Any]) -> list[MementoRecord]:
        with self._read() as conn:
            rows = conn.execute(
                f'SELECT {_MEMENTO_COLUMNS} FROM mementos WHERE {where} ORDER BY rid', params
            ).fetchall()
        return [
            MementoRecord(
                id=row['id'],
                session_id=row['session_id'],
                namespace=row['namespace'],
                text=row['text'],
                tokens=row['tokens'],
                summarizes=tuple(self._stored_json(row['summarizes_json'], f'what memento {row["id"]} summarizes')),
                score=row['score'],
                verified=bool(row['verified']),
                iterations=row['iterations'],
                compressor=row['compressor'],
                level=row['level'],
            )
            for row in rows
        ]

    def get_memento(
        self, memento_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> MementoRecord:
        where, params = _scope_sql(namespace, session_id)
        found = self._mementos(f'id = ? AND {where}', [memento_id, *params])
        if not found:
            raise MementoNotFoundError(f'no memento {memento_id!r} in namespace {namespace!r}')
        return found[0]

    def get_blocks(
        self, block_ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[BlockRecord]:
        ids = list(dict.fromkeys(block_ids))
        where, params = _scope_sql(namespace, session_id, '+')  # unary +: found by id, never by scope
        found: dict[str, BlockRecord] = {}
        with self._read() as conn:
            for chunk in _id_chunks(ids):
                rows = conn.execute(
                    f'SELECT {_BLOCK_COLUMNS} FROM blocks WHERE id IN ({", ".join("?" * len(chunk))}) AND {where}',
                    [*chunk, *params],
                ).fetchall()
                found.update((row['id'], _block(row)) for row in rows)
        return [found[block_id] for block_id in ids if block_id in found]

    def get_mementos(
        self, memento_ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[MementoRecord]:
        ids = list(dict.fromkeys(memento_ids))
        where, params = _scope_sql(namespace, session_id, '+')  # unary +: found by id, never by scope
        found = {
            memento.id: memento
            for chunk in _id_chunks(ids)
            for memento in self._mementos(f'id IN ({", ".join("?" * len(chunk))}) AND {where}', [*chunk, *params])
        }
        return [found[memento_id] for memento_id in ids if memento_id in found]

    def memento_of(
        self, target_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> MementoRecord | None:
        where, params = _scope_sql(namespace, session_id)
        found = self._mementos(
            'id = coalesce((SELECT memento_id FROM blocks WHERE id = ?), (SELECT parent_id FROM mementos WHERE id = ?)) '
            f'AND {where}',
            [target_id, target_id, *params],
        )
        return found[0] if found else None

    def list_sessions(self, *, namespace: str | None = DEFAULT_NAMESPACE) -> list[SessionRecord]:
        where, params = _scope_sql(namespace, None)
        with self._read() as conn:
            rows = conn.execute(
                f'SELECT namespace, id, created_at FROM sessions WHERE {where} ORDER BY created_at, id', params
            ).fetchall()
        return [SessionRecord(id=row['id'], namespace=row['namespace'], created_at=row['created_at']) for row in rows]

    def list_blocks(
        self,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        kind: BlockKind | None = 'block',
    ) -> list[BlockRecord]:
        where, params = _block_scope_sql(namespace, session_id, kind)
        with self._read() as conn:
            rows = conn.execute(
                f'SELECT {_BLOCK_COLUMNS} FROM blocks WHERE {where} ORDER BY session_id, seq, kind', params
            ).fetchall()
        return [_block(row) for row in rows]

    def write_vectors(
        self, model: str, vectors: Sequence[tuple[str, bytes]], *, namespace: str = DEFAULT_NAMESPACE
    ) -> int:
        with self._write() as conn:
            stored = 0
            for block_id, data in vectors:  # each takes its block's session; an id not in the namespace is skipped
                stored += conn.execute(
                    'INSERT OR REPLACE INTO vectors (model, block_id, namespace, session_id, data) '
                    'SELECT ?, id, namespace, session_id, ? FROM blocks WHERE id = ? AND namespace = ?',
                    (model, data, block_id, namespace),
                ).rowcount
            return stored

    def read_vectors(
        self,
        model: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        block_ids: Collection[str] | None = None,
    ) -> list[tuple[str, str, bytes]]:
        where, params = _scope_sql(namespace, session_id)
        sql = f'SELECT block_id, session_id, data FROM vectors WHERE model = ? AND {where}'
        with self._read() as conn:
            if block_ids is None:
                rows = conn.execute(sql, [model, *params]).fetchall()
            else:  # by primary key, in batches under SQLite's bound-parameter limit
                wanted = list(dict.fromkeys(block_ids))
                rows = []
                for start in range(0, len(wanted), _ID_BATCH):
                    batch = wanted[start : start + _ID_BATCH]
                    rows += conn.execute(
                        f'{sql} AND block_id IN ({", ".join("?" * len(batch))})', [model, *params, *batch]
                    ).fetchall()
        return [(str(block_id), str(sid), bytes(data)) for block_id, sid, data in rows]

    def block_counts(self, *, namespace: str = DEFAULT_NAMESPACE) -> dict[str, int]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT session_id, count(*) FROM blocks WHERE namespace = ? AND kind = 'block' GROUP BY session_id",
                (namespace,),
            ).fetchall()
        return {str(sid): int(count) for sid, count in rows}

    def list_block_ids(
        self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[tuple[str, str]]:
        where, params = _block_scope_sql(namespace, session_id, 'block')
        with self._read() as conn:
            rows = conn.execute(
                f'SELECT id, session_id FROM blocks WHERE {where} ORDER BY session_id, seq', params
            ).fetchall()
        return [(str(block_id), str(sid)) for block_id, sid in rows]

    def count_blocks(
        self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None, kind: BlockKind | None = 'block'
    ) -> int:
        where, params = _block_scope_sql(namespace, session_id, kind)
        with self._read() as conn:
            return int(conn.execute(f'SELECT count(*) FROM blocks WHERE {where}', params).fetchone()[0])

    def list_mementos(
        self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[MementoRecord]:
        where, params = _scope_sql(namespace, session_id)
        return self._mementos(where, params)

    def list_pages(self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None) -> list[PageRecord]:
        where, params = _scope_sql(namespace, session_id)
        with self._read() as conn:
            rows = conn.execute(f'SELECT * FROM pages WHERE {where} ORDER BY session_id, number', params).fetchall()
        members = {
            row['id']: [
                block_id
                for block_id, _ in sorted(
                    self._stored_json(row['members_json'], f'the blocks of page {row["id"]}').items(),
                    key=lambda item: (item[1], item[0]),
                )
            ]
            for row in rows
        }
        return [
            PageRecord(
                id=row['id'],
                session_id=row['session_id'],
                namespace=row['namespace'],
                number=row['number'],
                first_turn=row['first_turn'],
                last_turn=row['last_turn'],
                summary=row['summary'],
                topics=tuple(self._stored_json(row['topics_json'], f'the topics of page {row["id"]}')),
                block_ids=tuple(members[row['id']]),
            )
            for row in rows
        ]

    def entities_of(self, source_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> list[tuple[EntityRecord, int]]:
        """Entities a block or memento `MENTIONS`, with counts."""
        self._index_mentions()
        with self._read() as conn:
            rows = conn.execute(
                'SELECT e.key, e.name, e.kind, m.count FROM mentions m JOIN entities e ON e.id = m.entity_id '
                'WHERE m.source_id = ? AND e.namespace = ? ORDER BY m.count DESC, e.key',
                (source_id, namespace),
            ).fetchall()
        return [(_entity_record(row[0], row[1], row[2]), row[3]) for row in rows]

    def replace_mentions(
        self, source_ids: Sequence[str], mentions: Sequence[Mention], *, namespace: str = DEFAULT_NAMESPACE
    ) -> int:
        sources = check_mention_sources(source_ids, mentions)
        self._index_mentions()  # a backlog is indexed first, batch by batch, not under this call's lock
        with self._write() as conn:
            while self._apply_next_mentions(conn):  # what was written since: its old edges must be found below
                pass
            present: set[str] = set()
            dropped: Counter[str] = Counter()  # block mentions deleted, by entity: off their document frequencies
            touched: set[str] = set()
            for start in range(0, len(sources), 400):
                chunk = sources[start : start + 400]
                marks = ','.join('?' * len(chunk))
                present.update(
                    row[0]
                    for row in conn.execute(
                        f'SELECT id FROM blocks WHERE namespace = ? AND id IN ({marks}) '
                        f'UNION ALL SELECT id FROM mementos WHERE namespace = ? AND id IN ({marks})',
                        (namespace, *chunk, namespace, *chunk),
                    )
                )
                for entity_id, source_id in conn.execute(
                    f'SELECT entity_id, source_id FROM mentions WHERE source_id IN ({marks})', chunk
                ):
                    touched.add(entity_id)
                    if source_id.startswith('blk_'):
                        dropped[entity_id] += 1
            missing = [source for source in sources if source not in present]
            if missing:
                raise missing_sources(missing, namespace)  # before any change: the transaction writes nothing
            for start in range(0, len(sources), 400):
                chunk = sources[start : start + 400]
                conn.execute(f'DELETE FROM mentions WHERE source_id IN ({",".join("?" * len(chunk))})', chunk)
            conn.executemany(
                'UPDATE entities SET blocks = blocks - ? WHERE id = ?', [(dropped[key], key) for key in sorted(dropped)]
            )
            if mentions:
                self._apply_mentions(conn, [(None, namespace, _encode_mentions(mentions))])
            conn.executemany(
                'DELETE FROM entities WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM mentions WHERE entity_id = ?1)',
                [(entity_id,) for entity_id in sorted(touched)],
            )
        return len({(mention.source_id, mention.entity.key) for mention in mentions})

    def _index_mentions(self) -> None:
        """Move pending `MENTIONS` into the entity index (`entities`, `mentions` and its by-entity index).

        Deferred from eviction to the first read that needs it, like the full-text index: a block mentions ~100
        entities, and indexing them at eviction would write ~200 scattered B-tree pages on the agent's request
        path. Pending are the `mentions` of blocks past the mark and the `mention_queue` rows; they are applied in
        the order they were written (first name and first count win, as before), in batches, so memory stays
        bounded however much is pending.
        """
        with self._read() as conn:
            version = _version(conn)
            if version == self._mentions_current:  # nothing written since it was current
                return
            mark = self._mentions_mark(conn)
            top = conn.execute('SELECT coalesce(max(rid), 0) FROM blocks').fetchone()[0]
            queued = conn.execute('SELECT count(*) FROM mention_queue').fetchone()[0]
            # absent while a rebuild runs (here or in another process) or after one was cut short: finish it
            rebuild = conn.execute(_MENTIONS_ENTITY_INDEX_EXISTS).fetchone() is None
            if top <= mark and not queued and not rebuild:
                self._mentions_current = version
                return
            if not rebuild and top - mark + queued >= _REBUILD_QUEUE_ROWS:
                # A backlog as large as the index itself (bulk writes with no entity read between): inserting it
                # into the by-entity index would rewrite nearly every page of it per batch; building the index
                # afterwards is one sort.
                sample = conn.execute(
                    'SELECT mentions FROM blocks WHERE rid > ? AND mentions IS NOT NULL '
                    'UNION ALL SELECT data FROM mention_queue LIMIT 1',
                    (mark,),
                ).fetchone()
                if sample is not None:
                    pending = (top - mark + queued) * sum(1 for _ in _decode_mentions(sample[0]))
                    rebuild = pending >= conn.execute('SELECT count(*) FROM mentions').fetchone()[0]
        # A rebuild drops the index, applies the backlog a few batches per transaction and builds the index in a
        # transaction of its own: another writer waits for one transaction (~2 s; the sort: 4 s at 20k blocks, 32 s
        # at 100k), not for the whole rebuild (26 s at 20k). The drop commits with the first batches, and a rebuild
        # cut short (a kill) is finished by the next read, which finds the index missing.
        batches, drop = (_REBUILD_BATCHES if rebuild else 1), rebuild
        while True:
            with self._write() as conn:
                if drop:
                    drop = False
                    if self._mentions_mark(conn) != mark and conn.execute(_MENTIONS_ENTITY_INDEX_EXISTS).fetchone():
                        # another connection indexed meanwhile, and its index stands: no second sort, batch by batch
                        rebuild, batches = False, 1
                    else:
                        conn.execute('DROP INDEX IF EXISTS mentions_entity')
                for _ in range(batches):
                    applied = self._apply_next_mentions(conn)
                    if applied < _QUEUE_BATCH:  # a batch short of full took everything pending
                        break
            if applied < _QUEUE_BATCH:
                break
            time.sleep(_CATCH_UP_PAUSE)  # let a waiting writer in
        if rebuild:
            time.sleep(_CATCH_UP_PAUSE)
            with self._write() as conn:
                conn.execute(_MENTIONS_ENTITY_INDEX)  # one sort; a no-op when another connection built it first

    @staticmethod
    def _mentions_mark(conn: sqlite3.Connection) -> int:
        row = conn.execute('SELECT value FROM meta WHERE key = ?', (_MENTIONS_MARK,)).fetchone()
        return 0 if row is None else int(row[0])

    def _apply_next_mentions(self, conn: sqlite3.Connection) -> int:
        """Index the next `_QUEUE_BATCH` pending evictions' mentions, in write order, and move the mark past them;
        returns how many evictions' (0 when nothing was pending).

        Write order: a block's by `rid`; a queue row's right after the block that was last when it was written
        (`after_rid`), queue rows among themselves by their own `rid`.
        """
        mark = self._mentions_mark(conn)
        blocks = conn.execute(
            'SELECT rid, namespace, mentions FROM blocks WHERE rid > ? AND mentions IS NOT NULL ORDER BY rid LIMIT ?',
            (mark, _QUEUE_BATCH),
        ).fetchall()
        queue = conn.execute(
            'SELECT rid, after_rid, namespace, data FROM mention_queue ORDER BY after_rid, rid LIMIT ?', (_QUEUE_BATCH,)
        ).fetchall()
        pending = sorted(
            [((rid, 0, 0), namespace, data) for rid, namespace, data in blocks]
            + [((after_rid, 1, rid), namespace, data) for rid, after_rid, namespace, data in queue]
        )[:_QUEUE_BATCH]  # the first of each list are the first of both
        if not pending:
            top = conn.execute('SELECT coalesce(max(rid), 0) FROM blocks').fetchone()[0]
            if top > mark:  # blocks without mentions only
                conn.execute('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)', (_MENTIONS_MARK, str(top)))
            return 0
        self._apply_mentions(conn, [(None, namespace, data) for _, namespace, data in pending])
        taken = [key for key, _, _ in pending]
        done = [key[2] for key in taken if key[1] == 1]
        for start in range(0, len(done), 500):
            chunk = done[start : start + 500]
            conn.execute(f'DELETE FROM mention_queue WHERE rid IN ({",".join("?" * len(chunk))})', chunk)
        if len(pending) < _QUEUE_BATCH or len(taken) - len(done) == len(blocks) < _QUEUE_BATCH:
            # every pending block is applied: the mark can pass the blocks without mentions too
            last = conn.execute('SELECT coalesce(max(rid), 0) FROM blocks').fetchone()[0]
        else:
            last = max([key[0] for key in taken if key[1] == 0], default=mark)
        conn.execute('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)', (_MENTIONS_MARK, str(last)))
        return len(pending)

    @staticmethod
    def _apply_mentions(conn: sqlite3.Connection, rows: Sequence[tuple[Any, str, bytes]]) -> None:
        entities: dict[str, tuple[str, str, str, str, str]] = {}
        mentions: dict[tuple[str, str], int] = {}
        for _, namespace, data in rows:
            for source_id, key, name, kind, count in _decode_mentions(data):
                entity_id = entity_id_for(namespace, key)
                entities.setdefault(entity_id, (entity_id, namespace, key, name, kind))
                mentions.setdefault((source_id, entity_id), count)
        # first occurrences only, so sorting them (for page locality) cannot change which one wins
        conn.executemany(
            'INSERT OR IGNORE INTO entities (id, namespace, key, name, kind) VALUES (?, ?, ?, ?, ?)',
            sorted(entities.values()),
        )
        # document frequencies (`entities.blocks`) grow by the block mentions this batch adds: not by those already
        # indexed (a retried eviction's), which `INSERT OR IGNORE` keeps as they were. Counted here per entity,
        # not per row (a trigger per row made a bulk index build 2.7x slower).
        sources = sorted({source_id for source_id, _ in mentions if source_id.startswith('blk_')})
        indexed: set[tuple[str, str]] = set()
        for start in range(0, len(sources), 500):
            chunk = sources[start : start + 500]
            indexed.update(
                (source_id, entity_id)
                for source_id, entity_id in conn.execute(
                    f'SELECT source_id, entity_id FROM mentions WHERE source_id IN ({", ".join("?" * len(chunk))})',
                    chunk,
                )
            )
        conn.executemany(
            'INSERT OR IGNORE INTO mentions (source_id, entity_id, count) VALUES (?, ?, ?)',
            sorted((source_id, entity_id, count) for (source_id, entity_id), count in mentions.items()),
        )
        added = Counter(
            entity_id
            for source_id, entity_id in mentions
            if source_id.startswith('blk_') and (source_id, entity_id) not in indexed
        )
        conn.executemany(
            'UPDATE entities SET blocks = blocks + ? WHERE id = ?', [(added[key], key) for key in sorted(added)]
        )

    def _index_text(self) -> None:
        """Bring the full-text index up to date.

        Indexing is deferred from eviction to the first search after it: tokenizing a block's text costs more
        than writing it, and evictions sit on the agent's request path while searches are rarer.
        """
        with self._read() as conn:  # searches mostly find it current: no write lock for them
            version = _version(conn)
            if version == self._text_current:  # nothing written since it was current
                return
            marks = dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'fts_%'").fetchall())
            current = all(
                (conn.execute(f'SELECT max(rid) FROM {table}').fetchone()[0] or 0) <= int(marks.get(f'fts_{table}', 0))
                for table in ('blocks', 'mementos')
            )
        if current:
            self._text_current = version
            return
        while self._index_text_batch() == _TEXT_BATCH:  # more may be pending
            time.sleep(_CATCH_UP_PAUSE)

    def _index_text_batch(self) -> int:
        """Index up to `_TEXT_BATCH` mementos and blocks past their marks (mementos first), in one transaction;
        returns how many.

        A backlog is indexed batch by batch so that another process's eviction waits for one batch, not for all of
        it: in one transaction, 30,000 blocks held the write lock for 9 s, past SQLite's default 5 s busy timeout,
        so a concurrent compaction failed; in batches with a pause between them the longest wait was 1.4 s, for a
        catch-up ~25% slower (each batch is a new FTS5 segment to merge, plus the pauses).
        """
        from ..._echoes import searchable_messages  # pydantic-ai: only when blocks are pending
        from ..._messages import deserialize_messages, message_text

        with self._write() as conn:
            marks = dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'fts_%'").fetchall())
            mementos = conn.execute(
                'SELECT rid, id, namespace, session_id, text FROM mementos WHERE rid > ? ORDER BY rid LIMIT ?',
                (int(marks.get('fts_mementos', 0)), _TEXT_BATCH),
            ).fetchall()
            if mementos:
                conn.executemany(
                    _INSERT_TEXT,
                    [
                        (item, ns, session, _scope_tokens(ns, session), *text_columns(text))
                        for _, item, ns, session, text in mementos
                    ],
                )
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('fts_mementos', ?)", (str(mementos[-1][0]),)
                )
            room = _TEXT_BATCH - len(mementos)
            if not room:
                return len(mementos)
            done = int(marks.get('fts_blocks', 0))
            last, indexed = done, 0
            blocks = conn.execute(  # a cursor, not a list: the batch's bytes never sit in memory all at once
                'SELECT rid, id, namespace, session_id, messages_json FROM blocks WHERE rid > ? ORDER BY rid LIMIT ?',
                (done, room),
            )
            for row in blocks:
                raw = _stored_bytes(row['messages_json'])
                try:
                    text = '\n'.join(map(message_text, searchable_messages(deserialize_messages(raw))))
                except ValueError as exc:  # bytes altered on the disk: one block must not stop every search
                    text = raw.decode('utf-8', 'replace')
                    logger.warning(
                        'mementograph: block %s of %s does not decode (%s); indexed for search from its raw bytes, '
                        'and never recovered unless it passes its sha256 check (`mementograph verify` names it)',
                        row['id'], self._where(), type(exc).__name__,
                    )  # fmt: skip
                namespace, session = row['namespace'], row['session_id']
                scope = _scope_tokens(namespace, session)
                conn.execute(_INSERT_TEXT, (row['id'], namespace, session, scope, *text_columns(text)))
                last, indexed = row['rid'], indexed + 1
            if indexed:
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('fts_blocks', ?)", (str(last),))
            return len(mementos) + indexed

    def _text_memo(self, structure: bytes | None, docs: int) -> dict[tuple[str, str, int], int]:
        """Figures `search_text` computed on the FTS5 index as it is now: `('df', phrase, cap)`, a phrase's document
        frequency counted up to `cap + 1`, and `('floor', phrase, cap)`, the rowid of its `cap`-th latest document.

        A phrase of common tokens (a path such as `django/db/models/sql/query.py`) costs a walk over every document
        holding all its tokens to count, 1-6 ms at 100k blocks, while an agent asks about the same files again and
        again. The figures hold while the index does not change: the key is FTS5's structure record (the `_data`
        row 10), which every write to the index rewrites (a new segment and its write counter, a merge, a deletion),
        with `docs` (the highest rowid), both read in the search's own snapshot (so another process's commit is seen
        as well). Call it inside `_search` (its lock guards the memo).
        """
        state = None if structure is None else (bytes(structure), docs)
        if state is None or state != self._text_memo_state or len(self._text_memo_values) >= _TEXT_MEMO_SIZE:
            self._text_memo_values = {}
            self._text_memo_state = state
        return self._text_memo_values if state is not None else {}

    def search_text(
        self, query: str, *, k: int = 10, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[TextHit]:
        """`GraphStore.search_text` on SQLite: FTS5 BM25 over an OR of the query's rarer words.

        FTS5 scores every document matching the query (no top-k early exit), so the cost is the documents its words
        match: words in more than `TEXT_MAX_DF` documents are left out when rarer ones exist (their document
        frequency counted up to that cap, a bounded read), and a query of only such words is scored over the
        latest `TEXT_MAX_DF` documents holding its rarest word (told apart up to `_TEXT_FLOOR_SPAN` times the cap).
        These counts are kept while the index stays the same (`_text_memo`): a phrase of common tokens such as
        `django/db/models/sql/query.py` costs milliseconds to count at 100k blocks. Such a word (several ASCII
        tokens) is searched as the phrase of its token pairs, in the `pairs` column (`token_pairs`), which walks
        the documents holding each pair rather than those holding each common token.

        The scope: every document carries a token for its namespace and one for its session (`scope`). A session,
        or a small namespace (`_TEXT_SCOPE_SHARE`), is searched by intersecting the query with its token,
        so only its own documents are scored (checking the scope of every match instead cost 0.1-0.6 s at 100k
        blocks). A larger namespace ranks the file's matches `_TEXT_SCOPE_DEPTH` times `k` deep and keeps its own,
        intersecting only when other namespaces crowd them. If the rarer words find fewer than `k` documents in an
        intersected scope (at most `TEXT_ENOUGH_HITS`), it is ranked on all of the query's words (the common ones
        may be common only elsewhere).
        """
        from ..recall._values import TEXT_ENOUGH_HITS, TEXT_MAX_DF, TEXT_MAX_TERMS, TEXT_MIN_DOCS

        terms = list(dict.fromkeys(fts_terms(query)))
        if not terms or k <= 0:
            return []
        self._index_text_for_search()
        phrases = [_phrase(term) for term in terms]
        with self._search() as conn:
            # the highest rowid: the documents indexed (give or take deletions), read off the B-tree's last page;
            # and the index's structure record, which says whether `_text_memo` still holds
            docs, structure = conn.execute(
                'SELECT (SELECT max(rowid) FROM text_fts_docsize), (SELECT block FROM text_fts_data WHERE id = 10)'
            ).fetchone()
            docs = docs or 0
            picked = phrases
            present: list[tuple[int, int]] = []
            floor = 0
            scope = f'scope:{_scope_token(namespace)}'
            small = min(docs // _TEXT_SCOPE_SHARE, _TEXT_SCOPE_SHARE * TEXT_MAX_DF)
            if docs > TEXT_MIN_DOCS:
                memo = self._text_memo(structure, docs)
                # the namespace's documents are counted with the words (below: whether it is searched on its own)
                counted = [(phrase, TEXT_MAX_DF) for phrase in phrases] + ([] if session_id else [(scope, small)])
                dfs = _text_dfs(conn, memo, counted)[: len(phrases)]
                present = sorted((df, index) for index, df in enumerate(dfs) if df)
                if not present:
                    return []
                picked = [phrases[index] for df, index in present if df <= TEXT_MAX_DF][:TEXT_MAX_TERMS]
                if not picked:
                    # every word is common: the floor goes under the rarest, told apart by counting further (at
                    # the first cap they all tie, and the query's first word need not be the rarest); a rarer word
                    # is also cheaper for `bm25()`, which walks all of a word's matches for its IDF
                    indexes = [index for _, index in present[:TEXT_MAX_TERMS]]
                    rarest = _rarest(conn, memo, phrases, indexes, TEXT_MAX_DF * _TEXT_FLOOR_SPAN)
                    picked = [phrases[rarest]]
                    key = ('floor', picked[0], TEXT_MAX_DF)
                    if key not in memo:
                        memo[key] = conn.execute(
                            'SELECT rowid FROM text_fts WHERE text_fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?',
                            (picked[0], TEXT_MAX_DF - 1),
                        ).fetchone()[0]
                    floor = memo[key]
            match = ' OR '.join(picked)
            scoped = session_id is not None
            if not scoped and docs > TEXT_MIN_DOCS:
                # a small namespace is searched on its own (its documents counted up to the bound, a short read)
                scoped = _text_df(conn, memo, scope, small) <= small
            if not scoped:
                # a namespace holding most of the file: rank the file's (latest) matches deep enough to hold `k`
                # of them (reading their small columns is cheap: they come before the text)
                depth = max(k * _TEXT_SCOPE_DEPTH, 20)
                ranked = _text_rows(
                    conn,
                    f'SELECT r.rowid AS rowid, r.rank AS rank, t.item_id AS item_id FROM (SELECT rowid, {_TEXT_RANK} '
                    'AS rank FROM text_fts WHERE text_fts MATCH ? AND rowid >= ? ORDER BY rank, rowid LIMIT ?) r '
                    f'LEFT JOIN {_TEXT_CONTENT} t ON t.rowid = r.rowid AND t.namespace = ?',
                    (match, floor, depth, namespace),
                )
                rows = [row for row in ranked if row[2] is not None][:k]
                # other namespaces crowd the matches: the namespace's own are ranked apart (and on every word)
                scoped = len(rows) < min(k, len(ranked))
            if scoped:
                # FTS5 intersects the query with the scope's token, so only the scope's documents are scored
                rows = _scoped_text(conn, match, namespace, session_id, k)
                every = ' OR '.join(phrases[index] for index in sorted(index for _, index in present))
                if len(rows) < min(k, TEXT_ENOUGH_HITS) and present and every != match:
                    # the words left out were common across the whole file, maybe through other scopes alone:
                    # here they may be the only ones that match, so the scope is ranked on all of its words
                    rows = _scoped_text(conn, every, namespace, session_id, k)
        return [
            TextHit(
                id=item_id,
                block_ids=_summarized(summarizes) if item_id.startswith('mem_') else (item_id,),
                score=-rank,
            )
            for _, rank, item_id, summarizes in rows
            if item_id is not None
        ]

    def query(
        self,
        cypher: str,
        params: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
        namespace: str | None = None,
        limit: int | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """Run a read-only Cypher query over this store's graph of one namespace (the documented embedded subset,
        through grand-cypher; docs/cypher.md); rows as plain dicts.

        The same write refusal as on Neo4j applies first. `$namespace` (default `'default'`) and `$session_id` are
        always defined, and the view holds only that namespace. A query outside the subset raises
        `UnsupportedQueryError` saying it needs the Neo4j backend, rather than answering differently.

        Args:
            cypher: a read query.
            params: query parameters (strings, numbers, booleans, null, flat lists).
            session_id: bound to `$session_id`.
            namespace: bound to `$namespace`; the namespace whose graph the query sees.
            limit: most rows returned before the query fails (default 1000).
            timeout: seconds before the query is abandoned (default 10).

        Raises:
            ReadOnlyViolationError: the query would write.
            UnsupportedQueryError: the query needs the Neo4j backend.
            QueryError: a missing parameter, more rows than `limit`, or the timeout.
        """
        from importlib.util import find_spec

        from ._cypher import (
            DEFAULT_QUERY_LIMIT,
            DEFAULT_QUERY_TIMEOUT,
            prepare_query,
            query_bounds,
            run_embedded,
            scoped_params,
        )

        prepare_query(cypher)  # refuse writes before anything else, whatever the subset
        if find_spec('grandcypher') is None:
            raise UnsupportedQueryError(
                'the embedded store runs Cypher through the grand-cypher package, which is not installed '
                '(pip install grand-cypher); or use the Neo4j backend (--store neo4j://HOST:7687)'
            )
        merged = scoped_params(params, session_id=session_id, namespace=namespace)
        rows, seconds = query_bounds(
            DEFAULT_QUERY_LIMIT if limit is None else limit, DEFAULT_QUERY_TIMEOUT if timeout is None else timeout
        )
        return run_embedded(self.graph(namespace=merged['namespace']), cypher, merged, limit=rows, timeout=seconds)

    def graph(self, *, namespace: str = DEFAULT_NAMESPACE) -> Any:
        """The networkx `MultiDiGraph` view of one namespace, shaped like the Neo4j graph (labels in `__labels__`).

        Built from the tables on demand and cached until the database changes (this connection's
        `total_changes` or another connection's commit, seen through `PRAGMA data_version`), so repeated queries
        between writes do not rebuild it. Treat it as read-only: it is shared between calls.
        """
        from ._cypher import sqlite_graph_view

        self._index_mentions()
        self._index_text()  # blocks' text comes from the full-text index
        with self._read() as conn:
            version = (namespace, *_version(conn))
            cached = self._graph_cache
            if cached is not None and cached[0] == version:
                return cached[1]
            view = sqlite_graph_view(conn, namespace)
        self._graph_cache = (version, view)
        return view

    def stats(self, *, namespace: str | None = DEFAULT_NAMESPACE, session_id: str | None = None) -> StoreStats:
        where, params = _scope_sql(namespace, session_id)
        sess_where, sess_params = _scope_sql(namespace, None)
        if session_id is not None:
            sess_where += ' AND id = ?'
            sess_params.append(session_id)
        self._index_mentions()
        with self._read() as conn:

            def one(sql: str, args: Sequence[Any]) -> int:
                value = conn.execute(sql, args).fetchone()[0]
                return int(value or 0)

            block_tokens = one(f"SELECT sum(tokens) FROM blocks WHERE kind = 'block' AND {where}", params)
            return StoreStats(
                sessions=one(f'SELECT count(*) FROM sessions WHERE {sess_where}', sess_params),
                blocks=one(f"SELECT count(*) FROM blocks WHERE kind = 'block' AND {where}", params),
                parts=one(f"SELECT count(*) FROM blocks WHERE kind = 'part' AND {where}", params),
                mementos=one(f'SELECT count(*) FROM mementos WHERE {where}', params),
                verified_mementos=one(f'SELECT count(*) FROM mementos WHERE verified = 1 AND {where}', params),
                entities=one(
                    'SELECT count(DISTINCT m.entity_id) FROM mentions m JOIN blocks b ON b.id = m.source_id '
                    f'WHERE {_scope_sql(namespace, session_id, "b.")[0]}',
                    params,
                ),
                pages=one(f'SELECT count(*) FROM pages WHERE {where}', params),
                events=one(f'SELECT count(*) FROM events WHERE {where}', params),
                block_tokens=block_tokens,
                memento_tokens=one(f'SELECT sum(tokens) FROM mementos WHERE level = 1 AND {where}', params),
            )

    # -- recall reads (issue 6): entity postings and block neighbours ---------------------------------------------
    # Recall itself is Python over these two reads (knowledge_graph/recall), so every backend ranks identically.

    def entity_postings(
        self,
        keys: Sequence[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        prefix: bool = False,
        limit: int = 200,
        max_entities: int = 64,
        count_limit: int = 10_000,
        count_total: bool = True,
    ) -> EntityLookup:
        """`RecallStore.entity_postings` on SQLite."""
        from ..recall._values import EntityLookup, EntityPostings, Posting

        found: dict[str, tuple[str, str, int]] = {}  # key -> name, kind, document frequency
        self._index_mentions()
        with self._read() as conn:
            unique = list(dict.fromkeys(keys))
            if prefix:
                for key in unique:
                    low = entity_id_for(namespace, key)
                    for key_found, name, kind, blocks in _json_rows(
                        conn,
                        'SELECT key, name, kind, blocks FROM entities WHERE id >= ? AND id < ? ORDER BY id LIMIT ?',
                        (low, low + '\U0010ffff', max_entities),
                        'key, name, kind, blocks',
                    ):
                        found[key_found] = (name, kind, blocks)
            for start in range(0, 0 if prefix else len(unique), 500):  # exact keys: one lookup per 500
                chunk = [entity_id_for(namespace, key) for key in unique[start : start + 500]]
                for key_found, name, kind, blocks in _json_rows(
                    conn,
                    f'SELECT key, name, kind, blocks FROM entities WHERE id IN ({", ".join("?" * len(chunk))})',
                    chunk,
                    'key, name, kind, blocks',
                ):
                    found[key_found] = (name, kind, blocks)
            # the N of IDF, asked on every read: counting 100k index entries each time cost more than the postings,
            # so it is cached until the database changes (this connection's writes or another's commit)
            version = (namespace, *_version(conn))
            cached = self._total_blocks_cache
            if not count_total:
                total = 0
            elif cached is not None and cached[0] == version:
                total = cached[1]
            else:
                total = conn.execute(
                    "SELECT count(*) FROM blocks WHERE namespace = ? AND kind = 'block'", (namespace,)
                ).fetchone()[0]
                self._total_blocks_cache = (version, total)
            entities: list[EntityPostings] = []
            for key in sorted(found):
                entity_id = entity_id_for(namespace, key)
                postings: list[Posting] = []
                name, kind, stored = found[key]
                # the document frequency is kept on the entity row (`_RECOUNT`): no counting, however common
                blocks = stored if count_limit < 0 else min(stored, count_limit)
                if blocks and limit > 0 and session_id is None:
                    rows = _postings(
                        conn,
                        'SELECT source_id, count FROM mentions WHERE entity_id = ? '
                        "AND source_id >= 'blk_' AND source_id < 'blk`' ORDER BY count DESC, source_id LIMIT ?",
                        (entity_id, limit),
                    )
                    postings = [Posting(block_id, count) for block_id, count in rows]  # positional: faster to build
                elif blocks and limit > 0 and session_id is not None:  # one session's blocks
                    members = self._session_members(conn, session_id, version) if blocks > limit else None
                    if members is None:
                        rows = _postings(
                            conn,
                            'SELECT m.source_id AS source_id, m.count AS count FROM mentions m JOIN blocks b '
                            'ON b.id = m.source_id WHERE m.entity_id = ? AND b.namespace = ? AND b.session_id = ? '
                            "AND b.kind = 'block' ORDER BY m.count DESC, m.source_id LIMIT ?",
                            (entity_id, namespace, session_id, limit),
                        )
                    else:  # the by-entity index alone, its rows kept when their block is the session's
                        rows = _members_only(conn, entity_id, members, limit)
                    postings = [Posting(block_id, count) for block_id, count in rows]
                entities.append(
                    EntityPostings(entity=_entity_record(key, name, kind), blocks=int(blocks), postings=tuple(postings))
                )
        return EntityLookup(total_blocks=int(total), entities=tuple(entities))

    def _session_members(
        self, conn: sqlite3.Connection, session_id: str, version: tuple[str, int, int]
    ) -> frozenset[str] | None:
        """The ids of a session's blocks, kept while nothing is written (`None` past `_MEMBERS_MAX` blocks).

        A session's postings of a common entity were a join of each of its mentions with its block row, to read
        the block's session: ~8 ms of a recall in one session of a 100k-block store. Filtered against these ids,
        the by-entity index alone answers; the ids come off `blocks_scope` (format 7), not the block rows.
        """
        namespace = version[0]
        key = (namespace, session_id, *version[1:])  # `version`: the caller's `_version` read, once per lookup
        cached = self._members_cache.get(key)
        if cached is not None or key in self._members_cache:
            return cached
        ids = [
            row[0]
            for row in conn.execute(
                "SELECT id FROM blocks WHERE namespace = ? AND session_id = ? AND kind = 'block' LIMIT ?",
                (namespace, session_id, _MEMBERS_MAX + 1),
            )
        ]
        members = frozenset(ids) if len(ids) <= _MEMBERS_MAX else None
        if len(self._members_cache) >= 8 or any(k[2:] != key[2:] for k in self._members_cache):
            self._members_cache.clear()  # a write made them all stale; a few sessions are asked at a time
        self._members_cache[key] = members
        return members

    def mention_keys(
        self,
        block_ids: Sequence[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        entity_classes: Collection[str] | None = None,
    ) -> dict[str, tuple[tuple[str, int], ...]]:
        """`RecallStore.mention_keys` on SQLite: the mention rows alone, an entity's key being its id past the
        namespace's prefix (`entity_id_for`), and a class a range of those ids. For the second hop's seeds at 100k
        blocks: 0.60 ms on average against 1.01 ms joined with the entity rows (p95 2.5 against 4.0 ms), before
        building records for ~1,400 rows (`block_info`: 2.2 ms on average)."""
        self._index_mentions()
        ids = list(dict.fromkeys(block_ids))
        prefix = entity_id_for(namespace, '')
        ranges, range_params = _entity_ranges(namespace, entity_classes)
        where, params = _scope_sql(namespace, session_id, '+')  # blocks by id, never by the scope index
        found: dict[str, list[tuple[str, int]]] = {}
        with self._read() as conn:
            for start in range(0, len(ids), _ID_BATCH):
                chunk = ids[start : start + _ID_BATCH]
                rows = _json_rows(
                    conn,
                    'SELECT m.source_id AS source_id, m.entity_id AS entity_id, m.count AS count FROM mentions m '
                    f'WHERE m.source_id IN (SELECT id FROM blocks WHERE id IN ({", ".join("?" * len(chunk))}) '
                    f"AND +kind = 'block' AND {where}) AND ({ranges})",
                    [*chunk, *params, *range_params],
                    'source_id, entity_id, count',
                )
                for source_id, entity_id, count in rows:
                    found.setdefault(source_id, []).append((entity_id[len(prefix) :], count))
        for mentions in found.values():
            mentions.sort(key=_KEY)  # then, stably, most mentions first: both sorts keyed in C
            mentions.sort(key=_COUNT, reverse=True)
        return {block_id: tuple(found[block_id]) for block_id in ids if block_id in found}

    def block_info(
        self,
        block_ids: Sequence[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        mementos: bool = False,
        entities: bool = False,
        entity_classes: Collection[str] | None = None,
    ) -> list[BlockInfo]:
        """`RecallStore.block_info` on SQLite."""
        from dataclasses import replace

        from .._schema import memento_id_for
        from ..recall._values import BlockInfo

        where, params = _scope_sql(namespace, session_id, '+b.')  # unary +: found by id, never by scope
        ids = list(dict.fromkeys(block_ids))
        found: dict[str, BlockInfo] = {}
        linked: dict[str, str | None] = {}
        with self._read() as conn:
            for start in range(0, len(ids), 500):  # one statement per 500 ids, neighbours read off blocks_scope
                chunk = ids[start : start + 500]
                rows = _json_rows(
                    conn,
                    'SELECT b.id AS id, b.session_id AS session_id, b.seq AS seq, b.first_message AS first_message, '
                    'b.last_message AS last_message, b.tokens AS tokens, b.started_at AS started_at, '
                    'b.memento_id AS memento_id, (SELECT p.id FROM blocks p WHERE p.namespace = b.namespace '
                    "AND p.session_id = b.session_id AND p.kind = 'block' AND p.seq < b.seq ORDER BY p.seq DESC LIMIT 1) "
                    'AS previous_id, (SELECT n.id FROM blocks n WHERE n.namespace = b.namespace AND n.session_id = '
                    "b.session_id AND n.kind = 'block' AND n.seq > b.seq ORDER BY n.seq LIMIT 1) AS next_id "
                    f"FROM blocks b WHERE b.id IN ({', '.join('?' * len(chunk))}) AND +b.kind = 'block' AND {where}",
                    [*chunk, *params],
                    'id, session_id, seq, first_message, last_message, tokens, started_at, memento_id, previous_id, '
                    'next_id',
                )
                for block_id, session, seq, first, last, tokens, started, memento_id, previous_id, next_id in rows:
                    found[block_id] = BlockInfo(
                        id=block_id,
                        session_id=session,
                        seq=seq,
                        first_message=first,
                        last_message=last,
                        tokens=tokens,
                        started_at=started,
                        previous_id=previous_id,
                        next_id=next_id,
                    )
                    linked[block_id] = memento_id
        if mementos and found:
            # as `recall` always read it: the memento made of the block alone, else the one linked to it
            own = {block_id: memento_id_for(namespace, info.session_id, [block_id]) for block_id, info in found.items()}
            wanted = sorted({*own.values(), *(m for m in linked.values() if m is not None)})
            scope, scope_params = _scope_sql(namespace, session_id, '+')  # by id, not by the scope index
            records = {
                record.id: record
                for start in range(0, len(wanted), 500)
                for record in self._mementos(
                    f'id IN ({", ".join("?" * len(wanted[start : start + 500]))}) AND {scope}',
                    [*wanted[start : start + 500], *scope_params],
                )
            }
            for block_id, info in found.items():
                record = records.get(own[block_id]) or records.get(linked[block_id] or '')
                found[block_id] = replace(info, memento=record)
        if entities and found:  # every block's entities in one statement, each block's as `entities_of` orders them
            self._index_mentions()
            mentioned: dict[str, list[tuple[EntityRecord, int]]] = {block_id: [] for block_id in found}
            sources = list(found)
            in_classes, class_params = _entity_ranges(namespace, entity_classes)  # mentions out of them never joined
            with self._read() as conn:
                for start in range(0, len(sources), 500):
                    chunk = sources[start : start + 500]
                    rows = _json_rows(
                        conn,
                        'SELECT m.source_id AS source_id, e.key AS key, e.name AS name, e.kind AS kind, m.count AS '
                        f'count FROM mentions m JOIN entities e ON e.id = m.entity_id WHERE m.source_id IN '
                        f'({", ".join("?" * len(chunk))}) AND e.namespace = ?'
                        + ('' if entity_classes is None else f' AND ({in_classes})'),
                        [*chunk, namespace, *([] if entity_classes is None else class_params)],
                        'source_id, key, name, kind, count',
                    )
                    rows.sort(key=lambda row: (row[0], -row[4], row[1]))
                    for source_id, key, name, kind, count in rows:
                        mentioned[source_id].append((_entity_record(key, name, kind), count))
            for block_id, info in found.items():
                found[block_id] = replace(info, entities=tuple(mentioned[block_id]))
        return [found[block_id] for block_id in ids if block_id in found]

    # -- integrity reads (issue 8: `mementograph verify`) ----------------------------------------------------------

    def check_storage(self) -> tuple[str, ...]:
        """`GraphStore.check_storage` on SQLite: `PRAGMA integrity_check` (every b-tree page, the free list, each
        index against its table), its first findings. It finds a damaged page no other read of `verify` touches
        (the full-text index's, an index's); a zeroed overflow page of a value it cannot see, as SQLite keeps no
        checksums: that one shows as a block or log message failing its sha256, or a record that does not decode.

        Raises:
            StoreCorruptError: the file is too damaged to check (its first page, the schema, a page both checks
                stop at).
        """
        failed: StoreCorruptError | None = None
        # the full check also reads the row of every index entry, and stops at the first page it cannot read; the
        # quick one checks each page alone, so it still names the damaged one
        for pragma in ('integrity_check', 'quick_check'):
            try:
                with self._read() as conn:
                    rows = conn.execute(f'PRAGMA {pragma}({_INTEGRITY_FINDINGS})').fetchall()
            except StoreCorruptError as exc:
                failed = exc
                continue
            found = tuple(
                line for row in rows for line in str(row[0]).splitlines() if line and not line.startswith('***')
            )
            return () if found == ('ok',) else found
        assert failed is not None
        raise failed

    def scan_blocks(
        self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None, after: str = '', limit: int = 256
    ) -> list[BlockRecord]:
        """`GraphStore.scan_blocks` on SQLite: a seek on the unique id index per page (the unary `+` keeps the
        planner off the scope index, whose order would mean sorting the whole scope, bytes included, per page)."""
        clauses = ['id > ?', '+namespace = ?']
        params: list[Any] = [after, namespace]
        if session_id is not None:
            clauses.append('+session_id = ?')
            params.append(session_id)
        with self._read() as conn:
            rows = conn.execute(
                f'SELECT {_BLOCK_COLUMNS} FROM blocks WHERE {" AND ".join(clauses)} ORDER BY id LIMIT ?',
                [*params, max(limit, 0)],
            ).fetchall()
        return [_block(row) for row in rows]

    def graph_links(self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None) -> GraphLinks:
        """`GraphStore.graph_links` on SQLite. `NEXT` is not stored here: like the graph view (`_cypher`), it is
        derived from block order, so it can only break through the order itself (which `verify_store` checks)."""
        block_where, block_params = _scope_sql(namespace, session_id, 'b.')
        page_where, page_params = _scope_sql(namespace, session_id, 'p.')
        with self._read() as conn:
            block_rows = conn.execute(
                'SELECT b.id, b.session_id, b.kind, b.seq, b.first_message, b.last_message, EXISTS (SELECT 1 FROM '
                'sessions s WHERE s.namespace = b.namespace AND s.id = b.session_id) AS in_session '
                f'FROM blocks b WHERE {block_where} ORDER BY b.session_id, b.kind, b.seq, b.id',
                block_params,
            ).fetchall()
            page_rows = conn.execute(
                'SELECT p.id, p.session_id, p.number, p.first_turn, p.last_turn FROM pages p '
                f'WHERE {page_where} ORDER BY p.session_id, p.number',
                page_params,
            ).fetchall()
            members: dict[str, list[tuple[str, int]]] = {row[0]: [] for row in page_rows}
            for page_id, block_id, position in conn.execute(
                'SELECT pb.page_id, pb.block_id, pb.position FROM page_blocks pb JOIN pages p ON p.id = pb.page_id '
                f'WHERE {page_where} ORDER BY pb.page_id, pb.position',
                page_params,
            ):
                members[page_id].append((block_id, int(position)))
            where, params = _scope_sql(namespace, session_id)
            memento_rows = conn.execute(
                f'SELECT id, session_id, level, summarizes_json FROM mementos WHERE {where} ORDER BY rid', params
            ).fetchall()
        following: dict[str, str] = {}
        previous: sqlite3.Row | None = None  # the last block of kind 'block', as `_cypher._add_blocks` walks them
        for row in block_rows:
            if row['kind'] != 'block':
                continue
            if previous is not None and previous['session_id'] == row['session_id']:
                following[previous['id']] = row['id']
            previous = row
        blocks = tuple(
            BlockLink(
                id=row['id'], session_id=row['session_id'], kind=row['kind'], seq=row['seq'],
                first_message=row['first_message'], last_message=row['last_message'],
                next_ids=(following[row['id']],) if row['id'] in following else (), in_session=bool(row['in_session']),
            )
            for row in block_rows
        )  # fmt: skip
        # A memento's SUMMARIZES edges are its `summarizes_json`: targets and edges are one record here.
        mementos = tuple(
            MementoLink(id=row['id'], session_id=row['session_id'], level=row['level'], summarizes=targets,
                        targets=targets)
            for row in memento_rows
            for targets in [tuple(self._stored_json(row['summarizes_json'], f'what memento {row["id"]} summarizes'))]
        )  # fmt: skip
        pages = tuple(
            PageLink(
                id=row['id'], session_id=row['session_id'], number=row['number'], first_turn=row['first_turn'],
                last_turn=row['last_turn'], members=tuple(members[row['id']]),
            )
            for row in page_rows
        )  # fmt: skip
        return GraphLinks(blocks=blocks, mementos=mementos, pages=pages)


def _id_chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    """`ids` in runs of `_IDS_PER_STATEMENT`, one `IN (...)` statement each."""
    for start in range(0, len(ids), _IDS_PER_STATEMENT):
        yield ids[start : start + _IDS_PER_STATEMENT]
