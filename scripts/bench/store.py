"""Store benchmark: eviction write throughput and recover latency at 1k/10k/100k blocks, against plain SQLite.

Usage:
    TIKTOKEN_CACHE_DIR=... .venv/bin/python scripts/bench/store.py [--sizes 1000,10000,100000] [--data DIR]

Payloads are real blocks: the shared agent trajectories, segmented as the capability segments them, cycled
until the target count. The baseline, measured in the same run on the same bytes, is one plain SQLite
`INSERT` of the block bytes per transaction (the same commit granularity as one eviction, same pragmas).
Writes a table to stdout and JSON to bench-results/store.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mementograph._tokens import TokenCounter
from mementograph._transcripts import load_transcript
from mementograph.knowledge_graph import BlockRecord, Eviction, MementoRecord, memento_id_for
from mementograph.knowledge_graph.memory import render_block, segment_blocks
from mementograph.knowledge_graph.store import open_store

REPO = Path(__file__).resolve().parents[2]


def rss_mb() -> float:
    for line in Path('/proc/self/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
    return 0.0


def real_blocks(data: Path, counter: TokenCounter) -> list[tuple[list[object], str, int]]:
    blocks = []
    for path in sorted((data / 'agent_trajectories').glob('*.traj.json')):
        messages = load_transcript(path)
        for segment in segment_blocks(messages, counter, min_tokens=200, max_tokens=2000):
            chunk = messages[segment.start : segment.end]
            blocks.append((chunk, render_block(chunk), segment.tokens))
    return blocks


def evictions(blocks: list[tuple[list[object], str, int]], count: int, session_of: int = 1000) -> list[Eviction]:
    out = []
    for i in range(count):
        messages, text, tokens = blocks[i % len(blocks)]
        session = f's{i // session_of}'
        block = BlockRecord.from_messages(messages, session_id=session, seq=i, tokens=tokens, text=text)  # type: ignore[arg-type]
        memento = MementoRecord(
            id=memento_id_for('default', session, [block.id]), session_id=session, namespace='default',
            text=text[:400], tokens=tokens // 6, summarizes=(block.id,), score=9.0, verified=True,
            compressor='extractive',
        )  # fmt: skip
        out.append(Eviction(session_id=session, blocks=(block,), mementos=(memento,)))
    return out


def baseline_write(path: Path, payloads: list[tuple[str, bytes]]) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute('PRAGMA journal_mode = WAL')
    conn.execute('PRAGMA synchronous = NORMAL')
    conn.execute('CREATE TABLE blocks (id TEXT PRIMARY KEY, data BLOB)')
    started = time.perf_counter()
    for block_id, data in payloads:
        conn.execute('BEGIN IMMEDIATE')
        conn.execute('INSERT INTO blocks VALUES (?, ?)', (block_id, data))
        conn.execute('COMMIT')
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--sizes', default='1000,10000,100000')
    parser.add_argument('--data', default=os.environ.get('MEMENTOGRAPH_DATA_DIR', str(REPO.parent / 'shared' / 'data')))
    parser.add_argument('--recovers', type=int, default=2000)
    parser.add_argument('--store', choices=('memory', 'sqlite'), help='only this store (one child process)')
    args = parser.parse_args()
    if args.store is None:
        # each store and size in its own process, so one's memory never hides another's
        rows = []
        for size in args.sizes.split(','):
            for store in ('memory', 'sqlite'):
                child = [sys.executable, __file__, '--sizes', size, '--store', store, '--data', args.data]
                done = subprocess.run(child, capture_output=True, text=True, check=True)
                rows.extend(json.loads(line) for line in done.stdout.splitlines() if line.startswith('{'))
                print(json.dumps(rows[-1]), flush=True)
        report(rows)
        return
    counter = TokenCounter()
    blocks = real_blocks(Path(args.data), counter)
    rows = []
    for size in (int(s) for s in args.sizes.split(',')):
        batch = evictions(blocks, size)
        payloads = [(e.blocks[0].id, e.blocks[0].messages_json) for e in batch]
        total_mb = sum(len(p[1]) for p in payloads) / 1e6
        with tempfile.TemporaryDirectory() as tmp:
            base_s = baseline_write(Path(tmp) / 'baseline.db', payloads)
            uris = ('memory://',) if args.store == 'memory' else (f'sqlite://{Path(tmp) / "store.db"}',)
            for uri in uris:
                rss_before = rss_mb()
                store = open_store(uri)
                started = time.perf_counter()
                for eviction in batch:
                    store.write_eviction(eviction)
                write_s = time.perf_counter() - started
                rss_after = rss_mb()
                file_mb = sum(f.stat().st_size for f in Path(tmp).glob('store.db*')) / 1e6
                ids = [payloads[(i * 7919) % size][0] for i in range(min(args.recovers, size * 3))]
                latencies = []
                for block_id in ids:
                    t0 = time.perf_counter()
                    store.recover_block(block_id)
                    latencies.append((time.perf_counter() - t0) * 1000)
                store.close()
                rows.append(
                    {
                        'blocks': size,
                        'store': uri.split('://')[0],
                        'payload_mb': round(total_mb, 1),
                        'write_blocks_per_s': round(size / write_s),
                        'baseline_blocks_per_s': round(size / base_s),
                        'ratio_vs_baseline': round(base_s / write_s, 2),
                        'recover_p50_ms': round(statistics.median(latencies), 3),
                        'recover_p95_ms': round(percentile(latencies, 0.95), 3),
                        'rss_growth_mb': round(rss_after - rss_before, 1),
                        'file_mb': round(file_mb, 1),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)


def report(rows: list[dict[str, object]]) -> None:
    header = (
        '| blocks | store | payload MB | writes/s | raw inserts/s | ratio | recover p50 ms | recover p95 ms '
        '| RSS growth MB | file MB |'
    )
    print('\n' + header)
    print('|' + '---|' * 10)
    for r in rows:
        print(
            f'| {r["blocks"]} | {r["store"]} | {r["payload_mb"]} | {r["write_blocks_per_s"]} | '
            f'{r["baseline_blocks_per_s"]} | {r["ratio_vs_baseline"]} | {r["recover_p50_ms"]} | '
            f'{r["recover_p95_ms"]} | {r["rss_growth_mb"]} | {r["file_mb"]} |'
        )
    out = REPO / 'bench-results'
    out.mkdir(exist_ok=True)
    (out / 'store.json').write_text(json.dumps(rows, indent=2))


if __name__ == '__main__':
    main()
