"""Format 4 of the embedded store: each entity's document frequency (`entities.blocks`, its block mentions) is kept
on its row by the entity index's writers, so `entity_postings` reads it instead of counting up to 2,000 index
entries per common entity. The count must equal a fresh count after every kind of write and delete, and a format-3
file must come to format 4 in place with the same counts."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from mementograph.knowledge_graph import BlockRecord, EntityRecord, Eviction, MementoRecord, Mention
from mementograph.knowledge_graph.store import SqliteStore, StoreUnavailableError
from mementograph.knowledge_graph.store._sqlite import _REBUILD_QUEUE_ROWS, FORMAT
from tests.builders import session_history
from tests.store.test_sqlite_migration import schema_of

BASE = BlockRecord.from_messages(session_history(1), session_id='s', seq=0, tokens=10)


def entity(key: str) -> EntityRecord:
    return EntityRecord(key=f'concept:{key}', name=key, kind='concept')


def eviction(i: int, session: str = 's', *, memento: bool = True) -> Eviction:
    """Block `i` mentions `common`, `tag{i % 3}` and `own{i}`; its memento mentions `common` and `memo` (memento
    mentions are not block mentions: they must not count)."""
    block = replace(BASE, id=f'blk_{i:05d}', seq=i, session_id=session)
    mementos: tuple[MementoRecord, ...] = ()
    mentions = [
        Mention(block.id, entity('common'), i + 1),
        Mention(block.id, entity(f'tag{i % 3}'), 2),
        Mention(block.id, entity(f'own{i}'), 1),
    ]
    if memento:
        record = MementoRecord(
            id=f'mem_{i:05d}',
            session_id=session,
            namespace='default',
            text=f'memento {i}',
            tokens=3,
            summarizes=(block.id,),
        )
        mementos = (record,)
        mentions += [Mention(record.id, entity('common'), 1), Mention(record.id, entity('memo'), 1)]
    return Eviction(session_id=session, blocks=(block,), mementos=mementos, mentions=tuple(mentions))


def counted(conn: sqlite3.Connection) -> dict[str, int]:
    """Every entity's block mentions, counted afresh."""
    return dict(
        conn.execute(
            'SELECT e.id, (SELECT count(*) FROM mentions m WHERE m.entity_id = e.id '
            "AND m.source_id >= 'blk_' AND m.source_id < 'blk`') FROM entities e"
        ).fetchall()
    )


def stored(conn: sqlite3.Connection) -> dict[str, int]:
    return dict(conn.execute('SELECT id, blocks FROM entities').fetchall())


def assert_counts_hold(store: SqliteStore) -> dict[str, int]:
    store.entities_of('blk_00000')  # index whatever is pending
    truth = counted(store._conn)
    assert stored(store._conn) == truth
    return truth


def test_counts_follow_incremental_indexing_retries_and_queued_mentions(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / 'a.db') as store:
        for i in range(6):
            store.write_eviction(eviction(i))
            if i % 2:
                assert_counts_hold(store)  # small batches, indexed between writes
        # a retried eviction (its block exists: its mentions are queued) adds nothing to any count
        store.write_eviction(eviction(3))
        # an eviction of mementos only: its mentions are queued too, and memento mentions do not count
        extra = MementoRecord(
            id='mem_extra', session_id='s', namespace='default', text='extra', tokens=1, summarizes=('blk_00001',)
        )
        store.write_eviction(
            Eviction(session_id='s', mementos=(extra,), mentions=(Mention(extra.id, entity('common'), 4),))
        )
        truth = assert_counts_hold(store)

        assert store._conn.execute('SELECT count(*) FROM mention_queue').fetchone()[0] == 0
        by_key = {
            store._conn.execute('SELECT key FROM entities WHERE id = ?', (i,)).fetchone()[0]: n
            for i, n in truth.items()
        }
        assert (by_key['concept:common'], by_key['concept:tag0'], by_key['concept:own3'], by_key['concept:memo']) == (
            6,
            2,
            1,
            0,
        )


def test_entity_postings_reports_the_counts_as_counting_did(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / 'p.db') as store:
        for i in range(12):
            store.write_eviction(eviction(i, session='s1' if i < 8 else 's2'))
        keys = ['concept:common', 'concept:tag1', 'concept:own4', 'concept:memo', 'concept:absent']

        # limit below the frequency: the postings are cut, the frequency is not
        lookup = store.entity_postings(keys, limit=3)
        assert [(f.entity.key, f.blocks, len(f.postings)) for f in lookup.entities] == [
            ('concept:common', 12, 3),
            ('concept:memo', 0, 0),  # mentioned by mementos only: no block, no posting
            ('concept:own4', 1, 1),
            ('concept:tag1', 4, 3),
        ]
        assert [p.block_id for p in lookup.entities[0].postings] == ['blk_00011', 'blk_00010', 'blk_00009']
        # frequencies only, capped at `count_limit` (-1: no cap), and the same whatever the session scope
        assert [f.blocks for f in store.entity_postings(keys, limit=0, count_limit=5).entities] == [5, 0, 1, 4]
        assert [f.blocks for f in store.entity_postings(keys, limit=0, count_limit=-1).entities] == [12, 0, 1, 4]
        scoped = store.entity_postings(['concept:common'], session_id='s2', limit=10).entities[0]
        assert (scoped.blocks, [p.block_id for p in scoped.postings]) == (
            12,
            ['blk_00011', 'blk_00010', 'blk_00009', 'blk_00008'],
        )
        # a prefix lookup carries them too
        assert [
            (f.entity.key, f.blocks) for f in store.entity_postings(['concept:tag'], prefix=True, limit=0).entities
        ] == [
            ('concept:tag0', 4),
            ('concept:tag1', 4),
            ('concept:tag2', 4),
        ]


def test_counts_survive_the_bulk_rebuild_of_the_index(tmp_path: Path) -> None:
    count = _REBUILD_QUEUE_ROWS + 3
    with SqliteStore(tmp_path / 'bulk.db') as store:
        for i in range(count):
            store.write_eviction(eviction(i, memento=i % 2 == 0))
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)

        truth = assert_counts_hold(store)

        assert 'DROP INDEX IF EXISTS mentions_entity' in statements  # the rebuild path, not batch by batch
        assert max(truth.values()) == count
        assert store.entity_postings(['concept:common'], limit=0, count_limit=-1).entities[0].blocks == count


def test_delete_session_takes_its_blocks_off_the_counts(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / 'd.db') as store:
        for i in range(9):
            store.write_eviction(eviction(i, session='gone' if i % 3 == 0 else 'kept'))
        assert_counts_hold(store)
        store.write_eviction(eviction(20, session='gone'))  # still queued when the session is deleted

        assert store.delete_session('gone') > 0

        truth = assert_counts_hold(store)
        assert 'default:concept:own3' not in truth and truth['default:concept:memo'] == 0  # mementos left mention it
        common = store.entity_postings(['concept:common', 'concept:tag0'], limit=0).entities
        assert [(f.entity.key, f.blocks) for f in common] == [('concept:common', 6)]  # tag0: only blocks of 'gone'
        assert store._conn.execute("SELECT count(*) FROM entities WHERE key = 'concept:own3'").fetchone()[0] == 0


def as_format_3(path: Path) -> None:
    """Take a fresh file back to format 3: no `entities.blocks`."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute('ALTER TABLE entities DROP COLUMN blocks')
    conn.execute("UPDATE meta SET value = 'mementograph-sqlite-3' WHERE key = 'format'")
    conn.close()


def test_format_3_file_is_migrated_in_place_with_its_counts(tmp_path: Path) -> None:
    path = tmp_path / 'v3.db'
    with SqliteStore(path) as store:
        for i in range(7):
            store.write_eviction(eviction(i))
        before = store.entity_postings(['concept:common', 'concept:tag1'], limit=5, count_limit=-1)
        store.write_eviction(eviction(7))  # pending at migration: counted when indexed
    as_format_3(path)

    with SqliteStore(path) as store:
        conn = store._conn
        assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0] == FORMAT
        assert stored(conn) == counted(conn)  # the indexed mentions, counted by the migration
        assert max(stored(conn).values()) == 7
        assert conn.execute('SELECT blocks FROM entities WHERE key = ?', ('concept:common',)).fetchone()[0] == 7
        after = store.entity_postings(['concept:common', 'concept:tag1'], limit=5, count_limit=-1)  # indexes blk 7
        assert [f.blocks for f in before.entities] == [7, 2] and [f.blocks for f in after.entities] == [8, 3]
        assert after.entities[0].postings[1:] == before.entities[0].postings[:4]  # blk 7 mentions it most
        assert max(assert_counts_hold(store).values()) == 8
        assert [tuple(row) for row in conn.execute('PRAGMA integrity_check')] == [('ok',)]
    with SqliteStore(tmp_path / 'fresh.db'):
        pass
    assert schema_of(path) == schema_of(tmp_path / 'fresh.db')


def test_failed_migration_leaves_the_format_3_file_whole(tmp_path: Path) -> None:
    path = tmp_path / 'v3.db'
    with SqliteStore(path) as store:
        for i in range(3):
            store.write_eviction(eviction(i))
        store.entities_of('blk_00000')
    as_format_3(path)
    conn = sqlite3.connect(path, isolation_level=None)
    # a trigger of someone else's refuses the count's update: the migration fails half-way, after adding the column
    conn.execute("CREATE TRIGGER no_updates BEFORE UPDATE ON entities BEGIN SELECT RAISE(ABORT, 'refused'); END")
    before = conn.execute('SELECT * FROM entities ORDER BY id').fetchall()

    with pytest.raises(StoreUnavailableError, match=f'{path}.*migrating it from .mementograph-sqlite-3.*refused'):
        SqliteStore(path)

    assert conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ('mementograph-sqlite-3',)
    assert 'blocks' not in {row[1] for row in conn.execute('PRAGMA table_xinfo(entities)')}
    assert conn.execute('SELECT * FROM entities ORDER BY id').fetchall() == before
    conn.execute('DROP TRIGGER no_updates')
    conn.close()
    with SqliteStore(path) as store:  # the cause gone, it migrates
        assert_counts_hold(store)
        assert store.entity_postings(['concept:common'], limit=0).entities[0].blocks == 3


def test_another_connections_writes_reach_a_reader_that_found_its_indexes_current(tmp_path: Path) -> None:
    # readers skip the pending-work checks while nothing was written (`_version`): a commit by another connection
    # must still be seen, by the entity index and by the full-text index
    path = tmp_path / 'shared.db'
    with SqliteStore(path) as reader, SqliteStore(path) as writer:
        writer.write_eviction(eviction(0))
        assert reader.entity_postings(['concept:common'], limit=0).entities[0].blocks == 1
        assert [hit.id for hit in reader.search_text('memento')] == ['mem_00000']
        assert reader.entity_postings(['concept:common'], limit=0).entities[0].blocks == 1  # current: no work

        writer.write_eviction(eviction(1))

        assert reader.entity_postings(['concept:common'], limit=0).entities[0].blocks == 2
        assert sorted(hit.id for hit in reader.search_text('memento')) == ['mem_00000', 'mem_00001']
        assert_counts_hold(reader)


def test_a_session_s_postings_are_found_past_the_first_pages_of_a_common_entity(tmp_path: Path) -> None:
    """`_members_only` reads an entity's postings page by page (`_MEMBERS_PAGE`), each a seek past the last one read:
    the session's postings here sit behind pages of other sessions' (higher counts first, and within a count
    a page ending in the middle of one), and must come out as the joined read finds them."""
    mine = {0, 1, 2, 5, 102, 199, 296, 393, 490, 587, 970}
    with SqliteStore(tmp_path / 'p.db') as store:
        for i in range(1000):  # `common` counts i + 1; `tag1` counts 2 in 333 blocks (a tie longer than a page)
            store.write_eviction(eviction(i, session='mine' if i in mine else f'other{i % 4}', memento=False))
        lookup = store.entity_postings(['concept:common', 'concept:tag1'], session_id='mine', limit=5)
        truth = [
            [tuple(row) for row in store._conn.execute(
                'SELECT m.source_id, m.count FROM mentions m JOIN blocks b ON b.id = m.source_id '
                "WHERE m.entity_id = ? AND b.session_id = 'mine' ORDER BY m.count DESC, m.source_id LIMIT 5",
                (f'default:{key}',),
            )]
            for key in ('concept:common', 'concept:tag1')
        ]  # fmt: skip
        assert [[(p.block_id, p.count) for p in found.postings] for found in lookup.entities] == truth
        # the third page's postings are reached, and the second page of a tie
        assert [block_id for block_id, _ in truth[0]] == [
            'blk_00970',
            'blk_00587',
            'blk_00490',
            'blk_00393',
            'blk_00296',
        ]
        assert [block_id for block_id, _ in truth[1]] == ['blk_00001', 'blk_00199', 'blk_00490', 'blk_00970']
