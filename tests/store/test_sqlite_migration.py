"""Format-1 SQLite files (written before the eviction path was slimmed down) and format-2 files (before mentions
rode in block rows and page members in page rows) are migrated in place, whole or not at all, and read back exactly
as the old store read them; formats this version does not know are refused."""

from __future__ import annotations

import json
import sqlite3
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage

from mementograph._messages import message_text
from mementograph.knowledge_graph import (
    BlockRecord,
    EntityRecord,
    Eviction,
    MementoRecord,
    Mention,
    PageRecord,
    SessionEvent,
    entity_id_for,
    memento_id_for,
    page_id_for,
)
from mementograph.knowledge_graph.store import SqliteStore, StoreBusyError, StoreUnavailableError
from mementograph.knowledge_graph.store._sqlite import FORMAT
from tests.builders import rich_history, session_history

# The format-1 schema and write statements, verbatim from the store that wrote such files.
V1_SCHEMA = """
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

CREATED = '2025-01-01T00:00:00+00:00'


def write_v1(conn: sqlite3.Connection, eviction: Eviction) -> None:
    """The format-1 store's `write_eviction`."""
    ns, sid = eviction.namespace, eviction.session_id
    conn.execute('BEGIN IMMEDIATE')
    conn.execute('INSERT OR IGNORE INTO sessions (namespace, id, created_at) VALUES (?, ?, ?)', (ns, sid, CREATED))
    for block in eviction.blocks:
        conn.execute(
            'INSERT OR IGNORE INTO blocks (id, namespace, session_id, seq, kind, first_message, last_message, '
            'tokens, sha256, messages_json, text, started_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
            (
                block.id, ns, sid, block.seq, block.kind, block.first_message, block.last_message, block.tokens,
                block.sha256, block.messages_json, '', block.started_at, CREATED,
            ),
        )  # fmt: skip
    for memento in eviction.mementos:
        cur = conn.execute(
            'INSERT OR IGNORE INTO mementos (id, namespace, session_id, text, tokens, score, verified, iterations, '
            'compressor, level, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
            (
                memento.id, ns, sid, memento.text, memento.tokens, memento.score, int(memento.verified),
                memento.iterations, memento.compressor, memento.level, CREATED,
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
            (page.id, ns, sid, page.number, page.first_turn, page.last_turn, page.summary, json.dumps(page.topics)),
        )
        conn.executemany(
            'INSERT OR IGNORE INTO page_blocks (page_id, block_id, position) VALUES (?, ?, ?)',
            [(page.id, block_id, pos) for pos, block_id in enumerate(page.block_ids)],
        )
    for seq, event in enumerate(eviction.events):
        conn.execute(
            'INSERT INTO events (namespace, session_id, seq, key, kind, message_index, sha256, payload, '
            'block_ids_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
            (
                ns, sid, seq, event.key, event.kind, event.message_index, event.sha256, event.payload,
                json.dumps(list(event.block_ids)), CREATED,
            ),
        )  # fmt: skip
    conn.execute('COMMIT')


def block_of(messages: list[ModelMessage], seq: int) -> BlockRecord:
    return BlockRecord.from_messages(
        messages, session_id='s1', seq=seq, tokens=50, text='\n'.join(message_text(m) for m in messages)
    )


def memento_of(block_ids: list[str], text: str, *, level: int = 1, salt: str = '') -> MementoRecord:
    return MementoRecord(
        id=memento_id_for('default', 's1', [*block_ids, *([salt] if salt else [])]),
        session_id='s1',
        namespace='default',
        text=text,
        tokens=5,
        summarizes=tuple(block_ids),
        score=8.5,
        verified=level == 1,
        iterations=2,
        compressor='extractive',
        level=level,
    )


@pytest.fixture
def v1_file(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    """A format-1 database holding what the old store wrote for two blocks, their mementos, a second memento of
    the first block written later, a memento of mementos, mentions, a page and log events."""
    path = tmp_path / 'old.db'
    first, second = block_of(rich_history(), 0), block_of(session_history(2, prefix='zebra'), 10)
    m1, m2 = memento_of([first.id], 'giraffe memento one'), memento_of([second.id], 'memento two')
    late = memento_of([first.id], 'a later memento of block one', salt='again')
    # targets in an order that is not id order, so positions must be what orders them
    children = sorted([m1.id, m2.id], reverse=True)
    top = MementoRecord(
        id=memento_id_for('default', 's1', children), session_id='s1', namespace='default', text='top',
        tokens=2, summarizes=tuple(children), level=2,
    )  # fmt: skip
    shared = EntityRecord(key='file:app.py', name='app.py', kind='file')
    page = PageRecord(
        id=page_id_for('default', 's1', 1), session_id='s1', namespace='default', number=1, first_turn=0,
        last_turn=second.last_message, summary='two blocks', topics=('app.py',), block_ids=(first.id, second.id),
    )  # fmt: skip
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute('PRAGMA journal_mode = WAL')
    conn.executescript(f"BEGIN;\n{V1_SCHEMA}\nINSERT INTO meta VALUES ('format', 'mementograph-sqlite-1');\nCOMMIT;")
    write_v1(
        conn,
        Eviction(
            session_id='s1',
            blocks=(first, second),
            mementos=(m1, m2),
            mentions=(
                Mention(first.id, shared, 3),
                Mention(second.id, EntityRecord(key='file:app.py', name='APP.PY', kind='file'), 1),
                Mention(m1.id, EntityRecord(key='concept:giraffe', name='giraffe', kind='concept'), 1),
            ),
            pages=(page,),
            events=(
                SessionEvent(
                    session_id='s1', namespace='default', kind='message', payload=b'[]', sha256='x', message_index=4
                ),
                SessionEvent(
                    session_id='s1',
                    namespace='default',
                    kind='auto',
                    payload=b'{}',
                    sha256='',
                    block_ids=(first.id, second.id),
                ),
            ),
        ),
    )
    write_v1(conn, Eviction(session_id='s1', mementos=(late, top)))
    # the full-text index was current for the first eviction (its marks in meta), not for the second
    conn.execute('BEGIN')
    for item_id, text in ((first.id, 'zebra crossing block one'), (m1.id, m1.text), (m2.id, m2.text)):
        conn.execute("INSERT INTO text_fts VALUES (?, ?, 'default', 's1')", (text, item_id))
    conn.execute("INSERT INTO meta VALUES ('fts_blocks', '2'), ('fts_mementos', '2')")
    conn.execute('COMMIT')
    conn.close()
    return path, {'first': first, 'second': second, 'm1': m1, 'm2': m2, 'late': late, 'top': top, 'page': page}


def schema_of(path: Path) -> tuple[object, ...]:
    conn = sqlite3.connect(path)
    objects = sorted(conn.execute("SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'text_fts_%'"))
    columns = {
        name: [tuple(row) for row in conn.execute(f'PRAGMA table_xinfo({name})')]
        for kind, name, _ in objects
        if kind in ('table', 'view')
    }
    indexes = {
        name: [tuple(row) for row in conn.execute(f'PRAGMA index_xinfo({name})')]
        for kind, name, _ in objects
        if kind == 'index'
    }
    conn.close()
    return objects, columns, indexes


def test_format_1_file_is_migrated_in_place_and_reads_back_the_same(
    v1_file: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    path, old = v1_file
    first, second = old['first'], old['second']
    m1, m2, late, top, page = old['m1'], old['m2'], old['late'], old['top'], old['page']
    assert isinstance(first, BlockRecord) and isinstance(second, BlockRecord)
    assert isinstance(m1, MementoRecord) and isinstance(late, MementoRecord) and isinstance(top, MementoRecord)

    with SqliteStore(path) as store:
        assert store.recover_block(first.id).messages == tuple(rich_history())
        assert store.get_block(second.id).messages_json == second.messages_json
        # SUMMARIZES: declared order by position, and the first memento of a target wins as it did
        assert store.get_memento(top.id).summarizes == top.summarizes
        assert store.memento_of(first.id) == m1
        assert store.memento_of(second.id) == m2
        assert store.memento_of(m1.id) == top
        assert [m.id for m in store.list_mementos()] == [m1.id, m2.id, late.id, top.id]
        # entities keep their first name, mentions their counts
        assert store.entities_of(second.id) == [(EntityRecord(key='file:app.py', name='app.py', kind='file'), 1)]
        assert store.entities_of(first.id)[0][1] == 3
        assert store.list_pages() == [page]
        assert store.last_message_index('s1') == 4
        assert [e.kind for e in store.read_events('s1')] == ['message', 'auto']
        # full text: made again from the archived texts (format 5 scopes it), each row once
        assert [hit.id for hit in store.search_text('zebra')] == [second.id]
        assert store.search_text('crossing') == []  # the old index's own text is gone with it
        giraffe = {hit.id: hit for hit in store.search_text('giraffe')}
        assert set(giraffe) == {m1.id} and giraffe[m1.id].block_ids == (first.id,)
        assert {hit.id for hit in store.search_text('later')} == {late.id}
        stats = store.stats()
        assert (stats.blocks, stats.mementos, stats.entities, stats.pages, stats.events) == (2, 4, 1, 1, 2)
        # and it takes new writes
        third = block_of(session_history(1, prefix='after'), 20)
        store.write_eviction(Eviction(session_id='s1', blocks=(third,), mementos=(memento_of([third.id], 'new'),)))
        assert store.memento_of(third.id) is not None

    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (FORMAT,)
    assert conn.execute('PRAGMA integrity_check').fetchall() == [('ok',)]
    conn.close()
    # the migrated file has exactly the layout of a file created by this version
    with SqliteStore(tmp_path / 'fresh.db'):
        pass
    assert schema_of(path) == schema_of(tmp_path / 'fresh.db')
    with SqliteStore(path) as store:  # opening again is a plain open
        assert store.recover_block(third.id).record.id == third.id


def test_failed_migration_leaves_the_format_1_file_whole(v1_file: tuple[Path, dict[str, object]]) -> None:
    path, old = v1_file
    first = old['first']
    assert isinstance(first, BlockRecord)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute('CREATE TABLE mementos_v1 (x)')  # the migration's scratch name is taken: it fails midway
    before = conn.execute('SELECT count(*) FROM blocks').fetchone()

    with pytest.raises(StoreUnavailableError, match=f'{path}.*migrating it from .mementograph-sqlite-1.'):
        SqliteStore(path)

    assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ('mementograph-sqlite-1',)
    assert conn.execute('SELECT count(*) FROM blocks').fetchone() == before
    assert conn.execute('SELECT count(*) FROM summarizes').fetchone() == (5,)
    assert {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} >= {
        'blocks', 'mementos', 'summarizes', 'mementos_v1',
    }  # fmt: skip
    conn.execute('DROP TABLE mementos_v1')
    conn.close()
    with SqliteStore(path) as store:  # with the obstacle gone, the same file migrates
        assert store.recover_block(first.id).record.id == first.id


def test_migration_waits_for_a_writer_then_names_the_file(v1_file: tuple[Path, dict[str, object]]) -> None:
    path, _ = v1_file
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute('BEGIN IMMEDIATE')
    try:
        with pytest.raises(StoreBusyError, match=str(path)):
            SqliteStore(path, busy_timeout=0.2)
    finally:
        holder.execute('ROLLBACK')
        holder.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ('mementograph-sqlite-1',)
    conn.close()


def test_a_newer_format_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / 'newer.db'
    with SqliteStore(path):
        pass
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = 'mementograph-sqlite-11' WHERE key = 'format'")
    conn.commit()
    conn.close()

    with pytest.raises(StoreUnavailableError, match=f"{path}.*'mementograph-sqlite-11'.*newer"):
        SqliteStore(path)


# The format-2 schema and write statements, verbatim from the store that wrote such files.
V2_SCHEMA = """
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
    messages_json BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS blocks_scope ON blocks (namespace, session_id, kind, seq);
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
CREATE TABLE IF NOT EXISTS mention_queue (rid INTEGER PRIMARY KEY, namespace TEXT NOT NULL, data BLOB NOT NULL);
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
CREATE INDEX IF NOT EXISTS events_messages ON events (namespace, session_id, message_index)
    WHERE message_index IS NOT NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS text_fts USING fts5 (
    text, item_id UNINDEXED, namespace UNINDEXED, session_id UNINDEXED, tokenize = 'unicode61'
);
"""


def write_v2(conn: sqlite3.Connection, eviction: Eviction) -> None:
    """The format-2 store's `write_eviction` (mentions queued as zlib-compressed JSON, pages' members as rows)."""
    ns, sid = eviction.namespace, eviction.session_id
    first: dict[str, str] = {}
    for memento in eviction.mementos:
        for target in memento.summarizes:
            first.setdefault(target, memento.id)
    conn.execute('BEGIN IMMEDIATE')
    conn.execute('INSERT OR IGNORE INTO sessions (namespace, id, created_at) VALUES (?, ?, ?)', (ns, sid, CREATED))
    linked: set[str] = set()
    for block in eviction.blocks:
        if conn.execute(
            'INSERT INTO blocks (id, namespace, session_id, seq, kind, first_message, last_message, tokens, sha256, '
            'started_at, created_at, memento_id, text, messages_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) '
            'ON CONFLICT (id) DO NOTHING',
            (
                block.id, ns, sid, block.seq, block.kind, block.first_message, block.last_message, block.tokens,
                block.sha256, block.started_at, CREATED, first.get(block.id), '', block.messages_json,
            ),
        ).rowcount:  # fmt: skip
            linked.add(block.id)
    for memento in eviction.mementos:
        if conn.execute(
            'INSERT INTO mementos (id, namespace, session_id, tokens, score, verified, iterations, compressor, level, '
            'created_at, parent_id, summarizes_json, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) '
            'ON CONFLICT (id) DO NOTHING',
            (
                memento.id, ns, sid, memento.tokens, memento.score, int(memento.verified), memento.iterations,
                memento.compressor, memento.level, CREATED, first.get(memento.id), json.dumps(list(memento.summarizes)),
                memento.text,
            ),
        ).rowcount:  # fmt: skip
            linked.add(memento.id)
    for target, memento_id in first.items():
        if target not in linked:
            link = (memento_id, target, ns)
            if not conn.execute(
                'UPDATE blocks SET memento_id = ? WHERE id = ? AND namespace = ? AND memento_id IS NULL', link
            ).rowcount:
                conn.execute(
                    'UPDATE mementos SET parent_id = ? WHERE id = ? AND namespace = ? AND parent_id IS NULL', link
                )
    if eviction.mentions:
        groups: list[list[str | int]] = []
        group: list[str | int] = []
        source = None
        for mention in eviction.mentions:
            if mention.source_id != source:
                source = mention.source_id
                group = [source]
                groups.append(group)
            group += (mention.entity.key, mention.entity.name, mention.entity.kind, mention.count)
        data = zlib.compress(json.dumps(groups, separators=(',', ':')).encode(), 1)
        conn.execute('INSERT INTO mention_queue (namespace, data) VALUES (?, ?)', (ns, data))
    for page in eviction.pages:
        conn.execute(
            'INSERT INTO pages (id, namespace, session_id, number, first_turn, last_turn, summary, topics_json) '
            'VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET first_turn = excluded.first_turn, '
            'last_turn = excluded.last_turn, summary = excluded.summary, topics_json = excluded.topics_json',
            (page.id, ns, sid, page.number, page.first_turn, page.last_turn, page.summary, json.dumps(page.topics)),
        )
        conn.executemany(
            'INSERT OR IGNORE INTO page_blocks (page_id, block_id, position) VALUES (?, ?, ?)',
            [(page.id, block_id, pos) for pos, block_id in enumerate(page.block_ids)],
        )
    for event in eviction.events:
        conn.execute(
            'INSERT INTO events (namespace, session_id, seq, key, kind, message_index, sha256, payload, '
            'block_ids_json, created_at) SELECT ?1, ?2, coalesce(max(seq), -1) + 1, ?3, ?4, ?5, ?6, ?7, ?8, ?9 '
            'FROM events WHERE namespace = ?1 AND session_id = ?2 '
            'ON CONFLICT (namespace, session_id, key) DO NOTHING',
            (
                ns, sid, event.key, event.kind, event.message_index, event.sha256, event.payload,
                json.dumps(list(event.block_ids)), CREATED,
            ),
        )  # fmt: skip
    conn.execute('COMMIT')


@pytest.fixture
def v2_file(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    """A format-2 database as the format-2 store left it: blocks, mementos (one of mementos), queued mentions
    (one batch already indexed, two not), a page grown over two evictions, log events and full-text marks."""
    path = tmp_path / 'v2.db'
    blocks = [
        block_of(rich_history(), 0),
        block_of(session_history(2, prefix='zebra'), 10),
        block_of(session_history(3, prefix='okapi'), 20),
    ]
    mementos = [
        memento_of([b.id], f'memento {i} of giraffe' if i == 0 else f'memento {i}') for i, b in enumerate(blocks)
    ]
    children = sorted([mementos[0].id, mementos[1].id], reverse=True)
    top = MementoRecord(
        id=memento_id_for('default', 's1', children), session_id='s1', namespace='default', text='top',
        tokens=2, summarizes=tuple(children), level=2,
    )  # fmt: skip
    page_id = page_id_for('default', 's1', 1)

    def page(*members: BlockRecord) -> PageRecord:
        return PageRecord(
            id=page_id, session_id='s1', namespace='default', number=1, first_turn=0, last_turn=members[-1].last_message,
            summary=f'{len(members)} blocks', topics=('app.py',), block_ids=tuple(m.id for m in members),
        )  # fmt: skip

    def mention(source: str, key: str, name: str, count: int = 1) -> Mention:
        return Mention(source, EntityRecord(key=key, name=name, kind='file'), count)

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute('PRAGMA journal_mode = WAL')
    conn.executescript(f"BEGIN;\n{V2_SCHEMA}\nINSERT INTO meta VALUES ('format', 'mementograph-sqlite-2');\nCOMMIT;")
    write_v2(
        conn,
        Eviction(
            session_id='s1', blocks=(blocks[0],), mementos=(mementos[0],),
            mentions=(mention(blocks[0].id, 'file:app.py', 'app.py', 3), mention(mementos[0].id, 'file:zoo.py', 'zoo.py')),
            pages=(page(blocks[0]),),
            events=(SessionEvent(session_id='s1', namespace='default', kind='message', payload=b'[]', sha256='x',
                                 message_index=4),),
        ),
    )  # fmt: skip
    # the entity index and the full-text index caught up with the first eviction, as a read would have made them
    conn.execute('BEGIN')
    for source_id, key, name, count in (
        (blocks[0].id, 'file:app.py', 'app.py', 3),
        (mementos[0].id, 'file:zoo.py', 'zoo.py', 1),
    ):
        conn.execute(
            'INSERT INTO entities VALUES (?, ?, ?, ?, ?)', (entity_id_for('default', key), 'default', key, name, 'file')
        )
        conn.execute('INSERT INTO mentions VALUES (?, ?, ?)', (source_id, entity_id_for('default', key), count))
    conn.execute('DELETE FROM mention_queue')
    conn.execute("INSERT INTO text_fts VALUES ('zebra crossing block zero', ?, 'default', 's1')", (blocks[0].id,))
    conn.execute("INSERT INTO text_fts VALUES (?, ?, 'default', 's1')", (mementos[0].text, mementos[0].id))
    conn.execute("INSERT INTO meta VALUES ('fts_blocks', '1'), ('fts_mementos', '1')")
    conn.execute('COMMIT')
    write_v2(
        conn,
        Eviction(
            session_id='s1', blocks=(blocks[1], blocks[2]), mementos=(mementos[1], mementos[2], top),
            mentions=(mention(blocks[1].id, 'file:app.py', 'APP.PY'), mention(blocks[2].id, 'file:new.py', 'new.py', 2)),
            pages=(page(blocks[0], blocks[1], blocks[2]),),
            events=(SessionEvent(session_id='s1', namespace='default', kind='auto', payload=b'{}', sha256='',
                                 block_ids=(blocks[1].id, blocks[2].id)),),
        ),
    )  # fmt: skip
    conn.close()
    return path, {'blocks': blocks, 'mementos': [*mementos, top], 'page': page(*blocks)}


def test_format_2_file_is_migrated_in_place_and_reads_back_the_same(
    v2_file: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    path, old = v2_file
    blocks, mementos, page = old['blocks'], old['mementos'], old['page']
    assert isinstance(blocks, list) and isinstance(mementos, list) and isinstance(page, PageRecord)
    raw = sqlite3.connect(path)
    archived = {row[0]: bytes(row[1]) for row in raw.execute('SELECT id, messages_json FROM blocks')}
    raw.close()

    with SqliteStore(path) as store:
        # every block byte for byte, hash-checked
        for block in blocks:
            recovered = store.recover_block(block.id)
            assert recovered.record.messages_json == archived[block.id] == block.messages_json
            assert recovered.record.sha256 == block.sha256
        assert store.recover_block(blocks[0].id).messages == tuple(rich_history())
        assert store.list_mementos() == mementos
        assert [store.memento_of(b.id) for b in blocks] == mementos[:3]
        assert store.memento_of(mementos[0].id) == mementos[3]
        assert store.list_pages() == [page]
        assert [e.kind for e in store.read_events('s1')] == ['message', 'auto']
        assert store.last_message_index('s1') == 4
        # the queued mentions are indexed after the ones already indexed (first name wins) and before new ones
        store.write_eviction(
            Eviction(
                session_id='s1',
                blocks=(block_of(session_history(1, prefix='after'), 30),),
                mentions=(Mention('blk_after', EntityRecord(key='file:new.py', name='NEW.PY', kind='file'), 9),),
            )
        )
        assert store.entities_of(blocks[1].id) == [(EntityRecord(key='file:app.py', name='app.py', kind='file'), 1)]
        assert store.entities_of(blocks[2].id) == [(EntityRecord(key='file:new.py', name='new.py', kind='file'), 2)]
        assert store.entities_of('blk_after') == [(EntityRecord(key='file:new.py', name='new.py', kind='file'), 9)]
        assert store.entities_of(mementos[0].id)[0][0].key == 'file:zoo.py'
        # full text: made again from the archived texts (format 5 scopes it), each row once
        assert [hit.id for hit in store.search_text('zebra')] == [blocks[1].id]
        assert store.search_text('crossing') == []  # the old index's own text is gone with it
        memento_hits = [hit.id for hit in store.search_text('memento')]
        assert sorted(memento_hits) == sorted(m.id for m in mementos[:3])
        stats = store.stats()
        assert (stats.blocks, stats.mementos, stats.entities, stats.pages, stats.events) == (4, 4, 2, 1, 2)  # of blocks
        # the page keeps growing through the new layout, members keeping their first positions
        fourth = block_of(session_history(1, prefix='fourth'), 40)
        store.write_eviction(
            Eviction(session_id='s1', blocks=(fourth,), pages=(replace(page, block_ids=(*page.block_ids, fourth.id)),))
        )
        assert store.list_pages()[0].block_ids == (*page.block_ids, fourth.id)

    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (FORMAT,)
    assert conn.execute('PRAGMA integrity_check').fetchall() == [('ok',)]
    assert conn.execute('SELECT count(*) FROM mention_queue').fetchone() == (0,)
    conn.close()
    with SqliteStore(tmp_path / 'fresh.db'):
        pass
    assert schema_of(path) == schema_of(tmp_path / 'fresh.db')


def test_failed_migration_leaves_the_format_2_file_whole(v2_file: tuple[Path, dict[str, object]]) -> None:
    path, old = v2_file
    blocks = old['blocks']
    assert isinstance(blocks, list)
    conn = sqlite3.connect(path, isolation_level=None)
    # the migration's new view name is taken by a table: it fails after it dropped `page_blocks`
    conn.execute('CREATE TABLE page_blocks_insert (x)')
    conn.execute('CREATE TRIGGER page_blocks_insert AFTER INSERT ON page_blocks_insert BEGIN SELECT 1; END')
    before = [
        conn.execute(f'SELECT * FROM {t} ORDER BY 1').fetchall() for t in ('blocks', 'page_blocks', 'mention_queue')
    ]

    with pytest.raises(StoreUnavailableError, match=f'{path}.*migrating it from .mementograph-sqlite-2.'):
        SqliteStore(path)

    assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ('mementograph-sqlite-2',)
    assert [
        conn.execute(f'SELECT * FROM {t} ORDER BY 1').fetchall() for t in ('blocks', 'page_blocks', 'mention_queue')
    ] == before
    assert 'mentions' not in {row[1] for row in conn.execute('PRAGMA table_info(blocks)')}
    conn.execute('DROP TABLE page_blocks_insert')
    conn.close()
    with SqliteStore(path) as store:  # with the obstacle gone, the same file migrates
        assert store.recover_block(blocks[2].id).record.messages_json == blocks[2].messages_json


def test_format_5_file_gets_an_empty_vectors_table(tmp_path: Path) -> None:
    from tests.store.test_contract import make_eviction

    path = tmp_path / 'v5.db'
    eviction, block, _ = make_eviction(session_history(2), session_id='s1', namespace='default')
    with SqliteStore(path) as store:
        store.write_eviction(eviction)
    conn = sqlite3.connect(path)  # as format 5 left it: no vectors table
    conn.execute('DROP TABLE vectors')
    conn.execute("UPDATE meta SET value = 'mementograph-sqlite-5' WHERE key = 'format'")
    conn.commit()
    conn.close()

    with SqliteStore(path) as store:
        assert store.recover_block(block.id).record.sha256 == block.sha256
        assert store.read_vectors('test:m') == []
        assert store.write_vectors('test:m', [(block.id, b'\0' * 8)]) == 1
    conn = sqlite3.connect(path)
    assert (
        conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        == (FORMAT,)
        == ('mementograph-sqlite-10',)
    )
    conn.close()


def test_format_6_file_gets_block_ids_in_its_scope_index(tmp_path: Path) -> None:
    from tests.store.test_contract import make_eviction

    path = tmp_path / 'v6.db'
    blocks = []
    with SqliteStore(path) as store:
        for seq in range(3):
            eviction, block, _ = make_eviction(session_history(2), session_id='s1', namespace='default', seq=seq)
            store.write_eviction(eviction)
            blocks.append(block)
    conn = sqlite3.connect(path)  # as format 6 left it: the scope index without the ids
    conn.execute('DROP INDEX blocks_scope')
    conn.execute('CREATE INDEX blocks_scope ON blocks (namespace, session_id, kind, seq)')
    conn.execute("UPDATE meta SET value = 'mementograph-sqlite-6' WHERE key = 'format'")
    conn.commit()
    conn.close()

    with SqliteStore(path) as store:
        assert [info.next_id for info in store.block_info([b.id for b in blocks])] == [blocks[1].id, blocks[2].id, None]
        assert store.list_block_ids(namespace='default', session_id='s1') == [(b.id, 's1') for b in blocks]
    conn = sqlite3.connect(path)
    assert [row[2] for row in conn.execute('PRAGMA index_info(blocks_scope)')][-1] == 'id'
    assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ('mementograph-sqlite-10',)
    plan = conn.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM blocks WHERE namespace = 'default' AND session_id = 's1' AND kind = 'block'"
    ).fetchall()
    assert 'COVERING INDEX blocks_scope' in plan[0][3]  # a session's ids without reading its rows
    conn.close()


def test_format_7_file_finds_words_inside_chinese_and_japanese_text(tmp_path: Path) -> None:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    from tests.store.test_contract import make_eviction

    path = tmp_path / 'v7.db'
    chinese, english = '我们决定使用PostgreSQL数据库来存储订单', 'the deploy script lives in ops/deploy.sh'
    evictions = [
        make_eviction([ModelRequest(parts=[UserPromptPart(text)])], session_id='s1', namespace='default', seq=seq)
        for seq, text in enumerate((chinese, english))
    ]
    with SqliteStore(path) as store:
        for eviction, _, _ in evictions:
            store.write_eviction(eviction)
        assert [hit.id for hit in store.search_text('数据库')] == [evictions[0][1].id]
    conn = sqlite3.connect(path)  # as format 7 indexed it: a run of Han characters is one word
    conn.execute('UPDATE text_fts SET text = ? WHERE item_id = ?', (chinese, evictions[0][1].id))
    conn.execute("UPDATE meta SET value = 'mementograph-sqlite-7' WHERE key = 'format'")
    conn.commit()
    assert conn.execute("""SELECT count(*) FROM text_fts WHERE text_fts MATCH '"数 据"'""").fetchone() == (0,)
    others = conn.execute('SELECT item_id, text FROM text_fts WHERE item_id <> ?', (evictions[0][1].id,)).fetchall()
    conn.close()

    with SqliteStore(path) as store:
        assert [hit.id for hit in store.search_text('数据库')] == [evictions[0][1].id]
        assert [hit.id for hit in store.search_text('PostgreSQL')] == [evictions[0][1].id]
        assert [hit.id for hit in store.search_text('deploy.sh')] == [evictions[1][1].id]
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ('mementograph-sqlite-10',)
    assert sorted(conn.execute('SELECT item_id, text FROM text_fts WHERE item_id <> ?', (evictions[0][1].id,))) == (
        sorted(others)
    )  # indexed again from the archive, the same
    conn.close()


def test_format_8_file_gets_the_pairs_of_its_compound_words(tmp_path: Path) -> None:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    from tests.store.test_contract import make_eviction

    path = tmp_path / 'v8.db'
    texts = ('the deploy script lives in ops/deploy.sh', 'deploy it, then sh the ops notes')
    evictions = [
        make_eviction([ModelRequest(parts=[UserPromptPart(text)])], session_id='s1', namespace='default', seq=seq)
        for seq, text in enumerate(texts)
    ]
    with SqliteStore(path) as store:
        for eviction, _, _ in evictions:
            store.write_eviction(eviction)
        store.search_text('deploy')  # indexed before the file is taken back to format 8
    conn = sqlite3.connect(path)  # as format 8 left it: the same rows, indexed without a `pairs` column
    rows = conn.execute('SELECT rowid, item_id, namespace, session_id, scope, text FROM text_fts').fetchall()
    assert len(rows) == 4  # two blocks and their mementos
    conn.execute('DROP TABLE text_fts')
    conn.execute(
        'CREATE VIRTUAL TABLE text_fts USING fts5 (item_id UNINDEXED, namespace UNINDEXED, session_id UNINDEXED, '
        "scope, text, tokenize = 'unicode61')"
    )
    conn.executemany(
        'INSERT INTO text_fts (rowid, item_id, namespace, session_id, scope, text) VALUES (?, ?, ?, ?, ?, ?)', rows
    )
    conn.execute("UPDATE meta SET value = 'mementograph-sqlite-8' WHERE key = 'format'")
    conn.commit()
    conn.close()

    with SqliteStore(path) as store:
        assert [hit.id for hit in store.search_text('ops/deploy.sh')] == [evictions[0][1].id]
        assert {hit.id for hit in store.search_text('deploy')} == {evictions[0][1].id, evictions[1][1].id}
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ('mementograph-sqlite-10',)
    assert conn.execute('SELECT pairs FROM text_fts WHERE item_id = ?', (evictions[0][1].id,)).fetchone() == (
        'ops\u01c2deploy deploy\u01c2sh',
    )
    conn.close()


def test_format_9_file_leaves_the_memory_tools_answers_out_of_its_index(tmp_path: Path) -> None:
    """Format 9 indexed a block with the memory tools' calls and answers, which quote older blocks: at open, the
    rows naming a memory tool are read again and those holding such a call are indexed without it, the rest kept."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart

    from mementograph.knowledge_graph.store._sqlite import text_columns
    from tests.store.test_contract import make_eviction

    path = tmp_path / 'v9.db'
    quoting = [
        ModelRequest(parts=[UserPromptPart('Which studio was that?')]),
        ModelResponse(parts=[ToolCallPart('recall', {'query': 'studio'}, tool_call_id='r1')]),
        ModelRequest(
            parts=[
                ToolReturnPart(
                    'recall',
                    '1. recover_block("mem_0123456789abcdef01234567") Ann signed up at the Hollowbrook studio.',
                    tool_call_id='r1',
                )  # unmarked, as before the toolset marked its answers; a hit names the id that recovers it
            ]
        ),
        ModelResponse(parts=[TextPart('That one, from last month.')]),
    ]
    histories = (
        [ModelRequest(parts=[UserPromptPart('Ann signed up at the Hollowbrook studio.')])],  # where it was said
        quoting,
        [ModelRequest(parts=[UserPromptPart('I cannot recall the Hollowbrook opening hours.')])],  # names `recall`
    )
    evictions = [
        make_eviction(messages, session_id='s1', namespace='default', seq=seq) for seq, messages in enumerate(histories)
    ]
    said, quoted, other = (block.id for _, block, _ in evictions)
    with SqliteStore(path) as store:
        for eviction, _, _ in evictions:
            store.write_eviction(eviction)
        assert {hit.id for hit in store.search_text('Hollowbrook')} == {said, other}
    conn = sqlite3.connect(path)  # as format 9 indexed it: the recall's call and answer with the block
    old_text = '\n'.join(map(message_text, quoting))
    conn.execute('UPDATE text_fts SET text = ?, pairs = ? WHERE item_id = ?', (*text_columns(old_text), quoted))
    conn.execute("UPDATE meta SET value = 'mementograph-sqlite-9' WHERE key = 'format'")
    conn.commit()
    found = {row[0] for row in conn.execute("SELECT item_id FROM text_fts WHERE text_fts MATCH 'Hollowbrook'")}
    assert found == {said, other, quoted}
    rows = dict(conn.execute('SELECT item_id, rowid FROM text_fts').fetchall())
    kept = conn.execute('SELECT rowid, * FROM text_fts WHERE item_id <> ? ORDER BY rowid', (quoted,)).fetchall()
    conn.close()

    with SqliteStore(path) as store:
        assert {hit.id for hit in store.search_text('Hollowbrook', k=10)} == {said, other}
        assert store.search_text('studio month', k=10)[0].id == quoted  # the rest of it stays
        assert store.recover_block(quoted).record.messages_json == evictions[1][1].messages_json
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (FORMAT,)
    assert dict(conn.execute('SELECT item_id, rowid FROM text_fts').fetchall()) == rows  # same rowids: same order
    assert conn.execute('SELECT rowid, * FROM text_fts WHERE item_id <> ? ORDER BY rowid', (quoted,)).fetchall() == kept
    conn.close()
