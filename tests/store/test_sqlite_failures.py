"""Bad input and crashes on the embedded store: clear errors, nothing lost, nothing half-written."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from mementograph.knowledge_graph.store import (
    StoreBusyError,
    StoreUnavailableError,
    UnknownStoreSchemeError,
    default_store_uri,
    open_store,
    resolve_store_uri,
)
from tests.builders import session_history
from tests.store.test_contract import make_eviction

REPO = Path(__file__).resolve().parents[2]

_WRITER = r"""
import sys, time
from dataclasses import replace
from mementograph.knowledge_graph import BlockRecord, Eviction
from mementograph.knowledge_graph.store import open_store
from tests.builders import session_history

path, mode, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = open_store(f'sqlite://{path}')
base = BlockRecord.from_messages(session_history(40), session_id='crash', seq=0, tokens=1)
blocks = tuple(replace(base, id=f'blk_{i}', seq=i * 1000) for i in range(count))
print('writing', flush=True)
store.write_eviction(Eviction(session_id='crash', blocks=blocks))
print('committed', flush=True)
time.sleep(60)
"""


def _spawn_writer(path: Path, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, '-c', _WRITER, str(path), 'x', str(count)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, 'PYTHONPATH': str(REPO)},
    )


def _wait_for(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdout is not None
    while True:
        got = proc.stdout.readline()
        assert got, f'writer exited before printing {line!r}'
        if got.strip() == line:
            return


def test_sigkill_after_commit_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / 'm.db'
    proc = _spawn_writer(path, 20)
    _wait_for(proc, 'committed')
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    store = open_store(f'sqlite://{path}')
    blocks = store.list_blocks(session_id='crash')
    assert len(blocks) == 20
    assert all(len(store.recover_block(b.id).messages) == 160 for b in blocks)


def test_every_commit_is_synced_to_the_disk(tmp_path: Path) -> None:
    """A power cut must not lose an eviction whose blocks already left the context: WAL with `synchronous=FULL`
    syncs each commit before it returns (`NORMAL`, as before, left the last commits to the OS's writeback)."""
    store = open_store(f'sqlite://{tmp_path / "m.db"}')
    try:
        with store._read() as conn:  # the pragma is per connection: the one every write goes through
            assert conn.execute('PRAGMA synchronous').fetchone()[0] == 2  # FULL
            assert conn.execute('PRAGMA journal_mode').fetchone()[0] == 'wal'
    finally:
        store.close()


def _writer_holds_lock(path: Path) -> bool:
    """True while another connection is inside a write transaction on `path` (our BEGIN IMMEDIATE is refused)."""
    if not path.exists():
        return False
    probe = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        probe.execute('BEGIN IMMEDIATE')
        probe.execute('ROLLBACK')
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        probe.close()


def test_sigkill_mid_transaction_leaves_no_partial_eviction(tmp_path: Path) -> None:
    total = 3000
    interrupted = 0
    for attempt in range(5):
        path = tmp_path / f'm{attempt}.db'
        proc = _spawn_writer(path, total)
        _wait_for(proc, 'writing')
        deadline = time.monotonic() + 30
        while not _writer_holds_lock(path) and time.monotonic() < deadline:
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)  # inside the eviction's transaction (or, rarely, just after its commit)
        proc.wait()

        store = open_store(f'sqlite://{path}')
        count = len(store.list_blocks(session_id='crash'))
        assert count in (0, total), f'partial eviction: {count} of {total} blocks'
        if count == 0:
            interrupted += 1
            assert store.stats().sessions == 0
            store.write_eviction(make_eviction(session_history(1), session_id='after', namespace='default')[0])
            assert store.stats().blocks == 1  # the file is healthy after the crash
        store.close()
        if interrupted:
            break
    assert interrupted, 'no kill landed inside a transaction in 5 attempts'


def test_locked_database_waits_then_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / 'm.db'
    store = open_store(f'sqlite://{path}?busy_timeout=0.3')
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute('BEGIN IMMEDIATE')
    try:
        started = time.perf_counter()
        with pytest.raises(StoreBusyError, match=str(path)):
            store.write_eviction(make_eviction(session_history(1), session_id='s', namespace='default')[0])
        waited = time.perf_counter() - started
        assert 0.25 <= waited < 5
    finally:
        holder.execute('ROLLBACK')
        holder.close()
    store.write_eviction(make_eviction(session_history(1), session_id='s', namespace='default')[0])
    assert store.stats().blocks == 1


def test_corrupt_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / 'garbage.db'
    path.write_bytes(b'this is not a database at all' * 100)
    with pytest.raises(StoreUnavailableError, match=r'garbage\.db'):
        open_store(f'sqlite://{path}')
    assert path.read_bytes().startswith(b'this is not')  # never overwritten


def test_a_full_database_names_the_file_and_says_it_is_full(tmp_path: Path) -> None:
    """SQLite's "database or disk is full" named neither the file nor what to do. The page limit stands in for the
    disk (both are SQLITE_FULL to SQLite), so this runs anywhere; a real full disk is the test below."""
    path = tmp_path / 'm.db'
    store = open_store(f'sqlite://{path}')
    try:
        store.write_eviction(make_eviction(session_history(1), session_id='s', namespace='default')[0])
        conn = store._conn  # type: ignore[attr-defined]  # the test plays a file that cannot grow
        pages = conn.execute('PRAGMA page_count').fetchone()[0]
        conn.execute(f'PRAGMA max_page_count = {pages}')
        big = make_eviction(session_history(60, prefix='more'), session_id='s', namespace='default', seq=100)[0]
        with pytest.raises(StoreUnavailableError) as raised:
            store.write_eviction(big)
        message = str(raised.value)
        assert message.startswith(f'writing {path} failed, nothing was written: database or disk is full; ')
        assert f'the disk holding {path} was full' in message and 'max_page_count' in message
        assert store.stats().blocks == 1  # the earlier eviction is whole, the failed one left nothing
    finally:
        store.close()


def _fill(directory: Path) -> None:
    """Write a file in `directory` until its disk has no byte left."""
    filler = os.open(directory / 'filler', os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 16, 1 << 12, 1):
            try:
                while os.write(filler, bytes(size)):
                    pass
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    finally:
        os.close(filler)
    assert shutil.disk_usage(directory).free == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB disk of its own (a tmpfs), to be filled for real."""
    if os.geteuid() != 0:
        pytest.skip('a full disk is a 1 MiB tmpfs here, and only root may mount one')
    mount = tmp_path / 'disk'
    mount.mkdir()
    done = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f'this system does not let root mount a tmpfs: {done.stderr.decode().strip()}')
    try:
        yield mount
    finally:
        subprocess.run(['umount', '-l', str(mount)], check=True)


def test_a_full_disk_is_named_at_open_and_at_a_write(small_disk: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Opening a store on a full disk read "cannot use PATH: disk I/O error" (SQLite cannot grow the -shm file and
    says no more), and a write "database or disk is full": both now say the disk holding the file is full."""
    from mementograph.cli import main

    path = small_disk / 'm.db'
    store = open_store(f'sqlite://{path}')
    store.write_eviction(make_eviction(session_history(1), session_id='s', namespace='default')[0])
    store.close()
    with closing(sqlite3.connect(path)) as conn:  # as a store left closed: no -wal or -shm file beside it
        conn.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchall()
    for extra in ('-wal', '-shm'):
        path.with_name(path.name + extra).unlink(missing_ok=True)
    _fill(small_disk)
    full = f'the disk holding {path} is full (0 bytes free): free space on it'
    with pytest.raises(StoreUnavailableError) as raised:
        open_store(f'sqlite://{path}')
    assert str(raised.value).startswith(f'cannot use {path}: disk I/O error; {full}')
    assert main(['stats', '--store', f'sqlite://{path}', '--json']) == 1
    assert full in json.loads(capsys.readouterr().out)['error']['message']

    (small_disk / 'filler').unlink()
    store = open_store(f'sqlite://{path}')
    try:
        _fill(small_disk)
        more = make_eviction(session_history(40, prefix='more'), session_id='s', namespace='default', seq=100)[0]
        with pytest.raises(StoreUnavailableError) as raised:
            store.write_eviction(more)
        assert str(raised.value).startswith(f'writing {path} failed, nothing was written: ')
        assert full in str(raised.value)
        (small_disk / 'filler').unlink()
        assert store.stats().blocks == 1  # nothing of the failed write, nothing lost
        store.write_eviction(more)  # with room again, the same write goes through
        assert store.stats().blocks == 2
    finally:
        store.close()


@pytest.mark.parametrize(
    ('schema', 'refusal'),
    [
        ('CREATE TABLE customers (id INTEGER)', 'another application'),
        ("CREATE TABLE meta (key TEXT, value TEXT); INSERT INTO meta VALUES ('format', 'shop-2')", 'unknown format'),
    ],
)
def test_foreign_sqlite_file_is_refused_and_left_as_it_was(tmp_path: Path, schema: str, refusal: str) -> None:
    path = tmp_path / 'other.db'
    conn = sqlite3.connect(path)
    conn.executescript(schema)  # the default rollback journal, as most applications keep it
    conn.close()
    before = path.read_bytes()

    with pytest.raises(StoreUnavailableError, match=refusal):
        open_store(f'sqlite://{path}')

    assert path.read_bytes() == before  # not switched to WAL (a change the file would keep for good)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['other.db']


def test_directory_and_unwritable_paths(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailableError, match='is a directory'):
        open_store(f'sqlite://{tmp_path}')
    blocker = tmp_path / 'file'
    blocker.write_text('x')
    with pytest.raises(StoreUnavailableError, match='file'):
        open_store(f'sqlite://{blocker}/sub/m.db')


def test_a_misspelt_uri_option_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown store URI option busy_timeot in '.*': use busy_timeout$"):
        open_store(f'sqlite://{tmp_path / "m.db"}?busy_timeot=3')
    assert not (tmp_path / 'm.db').exists()


def test_unknown_scheme_lists_valid_ones() -> None:
    with pytest.raises(UnknownStoreSchemeError) as info:
        open_store('postgres://localhost/db')
    message = str(info.value)
    for scheme in ('sqlite://', 'memory://', 'neo4j://', 'bolt://', 'neo4j+s://'):
        assert scheme in message
    with pytest.raises(UnknownStoreSchemeError):
        open_store('just-a-path.db')
    with pytest.raises(UnknownStoreSchemeError, match='memory:// takes no name or path'):
        open_store('memory:///team')
    assert open_store('memory://?busy_timeout=1').stats().blocks == 0


def test_an_empty_or_non_string_uri_is_refused_not_taken_for_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('MEMENTOGRAPH_STORE', 'memory://')  # what `None` would open; '' must not
    for empty in ('', '  '):
        with pytest.raises(UnknownStoreSchemeError, match=r'^empty store URI: use one of sqlite://, memory://'):
            open_store(empty)
    with pytest.raises(TypeError, match=r'^a store URI is a str such as .*, not int$'):
        open_store(123)  # type: ignore[arg-type]
    monkeypatch.setenv('MEMENTOGRAPH_STORE', '')  # an empty variable is unset, as for any other
    assert resolve_store_uri(None) == default_store_uri()


def test_relative_and_home_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store('sqlite://rel/m.db')
    assert (tmp_path / 'rel' / 'm.db').exists()
    store.close()
    monkeypatch.setenv('HOME', str(tmp_path))
    assert open_store('sqlite://~/h.db').uri == f'sqlite://{tmp_path / "h.db"}'


def test_env_var_selects_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('MEMENTOGRAPH_STORE', f'sqlite://{tmp_path / "env.db"}')
    assert open_store().uri == f'sqlite://{tmp_path / "env.db"}'
    assert open_store('memory://').uri == 'memory://'  # explicit wins


def test_an_absolute_path_with_four_slashes_is_the_same_file(tmp_path: Path) -> None:
    """`sqlite:////abs/x.db` (SQLAlchemy's form) names /abs/x.db, and messages and `uri` show it so."""
    three = open_store(f'sqlite://{tmp_path / "m.db"}')
    four = open_store(f'sqlite:///{tmp_path / "m.db"}')
    try:
        assert four.uri == three.uri == f'sqlite://{tmp_path / "m.db"}'
    finally:
        three.close()
        four.close()
    with pytest.raises(StoreUnavailableError) as info:
        four.list_sessions()
    assert f'{tmp_path / "m.db"} failed: Cannot operate on a closed database' in str(info.value)
    assert 'corrupt' not in str(info.value)


_OPENER = r"""
import sys, time
from mementograph.knowledge_graph.store import open_store

# one line per round on stdin: a start time and a new file; this process opens the file at that moment
for line in sys.stdin:
    start, path = line.split(' ', 1)
    while time.time() < float(start):
        pass
    try:
        open_store(f'sqlite://{path.strip()}').close()
        print('ok', flush=True)
    except Exception as error:
        print(f'{type(error).__name__}: {error}'.replace('\n', ' '), flush=True)
"""


def test_a_new_file_opened_by_several_processes_at_once(tmp_path: Path) -> None:
    """Each process gets a working store: one creates the schema, the others wait for it (before, 1 round in ~10
    failed: a process read the schema half made, as another application's tables, or gave up at once on the switch
    to WAL with 'locked for 5 s')."""
    openers = [
        subprocess.Popen(
            [sys.executable, '-c', _OPENER], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    try:
        for round_ in range(30):
            path = tmp_path / f'new-{round_}.db'
            start = time.time() + 0.3
            for opener in openers:
                assert opener.stdin is not None
                opener.stdin.write(f'{start} {path}\n')
                opener.stdin.flush()
            outcomes = [opener.stdout.readline().strip() for opener in openers if opener.stdout is not None]
            assert outcomes == ['ok'] * 6, f'round {round_}: {outcomes}'
    finally:
        for opener in openers:
            opener.kill()
            opener.wait()
