"""The embedded store's eviction path: links stored on the rows an eviction writes anyway, and the entity index
built at the first read that needs it, from `mention_queue`. What the reads return is what the old eager writes
returned (first name and first count win), whether the backlog is applied batch by batch or, when it outgrows the
index, by rebuilding the by-entity index."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from mementograph.knowledge_graph import BlockRecord, EntityRecord, Eviction, MementoRecord, Mention, PageRecord
from mementograph.knowledge_graph.store import PageConflictError, SqliteStore, StoreUnavailableError, _sqlite
from mementograph.knowledge_graph.store._sqlite import _REBUILD_QUEUE_ROWS
from tests.builders import session_history, user

REPO = Path(__file__).resolve().parents[2]
BASE = BlockRecord.from_messages(session_history(1), session_id='s', seq=0, tokens=10)


def entity(key: str, name: str | None = None) -> EntityRecord:
    return EntityRecord(key=f'concept:{key}', name=name or key, kind='concept')


def eviction(i: int, session: str = 's') -> Eviction:
    """Block `i` mentions `common` (i+1 times, first named by block 0), `tag{i % 7}`, and twice `own{i}`."""
    block = replace(BASE, id=f'blk_{i:05d}', seq=i, session_id=session)
    mentions = (
        Mention(block.id, entity('common', f'Common{i}'), i + 1),
        Mention(block.id, entity(f'tag{i % 7}'), 2),
        Mention(block.id, entity(f'own{i}'), 1),
        Mention(block.id, entity(f'own{i}'), 5),  # a repeat: the first count stands
    )
    return Eviction(session_id=session, blocks=(block,), mentions=mentions)


def queued(store: SqliteStore) -> int:
    """Evictions whose mentions wait for the entity index: on block rows past the mark, or in `mention_queue`."""
    return pending(store._conn)


def pending(conn: sqlite3.Connection) -> int:
    mark = conn.execute("SELECT coalesce((SELECT value FROM meta WHERE key = 'mentions_blocks'), 0)").fetchone()[0]
    on_blocks = conn.execute('SELECT count(*) FROM blocks WHERE rid > ? AND mentions IS NOT NULL', (int(mark),))
    return int(on_blocks.fetchone()[0]) + int(conn.execute('SELECT count(*) FROM mention_queue').fetchone()[0])


def snapshot(store: SqliteStore, count: int) -> tuple[object, ...]:
    lookup = store.entity_postings(['concept:common', 'concept:tag3', 'concept:own5'], limit=20)
    return (
        lookup,
        [store.entities_of(f'blk_{i:05d}') for i in (0, 3, count - 1)],
        store.stats().entities,
        store._conn.execute('SELECT count(*) FROM mentions').fetchone()[0],
    )


def test_reads_index_the_queue_first_with_first_write_wins(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / 'a.db') as store:
        for i in range(3):
            store.write_eviction(eviction(i))
        assert queued(store) == 3
        assert store._conn.execute('SELECT count(*) FROM mentions').fetchone()[0] == 0  # nothing indexed yet

        assert store.entities_of('blk_00001') == [
            (EntityRecord(key='concept:common', name='Common0', kind='concept'), 2),
            (entity('tag1'), 2),
            (entity('own1'), 1),
        ]
        assert queued(store) == 0
        store.write_eviction(eviction(3))  # indexed later, in a second batch: the first name still stands
        lookup = store.entity_postings(['concept:common'])
        assert lookup.entities[0].entity.name == 'Common0'
        assert [(p.block_id, p.count) for p in lookup.entities[0].postings][:2] == [('blk_00003', 4), ('blk_00002', 3)]
        assert store.stats().entities == 1 + 4 + 4  # common, tag0..tag3, own0..own3
        graph = store.graph()
        assert graph.has_edge('blk_00003', 'default:concept:own3')


def write_both(incremental: SqliteStore, bulk: SqliteStore, count: int) -> None:
    """The same evictions into both stores, with reads between them in `incremental` only (small batches), so
    `bulk` holds them all as a backlog."""
    for i in range(count):
        incremental.write_eviction(eviction(i))
        bulk.write_eviction(eviction(i))
        if i % 50 == 0:
            incremental.entities_of('blk_00000')
    incremental.entities_of('blk_00000')


def test_a_large_backlog_rebuilds_the_index_to_the_same_result(tmp_path: Path) -> None:
    count = _REBUILD_QUEUE_ROWS + 5
    with SqliteStore(tmp_path / 'incremental.db') as incremental, SqliteStore(tmp_path / 'bulk.db') as bulk:
        write_both(incremental, bulk, count)
        assert queued(incremental) == 0 and queued(bulk) == count
        bulk_conn = bulk._conn
        index_sql = "SELECT sql FROM sqlite_master WHERE name = 'mentions_entity'"
        before = tuple(bulk_conn.execute(index_sql).fetchone())
        statements: list[str] = []
        bulk_conn.set_trace_callback(statements.append)
        incremental._conn.set_trace_callback(statements.append)

        assert snapshot(bulk, count) == snapshot(incremental, count)

        assert statements.count('DROP INDEX IF EXISTS mentions_entity') == 1  # the bulk store rebuilt, once
        assert queued(bulk) == 0
        assert tuple(bulk_conn.execute(index_sql).fetchone()) == before  # the same index
        assert entity_index_used(bulk_conn)
        assert [tuple(row) for row in bulk_conn.execute('PRAGMA integrity_check')] == [('ok',)]


def entity_index_used(conn: sqlite3.Connection) -> bool:
    plan = conn.execute(
        "EXPLAIN QUERY PLAN SELECT source_id FROM mentions WHERE entity_id = 'x' ORDER BY count DESC"
    ).fetchall()
    return 'mentions_entity' in plan[0][3]


def test_a_rebuild_lets_another_writer_in_between_its_transactions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sqlite, '_REBUILD_BATCHES', 1)  # a transaction per batch: 500, 500, 5 evictions
    count = _REBUILD_QUEUE_ROWS + 5
    path = tmp_path / 'bulk.db'
    landed: list[float] = []
    real_sleep = time.sleep
    with SqliteStore(path) as bulk, SqliteStore(path, busy_timeout=0.5) as other:
        for i in range(count):
            bulk.write_eviction(eviction(i))
        statements: list[str] = []
        bulk._conn.set_trace_callback(statements.append)

        def pause(seconds: float) -> None:  # the rebuild's pauses: another process evicts meanwhile
            if not landed:
                started = time.perf_counter()
                other.write_eviction(eviction(count))  # `StoreBusyError` after 0.5 s if the lock were held
                landed.append(time.perf_counter() - started)
            real_sleep(seconds)

        monkeypatch.setattr(_sqlite.time, 'sleep', pause)
        lookup = bulk.entity_postings(['concept:common'], limit=2, count_limit=-1)

        assert 'DROP INDEX IF EXISTS mentions_entity' in statements  # the rebuild path
        assert len(landed) == 1 and landed[0] < 0.5
        assert queued(bulk) == 0  # the eviction that came in meanwhile was indexed by the same rebuild
        assert (lookup.entities[0].blocks, [p.block_id for p in lookup.entities[0].postings]) == (
            count + 1,
            [f'blk_{count:05d}', f'blk_{count - 1:05d}'],
        )
        assert entity_index_used(bulk._conn)


def test_a_rebuild_another_connection_finished_first_is_not_done_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes read a bulk backlog at once: both decide to rebuild, one finishes first; the other keeps that
    index instead of dropping it and sorting again."""
    count = _REBUILD_QUEUE_ROWS + 5
    path = tmp_path / 'bulk.db'
    with SqliteStore(path) as first, SqliteStore(path) as second:
        for i in range(count):
            first.write_eviction(eviction(i))
        read = second._read

        @contextmanager
        def decided_then_overtaken() -> Iterator[sqlite3.Connection]:
            with read() as conn:
                yield conn
            monkeypatch.setattr(second, '_read', read)  # once: the read that decided to rebuild
            first.entities_of('blk_00000')  # the other process rebuilds, all of it, before this one writes

        monkeypatch.setattr(second, '_read', decided_then_overtaken)
        statements: list[str] = []
        second._conn.set_trace_callback(statements.append)

        lookup = second.entity_postings(['concept:common'], limit=1, count_limit=-1)

        assert not [s for s in statements if s.startswith(('DROP INDEX', 'CREATE INDEX'))]  # no second sort
        assert (lookup.entities[0].blocks, lookup.entities[0].postings[0].block_id) == (count, f'blk_{count - 1:05d}')
        assert queued(second) == 0 and entity_index_used(second._conn)


@pytest.mark.parametrize('cut', ['after the first batch', 'before the index is built'])
def test_a_rebuild_cut_short_is_finished_by_the_next_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut: str
) -> None:
    """A kill between the rebuild's transactions leaves the index dropped and part of the backlog applied (here an
    error at that point, which leaves the file as a kill would): the next read, in any process, finishes it."""
    monkeypatch.setattr(_sqlite, '_REBUILD_BATCHES', 1)
    count = _REBUILD_QUEUE_ROWS + 5
    with SqliteStore(tmp_path / 'incremental.db') as incremental, SqliteStore(tmp_path / 'bulk.db') as bulk:
        write_both(incremental, bulk, count)
        if cut == 'after the first batch':
            apply = SqliteStore._apply_next_mentions
            calls: list[int] = []

            def killed(self: SqliteStore, conn: sqlite3.Connection) -> int:
                if calls:
                    raise OSError('killed')
                calls.append(1)
                return apply(self, conn)

            monkeypatch.setattr(SqliteStore, '_apply_next_mentions', killed)
        else:
            monkeypatch.setattr(_sqlite, '_MENTIONS_ENTITY_INDEX', 'SELECT killed()')
        with pytest.raises((OSError, StoreUnavailableError)):
            bulk.entities_of('blk_00000')
        missing = bulk._conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'mentions_entity'").fetchone()
        assert missing[0] == 0
        assert queued(bulk) == (count - 500 if cut == 'after the first batch' else 0)
        monkeypatch.undo()

    with SqliteStore(tmp_path / 'bulk.db') as reopened, SqliteStore(tmp_path / 'incremental.db') as reference:
        assert snapshot(reopened, count) == snapshot(reference, count)
        assert queued(reopened) == 0
        assert entity_index_used(reopened._conn)
        assert [tuple(row) for row in reopened._conn.execute('PRAGMA integrity_check')] == [('ok',)]


def test_delete_session_takes_its_queued_mentions(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / 'd.db') as store:
        store.write_eviction(eviction(1, session='gone'))
        store.write_eviction(eviction(2, session='kept'))

        assert store.delete_session('gone') > 0

        assert queued(store) == 0
        assert store.entities_of('blk_00001') == []
        assert [e.key for e, _ in store.entities_of('blk_00002')] == ['concept:common', 'concept:tag2', 'concept:own2']
        assert store._conn.execute("SELECT count(*) FROM entities WHERE key = 'concept:own1'").fetchone()[0] == 0


_WRITER = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
from tests.store.test_sqlite_write_path import eviction
from mementograph.knowledge_graph.store import SqliteStore
store = SqliteStore(sys.argv[1])
store.write_eviction(eviction(7))
print('committed', flush=True)
time.sleep(60)
"""


def test_queued_mentions_survive_a_kill_after_commit(tmp_path: Path) -> None:
    path = tmp_path / 'k.db'
    proc = subprocess.Popen(
        [sys.executable, '-c', _WRITER, str(path), str(REPO)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, 'PYTHONPATH': str(REPO)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == 'committed'
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    raw = sqlite3.connect(path)
    assert pending(raw) == 1
    raw.close()
    with SqliteStore(path) as store:
        assert [e.key for e, _ in store.entities_of('blk_00007')] == ['concept:common', 'concept:tag0', 'concept:own7']


@pytest.mark.parametrize('count', [0, 1])
def test_reads_with_nothing_queued_write_nothing(tmp_path: Path, count: int) -> None:
    with SqliteStore(tmp_path / 'n.db') as store:
        for i in range(count):
            store.write_eviction(eviction(i))
        store.entities_of('blk_00000')
        changes = store._conn.total_changes
        store.entities_of('blk_00000')
        store.entity_postings(['concept:common'])
        store.stats()
        assert store._conn.total_changes == changes


def memento(memento_id: str, targets: tuple[str, ...], level: int = 1) -> MementoRecord:
    return MementoRecord(
        id=memento_id, session_id='s', namespace='default', text=memento_id, tokens=1, summarizes=targets, level=level
    )


def test_summarizes_links_follow_writes_across_evictions(tmp_path: Path) -> None:
    """`memento_of` is the first memento written while its target was present, whichever eviction brought each;
    a memento written before its target does not claim it (as on Neo4j, where the edge needs both ends)."""
    blocks = [replace(BASE, id=f'blk_{i}', seq=i) for i in range(4)]
    with SqliteStore(tmp_path / 'links.db') as store:
        store.write_eviction(Eviction(session_id='s', blocks=(blocks[0], blocks[1])))
        store.write_eviction(Eviction(session_id='s', mementos=(memento('m0', ('blk_0',)),)))
        store.write_eviction(Eviction(session_id='s', mementos=(memento('m0b', ('blk_0', 'blk_1')),)))
        early = memento('early', ('blk_3',))
        store.write_eviction(Eviction(session_id='s', mementos=(early,)))
        store.write_eviction(Eviction(session_id='s', blocks=(blocks[3],)))
        # a memento of mementos listed before its children, all in one eviction, ids without the usual prefix
        children = (memento('c1', ('blk_2',)), memento('c2', ('blk_2',)))
        top = memento('top', ('c2', 'c1'), level=2)
        store.write_eviction(Eviction(session_id='s', blocks=(blocks[2],), mementos=(top, *children)))
        store.write_eviction(Eviction(session_id='s', mementos=(memento('top2', ('c1',), level=2),)))

        assert store.memento_of('blk_0') == memento('m0', ('blk_0',))
        assert store.memento_of('blk_1') == memento('m0b', ('blk_0', 'blk_1'))
        assert store.memento_of('blk_3') is None
        assert store.get_memento('early').summarizes == ('blk_3',)  # its declaration is kept whole
        assert store.memento_of('blk_2') == children[0]
        assert store.memento_of('c1') == top and store.memento_of('c2') == top
        assert store.get_memento('top').summarizes == ('c2', 'c1')
        assert store.memento_of('blk_0', session_id='other') is None
        # the compatibility view lists every declared link, by position
        rows = store._conn.execute(
            "SELECT target_id, position FROM summarizes WHERE memento_id = 'top' ORDER BY position"
        ).fetchall()
        assert [tuple(row) for row in rows] == [('c2', 0), ('c1', 1)]


def test_mentions_without_a_new_block_row_keep_their_place_in_write_order(tmp_path: Path) -> None:
    """An eviction that writes no new block (mementos only, or a retry) queues its mentions after the last block
    row; the entity index applies them there, between the block rows' own mentions."""
    blocks = [replace(BASE, id=f'blk_{i}', seq=i) for i in range(3)]

    def named(source: str, name: str, count: int = 1) -> Mention:
        return Mention(source, entity('shared', name), count)

    with SqliteStore(tmp_path / 'order.db') as store:
        store.write_eviction(Eviction(session_id='s', blocks=(blocks[0],), mentions=(named('blk_0', 'FromBlock0'),)))
        store.write_eviction(
            Eviction(
                session_id='s',
                mementos=(memento('m0', ('blk_0',)),),
                mentions=(named('m0', 'FromMemento'), Mention('m0', entity('late', 'FromQueue'), 4)),
            )
        )
        # a retry of block 0 (its row exists) with a pair it did not have: queued too
        store.write_eviction(Eviction(session_id='s', blocks=(blocks[0],), mentions=(named('blk_0', 'Retry', 7),
                                                                                     Mention('blk_0', entity('retry'), 2))))  # fmt: skip
        store.write_eviction(
            Eviction(session_id='s', blocks=(blocks[1],), mentions=(Mention('blk_1', entity('late', 'FromBlock1'), 1),))
        )
        assert queued(store) == 4
        assert store._conn.execute('SELECT count(*) FROM mention_queue').fetchone()[0] == 2

        assert store.entities_of('m0') == [
            (EntityRecord(key='concept:late', name='FromQueue', kind='concept'), 4),
            (EntityRecord(key='concept:shared', name='FromBlock0', kind='concept'), 1),
        ]
        assert store.entities_of('blk_0') == [
            (entity('retry'), 2),
            (EntityRecord(key='concept:shared', name='FromBlock0', kind='concept'), 1),  # the first count stands
        ]
        assert store.entities_of('blk_1') == [(EntityRecord(key='concept:late', name='FromQueue', kind='concept'), 1)]
        assert queued(store) == 0
        # blocks written after the drain carry theirs again, and the mark moves past them at the next read
        store.write_eviction(
            Eviction(session_id='s', blocks=(blocks[2],), mentions=(Mention('blk_2', entity('x'), 1),))
        )
        assert queued(store) == 1
        assert store.entities_of('blk_2') == [(entity('x'), 1)]


def test_unusual_strings_in_mentions_round_trip(tmp_path: Path) -> None:
    """The compact encoding cannot hold a NUL or an empty source id; such an eviction is encoded as JSON."""
    odd = EntityRecord(key='concept:nul\x00key', name='tab\there\nnew line \u00e9\U0001f600', kind='con\x00cept')
    with SqliteStore(tmp_path / 'odd.db') as store:
        store.write_eviction(Eviction(session_id='s', blocks=(BASE,), mentions=(Mention(BASE.id, odd, 2),)))
        store.write_eviction(
            Eviction(session_id='s', mementos=(memento('m', (BASE.id,)),), mentions=(
                Mention('m', entity('a'), 1), Mention('', entity('empty'), 3), Mention('m', entity('b'), 1)))
        )  # fmt: skip
        assert store.entities_of(BASE.id) == [(odd, 2)]
        assert store.entities_of('') == [(entity('empty'), 3)]
        assert store.entities_of('m') == [(entity('a'), 1), (entity('b'), 1)]


def test_writes_after_deleting_the_newest_session_are_indexed(tmp_path: Path) -> None:
    """SQLite reuses the highest `rid`s once their rows are deleted; the index marks come down with them."""
    with SqliteStore(tmp_path / 'reuse.db') as store:
        store.write_eviction(eviction(1, session='kept'))
        store.write_eviction(eviction(2, session='gone'))
        store.write_eviction(
            Eviction(session_id='gone', mementos=(replace(memento('mem_gone', ('blk_00002',)), session_id='gone'),))
        )
        assert store.search_text('check') and store.entities_of('blk_00002')  # both indexes are current
        store.delete_session('gone')

        store.write_eviction(eviction(3, session='new'))
        store.write_eviction(
            Eviction(session_id='new', mementos=(replace(memento('mem_new', ('blk_00003',)), session_id='new'),))
        )

        assert [e.key for e, _ in store.entities_of('blk_00003')] == ['concept:common', 'concept:tag3', 'concept:own3']
        assert {hit.id for hit in store.search_text('check')} == {'blk_00001', 'blk_00003'}
        assert [hit.id for hit in store.search_text('mem_new')] == ['mem_new']


def test_a_page_grows_from_the_members_it_holds(tmp_path: Path) -> None:
    blocks = [replace(BASE, id=f'blk_{i}', seq=i) for i in range(3)]
    page = PageRecord(
        id='pg_1', session_id='s', namespace='default', number=1, first_turn=0, last_turn=1, summary='',
        topics=(), block_ids=('blk_0', 'blk_1'),
    )  # fmt: skip
    with SqliteStore(tmp_path / 'pages.db') as store:
        store.write_eviction(Eviction(session_id='s', blocks=tuple(blocks[:2]), pages=(page,)))
        reordered = replace(page, block_ids=('blk_1', 'blk_0', 'blk_2'))  # not what the page holds: refused
        with pytest.raises(PageConflictError):
            store.write_eviction(Eviction(session_id='s', blocks=(blocks[2],), pages=(reordered,)))
        assert store.list_pages() == [page] and len(store.list_blocks(session_id='s')) == 2
        grown = replace(page, summary='closed', topics=('t',), block_ids=('blk_0', 'blk_1', 'blk_2', 'blk_2'))
        store.write_eviction(Eviction(session_id='s', blocks=(blocks[2],), pages=(grown,)))

        assert store.list_pages() == [replace(grown, block_ids=('blk_0', 'blk_1', 'blk_2'))]
        rows = store._conn.execute('SELECT block_id, position FROM page_blocks ORDER BY position').fetchall()
        assert [tuple(row) for row in rows] == [('blk_0', 0), ('blk_1', 1), ('blk_2', 2)]
        # the compatibility view writes through to the page row
        store._conn.execute("DELETE FROM page_blocks WHERE block_id = 'blk_1'")
        store._conn.execute("UPDATE page_blocks SET position = 5 WHERE block_id = 'blk_0'")
        store._conn.execute("INSERT INTO page_blocks VALUES ('pg_1', 'blk_9', 1)")
        assert store.list_pages()[0].block_ids == ('blk_9', 'blk_2', 'blk_0')
        assert store.delete_session('s') == 3 + 1 + 3 + 1  # blocks, the page, its members (CONTAINS), the session


def test_the_wal_is_cut_back_after_a_large_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite keeps a WAL file at the size of the largest transaction it held until the last connection closes;
    a long-running agent would hold that disk space for good. Once checkpointed, it goes back to the limit."""
    monkeypatch.setattr(_sqlite, '_WAL_SIZE_LIMIT', 1024 * 1024)
    wal = tmp_path / 'wal.db-wal'
    large = BlockRecord.from_messages([user(os.urandom(2_000_000).hex())], session_id='s', seq=0, tokens=10)
    with SqliteStore(tmp_path / 'wal.db') as store:
        store.write_eviction(Eviction(session_id='s', blocks=(large,)))
        assert wal.stat().st_size > 4_000_000  # the 4 MB block went through the WAL whole
        for i in range(1, 4):  # the next commits find it checkpointed and start it over, cut back
            store.write_eviction(eviction(i))
        assert wal.stat().st_size <= 1024 * 1024
        assert store.recover_block(large.id).record.messages_json == large.messages_json
