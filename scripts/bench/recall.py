"""Recall benchmark: `recall` latency p50/p95 at 1k, 10k and 100k blocks, per backend, and how it grows.

Usage:
    TIKTOKEN_CACHE_DIR=... .venv/bin/python scripts/bench/recall.py [--sizes 1000,10000,100000] [--data DIR]
        [--store sqlite|memory|neo4j://HOST:7687 ...] [--queries 60] [--keep] [--reuse DIR] [--rounds 3]
        [--embedding onnx:PATH]

Payloads are real: the shared agent trajectories segmented as the capability segments them, each block with its
extractive memento and its entities (`mentions_for` on block and memento, as the compactor writes them), cycled
into sessions of 1,000 blocks until the target count (a cycled block gets a new id in its new place). Queries
are real too: entity names drawn from random blocks (a file, a symbol or error, a plain word), two or three per
query, seeded. The measured call is `recall(store, query, k=10)` over the whole namespace (what the MCP server's
`recall` asks without a session) after one warm-up round, and once per round scoped to one session of it
(`recall_session`: what the capability's tool asks, a different session of 1,000 blocks per query), after a first
pass over those sessions timed apart (`recall_session_first`: a session's pages read from disk, not the page cache,
when the machine keeps less page cache than the file's size); the first search also builds the lazy full-text
index, which is timed apart (`index_s`). Measured side by side in the same run: `recall` (fused), the
graph ranking alone (`method='graph'`, Python over the entity reads), and the store's plain BM25 `search_text`
with the same words (the baseline `recall` cannot be faster than). The rounds repeat the same queries, and a SQLite
store keeps its full-text word counts while its index is unchanged, so `recall_first` times each query once more
with those counts dropped: what a query costs the first time it is asked.

Writes a table to stdout and JSON to bench-results/recall.json. Neo4j runs when `--store neo4j://...` is given
(credentials from NEO4J_USERNAME/NEO4J_PASSWORD). With `--keep`, a Neo4j run loads into `bench-recall-keep-SIZE`
and leaves it there, and the next `--keep` run measures it without loading again (`reused` in the row): a settled
namespace, where a fresh one is measured right after its load. `--reuse DIR` does the same for SQLite: the store of
each size is the file DIR/recall-SIZE.db, loaded on the first run and measured as it is afterwards (to compare
code changes on the same data; a 100k load takes minutes).

With `--embedding MODEL` (`onnx:PATH`, e.g. what `scripts/fetch-embedding-model` prints), the same store is also
measured with vectors (`hybrid`): every block gets a vector stored beside it, as the capability stores them, but a
random unit vector seeded by its id (embedding 100k real blocks takes hours on 2 cores; ranking and fusion cost the
same whatever the values), while each query is embedded by the real model, its cache dropped so every query pays
its embedding. Measured: `sync_first_s` (a new process's first sync over the namespace: the stored vectors read),
`sync_new_ms` (the sync after one more block is archived with its vector: what the MCP server's next recall pays
for reading it; the capability embeds a new block once, in the background as it archives it), and
`hybrid` over the namespace and in a session.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mementograph._tokens import TokenCounter
from mementograph._transcripts import load_transcript
from mementograph.knowledge_graph import BlockRecord, Eviction, MementoRecord, Mention, memento_id_for
from mementograph.knowledge_graph.dense import DenseIndex, embedding_model
from mementograph.knowledge_graph.entities import extract_entities, mentions_for
from mementograph.knowledge_graph.memory import BlockInput, MementoEngine, segment_blocks
from mementograph.knowledge_graph.recall import recall
from mementograph.knowledge_graph.store import GraphStore, SqliteStore, open_store

REPO = Path(__file__).resolve().parents[2]
SESSION_BLOCKS = 1_000
BATCH = 250
"""Blocks per eviction transaction while loading (loading speed is not what this benchmark measures)."""


class Source:
    """One distinct real block: messages, text, tokens, memento text and the entities of both."""

    def __init__(self, messages: Sequence[Any], text: str, tokens: int, memento: str, memento_tokens: int) -> None:
        self.messages = list(messages)
        self.text = text
        self.tokens = tokens
        self.memento = memento
        self.memento_tokens = memento_tokens
        self.block_entities = mentions_for('_', text)
        self.memento_entities = mentions_for('_', memento)


def real_sources(data: Path, counter: TokenCounter) -> list[Source]:
    engine = MementoEngine(counter=counter)
    sources: list[Source] = []
    for path in sorted((data / 'agent_trajectories').glob('*.traj.json')):
        messages = load_transcript(path)
        for segment in segment_blocks(messages, counter, min_tokens=200, max_tokens=2000):
            chunk = messages[segment.start : segment.end]
            block = BlockInput.from_messages(chunk, counter)
            try:
                result = asyncio.run(engine.make_memento(block))
            except Exception:
                continue
            sources.append(Source(chunk, block.text, block.tokens, result.text, result.tokens))
    return sources


def _relink(mentions: Sequence[Mention], source_id: str) -> list[Mention]:
    return [Mention(source_id=source_id, entity=m.entity, count=m.count) for m in mentions]


def load(store: GraphStore, sources: Sequence[Source], count: int, namespace: str = 'default') -> None:
    pending: dict[str, list[tuple[BlockRecord, MementoRecord, list[Mention]]]] = {}
    for i in range(count):
        source = sources[i % len(sources)]
        session = f's{i // SESSION_BLOCKS}'
        block = BlockRecord.from_messages(
            source.messages, session_id=session, seq=i, tokens=source.tokens, text=source.text, namespace=namespace
        )
        memento = MementoRecord(
            id=memento_id_for(namespace, session, [block.id]),
            session_id=session,
            namespace=namespace,
            text=source.memento,
            tokens=source.memento_tokens,
            summarizes=(block.id,),
            compressor='extractive',
        )
        mentions = _relink(source.block_entities, block.id) + _relink(source.memento_entities, memento.id)
        pending.setdefault(session, []).append((block, memento, mentions))
        if len(pending[session]) >= BATCH or i == count - 1:
            for sid, items in list(pending.items()):
                store.write_eviction(
                    Eviction(
                        session_id=sid,
                        namespace=namespace,
                        blocks=tuple(b for b, _, _ in items),
                        mementos=tuple(m for _, m, _ in items),
                        mentions=tuple(x for _, _, ms in items for x in ms),
                    )
                )
            pending.clear()


def queries(sources: Sequence[Source], count: int, seed: int = 7) -> list[str]:
    """Two or three entity names from one random block: what an agent asks about what it did."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < count:
        source = rng.choice(sources)
        entities = extract_entities(source.text)
        named = [e.name for e in entities if e.kind in ('file', 'symbol', 'error', 'command', 'test')]
        words = [e.name for e in entities if e.kind == 'concept']
        if not named or not words:
            continue
        picked = [*rng.sample(named, min(len(named), rng.choice((1, 2)))), rng.choice(words)]
        out.append(' '.join(picked))
    return out


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def forget_search_counts(store: GraphStore) -> None:
    """Drop the word counts a SQLite store keeps between searches while its full-text index is unchanged (the bench
    repeats its queries, which those counts favour; Neo4j keeps none)."""
    if isinstance(store, SqliteStore):
        store._text_memo_values.clear()  # the bench peeks: a first-time query is what it measures here


def measure(store: GraphStore, texts: Sequence[str], namespace: str, size: int, rounds: int = 3) -> dict[str, float]:
    started = time.perf_counter()
    store.search_text('warm up the full-text index', k=1, namespace=namespace)
    index_s = time.perf_counter() - started
    for text in texts:  # warm-up round (caches, lazy index)
        recall(store, text, 10, namespace=namespace, session_id=None)
    times: dict[str, list[float]] = {
        'recall': [], 'graph': [], 'search_text': [], 'recall_first': [], 'recall_session': [],
        'recall_session_first': [],
    }  # fmt: skip
    # the `recall` tool's own scope: the session (of 1,000 blocks) the agent is in, a different one per query
    sessions = [f's{i % max(1, size // SESSION_BLOCKS)}' for i in range(len(texts))]
    for text in texts:  # each query as if asked for the first time: no full-text counts kept from earlier searches
        forget_search_counts(store)
        t0 = time.perf_counter()
        recall(store, text, 10, namespace=namespace, session_id=None)
        times['recall_first'].append((time.perf_counter() - t0) * 1000)
    # each session asked for the first time: its pages may not be cached yet (the namespace had its warm-up round)
    for text, session in zip(texts, sessions, strict=True):
        t0 = time.perf_counter()
        recall(store, text, 10, namespace=namespace, session_id=session)
        times['recall_session_first'].append((time.perf_counter() - t0) * 1000)
    for _ in range(rounds):
        for text in texts:
            t0 = time.perf_counter()
            recall(store, text, 10, namespace=namespace, session_id=None)
            times['recall'].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            recall(store, text, 10, namespace=namespace, session_id=None, method='graph')
            times['graph'].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            store.search_text(text, k=20, namespace=namespace)
            times['search_text'].append((time.perf_counter() - t0) * 1000)
        for text, session in zip(texts, sessions, strict=True):
            t0 = time.perf_counter()
            recall(store, text, 10, namespace=namespace, session_id=session)
            times['recall_session'].append((time.perf_counter() - t0) * 1000)
    row: dict[str, float] = {'index_s': round(index_s, 2)}
    for name, values in times.items():
        row[f'{name}_p50_ms'] = round(statistics.median(values), 2)
        row[f'{name}_p95_ms'] = round(percentile(values, 0.95), 2)
    return row


def store_random_vectors(store: GraphStore, index: DenseIndex, namespace: str, session_id: str | None = None) -> int:
    """A unit vector seeded by its id for every block of the scope without one of this model; returns how many."""
    import numpy as np

    width = len(index._embed(['width'], query=True)[0])
    scope = {'namespace': namespace, 'session_id': session_id}
    stored = {block_id for block_id, _, _ in store.read_vectors(index.model_key, **scope)}
    missing = [block_id for block_id, _ in store.list_block_ids(**scope) if block_id not in stored]
    for start in range(0, len(missing), 1000):
        rows = []
        for block_id in missing[start : start + 1000]:
            vector = np.random.default_rng(int(block_id[4:16], 16)).standard_normal(width).astype('<f4')
            rows.append((block_id, (vector / np.linalg.norm(vector)).astype('<f4').tobytes()))
        store.write_vectors(index.model_key, rows, namespace=namespace)
    return len(missing)


def measure_dense(
    store: GraphStore, model_spec: str, sources: Sequence[Source], texts: Sequence[str], namespace: str, size: int,
    rounds: int,
) -> dict[str, float]:  # fmt: skip
    model = embedding_model(model_spec)
    writer = DenseIndex(model)
    row: dict[str, float] = {'vectors_written': store_random_vectors(store, writer, namespace)}
    started = time.perf_counter()
    index = DenseIndex(model)  # a new process (the MCP server) reading what the capability stored
    index.sync(store, namespace=namespace)
    row['sync_first_s'] = round(time.perf_counter() - started, 2)
    times: dict[str, list[float]] = {'hybrid': [], 'hybrid_session': [], 'embed_query': [], 'sync_new': []}
    sessions = [f's{i % max(1, size // SESSION_BLOCKS)}' for i in range(len(texts))]
    for _ in range(rounds):
        for text, session in zip(texts, sessions, strict=True):
            for scope, name in ((None, 'hybrid'), (session, 'hybrid_session')):
                index._queries.clear()  # every query pays its embedding, as a new one would
                t0 = time.perf_counter()
                recall(store, text, 10, namespace=namespace, session_id=scope, method='hybrid', dense=index)
                times[name].append((time.perf_counter() - t0) * 1000)
            index._queries.clear()
            t0 = time.perf_counter()
            index._query_vector(text)
            times['embed_query'].append((time.perf_counter() - t0) * 1000)
    try:
        for i in range(5):  # one more block archived, then the sync a recall makes first
            source = sources[i % len(sources)]
            block = BlockRecord.from_messages(
                source.messages, session_id='dense-sync', seq=i, tokens=source.tokens, text=source.text,
                namespace=namespace,
            )  # fmt: skip
            store.write_eviction(Eviction(session_id='dense-sync', namespace=namespace, blocks=(block,)))
            store_random_vectors(
                store, writer, namespace, 'dense-sync'
            )  # as the capability stores its new block's vector
            t0 = time.perf_counter()
            index.sync(store, namespace=namespace)
            times['sync_new'].append((time.perf_counter() - t0) * 1000)
    finally:
        store.delete_session('dense-sync', namespace=namespace)
    for name, values in times.items():
        row[f'{name}_p50_ms'] = round(statistics.median(values), 2)
        row[f'{name}_p95_ms'] = round(percentile(values, 0.95), 2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sizes', default='1000,10000,100000')
    parser.add_argument('--data', default=os.environ.get('MEMENTOGRAPH_DATA_DIR', str(REPO.parent / 'shared' / 'data')))
    parser.add_argument('--store', action='append', help='sqlite (default), memory, or a neo4j:// URI; repeatable')
    parser.add_argument('--queries', type=int, default=60)
    parser.add_argument(
        '--keep',
        action='store_true',
        help='Neo4j: load into bench-recall-keep-SIZE, reuse it when it already holds SIZE blocks, never delete it '
        '(a 100k load takes 10-30 min; remove it later with `mementograph forget --session sN` per session)',
    )
    parser.add_argument(
        '--reuse',
        metavar='DIR',
        help='SQLite: keep each size in DIR/recall-SIZE.db, load it only when missing, measure it as it is',
    )
    parser.add_argument('--rounds', type=int, default=3, help='measured rounds of the queries (after one warm-up)')
    parser.add_argument('--embedding', metavar='MODEL', help='also measure hybrid recall and vector sync (onnx:PATH)')
    args = parser.parse_args()
    counter = TokenCounter()
    started = time.perf_counter()
    sources = real_sources(Path(args.data), counter)
    print(f'{len(sources)} distinct real blocks prepared in {time.perf_counter() - started:.1f} s', flush=True)
    texts = queries(sources, args.queries)
    rows: list[dict[str, Any]] = []
    for target in args.store or ['sqlite']:
        for size in (int(s) for s in args.sizes.split(',')):
            with tempfile.TemporaryDirectory() as tmp:
                reuse = bool(args.reuse) and target == 'sqlite'
                folder = Path(args.reuse) if reuse else Path(tmp)
                folder.mkdir(parents=True, exist_ok=True)
                uri = f'sqlite://{folder / f"recall-{size}.db"}' if target == 'sqlite' else target
                uri = 'memory://' if target == 'memory' else uri
                store = open_store(uri)
                # a namespace of the run's own: a shared server (Neo4j) is never touched outside it
                keep = reuse or (args.keep and not uri.startswith(('sqlite://', 'memory://')))
                namespace = f'bench-recall-keep-{size}' if keep else f'bench-recall-{os.getpid()}-{size}'
                try:
                    t0 = time.perf_counter()
                    reused = keep and store.stats(namespace=namespace).blocks >= size
                    if not reused:
                        load(store, sources, size, namespace)
                    load_s = time.perf_counter() - t0
                    row = {'blocks': size, 'store': uri.split('://')[0], 'load_s': round(load_s, 1), 'reused': reused}
                    # the machine's load before and after: shared cores make every figure depend on it
                    load_before = round(os.getloadavg()[0], 2)
                    row |= measure(store, texts, namespace, size, rounds=args.rounds)
                    if args.embedding:
                        row |= measure_dense(store, args.embedding, sources, texts, namespace, size, args.rounds)
                    row['load_avg_1m_before'] = load_before
                    row['load_avg_1m'] = round(os.getloadavg()[0], 2)
                finally:
                    if not keep and not uri.startswith(('sqlite://', 'memory://')):
                        for session in range((size + SESSION_BLOCKS - 1) // SESSION_BLOCKS):
                            store.delete_session(f's{session}', namespace=namespace)
                    store.close()
            rows.append(row)
            print(json.dumps(row), flush=True)
    by_store: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_store.setdefault(row['store'], []).append(row)
    for store_rows in by_store.values():
        base = store_rows[0]
        for row in store_rows:
            row['growth_p50_vs_smallest'] = round(row['recall_p50_ms'] / max(base['recall_p50_ms'], 1e-9), 2)
    header = (
        '| blocks | store | recall (fused) p50 / p95 ms | fused, first time p50 / p95 ms | fused in a session p50 / p95 ms '
        '| fused in a session, first time p50 / p95 ms | graph only p50 / p95 ms | search_text p50 / p95 ms '
        '| fused p50 growth vs smallest | FTS index build s | load s | load avg before / after |'
    )
    print('\n' + header)
    print('|' + '---|' * 12)
    for r in rows:
        print(
            f'| {r["blocks"]} | {r["store"]} | {r["recall_p50_ms"]} / {r["recall_p95_ms"]} | '
            f'{r["recall_first_p50_ms"]} / {r["recall_first_p95_ms"]} | '
            f'{r["recall_session_p50_ms"]} / {r["recall_session_p95_ms"]} | '
            f'{r["recall_session_first_p50_ms"]} / {r["recall_session_first_p95_ms"]} | '
            f'{r["graph_p50_ms"]} / {r["graph_p95_ms"]} | '
            f'{r["search_text_p50_ms"]} / {r["search_text_p95_ms"]} | '
            f'{r["growth_p50_vs_smallest"]} | {r["index_s"]} | {r["load_s"]} | '
            f'{r["load_avg_1m_before"]} / {r["load_avg_1m"]} |'
        )
    dense_rows = [r for r in rows if 'hybrid_p50_ms' in r]
    if dense_rows:
        print(
            '\n| blocks | store | hybrid p50 / p95 ms | hybrid in a session p50 / p95 ms | query embedding p50 / p95 ms '
            '| first sync over the namespace s | sync after one new block p50 / p95 ms |'
        )
        print('|' + '---|' * 7)
        for r in dense_rows:
            print(
                f'| {r["blocks"]} | {r["store"]} | {r["hybrid_p50_ms"]} / {r["hybrid_p95_ms"]} | '
                f'{r["hybrid_session_p50_ms"]} / {r["hybrid_session_p95_ms"]} | '
                f'{r["embed_query_p50_ms"]} / {r["embed_query_p95_ms"]} | {r["sync_first_s"]} | '
                f'{r["sync_new_p50_ms"]} / {r["sync_new_p95_ms"]} |'
            )
    out = REPO / 'bench-results'
    out.mkdir(exist_ok=True)
    (out / 'recall.json').write_text(json.dumps(rows, indent=2))


if __name__ == '__main__':
    main()
