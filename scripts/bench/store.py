"""Store benchmark: eviction write throughput and recover latency at 1k/10k/100k blocks, against plain SQLite.

Usage:
    TIKTOKEN_CACHE_DIR=... .venv/bin/python scripts/bench/store.py [--sizes 1000,10000,100000] [--data DIR]

Payloads are real blocks: the shared agent trajectories, segmented as the capability segments them, cycled
until the target count. Each eviction is one `write_eviction` (one transaction) of one block, in two shapes:

- `core`: the block and its memento (a fifth of the block's text, as the compressor's default ratio makes it);
- `full`: what the compactor writes: also the block's and the memento's entity mentions (the real extractor,
  `mentions_for`, ~120 per eviction), the session's open page (closed with a summary every 8 blocks) and the
  compaction event.

The baseline, measured in the same process on the same bytes, is one plain SQLite `INSERT` per transaction of
the block bytes and the memento text into a table keyed by block id, on a connection with the store's own
pragmas. For the `full` shape a second baseline inserts every record the eviction holds, as plain rows (that row
with the store's encoding of the mentions, the page row, the event row), its bytes made before the clock starts.
Store and baselines take turns in chunks of 100 evictions (who goes first rotates every chunk), so load from
other jobs on the machine falls on all alike. The store defers its full-text and entity indexes to
the first read that needs them; `index s` is that first read (a search and an entity lookup) after all the
writes, and `ratio incl. index` charges it to the writes. Memory, file size and recover latency come from a
separate process per store and size that writes the `full` shape with no baseline beside it, so RSS growth is
the store's alone. Pages per eviction (`--pages-sizes`, `sqlite://` only) are read from the WAL: after the first
`size - 1000` evictions, a checkpoint, then 1000 more with checkpoints off, each WAL frame counted against the
B-tree (table or index, overflow pages included) its page belongs to, from `dbstat`; the baseline likewise.
Writes a table to stdout and JSON to bench-results/store.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mementograph._tokens import TokenCounter
from mementograph._transcripts import load_transcript
from mementograph.knowledge_graph import (
    BlockRecord,
    Eviction,
    MementoRecord,
    Mention,
    PageRecord,
    SessionEvent,
    memento_id_for,
    page_id_for,
)
from mementograph.knowledge_graph.entities import mentions_for
from mementograph.knowledge_graph.memory import render_block, segment_blocks
from mementograph.knowledge_graph.store import SqliteStore, open_store
from mementograph.knowledge_graph.store._sqlite import _encode_mentions

REPO = Path(__file__).resolve().parents[2]
CHUNK = 100
SESSION_BLOCKS = 1000
PAGE_BLOCKS = 8
SHAPES = ('core', 'full')


def rss_mb() -> float:
    for line in Path('/proc/self/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
    return 0.0


Source = tuple[list[Any], str, int, tuple[Mention, ...], tuple[Mention, ...]]
"""messages, rendered text, tokens, the text's mentions, the memento text's mentions (source ids to replace)."""


def real_blocks(data: Path) -> list[Source]:
    counter = TokenCounter()
    out: list[Source] = []
    for path in sorted((data / 'agent_trajectories').glob('*.traj.json')):
        messages = load_transcript(path)
        for segment in segment_blocks(messages, counter, min_tokens=200, max_tokens=2000):
            chunk = messages[segment.start : segment.end]
            text = render_block(chunk)
            out.append((chunk, text, segment.tokens, mentions_for('', text), mentions_for('', memento_text(text))))
    return out


def memento_text(text: str) -> str:
    return text[: len(text) // 5]


def evictions(sources: list[Source], count: int, shape: str) -> Iterator[Eviction]:
    """The benchmark's evictions, one block each, generated as they are written (100k never sit in memory)."""
    page: list[tuple[BlockRecord, MementoRecord, tuple[Mention, ...]]] = []
    for i in range(count):
        messages, text, tokens, block_mentions, memento_mentions = sources[i % len(sources)]
        session = f's{i // SESSION_BLOCKS}'
        block = BlockRecord.from_messages(messages, session_id=session, seq=i, tokens=tokens, text=text)
        memento = MementoRecord(
            id=memento_id_for('default', session, [block.id]), session_id=session, namespace='default',
            text=memento_text(text), tokens=tokens // 5, summarizes=(block.id,), score=9.0, verified=True,
            iterations=1, compressor='extractive',
        )  # fmt: skip
        if shape == 'core':
            yield Eviction(session_id=session, blocks=(block,), mementos=(memento,))
            continue
        mentions = tuple(Mention(block.id, m.entity, m.count) for m in block_mentions) + tuple(
            Mention(memento.id, m.entity, m.count) for m in memento_mentions
        )
        if i % SESSION_BLOCKS == 0:
            page = []
        page.append((block, memento, mentions))
        event = SessionEvent(
            session_id=session, namespace='default', kind='auto', sha256='', block_ids=(block.id,),
            payload=json.dumps({
                'trigger': 'auto', 'tokens_before': 40_000, 'tokens_after': 40_000 - tokens, 'micro_part_ids': [],
                'block_ids': [block.id], 'memento_ids': [memento.id], 'merged_memento_ids': [], 'verified': 1,
            }).encode(),
        )  # fmt: skip
        yield Eviction(
            session_id=session,
            blocks=(block,),
            mementos=(memento,),
            mentions=mentions,
            pages=(page_record(session, i % SESSION_BLOCKS // PAGE_BLOCKS + 1, page),),
            events=(event,),
        )
        if len(page) == PAGE_BLOCKS:
            page = []


def page_record(
    session: str, number: int, members: list[tuple[BlockRecord, MementoRecord, tuple[Mention, ...]]]
) -> PageRecord:
    """The session's open page as `pages_for_eviction` writes it: summary and topics once it holds 8 blocks."""
    closed = len(members) == PAGE_BLOCKS
    counts: Counter[str] = Counter()
    for _, _, mentions in members:
        for mention in mentions:
            counts[mention.entity.name] += mention.count
    return PageRecord(
        id=page_id_for('default', session, number), session_id=session, namespace='default', number=number,
        first_turn=members[0][0].first_message, last_turn=members[-1][0].last_message,
        summary=' | '.join(m.text.split('\n', 1)[0] for _, m, _ in members)[:200] if closed else '',
        topics=tuple(name for name, _ in counts.most_common(6)) if closed else (),
        block_ids=tuple(b.id for b, _, _ in members),
    )  # fmt: skip


def store_pragmas(store: object) -> list[str]:
    """The pragmas of a file store's connection, so the baseline runs with exactly the same settings (for
    `memory://`, which has no file, those a fresh file store gets)."""
    names = ('page_size', 'journal_mode', 'synchronous', 'cache_size', 'wal_autocheckpoint', 'secure_delete')
    with tempfile.TemporaryDirectory() as tmp:
        probe = store if isinstance(store, SqliteStore) and store.path else SqliteStore(Path(tmp) / 'probe.db')
        values = {name: probe._conn.execute(f'PRAGMA {name}').fetchone()[0] for name in names}  # the bench peeks
        if probe is not store:
            probe.close()
    return [f'PRAGMA {name} = {values[name]}' for name in names]


class Baseline:
    """Plain SQLite inserts of an eviction's bytes, one transaction each, with no index beyond the primary keys.

    `records=False` writes the block bytes and the memento text (one row); `records=True` writes every record the
    eviction holds, as the bytes the store writes: that row with the store's encoding of the mentions beside it,
    the page row (replaced, as the open page is rewritten) and the event row. The bytes are made before the clock
    starts (`rows`), so the baseline times inserts alone while the store's time includes its own encoding.
    """

    def __init__(self, path: Path, pragmas: list[str], *, records: bool = False) -> None:
        self.records = records
        self.conn = sqlite3.connect(path, isolation_level=None)
        for pragma in pragmas:
            self.conn.execute(pragma)
        self.conn.execute(
            'CREATE TABLE blocks (id TEXT PRIMARY KEY, data BLOB NOT NULL, memento TEXT NOT NULL, mentions BLOB)'
        )
        self.conn.execute('CREATE TABLE pages (id TEXT PRIMARY KEY, summary TEXT, topics TEXT, members TEXT)')
        self.conn.execute('CREATE TABLE events (payload BLOB, block_ids TEXT)')

    def rows(self, eviction: Eviction) -> BaselineRows:
        block, memento = eviction.blocks[0], eviction.mementos[0]
        if not self.records:
            return (block.id, block.messages_json, memento.text, None), (), ()
        mentions = _encode_mentions(eviction.mentions) if eviction.mentions else None
        pages = tuple(
            (page.id, page.summary, json.dumps(list(page.topics)), json.dumps(list(page.block_ids)))
            for page in eviction.pages
        )
        events = tuple((event.payload, json.dumps(list(event.block_ids))) for event in eviction.events)
        return (block.id, block.messages_json, memento.text, mentions), pages, events

    def write(self, rows: BaselineRows) -> None:
        block, pages, events = rows
        self.conn.execute('BEGIN IMMEDIATE')
        self.conn.execute('INSERT INTO blocks VALUES (?, ?, ?, ?)', block)
        self.conn.executemany('INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?)', pages)
        self.conn.executemany('INSERT INTO events VALUES (?, ?)', events)
        self.conn.execute('COMMIT')


BaselineRows = tuple[tuple[Any, ...], tuple[tuple[Any, ...], ...], tuple[tuple[Any, ...], ...]]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def throughput(sources: list[Source], size: int, scheme: str, shape: str) -> dict[str, object]:
    """Evictions/s of the store against plain inserts, in chunks that rotate who goes first (load falls on all).

    Two baselines for the `full` shape: the block bytes and memento text alone (as for `core`), and every record
    the eviction holds (`records`); for `core` the two are the same writes, so only the first runs.
    """
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store('memory://' if scheme == 'memory' else f'sqlite://{Path(tmp) / "store.db"}')
        pragmas = store_pragmas(store)
        baselines = [Baseline(Path(tmp) / 'baseline.db', pragmas)]
        if shape == 'full':
            baselines.append(Baseline(Path(tmp) / 'records.db', pragmas, records=True))
        seconds = [0.0] * (len(baselines) + 1)  # store first, then each baseline
        payload = 0
        batch = evictions(sources, size, shape)
        for n in range(0, size, CHUNK):
            chunk = [next(batch) for _ in range(min(CHUNK, size - n))]
            payload += sum(len(e.blocks[0].messages_json) + len(e.mementos[0].text.encode()) for e in chunk)
            rows = [[baseline.rows(eviction) for eviction in chunk] for baseline in baselines]
            order = list(range(len(seconds)))
            shift = n // CHUNK % len(order)
            for writer in order[shift:] + order[:shift]:
                started = time.perf_counter()
                if writer == 0:
                    for eviction in chunk:
                        store.write_eviction(eviction)
                else:
                    for row in rows[writer - 1]:
                        baselines[writer - 1].write(row)
                seconds[writer] += time.perf_counter() - started
        for baseline in baselines:
            baseline.conn.close()
        started = time.perf_counter()
        store.search_text('error traceback test')  # builds the full-text index
        store.entities_of(chunk[-1].blocks[0].id)  # builds the entity index
        index_s = time.perf_counter() - started
        store.close()
    store_s, base_s, *records_s = seconds
    return {
        'blocks': size,
        'store': scheme,
        'shape': shape,
        'payload_mb': round(payload / 1e6, 1),
        'write_blocks_per_s': round(size / store_s),
        'baseline_blocks_per_s': round(size / base_s),
        'ratio_vs_baseline': round(base_s / store_s, 2),
        'records_baseline_blocks_per_s': round(size / records_s[0]) if records_s else None,
        'ratio_vs_records': round(records_s[0] / store_s, 2) if records_s else None,
        'index_s': round(index_s, 2),
        'ratio_incl_index': round(base_s / (store_s + index_s), 2),
        'pragmas': pragmas,
    }


PAGE_SAMPLE = 1000


def wal_pages(conn: sqlite3.Connection, wal: Path) -> Counter[str]:
    """WAL frames by the B-tree their page belongs to (page 1, the file header, is `sqlite_schema`'s)."""
    page_size = conn.execute('PRAGMA page_size').fetchone()[0]
    names = dict(conn.execute('SELECT pageno, name FROM dbstat').fetchall())
    data = wal.read_bytes()
    counts: Counter[str] = Counter()
    for offset in range(32, len(data) - 23, 24 + page_size):  # 32-byte WAL header, then (24-byte header, page)s
        counts[names.get(struct.unpack('>I', data[offset : offset + 4])[0], '?')] += 1
    return counts


def pages(sources: list[Source], size: int, shape: str) -> dict[str, object]:
    """B-tree pages each eviction (and each baseline insert) writes to the WAL, over the last evictions of `size`."""
    sample = min(PAGE_SAMPLE, size)
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / 'store.db')
        baseline = Baseline(Path(tmp) / 'baseline.db', store_pragmas(store))
        conns = (store._conn, baseline.conn)  # the bench peeks
        batch = evictions(sources, size, shape)
        for n in range(size):
            if n == size - sample:
                for conn in conns:
                    conn.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchall()
                    conn.execute('PRAGMA wal_autocheckpoint = 0')
            eviction = next(batch)
            store.write_eviction(eviction)
            baseline.write(baseline.rows(eviction))
        counts = [
            wal_pages(conn, Path(tmp) / name)
            for conn, name in zip(conns, ('store.db-wal', 'baseline.db-wal'), strict=True)
        ]
        store.close()
        baseline.conn.close()

    def per(count: int) -> float:
        return round(count / sample, 2)

    return {
        'blocks': size,
        'shape': shape,
        'store_pages': per(sum(counts[0].values())),
        'baseline_pages': per(sum(counts[1].values())),
        'store_by_btree': {name: per(count) for name, count in counts[0].most_common()},
        'baseline_by_btree': {name: per(count) for name, count in counts[1].most_common()},
    }


def footprint(sources: list[Source], size: int, scheme: str, recovers: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        rss_before = rss_mb()
        store = open_store('memory://' if scheme == 'memory' else f'sqlite://{Path(tmp) / "store.db"}')
        ids = []
        for eviction in evictions(sources, size, 'full'):
            store.write_eviction(eviction)
            ids.append(eviction.blocks[0].id)
        rss_after = rss_mb()
        file_mb = sum(f.stat().st_size for f in Path(tmp).glob('store.db*')) / 1e6
        latencies = []
        for i in range(min(recovers, size * 3)):
            block_id = ids[(i * 7919) % size]
            started = time.perf_counter()
            store.recover_block(block_id)
            latencies.append((time.perf_counter() - started) * 1000)
        store.close()
    return {
        'blocks': size,
        'store': scheme,
        'recover_p50_ms': round(statistics.median(latencies), 3),
        'recover_p95_ms': round(percentile(latencies, 0.95), 3),
        'rss_growth_mb': round(rss_after - rss_before, 1),
        'file_mb': round(file_mb, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sizes', default='1000,10000,100000')
    parser.add_argument('--shapes', default=','.join(SHAPES))
    parser.add_argument('--stores', default='memory,sqlite')
    parser.add_argument('--data', default=os.environ.get('MEMENTOGRAPH_DATA_DIR', str(REPO.parent / 'shared' / 'data')))
    parser.add_argument('--recovers', type=int, default=2000)
    parser.add_argument('--pages-sizes', default='1000,10000', help='sizes to count WAL pages at (empty: none)')
    # "throughput:SCHEME:SHAPE:SIZE", "footprint:SCHEME:SIZE" or "pages:sqlite:SHAPE:SIZE"
    parser.add_argument('--child', help=argparse.SUPPRESS)
    parser.add_argument('--sources', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sources = pickle.loads(Path(args.sources).read_bytes())
        kind, scheme, *rest = args.child.split(':')
        if kind == 'throughput':
            row = throughput(sources, int(rest[1]), scheme, rest[0])
        elif kind == 'pages':
            row = pages(sources, int(rest[1]), rest[0])
        else:
            row = footprint(sources, int(rest[0]), scheme, args.recovers)
        print(json.dumps(row), flush=True)
        return
    # each measurement in its own process, so one's memory never hides another's
    throughputs: list[dict[str, Any]] = []
    footprints: list[dict[str, Any]] = []
    page_counts: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / 'sources.pickle'
        cache.write_bytes(pickle.dumps(real_blocks(Path(args.data))))
        for size in args.sizes.split(','):
            for scheme in args.stores.split(','):
                jobs = [f'throughput:{scheme}:{shape}:{size}' for shape in args.shapes.split(',')]
                jobs.append(f'footprint:{scheme}:{size}')
                if scheme == 'sqlite' and size in args.pages_sizes.split(','):
                    jobs += [f'pages:sqlite:{shape}:{size}' for shape in args.shapes.split(',')]
                for job in jobs:
                    child = [sys.executable, __file__, '--child', job, '--sources', str(cache)]
                    child += ['--recovers', str(args.recovers)]
                    done = subprocess.run(child, capture_output=True, text=True, check=True)
                    row = json.loads(done.stdout.strip().splitlines()[-1])
                    kind = job.split(':')[0]
                    {'throughput': throughputs, 'footprint': footprints, 'pages': page_counts}[kind].append(row)
                    print(json.dumps(row), flush=True)
    report(throughputs, footprints, page_counts)


def report(
    throughputs: list[dict[str, Any]], footprints: list[dict[str, Any]], page_counts: list[dict[str, Any]]
) -> None:
    print(
        '\n| blocks | store | shape | payload MB | evictions/s | raw inserts/s (block + memento) | ratio | '
        'raw inserts/s (every record) | ratio | index s | ratio incl. index |'
    )
    print('|' + '---|' * 11)
    for r in throughputs:
        records = r.get('records_baseline_blocks_per_s')
        print(
            f'| {r["blocks"]} | {r["store"]} | {r["shape"]} | {r["payload_mb"]} | {r["write_blocks_per_s"]} | '
            f'{r["baseline_blocks_per_s"]} | {r["ratio_vs_baseline"]} | {records or "(same)"} | '
            f'{r["ratio_vs_records"] if records else r["ratio_vs_baseline"]} | {r["index_s"]} | '
            f'{r["ratio_incl_index"]} |'
        )
    print('\n| blocks | store | recover p50 ms | recover p95 ms | RSS growth MB | file MB |')
    print('|' + '---|' * 6)
    for r in footprints:
        print(
            f'| {r["blocks"]} | {r["store"]} | {r["recover_p50_ms"]} | {r["recover_p95_ms"]} | '
            f'{r["rss_growth_mb"]} | {r["file_mb"]} |'
        )
    if page_counts:
        print('\n| blocks | shape | pages/eviction | pages/raw insert | by B-tree (store) |')
        print('|' + '---|' * 5)
        for r in page_counts:
            btrees = ', '.join(f'{name} {count}' for name, count in r['store_by_btree'].items())
            print(f'| {r["blocks"]} | {r["shape"]} | {r["store_pages"]} | {r["baseline_pages"]} | {btrees} |')
    if throughputs:
        print(f'\npragmas (store and baseline): {"; ".join(throughputs[0]["pragmas"])}')
    out = REPO / 'bench-results'
    out.mkdir(exist_ok=True)
    (out / 'store.json').write_text(
        json.dumps({'throughput': throughputs, 'footprint': footprints, 'pages': page_counts}, indent=2)
    )


if __name__ == '__main__':
    main()
