"""`SqliteStore` -- the embedded default: SQLite (WAL) is the source of truth, FTS5 gives BM25.

`memory://` is the same store over an in-memory SQLite database: one code path, identical behaviour, nothing on
disk. The networkx traversal view is built from these tables on demand (`graph()`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..._messages import deserialize_messages, message_text
from .._schema import (
    DEFAULT_NAMESPACE,
    BlockKind,
    BlockRecord,
    EntityRecord,
    Eviction,
    MementoRecord,
    PageRecord,
    SessionEvent,
    SessionRecord,
    StoreStats,
    entity_id_for,
)
from ._base import check_block, fts_terms, now_iso
from ._errors import (
    BlockNotFoundError,
    MementoNotFoundError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    UnsupportedQueryError,
)
from ._protocol import RecoveredBlock, TextHit

if TYPE_CHECKING:  # recall reads (section at the end of SqliteStore); a runtime import would be circular
    from ..recall._values import BlockInfo, EntityLookup

__all__ = ('SqliteStore',)

FORMAT: Final = 'mementograph-sqlite-1'
DEFAULT_BUSY_TIMEOUT: Final = 5.0

_SCHEMA: Final = """
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
    messages_json BLOB NOT NULL,
    text TEXT NOT NULL,
    started_at TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS blocks_scope ON blocks (namespace, session_id, kind, seq);
CREATE TABLE IF NOT EXISTS mementos (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL,
    session_id TEXT NOT NULL,
    text TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    score REAL,
    verified INTEGER NOT NULL,
    iterations INTEGER NOT NULL,
    compressor TEXT NOT NULL,
    level INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS mementos_scope ON mementos (namespace, session_id, rid);
CREATE TABLE IF NOT EXISTS summarizes (
    memento_id TEXT NOT NULL, target_id TEXT NOT NULL, position INTEGER NOT NULL,
    PRIMARY KEY (memento_id, target_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS summarizes_target ON summarizes (target_id);
CREATE TABLE IF NOT EXISTS entities (
    id TEXT PRIMARY KEY, namespace TEXT NOT NULL, key TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS mentions (
    source_id TEXT NOT NULL, entity_id TEXT NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (source_id, entity_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS mentions_entity ON mentions (entity_id, count DESC, source_id);
CREATE TABLE IF NOT EXISTS pages (
    id TEXT PRIMARY KEY, namespace TEXT NOT NULL, session_id TEXT NOT NULL, number INTEGER NOT NULL,
    first_turn INTEGER NOT NULL, last_turn INTEGER NOT NULL, summary TEXT NOT NULL, topics_json TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS pages_scope ON pages (namespace, session_id, number);
CREATE TABLE IF NOT EXISTS page_blocks (
    page_id TEXT NOT NULL, block_id TEXT NOT NULL, position INTEGER NOT NULL, PRIMARY KEY (page_id, block_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    namespace TEXT NOT NULL, session_id TEXT NOT NULL, seq INTEGER NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL,
    message_index INTEGER, sha256 TEXT NOT NULL, payload BLOB NOT NULL, block_ids_json TEXT NOT NULL,
    created_at TEXT NOT NULL, PRIMARY KEY (namespace, session_id, seq), UNIQUE (namespace, session_id, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS events_messages ON events (namespace, session_id, message_index);
CREATE VIRTUAL TABLE IF NOT EXISTS text_fts USING fts5 (
    text, item_id UNINDEXED, namespace UNINDEXED, session_id UNINDEXED, tokenize = 'unicode61'
);
"""

_BLOCK_COLUMNS: Final = (
    'id, session_id, namespace, seq, first_message, last_message, tokens, sha256, messages_json, kind, text, started_at'
)
_MEMENTO_COLUMNS: Final = 'id, session_id, namespace, text, tokens, score, verified, iterations, compressor, level'


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
        messages_json=bytes(row['messages_json']),
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


class SqliteStore:
    """Graph store on one SQLite file (or in memory).

    Block text is not stored: the full-text index renders it from the archived messages, lazily, at the first
    search after an eviction (`BlockRecord.text` reads back empty). One eviction is one `BEGIN IMMEDIATE ... COMMIT`
    transaction; WAL with `synchronous=NORMAL` means a process
    killed after `COMMIT` loses nothing and one killed before leaves nothing. Another process writing the same
    file is waited for up to `busy_timeout` seconds, then `StoreBusyError` names the file.
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

    # -- connection -------------------------------------------------------------------------------------------

    def _where(self) -> str:
        return 'the in-memory store' if self._path is None else str(self._path)

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
            conn.execute('PRAGMA journal_mode = WAL')
            conn.execute('PRAGMA synchronous = NORMAL')
            conn.execute('PRAGMA cache_size = -65536')  # 64 MiB: index pages stay hot at 100k blocks
            self._init_schema(conn)
        except sqlite3.OperationalError as exc:
            conn.close()
            if 'locked' in str(exc) or 'busy' in str(exc):
                raise StoreBusyError(self._busy_message()) from exc
            raise StoreUnavailableError(f'cannot use {self._where()}: {exc}') from exc
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreUnavailableError(
                f'{self._where()} is not a mementograph SQLite database, or it is corrupt ({exc}); '
                'move it aside or choose another --store'
            ) from exc
        return conn

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        row = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
        has_tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0] > 0
        if row is None and has_tables:
            raise sqlite3.DatabaseError('it holds tables of another application')
        if row is not None:
            fmt = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if fmt is None or fmt[0] != FORMAT:
                raise sqlite3.DatabaseError(f'unknown format {fmt[0] if fmt else None!r}, expected {FORMAT!r}')
            return
        # executescript commits any open transaction first, so the whole setup is one script.
        try:
            conn.executescript(
                f"BEGIN IMMEDIATE;\n{_SCHEMA}\nINSERT OR IGNORE INTO meta (key, value) VALUES ('format', '{FORMAT}');\nCOMMIT;"
            )
        except BaseException:
            if conn.in_transaction:
                conn.execute('ROLLBACK')
            raise

    def _busy_message(self) -> str:
        return (
            f'{self._where()} is locked by another writer and stayed locked for {self._busy_timeout:g} s; '
            'retry when it finishes, or raise the wait with ?busy_timeout=SECONDS in the store URI'
        )

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._conn
            except sqlite3.OperationalError as exc:
                if 'locked' in str(exc) or 'busy' in str(exc):
                    raise StoreBusyError(self._busy_message()) from exc
                raise StoreUnavailableError(f'reading {self._where()} failed: {exc}') from exc
            except sqlite3.DatabaseError as exc:
                raise StoreUnavailableError(f'{self._where()} is corrupt or unreadable: {exc}') from exc

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            try:
                conn.execute('BEGIN IMMEDIATE')
            except sqlite3.OperationalError as exc:
                if 'locked' in str(exc) or 'busy' in str(exc):
                    raise StoreBusyError(self._busy_message()) from exc
                raise StoreUnavailableError(f'cannot write {self._where()}: {exc}') from exc
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
                    raise StoreUnavailableError(f'writing {self._where()} failed, nothing was written: {exc}') from exc
                raise

    @property
    def uri(self) -> str:
        return self._uri

    @property
    def path(self) -> Path | None:
        """The database file, or `None` in memory."""
        return self._path

    def close(self) -> None:
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
        created = now_iso()
        ns, sid = eviction.namespace, eviction.session_id
        with self._write() as conn:
            conn.execute(
                'INSERT OR IGNORE INTO sessions (namespace, id, created_at) VALUES (?, ?, ?)', (ns, sid, created)
            )
            for block in eviction.blocks:
                conn.execute(
                    'INSERT OR IGNORE INTO blocks (id, namespace, session_id, seq, kind, first_message, last_message, '
                    'tokens, sha256, messages_json, text, started_at, created_at) '
                    'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
                    (
                        block.id, ns, sid, block.seq, block.kind, block.first_message, block.last_message,
                        block.tokens, block.sha256, block.messages_json, '', block.started_at, created,
                    ),
                )  # fmt: skip
            for memento in eviction.mementos:
                cur = conn.execute(
                    'INSERT OR IGNORE INTO mementos (id, namespace, session_id, text, tokens, score, verified, '
                    'iterations, compressor, level, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
                    (
                        memento.id, ns, sid, memento.text, memento.tokens, memento.score, int(memento.verified),
                        memento.iterations, memento.compressor, memento.level, created,
                    ),
                )  # fmt: skip
                if cur.rowcount == 1:
                    conn.executemany(
                        'INSERT OR IGNORE INTO summarizes (memento_id, target_id, position) VALUES (?, ?, ?)',
                        [(memento.id, target, pos) for pos, target in enumerate(memento.summarizes)],
                    )
            for mention in eviction.mentions:
                entity_id = entity_id_for(ns, mention.entity.key)
                conn.execute(
                    'INSERT OR IGNORE INTO entities (id, namespace, key, name, kind) VALUES (?, ?, ?, ?, ?)',
                    (entity_id, ns, mention.entity.key, mention.entity.name, mention.entity.kind),
                )
                conn.execute(
                    'INSERT OR IGNORE INTO mentions (source_id, entity_id, count) VALUES (?, ?, ?)',
                    (mention.source_id, entity_id, mention.count),
                )
            for page in eviction.pages:
                conn.execute(
                    'INSERT INTO pages (id, namespace, session_id, number, first_turn, last_turn, summary, topics_json) '
                    'VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET first_turn = excluded.first_turn, '
                    'last_turn = excluded.last_turn, summary = excluded.summary, topics_json = excluded.topics_json',
                    (
                        page.id, ns, sid, page.number, page.first_turn, page.last_turn, page.summary,
                        json.dumps(list(page.topics)),
                    ),
                )  # fmt: skip
                conn.executemany(
                    'INSERT OR IGNORE INTO page_blocks (page_id, block_id, position) VALUES (?, ?, ?)',
                    [(page.id, block_id, pos) for pos, block_id in enumerate(page.block_ids)],
                )
            self._insert_events(conn, eviction.events, created)

    def append_events(self, events: Sequence[SessionEvent]) -> None:
        if not events:
            return
        created = now_iso()
        with self._write() as conn:
            for ns, sid in {(event.namespace, event.session_id) for event in events}:
                conn.execute(
                    'INSERT OR IGNORE INTO sessions (namespace, id, created_at) VALUES (?, ?, ?)', (ns, sid, created)
                )
            self._insert_events(conn, events, created)

    @staticmethod
    def _insert_events(conn: sqlite3.Connection, events: Sequence[SessionEvent], created: str) -> None:
        next_seq: dict[tuple[str, str], int] = {}
        for event in events:
            scope = (event.namespace, event.session_id)
            exists = conn.execute(
                'SELECT 1 FROM events WHERE namespace = ? AND session_id = ? AND key = ?', (*scope, event.key)
            ).fetchone()
            if exists:
                continue
            if scope not in next_seq:
                row = conn.execute(
                    'SELECT max(seq) FROM events WHERE namespace = ? AND session_id = ?', scope
                ).fetchone()
                next_seq[scope] = -1 if row[0] is None else int(row[0])
            next_seq[scope] += 1
            conn.execute(
                'INSERT INTO events (namespace, session_id, seq, key, kind, message_index, sha256, payload, '
                'block_ids_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
                (
                    *scope, next_seq[scope], event.key, event.kind, event.message_index, event.sha256, event.payload,
                    json.dumps(list(event.block_ids)), event.created_at or created,
                ),
            )  # fmt: skip

    def delete_session(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> int:
        scope = (namespace, session_id)
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
            for chunk_start in range(0, len(ids), 500):
                chunk = ids[chunk_start : chunk_start + 500]
                marks = ','.join('?' * len(chunk))
                removed += conn.execute(f'DELETE FROM mentions WHERE source_id IN ({marks})', chunk).rowcount
                removed += conn.execute(f'DELETE FROM summarizes WHERE memento_id IN ({marks})', chunk).rowcount
                conn.execute(f'DELETE FROM text_fts WHERE item_id IN ({marks})', chunk)
            for page_id in page_ids:
                removed += conn.execute('DELETE FROM page_blocks WHERE page_id = ?', (page_id,)).rowcount
            for table in ('blocks', 'mementos', 'pages', 'events'):
                removed += conn.execute(f'DELETE FROM {table} WHERE namespace = ? AND session_id = ?', scope).rowcount
            removed += conn.execute('DELETE FROM sessions WHERE namespace = ? AND id = ?', scope).rowcount
            removed += conn.execute(
                'DELETE FROM entities WHERE namespace = ? AND id NOT IN (SELECT entity_id FROM mentions)', (namespace,)
            ).rowcount
        return removed

    # -- reads ------------------------------------------------------------------------------------------------

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
                block_ids=tuple(json.loads(row['block_ids_json'])),
                created_at=row['created_at'],
            )
            for row in rows
        ]

    def last_message_index(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> int:
        with self._read() as conn:
            row = conn.execute(
                'SELECT max(message_index) FROM events WHERE namespace = ? AND session_id = ?', (namespace, session_id)
            ).fetchone()
        return -1 if row[0] is None else int(row[0])

    def get_block(
        self, block_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> BlockRecord:
        where, params = _scope_sql(namespace, session_id)
        with self._read() as conn:
            row = conn.execute(
                f'SELECT {_BLOCK_COLUMNS} FROM blocks WHERE id = ? AND {where}', [block_id, *params]
            ).fetchone()
        if row is None:
            raise BlockNotFoundError(f'no evicted block {block_id!r} in namespace {namespace!r}' + (
                f', session {session_id!r}' if session_id else ''))  # fmt: skip
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
            targets: dict[str, list[str]] = {row['id']: [] for row in rows}
            if targets:
                for start in range(0, len(rows), 500):
                    chunk = [row['id'] for row in rows[start : start + 500]]
                    marks = ','.join('?' * len(chunk))
                    for memento_id, target_id in conn.execute(
                        f'SELECT memento_id, target_id FROM summarizes WHERE memento_id IN ({marks}) '
                        'ORDER BY memento_id, position',
                        chunk,
                    ):
                        targets[memento_id].append(target_id)
        return [
            MementoRecord(
                id=row['id'],
                session_id=row['session_id'],
                namespace=row['namespace'],
                text=row['text'],
                tokens=row['tokens'],
                summarizes=tuple(targets[row['id']]),
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

    def memento_of(
        self, target_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> MementoRecord | None:
        where, params = _scope_sql(namespace, session_id)
        found = self._mementos(
            f'id IN (SELECT memento_id FROM summarizes WHERE target_id = ?) AND {where}', [target_id, *params]
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
        where, params = _scope_sql(namespace, session_id)
        if kind is not None:
            where += ' AND kind = ?'
            params.append(kind)
        with self._read() as conn:
            rows = conn.execute(
                f'SELECT {_BLOCK_COLUMNS} FROM blocks WHERE {where} ORDER BY session_id, seq, kind', params
            ).fetchall()
        return [_block(row) for row in rows]

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
                    r[0]
                    for r in conn.execute(
                        'SELECT block_id FROM page_blocks WHERE page_id = ? ORDER BY position', (row['id'],)
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
                topics=tuple(json.loads(row['topics_json'])),
                block_ids=tuple(members[row['id']]),
            )
            for row in rows
        ]

    def entities_of(self, source_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> list[tuple[EntityRecord, int]]:
        """Entities a block or memento `MENTIONS`, with counts."""
        with self._read() as conn:
            rows = conn.execute(
                'SELECT e.key, e.name, e.kind, m.count FROM mentions m JOIN entities e ON e.id = m.entity_id '
                'WHERE m.source_id = ? AND e.namespace = ? ORDER BY m.count DESC, e.key',
                (source_id, namespace),
            ).fetchall()
        return [(EntityRecord(key=row[0], name=row[1], kind=row[2]), row[3]) for row in rows]

    def _index_text(self) -> None:
        """Bring the full-text index up to date.

        Indexing is deferred from eviction to the first search after it: tokenizing a block's text costs more
        than writing it, and evictions sit on the agent's request path while searches are rarer.
        """
        with self._read() as conn:  # searches mostly find it current: no write lock for them
            marks = dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'fts_%'").fetchall())
            current = all(
                (conn.execute(f'SELECT max(rid) FROM {table}').fetchone()[0] or 0) <= int(marks.get(f'fts_{table}', 0))
                for table in ('blocks', 'mementos')
            )
        if current:
            return
        with self._write() as conn:
            marks = dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'fts_%'").fetchall())
            done = int(marks.get('fts_mementos', 0))
            top = conn.execute('SELECT max(rid) FROM mementos').fetchone()[0] or 0
            if top > done:
                conn.execute(
                    'INSERT INTO text_fts (text, item_id, namespace, session_id) '
                    'SELECT text, id, namespace, session_id FROM mementos WHERE rid > ? AND rid <= ?',
                    (done, top),
                )
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('fts_mementos', ?)", (str(top),))
            done = int(marks.get('fts_blocks', 0))
            rows = conn.execute(
                'SELECT rid, id, namespace, session_id, messages_json FROM blocks WHERE rid > ? ORDER BY rid', (done,)
            ).fetchall()
            for row in rows:
                text = '\n'.join(message_text(m) for m in deserialize_messages(bytes(row['messages_json'])))
                conn.execute(
                    'INSERT INTO text_fts (text, item_id, namespace, session_id) VALUES (?, ?, ?, ?)',
                    (text, row['id'], row['namespace'], row['session_id']),
                )
            if rows:
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('fts_blocks', ?)", (str(rows[-1]['rid']),)
                )

    def search_text(
        self, query: str, *, k: int = 10, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[TextHit]:
        terms = fts_terms(query)
        if not terms or k <= 0:
            return []
        self._index_text()
        match = ' OR '.join('"' + term.replace('"', '""') + '"' for term in terms)
        where, params = _scope_sql(namespace, session_id)
        with self._read() as conn:
            rows = conn.execute(
                f'SELECT item_id, bm25(text_fts) AS rank FROM text_fts WHERE text_fts MATCH ? AND {where} '
                'ORDER BY rank LIMIT ?',
                [match, *params, k],
            ).fetchall()
            hits: list[TextHit] = []
            for item_id, rank in rows:
                if item_id.startswith('mem_'):
                    block_ids = tuple(
                        r[0]
                        for r in conn.execute(
                            'SELECT target_id FROM summarizes WHERE memento_id = ? ORDER BY position', (item_id,)
                        )
                    )
                else:
                    block_ids = (item_id,)
                hits.append(TextHit(id=item_id, block_ids=block_ids, score=-float(rank)))
        return hits

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

        from ._cypher import DEFAULT_QUERY_LIMIT, DEFAULT_QUERY_TIMEOUT, prepare_query, run_embedded, scoped_params

        prepare_query(cypher)  # refuse writes before anything else, whatever the subset
        if find_spec('grandcypher') is None:
            raise UnsupportedQueryError(
                'the embedded store runs Cypher through the grand-cypher package, which is not installed '
                '(pip install grand-cypher); or use the Neo4j backend (--store neo4j://HOST:7687)'
            )
        merged = scoped_params(params, session_id=session_id, namespace=namespace)
        return run_embedded(
            self.graph(namespace=merged['namespace']),
            cypher,
            merged,
            limit=DEFAULT_QUERY_LIMIT if limit is None else limit,
            timeout=DEFAULT_QUERY_TIMEOUT if timeout is None else timeout,
        )

    def graph(self, *, namespace: str = DEFAULT_NAMESPACE) -> Any:
        """The networkx `MultiDiGraph` view of one namespace, shaped like the Neo4j graph (labels in `__labels__`).

        Built from the tables on demand and cached until the database changes (this connection's
        `total_changes` or another connection's commit, seen through `PRAGMA data_version`), so repeated queries
        between writes do not rebuild it. Treat it as read-only: it is shared between calls.
        """
        from ._cypher import sqlite_graph_view

        with self._read() as conn:
            version = (namespace, conn.total_changes, conn.execute('PRAGMA data_version').fetchone()[0])
            cached: tuple[tuple[str, int, int], Any] | None = getattr(self, '_graph_cache', None)
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
    ) -> EntityLookup:
        """`RecallStore.entity_postings` on SQLite."""
        from ..recall._values import EntityLookup, EntityPostings, Posting

        found: dict[str, tuple[str, str]] = {}
        with self._read() as conn:
            for key in dict.fromkeys(keys):
                low = entity_id_for(namespace, key)
                if prefix:
                    rows = conn.execute(
                        'SELECT key, name, kind FROM entities WHERE id >= ? AND id < ? ORDER BY id LIMIT ?',
                        (low, low + '\U0010ffff', max_entities),
                    ).fetchall()
                else:
                    rows = conn.execute('SELECT key, name, kind FROM entities WHERE id = ?', (low,)).fetchall()
                for row in rows:
                    found[row[0]] = (row[1], row[2])
            total = conn.execute(
                "SELECT count(*) FROM blocks WHERE namespace = ? AND kind = 'block'", (namespace,)
            ).fetchone()[0]
            entities: list[EntityPostings] = []
            for key in sorted(found):
                entity_id = entity_id_for(namespace, key)
                blocks = conn.execute(
                    'SELECT count(*) FROM (SELECT 1 FROM mentions WHERE entity_id = ? '
                    "AND source_id >= 'blk_' AND source_id < 'blk`' LIMIT ?)",
                    (entity_id, count_limit),
                ).fetchone()[0]
                postings: list[Posting] = []
                if limit > 0 and blocks:
                    if session_id is None:
                        rows = conn.execute(
                            'SELECT m.source_id, m.count FROM mentions m WHERE m.entity_id = ? '
                            "AND m.source_id >= 'blk_' AND m.source_id < 'blk`' "
                            'ORDER BY m.count DESC, m.source_id LIMIT ?',
                            (entity_id, limit),
                        ).fetchall()
                    else:
                        rows = conn.execute(
                            'SELECT m.source_id, m.count FROM mentions m JOIN blocks b ON b.id = m.source_id '
                            "WHERE m.entity_id = ? AND b.namespace = ? AND b.session_id = ? AND b.kind = 'block' "
                            'ORDER BY m.count DESC, m.source_id LIMIT ?',
                            (entity_id, namespace, session_id, limit),
                        ).fetchall()
                    postings = [Posting(block_id=row[0], count=int(row[1])) for row in rows]
                name, kind = found[key]
                entities.append(
                    EntityPostings(
                        entity=EntityRecord(key=key, name=name, kind=kind), blocks=int(blocks), postings=tuple(postings)
                    )
                )
        return EntityLookup(total_blocks=int(total), entities=tuple(entities))

    def block_info(
        self, block_ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[BlockInfo]:
        """`RecallStore.block_info` on SQLite."""
        from ..recall._values import BlockInfo

        where, params = _scope_sql(namespace, session_id)
        infos: list[BlockInfo] = []
        with self._read() as conn:
            for block_id in dict.fromkeys(block_ids):
                row = conn.execute(
                    'SELECT id, namespace, session_id, seq, first_message, last_message, tokens, started_at '
                    f"FROM blocks WHERE id = ? AND kind = 'block' AND {where}",
                    [block_id, *params],
                ).fetchone()
                if row is None:
                    continue
                scope = (row['namespace'], row['session_id'], row['seq'])
                previous = conn.execute(
                    "SELECT id FROM blocks WHERE namespace = ? AND session_id = ? AND kind = 'block' AND seq < ? "
                    'ORDER BY seq DESC LIMIT 1',
                    scope,
                ).fetchone()
                following = conn.execute(
                    "SELECT id FROM blocks WHERE namespace = ? AND session_id = ? AND kind = 'block' AND seq > ? "
                    'ORDER BY seq LIMIT 1',
                    scope,
                ).fetchone()
                infos.append(
                    BlockInfo(
                        id=row['id'],
                        session_id=row['session_id'],
                        seq=row['seq'],
                        first_message=row['first_message'],
                        last_message=row['last_message'],
                        tokens=row['tokens'],
                        started_at=row['started_at'],
                        previous_id=None if previous is None else previous[0],
                        next_id=None if following is None else following[0],
                    )
                )
        return infos
