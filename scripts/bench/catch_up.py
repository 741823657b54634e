"""Index catch-up benchmark: how long another writer waits while the first read indexes a backlog (SQLite).

Usage:
    TIKTOKEN_CACHE_DIR=... .venv/bin/python scripts/bench/catch_up.py [--blocks 30000] [--index text|entities]
        [--data DIR] [--no-writer]

A store of `--blocks` evictions (real blocks of the shared trajectories, as `store.py` makes them) is written with
no read between, so the deferred index has the whole backlog to catch up on: `--index text` (the default) writes
core evictions and times the first search (the full-text index); `--index entities` writes full ones (with their
mentions) and times the first entity lookup, which rebuilds the by-entity index from the backlog. Then, on a fresh
copy of that file, one thread runs that first read while another connection evicts in a loop (each write waits up
to ten minutes for the lock): the figures are the catch-up's seconds and the longest wait of one eviction
meanwhile. A wait past SQLite's default 5 s busy timeout is a compaction that failed. `--no-writer` times the
catch-up alone. The WAL file's size is sampled throughout: its peak, its size when the read returns, and its size
after 200 more evictions (by then checkpointed and started over, so cut back to the store's limit). The backlog
file is kept in the temporary directory's `catch-up-N.db` (`catch-up-entities-N.db`)
between runs.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from mementograph.knowledge_graph.store import open_store
from store import evictions, real_blocks  # scripts/bench/store.py, beside this file

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--blocks', type=int, default=30_000)
    parser.add_argument('--data', type=Path, default=REPO.parent / 'shared' / 'data')
    parser.add_argument('--index', choices=('text', 'entities'), default='text', help='the index that catches up')
    parser.add_argument('--no-writer', action='store_true', help='time the catch-up with no other writer')
    args = parser.parse_args()

    sources = real_blocks(args.data)
    shape, name = ('core', 'catch-up') if args.index == 'text' else ('full', 'catch-up-entities')
    backlog = Path(tempfile.gettempdir()) / f'{name}-{args.blocks}.db'
    if not backlog.exists():
        store = open_store(f'sqlite://{backlog}')
        for eviction in evictions(sources, args.blocks, shape):
            store.write_eviction(eviction)
        store.close()
    extra = list(evictions(sources, args.blocks + 400, shape))[args.blocks :]

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / 'work.db'
        shutil.copy(backlog, work)
        searcher = open_store(f'sqlite://{work}')
        writer = open_store(f'sqlite://{work}?busy_timeout=600')
        done = threading.Event()
        took: list[float] = []
        wal = Path(f'{work}-wal')
        wal_peak = [0]

        def sample_wal() -> None:
            while not done.wait(0.2):
                wal_peak[0] = max(wal_peak[0], wal_size(wal))

        sampler = threading.Thread(target=sample_wal)
        sampler.start()

        def first_read() -> None:
            started = time.perf_counter()
            if args.index == 'text':
                searcher.search_text('error traceback')
            else:
                searcher.entity_postings(['concept:error'])
            took.append(time.perf_counter() - started)
            done.set()

        thread = threading.Thread(target=first_read)
        thread.start()
        waits: list[float] = []
        while not args.no_writer and not done.is_set():
            started = time.perf_counter()
            writer.write_eviction(extra[len(waits) % len(extra)])  # a repeat is idempotent but still takes the lock
            waits.append(time.perf_counter() - started)
        thread.join()
        sampler.join()
        wal_at_read = wal_size(wal)
        for eviction in extra[:200]:
            writer.write_eviction(eviction)
        wal_after = wal_size(wal)
        searcher.close()
        writer.close()
    print(f'blocks {args.blocks}, {args.index} index: catch-up {took[0]:.2f} s', end='')
    if waits:
        print(
            f'; {len(waits)} evictions meanwhile, longest wait {max(waits):.2f} s, '
            f'median {statistics.median(waits) * 1000:.1f} ms',
            end='',
        )
    mb = 1024 * 1024
    print(
        f'; WAL peak {max(wal_peak[0], wal_at_read) / mb:,.0f} MiB, {wal_at_read / mb:,.0f} MiB when the read '
        f'returned, {wal_after / mb:,.0f} MiB after 200 more evictions'
    )


def wal_size(wal: Path) -> int:
    try:
        return wal.stat().st_size
    except FileNotFoundError:
        return 0


if __name__ == '__main__':
    main()
