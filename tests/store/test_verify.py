"""`verify_store` and `mementograph verify` on every backend: a real archive verifies; each kind of damage, done
behind the store's back with SQL or Cypher, is reported as its own problem."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mementograph._messages import message_text
from mementograph.cli import _verify_cmd, main
from mementograph.eval import Dialogue, DialogueIngestor, Segment, Turn
from mementograph.knowledge_graph import BlockRecord, Eviction, MementoRecord, SessionEvent, memento_id_for
from mementograph.knowledge_graph.recall import PagePolicy
from mementograph.knowledge_graph.store import (
    GraphStore,
    SqliteStore,
    StoreCorruptError,
    VerifyReport,
    _verify,
    open_store,
    verify_store,
)
from tests.builders import ret, session_history
from tests.store.conftest import Backend
from tests.store.test_contract import make_eviction

DAY = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)

_TURNS = [
    ('user', 'The build of {s} fails with TypeError in src/app/models.py line 42, can you look?'),
    ('assistant', 'Run `pytest tests/test_models.py -x` first; numpy==1.21 is pinned in requirements.txt.'),
    ('user', 'Done: 3 failed, 40 passed. The traceback ends in QuerySet.filter with a None argument.'),
    ('assistant', 'Then filter(None) is the bug: guard it in src/app/query.py before calling the ORM.'),
    ('user', 'Fixed it, now 43 passed in 1.75s. Next, the marker word for this session is {s}marker.'),
    ('assistant', 'Noted {s}marker. Should we also update the CHANGELOG.md entry for version 2.3.1?'),
    ('user', 'Yes, and tag the release v2.3.1 on the main branch after the CI run on GitHub finishes.'),
    ('assistant', 'The CI run passed on all three Python versions; I tagged v2.3.1 and pushed the tag.'),
]


def dialogue(session_id: str) -> Dialogue:
    """Two sittings of a realistic chat (two evictions, so chains and pages are extended across writes)."""

    def segment(name: str, start: datetime) -> Segment:
        return Segment(
            name,
            tuple(
                Turn(f'{name}:{i}', role, text.format(s=session_id), start + timedelta(minutes=i))  # type: ignore[arg-type]
                for i, (role, text) in enumerate(_TURNS)
            ),
        )

    return Dialogue(session_id, (segment('S1', DAY), segment('S2', DAY + timedelta(days=1))))


@dataclass(frozen=True)
class Archived:
    """One session as the real ingest path wrote it, in session order."""

    session_id: str
    block_ids: tuple[str, ...]
    memento_ids: tuple[str, ...]
    """`memento_ids[i]` stands in for `block_ids[i]`."""
    part_id: str
    top_memento_id: str
    """A memento of the first two mementos (level 2)."""


def archive(store: GraphStore, namespace: str, session_id: str) -> Archived:
    """Ingest a session through the engine (blocks, mementos, mentions, pages of 4, the message log), then a
    micro-compacted part and a memento of mementos, as the capability writes them."""
    ingestor = DialogueIngestor(min_tokens=40, namespace=namespace, page_policy=PagePolicy(blocks_per_page=4))
    ingested = asyncio.run(ingestor.ingest(store, dialogue(session_id)))
    assert len(ingested.blocks) >= 6 and all(b.memento_id for b in ingested.blocks)
    block_ids = tuple(b.block_id for b in ingested.blocks)
    memento_ids = tuple(str(b.memento_id) for b in ingested.blocks)

    stubbed = ret('bash', 'line of output\n' * 50, 'call_9', 3)
    part = BlockRecord.from_messages(
        [stubbed],
        session_id=session_id,
        namespace=namespace,
        seq=1,
        tokens=300,
        kind='part',
        text=message_text(stubbed),
    )
    micro = SessionEvent(
        session_id=session_id, namespace=namespace, kind='micro', payload=b'{}', sha256='', block_ids=(part.id,)
    )
    top = MementoRecord(
        id=memento_id_for(namespace, session_id, memento_ids[:2]),
        session_id=session_id,
        namespace=namespace,
        text='both first blocks, merged',
        tokens=6,
        summarizes=memento_ids[:2],
        level=2,
        compressor='extractive',
    )
    store.write_eviction(Eviction(session_id=session_id, namespace=namespace, blocks=(part,), events=(micro,)))
    store.write_eviction(Eviction(session_id=session_id, namespace=namespace, mementos=(top,)))
    return Archived(session_id, block_ids, memento_ids, part.id, top.id)


def raw(backend: Backend, *, sql: str = '', cypher: str = '', **params: Any) -> list[Any]:
    """Run SQL (embedded stores) or Cypher (Neo4j) behind the store's back: the test plays someone editing, or a
    disk corrupting, the database. Named `:name` parameters in SQL, `$name` in Cypher."""
    store = backend.store
    if isinstance(store, SqliteStore):
        assert sql, 'this backend needs the SQL form'
        return [tuple(row) for row in store._conn.execute(sql, params).fetchall()]
    from mementograph.knowledge_graph.store._neo4j import Neo4jStore

    assert isinstance(store, Neo4jStore) and cypher, 'this backend needs the Cypher form'
    records, _, _ = store._driver.execute_query(cypher, params, database_=store._database)
    return [tuple(record.values()) for record in records]


def is_neo4j(backend: Backend) -> bool:
    return not isinstance(backend.store, SqliteStore)


def found(report: VerifyReport) -> set[tuple[str, str]]:
    return {(p.kind, p.subject_id) for p in report.problems}


def cli(backend: Backend, argv: Sequence[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """Run the real command line against the backend's store: by URI for a file or server; for `memory://`,
    which another process cannot see, by handing the command this very store."""
    if backend.store.uri == 'memory://':

        @contextmanager
        def same_store(_: object) -> Iterator[GraphStore]:
            yield backend.store

        monkeypatch.setattr(_verify_cmd, 'store_from', same_store)
        return main([*argv, '--namespace', backend.namespace])
    return main([*argv, '--store', backend.store.uri, '--namespace', backend.namespace])


@pytest.fixture
def archived(backend: Backend) -> Iterator[dict[str, Archived]]:
    yield {sid: archive(backend.store, backend.namespace, sid) for sid in ('a', 'b')}
    if is_neo4j(backend):  # the server is shared: leave nothing behind
        for sid in ('a', 'b'):
            backend.store.delete_session(sid, namespace=backend.namespace)


# -- a sound archive ----------------------------------------------------------------------------------------------


def test_real_archive_verifies_and_verify_only_reads(backend: Backend, archived: dict[str, Archived]) -> None:
    store, ns = backend.store, backend.namespace
    blocks = len(archived['a'].block_ids)
    before = (store.stats(namespace=ns), store.list_blocks(namespace=ns, kind=None), store.list_pages(namespace=ns))

    report = verify_store(store, namespace=ns)

    assert store.check_storage() == ()  # the engine finds its storage whole (Neo4j: nothing a client runs)
    assert report.problems == () and report.ok
    assert report.blocks_checked == 2 * (blocks + 1)  # blocks and the stubbed part of each session
    assert report.mementos_checked == 2 * (blocks + 1)  # one per block, plus the memento of mementos
    assert report.pages_checked == 2 * len(store.list_pages(namespace=ns, session_id='a')) == 4
    assert report.sessions_checked == 2
    one = verify_store(store, namespace=ns, session_id='b')
    assert (one.ok, one.sessions_checked, one.blocks_checked, one.pages_checked) == (True, 1, blocks + 1, 2)
    assert verify_store(store, namespace=ns + '-empty') == VerifyReport(True, 0, 0, 0, 0, ())
    after = (store.stats(namespace=ns), store.list_blocks(namespace=ns, kind=None), store.list_pages(namespace=ns))
    assert after == before


def test_graph_links_show_the_chain_the_pages_and_summarizes(backend: Backend, archived: dict[str, Archived]) -> None:
    a = archived['a']
    links = backend.store.graph_links(namespace=backend.namespace, session_id='a')
    chain = {link.id: link.next_ids for link in links.blocks if link.kind == 'block'}
    assert [chain[block_id] for block_id in a.block_ids] == [(n,) for n in a.block_ids[1:]] + [()]
    assert {link.id: link.next_ids for link in links.blocks if link.kind == 'part'} == {a.part_id: ()}
    assert all(link.in_session for link in links.blocks)
    targets = {link.id: link.targets for link in links.mementos}
    assert targets[a.top_memento_id] == a.memento_ids[:2]
    assert [targets[m] for m in a.memento_ids] == [(b,) for b in a.block_ids]
    assert [page.members for page in links.pages] == [
        tuple((block_id, i) for i, block_id in enumerate(a.block_ids[:4])),
        tuple((block_id, i) for i, block_id in enumerate(a.block_ids[4:])),
    ]


def test_blocks_are_read_page_by_page(
    backend: Backend, archived: dict[str, Archived], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At any size the bytes come a few blocks at a time; a bad block on a later page is still found."""
    ids = sorted([*archived['a'].block_ids, archived['a'].part_id, *archived['b'].block_ids, archived['b'].part_id])
    pages: list[int] = []
    scan = backend.store.scan_blocks

    def counting_scan(**kwargs: Any) -> list[BlockRecord]:
        page = scan(**kwargs)
        pages.append(len(page))
        return page

    monkeypatch.setattr(_verify, 'SCAN_BATCH', 5)
    monkeypatch.setattr(backend.store, 'scan_blocks', counting_scan)
    backend.tamper(ids[-1])

    report = verify_store(backend.store, namespace=backend.namespace)

    assert max(pages) == 5 and sum(pages) == len(ids) == report.blocks_checked
    assert found(report) == {('hash_mismatch', ids[-1])}


# -- each kind of damage --------------------------------------------------------------------------------------------


def test_tampered_block_is_a_hash_mismatch_and_exit_4(
    backend: Backend,
    archived: dict[str, Archived],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    block_id = archived['a'].block_ids[2]
    backend.tamper(block_id)

    report = verify_store(backend.store, namespace=backend.namespace)

    assert not report.ok
    assert found(report) == {('hash_mismatch', block_id)}
    assert 'stored sha256' in report.problems[0].detail and report.problems[0].session_id == 'a'
    assert verify_store(backend.store, namespace=backend.namespace, session_id='b').ok

    assert cli(backend, ['verify', '--json'], monkeypatch) == 4
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data['ok'] is False and data['blocks_checked'] == report.blocks_checked
    assert [(p['kind'], p['subject_id']) for p in data['problems']] == [('hash_mismatch', block_id)]
    assert 'verify failed: 1 problem in' in err
    assert cli(backend, ['verify', '--session', 'a'], monkeypatch) == 4
    out = capsys.readouterr().out
    assert f'hash_mismatch  {block_id}  session a: stored sha256' in out
    assert cli(backend, ['verify', '--session', 'b'], monkeypatch) == 0
    assert 'OK: every block matches its sha256' in capsys.readouterr().out


def test_deleted_memento_leaves_its_block_unsummarized(backend: Backend, archived: dict[str, Archived]) -> None:
    a = archived['a']
    raw(
        backend,
        sql='DELETE FROM mementos WHERE id = :id',
        cypher='MATCH (m:Memento {id: $id}) DETACH DELETE m',
        id=a.memento_ids[3],
    )

    report = verify_store(backend.store, namespace=backend.namespace)

    assert found(report) == {('missing_summarizes', a.block_ids[3])}
    assert report.mementos_checked == 2 * len(a.memento_ids) + 1


def test_deleted_memento_under_a_memento_of_mementos(backend: Backend, archived: dict[str, Archived]) -> None:
    a = archived['a']
    raw(
        backend,
        sql='DELETE FROM mementos WHERE id = :id',
        cypher='MATCH (m:Memento {id: $id}) DETACH DELETE m',
        id=a.memento_ids[0],
    )

    report = verify_store(backend.store, namespace=backend.namespace)

    assert found(report) == {('missing_summarizes', a.block_ids[0]), ('orphan_memento', a.top_memento_id)}
    assert any(a.memento_ids[0] in p.detail and 'not in the store' in p.detail for p in report.problems)


def test_deleted_block_orphans_its_memento_and_leaves_a_hole_in_its_page(
    backend: Backend, archived: dict[str, Archived]
) -> None:
    a = archived['a']
    first_page = backend.store.list_pages(namespace=backend.namespace, session_id='a')[0]
    raw(
        backend,
        sql='DELETE FROM blocks WHERE id = :id',
        cypher='MATCH (b:EvictedBlock {id: $id}) DETACH DELETE b',
        id=a.block_ids[1],
    )

    report = verify_store(backend.store, namespace=backend.namespace)

    expected = {('orphan_memento', a.memento_ids[1]), ('page_missing_block', first_page.id)}
    if is_neo4j(backend):  # the chain is stored there, and lost its edge into the deleted block
        expected.add(('broken_next_chain', a.block_ids[0]))
    assert found(report) == expected
    assert report.blocks_checked == 2 * (len(a.block_ids) + 1) - 1


def test_broken_next_chain(backend: Backend, archived: dict[str, Archived]) -> None:
    """Neo4j stores NEXT edges: one goes missing, another leads to the wrong block. The embedded stores derive NEXT
    from block order, which breaks when a block's message range is moved over its neighbour's."""
    a = archived['a']
    if is_neo4j(backend):
        raw(backend, cypher='MATCH (:EvictedBlock {id: $id})-[r:NEXT]->() DELETE r', id=a.block_ids[1])
        raw(
            backend,
            cypher='MATCH (b:EvictedBlock {id: $id})-[r:NEXT]->() DELETE r '
            'WITH b MATCH (x:EvictedBlock {id: $to}) CREATE (b)-[:NEXT]->(x)',
            id=a.block_ids[3],
            to=a.block_ids[5],
        )
        expected = {('broken_next_chain', a.block_ids[1]), ('broken_next_chain', a.block_ids[3])}
    else:
        raw(
            backend,
            sql='UPDATE blocks SET last_message = last_message + 1 WHERE id = :id',
            id=a.block_ids[1],
        )
        expected = {('broken_next_chain', a.block_ids[1])}

    report = verify_store(backend.store, namespace=backend.namespace, session_id='a')

    assert found(report) == expected
    assert all('NEXT leads to' in p.detail or 'overlap' in p.detail for p in report.problems)


def test_overlapping_blocks_break_the_chain(backend: Backend, archived: dict[str, Archived]) -> None:
    a = archived['a']
    raw(
        backend,
        sql='UPDATE blocks SET first_message = first_message - 1 WHERE id = :id',
        cypher='MATCH (b:EvictedBlock {id: $id}) SET b.first_message = b.first_message - 1',
        id=a.block_ids[2],
    )

    report = verify_store(backend.store, namespace=backend.namespace)

    # its range no longer starts at its seq, and the block before now overlaps it
    assert found(report) == {('broken_next_chain', a.block_ids[2]), ('broken_next_chain', a.block_ids[1])}
    details = sorted(p.detail for p in report.problems)
    assert 'does not start at seq' in details[0] and 'overlap the next block' in details[1]


def test_page_pointing_at_a_missing_block(backend: Backend, archived: dict[str, Archived]) -> None:
    """The page's second CONTAINS leads elsewhere: to an id no block has (a SQLite row can dangle), or on Neo4j,
    where an edge cannot dangle, to a node that is not a block of the session."""
    a = archived['a']
    page = backend.store.list_pages(namespace=backend.namespace, session_id='a')[0]
    raw(
        backend,
        sql="UPDATE page_blocks SET block_id = 'blk_gone' WHERE page_id = :page AND position = 1",
        cypher='MATCH (p:Page {id: $page})-[c:CONTAINS {position: 1}]->() DELETE c '
        'WITH p MATCH (m:Memento {id: $memento}) CREATE (p)-[:CONTAINS {position: 1}]->(m)',
        page=page.id,
        memento=a.memento_ids[0],
    )

    report = verify_store(backend.store, namespace=backend.namespace)

    assert found(report) == {('page_missing_block', page.id), ('block_without_page', a.block_ids[1])}
    missing = next(p for p in report.problems if p.kind == 'page_missing_block')
    assert ('blk_gone' if not is_neo4j(backend) else a.memento_ids[0]) in missing.detail


def test_page_lost_a_member(backend: Backend, archived: dict[str, Archived]) -> None:
    a = archived['a']
    page = backend.store.list_pages(namespace=backend.namespace, session_id='a')[0]
    raw(
        backend,
        sql='DELETE FROM page_blocks WHERE page_id = :page AND position = 2',
        cypher='MATCH (p:Page {id: $page})-[c:CONTAINS {position: 2}]->() DELETE c',
        page=page.id,
    )

    report = verify_store(backend.store, namespace=backend.namespace)

    assert found(report) == {('page_missing_block', page.id), ('block_without_page', a.block_ids[2])}


def test_session_record_gone_orphans_its_records(backend: Backend, archived: dict[str, Archived]) -> None:
    a = archived['a']
    raw(
        backend,
        sql="DELETE FROM sessions WHERE namespace = :ns AND id = 'b'",
        cypher="MATCH (s:Session {namespace: $ns, id: 'b'}) DETACH DELETE s",
        ns=backend.namespace,
    )

    report = verify_store(backend.store, namespace=backend.namespace)

    b = archived['b']
    assert found(report) == {('orphan_block', block_id) for block_id in (*b.block_ids, b.part_id)} | {
        ('orphan_memento', memento_id) for memento_id in (*b.memento_ids, b.top_memento_id)
    }
    assert report.sessions_checked == 2
    assert verify_store(backend.store, namespace=backend.namespace, session_id=a.session_id).ok
    assert not verify_store(backend.store, namespace=backend.namespace, session_id='b').ok


@pytest.mark.neo4j
def test_missing_summarizes_edge_on_neo4j(neo4j_store: GraphStore, unique_namespace: str) -> None:
    """Only Neo4j stores a memento's targets twice (its `summarizes` list and its edges): they can disagree."""
    store = neo4j_store
    try:
        a = archive(store, unique_namespace, 'a')
        backend = Backend(store=store, namespace=unique_namespace, tamper=lambda _: None)
        raw(backend, cypher='MATCH (:Memento {id: $id})-[r:SUMMARIZES]->() DELETE r', id=a.memento_ids[4])
        raw(
            backend,
            cypher='MATCH (m:Memento {id: $id}), (b:EvictedBlock {id: $block}) CREATE (m)-[:SUMMARIZES]->(b)',
            id=a.memento_ids[5],
            block=a.block_ids[0],
        )

        report = verify_store(store, namespace=unique_namespace)

        assert found(report) == {('missing_summarizes', a.memento_ids[4]), ('extra_summarizes', a.memento_ids[5])}
    finally:
        store.delete_session('a', namespace=unique_namespace)


def test_verify_unknown_session_is_not_found(
    backend: Backend, archived: dict[str, Archived], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(backend, ['verify', '--session', 'nope'], monkeypatch) == 3
    assert "no session 'nope'" in capsys.readouterr().err


def test_a_block_column_retyped_by_another_tool_is_checked_not_a_crash(tmp_path: Path) -> None:
    """A SQLite file edited with another tool may hold text, or nothing usable, where a block's bytes were: the same
    text is still the archived block; anything else is a hash mismatch, never a crash."""
    store = open_store(f'sqlite://{tmp_path / "edited.db"}')
    ids = []
    for number in range(2):
        eviction, _, _ = make_eviction(
            session_history(3, prefix=f'p{number}'), session_id='s', namespace='default', seq=number * 20
        )
        store.write_eviction(eviction)
        ids.append(eviction.blocks[0].id)
    same, other = ids
    conn = store._conn  # type: ignore[attr-defined]  # plays another tool editing the file
    conn.execute('UPDATE blocks SET messages_json = CAST(messages_json AS TEXT) WHERE id = ?', (same,))
    conn.execute('UPDATE blocks SET messages_json = 42 WHERE id = ?', (other,))
    assert conn.execute('SELECT typeof(messages_json) FROM blocks WHERE id = ?', (same,)).fetchone()[0] == 'text'
    report = verify_store(store)
    assert found(report) == {('hash_mismatch', other)}
    assert store.recover_block(same)  # the text is the archived bytes
    store.close()


def test_an_altered_log_message_is_a_log_hash_mismatch(
    backend: Backend, archived: dict[str, Archived], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The session log is the full record (`transcript` rebuilds the session from it): an edit on the disk passed
    `verify` before, and `transcript` showed the altered text."""
    ns = backend.namespace
    where = {'ns': ns, 'index': 1}
    (payload,) = raw(
        backend,
        sql="SELECT payload FROM events WHERE namespace = :ns AND session_id = 'a' AND message_index = :index",
        cypher="MATCH (e:Event {namespace: $ns, session_id: 'a', message_index: $index}) RETURN e.payload",
        **where,
    )[0]
    altered = bytes(payload).replace(b'a', b'b', 1)
    assert altered != bytes(payload)
    raw(
        backend,
        sql="UPDATE events SET payload = :p WHERE namespace = :ns AND session_id = 'a' AND message_index = :index",
        cypher="MATCH (e:Event {namespace: $ns, session_id: 'a', message_index: $index}) SET e.payload = $p",
        p=altered,
        **where,
    )

    report = verify_store(backend.store, namespace=ns)
    assert found(report) == {('log_hash_mismatch', 'message 1')} and report.problems[0].session_id == 'a'
    assert verify_store(backend.store, namespace=ns, session_id='b').ok
    assert cli(backend, ['verify', '--session', 'a'], monkeypatch) == 4
    assert 'log_hash_mismatch  message 1  session a: logged sha256' in capsys.readouterr().out


# -- a damaged SQLite file ------------------------------------------------------------------------------------------

_BTREE_PAGE_TYPES = (0x02, 0x05, 0x0A, 0x0D)
"""The first byte of a b-tree page (index or table, interior or leaf); overflow and free pages start with 0."""


def _archive_file(tmp_path: Path) -> tuple[Path, int]:
    """Two sessions archived in a SQLite file, everything checkpointed into the file itself; and its page size."""
    path = tmp_path / 'archive.db'
    store = open_store(f'sqlite://{path}')
    for sid in ('a', 'b'):
        archive(store, 'default', sid)
    store.close()
    with closing(sqlite3.connect(path)) as conn:
        conn.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchall()
        page_size = int(conn.execute('PRAGMA page_size').fetchone()[0])
    return path, page_size


def _zero_page(path: Path, page_size: int, number: int) -> None:
    with path.open('r+b') as file:
        file.seek((number - 1) * page_size)
        file.write(bytes(page_size))


def _middle_btree_page(path: Path, page_size: int) -> int:
    data = path.read_bytes()
    pages = len(data) // page_size
    btree = [n for n in range(2, pages + 1) if data[(n - 1) * page_size] in _BTREE_PAGE_TYPES]
    return min(btree, key=lambda n: abs(n - pages // 2))


def _root_page(table: str) -> Callable[[Path, int], int]:
    def root(path: Path, page_size: int) -> int:
        with closing(sqlite3.connect(path)) as conn:
            return int(conn.execute('SELECT rootpage FROM sqlite_master WHERE name = ?', (table,)).fetchone()[0])

    return root


@pytest.mark.parametrize('page', [_middle_btree_page, _root_page('events')], ids=['middle', 'events-root'])
def test_a_zeroed_page_is_a_corrupt_file_not_an_unexpected_error(
    page: Callable[[Path, int], int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A disk that zeroed one page of the file: `verify` exited 1 with "database disk image is malformed" when a
    check read the page (an error, as for a server that is down), and 0 when none did, where its promise is to say
    whether the archive holds (exit 4)."""
    path, page_size = _archive_file(tmp_path)
    _zero_page(path, page_size, page(path, page_size))
    uri = f'sqlite://{path}'

    assert main(['verify', '--store', uri, '--json']) == 4
    out, err = capsys.readouterr()
    data_out = json.loads(out)
    assert data_out['ok'] is False
    kinds = {(p['kind'], p['subject_id']) for p in data_out['problems']}
    assert ('corrupt_file', uri) in kinds
    assert 'verify failed' in err and 'Traceback' not in err
    assert main(['verify', '--store', uri]) == 4
    text = capsys.readouterr().out
    assert f'corrupt_file  {uri}: ' in text  # no session to name: the file is the subject
    assert 'session :' not in text


def test_a_file_too_damaged_to_open_is_a_corrupt_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, page_size = _archive_file(tmp_path)
    _zero_page(path, page_size, 1)  # the header: SQLite no longer takes it for a database
    uri = f'sqlite://{path}'
    assert main(['verify', '--store', uri, '--json']) == 4
    problems = json.loads(capsys.readouterr().out)['problems']
    assert [(p['kind'], p['subject_id']) for p in problems] == [('corrupt_file', uri)]
    assert f'{path} is not a mementograph SQLite database, or it is corrupt' in problems[0]['detail']


def test_the_engines_own_check_finds_a_page_no_other_read_touches(tmp_path: Path) -> None:
    """The full-text index is read by no check of `verify`: a zeroed page of it passed as verified."""
    path, page_size = _archive_file(tmp_path)
    store = open_store(f'sqlite://{path}')
    try:
        assert store.search_text('pytest')  # the index is built at the first search
    finally:
        store.close()
    with closing(sqlite3.connect(path)) as conn:
        conn.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchall()
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'text_fts_data'").fetchone()[0]
    _zero_page(path, page_size, root)
    store = open_store(f'sqlite://{path}')
    try:
        report = verify_store(store)
    finally:
        store.close()
    assert not report.ok
    assert [p.kind for p in report.problems] == ['corrupt_file']
    assert report.problems[0].subject_id == f'sqlite://{path}' and report.blocks_checked > 0


def test_a_stored_value_that_no_longer_decodes_is_a_corrupt_file(tmp_path: Path) -> None:
    """A zeroed overflow page reads back as NUL bytes, which SQLite's own check cannot see: the event log's block
    ids then failed to decode with a bare "Expecting value: line 1 column 1" (exit 1)."""
    path, _ = _archive_file(tmp_path)
    store = open_store(f'sqlite://{path}')
    try:
        conn = store._conn  # type: ignore[attr-defined]  # plays the damaged page
        conn.execute("UPDATE events SET block_ids_json = char(0, 0, 0) WHERE kind = 'micro'")
        with pytest.raises(StoreCorruptError, match=rf'{path} is corrupt: a value it stored \(the block ids of event'):
            store.read_events('a')
        report = verify_store(store)
    finally:
        store.close()
    assert [p.kind for p in report.problems] == ['corrupt_file']
    assert 'no longer decodes' in report.problems[0].detail and report.blocks_checked > 0


def test_skip_file_check_leaves_out_the_engines_check_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--skip-file-check` saves reading every page of a large file (minutes at 100k blocks): a damaged page only
    that check reads then passes, while a page a block check reads still fails."""
    path, page_size = _archive_file(tmp_path)
    store = open_store(f'sqlite://{path}')
    try:
        assert store.search_text('pytest')
    finally:
        store.close()
    with closing(sqlite3.connect(path)) as conn:
        conn.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchall()
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'text_fts_data'").fetchone()[0]
    _zero_page(path, page_size, root)
    uri = f'sqlite://{path}'

    assert main(['verify', '--store', uri, '--skip-file-check']) == 0
    assert main(['verify', '--store', uri]) == 4
    assert f'corrupt_file  {uri}: ' in capsys.readouterr().out
    _zero_page(path, page_size, _root_page('events')(path, page_size))
    assert main(['verify', '--store', uri, '--skip-file-check']) == 4
