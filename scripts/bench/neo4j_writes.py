#!/usr/bin/env python
"""Neo4j backend benchmark: batched eviction writes vs naive per-node writes, recovery latency, README queries.

Usage (a server from `eval "$(scripts/neo4j-server start)"`, or NEO4J_URI/NEO4J_USERNAME/NEO4J_PASSWORD):

    .venv/bin/python scripts/bench/neo4j_writes.py                 # full run: 100k blocks for the read side
    .venv/bin/python scripts/bench/neo4j_writes.py --blocks 10000  # quicker

Same run, same payloads: the write side writes identical evictions (blocks with their mementos, entity mentions,
a page and a compaction event) three ways, each into its own namespace:
  batched   Neo4jStore.write_eviction: one transaction per eviction holding one statement of batched
            UNWIND ... MERGE parts (two round trips: the statement with its BEGIN, then the commit)
  naive     one auto-commit statement per node (the baseline the >= 5x target is measured against)
  per-node  one statement per node, all in one transaction per eviction (to show where the gain comes from)
The read side fills a namespace to --blocks blocks (with the batched writer), then measures `recover_block`
(p50/p95/p99 over random blocks, sha256 check included) and the README queries (docs/cypher.md) at that size.

Prints a table and writes JSON under bench-results/ (git-ignored). Time is noisy on shared machines: compare the
ratio measured in the same run, and the medians. The header names the full-text index's update mode: a synchronous
one (left by an old version; `Neo4jStore` rebuilds it on open) adds ~8 ms to every commit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

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
from mementograph.knowledge_graph.store._cypher import EXAMPLE_QUERIES
from mementograph.knowledge_graph.store._neo4j import FULLTEXT_INDEX, Neo4jStore, session_key

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1, tzinfo=UTC)
ENTITY_POOL = 400


# -- payloads ---------------------------------------------------------------------------------------------------


def _messages(rng: random.Random, session: str, seq: int) -> list[ModelMessage]:
    """A realistic evicted block: a request, a tool call, its ~1.5 kB result, an answer (~2.5 kB serialized)."""
    at = T0 + timedelta(seconds=seq)
    path = f'src/pkg/mod_{rng.randrange(ENTITY_POOL)}.py'
    output = '\n'.join(f'{path}:{i}: value_{i} = {rng.randrange(10**6)}  # checked' for i in range(30))
    return [
        ModelRequest(parts=[UserPromptPart(f'[{session}#{seq}] inspect {path} and run the tests', timestamp=at)]),
        ModelResponse(
            parts=[ToolCallPart('bash', {'command': f'pytest -q {path}'}, tool_call_id=f'c{seq}')], timestamp=at
        ),
        ModelRequest(parts=[ToolReturnPart('bash', output, tool_call_id=f'c{seq}', timestamp=at)]),
        ModelResponse(parts=[TextPart(f'{path}: 30 values checked, pytest exit 0.')], timestamp=at),
    ]


def _entities(rng: random.Random) -> list[EntityRecord]:
    picks = rng.sample(range(ENTITY_POOL), 4)
    return [
        EntityRecord(key=f'file:src/pkg/mod_{picks[0]}.py', name=f'src/pkg/mod_{picks[0]}.py', kind='file'),
        EntityRecord(key=f'symbol:value_{picks[1]}', name=f'value_{picks[1]}', kind='symbol'),
        EntityRecord(key='command:pytest', name='pytest', kind='command'),
        EntityRecord(key=f'number:{picks[3]}', name=str(picks[3]), kind='number'),
    ]


def make_evictions(
    namespace: str, sessions: Sequence[str], blocks_per_session: int, batch: int, seed: int
) -> list[Eviction]:
    """Deterministic evictions: `batch` blocks each, with a memento per block, 4 entity mentions per block, the
    page they belong to and the compaction event naming them. The same seed gives the same payloads in any
    namespace."""
    evictions: list[Eviction] = []
    for session in sessions:
        rng = random.Random(f'{seed}:{session}')
        for start in range(0, blocks_per_session, batch):
            blocks, mementos, mentions = [], [], []
            for i in range(start, min(start + batch, blocks_per_session)):
                messages = _messages(rng, session, i * 4)
                text = '\n'.join(message_text(m) for m in messages)
                block = BlockRecord.from_messages(
                    messages, session_id=session, namespace=namespace, seq=i * 4, tokens=600 + rng.randrange(400),
                    text=text, started_at=(T0 + timedelta(seconds=i * 4)).isoformat(),
                )  # fmt: skip
                memento = MementoRecord(
                    id=memento_id_for(namespace, session, [block.id]), session_id=session, namespace=namespace,
                    text=f'{text.splitlines()[0][:80]} -> pytest exit 0', tokens=30 + rng.randrange(20),
                    summarizes=(block.id,), score=float(rng.randrange(6, 11)), verified=rng.random() < 0.8,
                    iterations=1, compressor='extractive',
                )  # fmt: skip
                blocks.append(block)
                mementos.append(memento)
                mentions += [Mention(block.id, entity, rng.randrange(1, 5)) for entity in _entities(rng)]
            number = start // batch
            page = PageRecord(
                id=page_id_for(namespace, session, number), session_id=session, namespace=namespace, number=number,
                first_turn=blocks[0].first_message, last_turn=blocks[-1].last_message, summary=f'page {number}',
                topics=(mentions[0].entity.name,), block_ids=tuple(b.id for b in blocks),
            )  # fmt: skip
            report = json.dumps({'evicted': [b.id for b in blocks]}).encode()
            event = SessionEvent(
                session_id=session, namespace=namespace, kind='auto', payload=report, sha256=str(hash(report)),
                block_ids=tuple(b.id for b in blocks),
            )  # fmt: skip
            evictions.append(
                Eviction(
                    session_id=session, namespace=namespace, blocks=tuple(blocks), mementos=tuple(mementos),
                    mentions=tuple(mentions), pages=(page,), events=(event,),
                )
            )  # fmt: skip
    return evictions


# -- the naive baseline -----------------------------------------------------------------------------------------


def naive_statements(ev: Eviction) -> Iterator[tuple[str, dict[str, Any]]]:
    """One statement per node (with the edges that hang off it), same MERGE semantics as the store."""
    ns, sid = ev.namespace, ev.session_id
    key = session_key(ns, sid)
    yield (
        'MERGE (s:Session {key: $key}) ON CREATE SET s.id = $sid, s.namespace = $ns, s.created_at = $now',
        {'key': key, 'sid': sid, 'ns': ns, 'now': T0.isoformat()},
    )
    for b in ev.blocks:
        props = {
            'id': b.id, 'session_id': sid, 'namespace': ns, 'seq': b.seq, 'kind': b.kind,
            'first_message': b.first_message, 'last_message': b.last_message, 'tokens': b.tokens,
            'sha256': b.sha256, 'messages_json': b.messages_json, 'text': b.text, 'started_at': b.started_at,
        }  # fmt: skip
        yield (
            'MATCH (s:Session {key: $key}) MERGE (b:EvictedBlock {id: $id}) ON CREATE SET b += $props '
            'MERGE (b)-[:IN_SESSION]->(s) '
            "WITH b OPTIONAL MATCH (p:EvictedBlock {namespace: $ns, session_id: $sid, kind: 'block', seq: $prev}) "
            'FOREACH (_ IN CASE WHEN p IS NULL THEN [] ELSE [1] END | MERGE (p)-[:NEXT]->(b))',
            {'key': key, 'id': b.id, 'props': props, 'ns': ns, 'sid': sid, 'prev': b.seq - 4},
        )
    for m in ev.mementos:
        props = {
            'id': m.id, 'session_id': sid, 'namespace': ns, 'text': m.text, 'tokens': m.tokens,
            'summarizes': list(m.summarizes), 'score': m.score, 'verified': m.verified, 'iterations': m.iterations,
            'compressor': m.compressor, 'level': m.level,
        }  # fmt: skip
        yield (
            'MERGE (m:Memento {id: $id}) ON CREATE SET m += $props WITH m '
            'MATCH (b:EvictedBlock {id: $target}) MERGE (m)-[r:SUMMARIZES]->(b) ON CREATE SET r.position = 0',
            {'id': m.id, 'props': props, 'target': m.summarizes[0]},
        )
    for mention in ev.mentions:
        e = mention.entity
        yield (
            'MERGE (e:Entity {id: $eid}) ON CREATE SET e.key = $key, e.name = $name, e.kind = $kind, '
            'e.namespace = $ns WITH e MATCH (b:EvictedBlock {id: $src}) '
            'MERGE (b)-[r:MENTIONS]->(e) ON CREATE SET r.count = $count',
            {'eid': entity_id_for(ns, e.key), 'key': e.key, 'name': e.name, 'kind': e.kind, 'ns': ns,
             'src': mention.source_id, 'count': mention.count},
        )  # fmt: skip
    for page in ev.pages:
        yield (
            'MERGE (p:Page {id: $id}) ON CREATE SET p.namespace = $ns, p.session_id = $sid, p.number = $number '
            'SET p.summary = $summary, p.topics = $topics '
            'WITH p UNWIND $blocks AS bid MATCH (b:EvictedBlock {id: bid}) MERGE (p)-[:CONTAINS]->(b)',
            {'id': page.id, 'ns': ns, 'sid': sid, 'number': page.number, 'summary': page.summary,
             'topics': list(page.topics), 'blocks': list(page.block_ids)},
        )  # fmt: skip
    for event in ev.events:
        yield (
            'MATCH (s:Session {key: $key}) MERGE (e:Event {uid: $uid}) ON CREATE SET e.kind = $kind, '
            'e.payload = $payload, e.block_ids = $blocks, e.namespace = $ns, e.session_id = $sid '
            'MERGE (e)-[:IN_SESSION]->(s)',
            {'key': key, 'uid': f'{key}\x1f{event.key}', 'kind': event.kind, 'payload': event.payload,
             'blocks': list(event.block_ids), 'ns': ns, 'sid': sid},
        )  # fmt: skip


@contextmanager
def naive_writer(store: Neo4jStore, *, one_tx: bool) -> Iterator[Callable[[Eviction], None]]:
    """The baselines: every node its own statement, each auto-committed (`one_tx=False`) or all of an eviction's
    statements in one explicit transaction."""

    def write(ev: Eviction) -> None:
        if one_tx:
            with session.begin_transaction() as tx:
                for cypher, params in naive_statements(ev):
                    tx.run(cypher, params).consume()
                tx.commit()
        else:
            for cypher, params in naive_statements(ev):
                session.run(cypher, params).consume()

    with store._driver.session(database=store._database) as session:
        yield write


@dataclass
class Timing:
    name: str
    seconds: list[float]
    """Per eviction."""
    blocks: int

    @property
    def total(self) -> float:
        return sum(self.seconds)

    @property
    def rate(self) -> float:
        return self.blocks / self.total if self.total else 0.0

    @property
    def median_rate(self) -> float:
        """Blocks/s at the median eviction: what a write costs without the machine's worst moments."""
        return self.blocks / len(self.seconds) / statistics.median(self.seconds)


def timed(name: str, evictions: Sequence[Eviction], write: Callable[[Eviction], None]) -> Timing:
    seconds = []
    for ev in evictions:
        start = time.perf_counter()
        write(ev)
        seconds.append(time.perf_counter() - start)
    return Timing(name, seconds, sum(len(ev.blocks) for ev in evictions))


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] * 1000

    return {
        'p50_ms': pick(0.5),
        'p95_ms': pick(0.95),
        'p99_ms': pick(0.99),
        'mean_ms': statistics.fmean(ordered) * 1000,
    }


def drop_namespace(store: Neo4jStore, namespace: str) -> None:
    """Delete a namespace's nodes in batches (a 100k-block namespace does not fit one transaction's memory)."""
    with store._driver.session(database=store._database) as session:
        for label in ('EvictedBlock', 'Memento', 'Page', 'Event', 'Entity', 'Session'):
            session.run(
                f'MATCH (n:{label} {{namespace: $ns}}) CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF 2000 ROWS',
                ns=namespace,
            ).consume()


def fulltext_mode(store: Neo4jStore) -> str:
    """How the full-text index is updated: it decides most of a small eviction's commit time."""
    records = store._driver.execute_query(
        'SHOW INDEXES YIELD name, options WHERE name = $name RETURN options', name=FULLTEXT_INDEX
    ).records
    if not records:
        return 'missing'
    config = records[0]['options'].get('indexConfig') or {}
    return 'eventually consistent' if config.get('fulltext.eventually_consistent') else 'synchronous (in every commit)'


def count_blocks(store: Neo4jStore, namespace: str) -> int:
    rows = store.query(
        "MATCH (b:EvictedBlock {namespace: $namespace, kind: 'block'}) RETURN count(b) AS n", namespace=namespace
    )
    return int(rows[0]['n'])


def session_names(count: int) -> list[str]:
    return [f'session-{s:04d}' for s in range(count)]


def bench_writes(store: Neo4jStore, args: argparse.Namespace, batch: int, tag: str) -> dict[str, Any]:
    sessions = session_names(max(1, args.write_blocks // 500))
    per_session = args.write_blocks // len(sessions)
    namespaces = {mode: f'bench-{tag}-{batch}-{mode}' for mode in ('batched', 'naive', 'pernode')}
    payloads = {mode: make_evictions(ns, sessions, per_session, batch, args.seed) for mode, ns in namespaces.items()}
    total = len(sessions) * per_session
    warm_ns = f'bench-{tag}-{batch}-warm'
    try:
        warm = make_evictions(warm_ns, ['warm'], 100, 10, args.seed)
        for ev in warm[:5]:  # plans cached and the JIT warm for every writer before anything is timed
            store.write_eviction(ev)
        with naive_writer(store, one_tx=False) as naive, naive_writer(store, one_tx=True) as pernode:
            for ev in warm[5:7]:
                naive(ev)
            for ev in warm[7:9]:
                pernode(ev)
            timings = [
                timed('batched: write_eviction (1 tx, 1 statement)', payloads['batched'], store.write_eviction),
                timed('naive: 1 auto-commit statement per node', payloads['naive'], naive),
                timed('per-node statements, 1 tx per eviction', payloads['pernode'], pernode),
            ]
    finally:
        for ns in (*namespaces.values(), warm_ns):
            drop_namespace(store, ns)
    batched_t, naive_t, pernode_t = timings
    return {
        'blocks': total,
        'blocks_per_eviction': batch,
        'timings': [
            {
                'name': t.name,
                'seconds': round(t.total, 3),
                'blocks_per_s': round(t.rate, 1),
                'median_eviction_ms': round(statistics.median(t.seconds) * 1000, 2),
                'blocks_per_s_at_median': round(t.median_rate, 1),
            }
            for t in timings
        ],
        'speedup_vs_naive': round(batched_t.rate / naive_t.rate, 2),
        'speedup_vs_naive_at_median': round(batched_t.median_rate / naive_t.median_rate, 2),
        'speedup_vs_pernode_tx': round(batched_t.rate / pernode_t.rate, 2),
    }


def fill(store: Neo4jStore, namespace: str, blocks: int, seed: int) -> dict[str, Any]:
    """Bring a namespace to `blocks` blocks (1,000 a session, 50 an eviction) plus one memento of mementos per
    session; reuses what an earlier `--keep` run left."""
    sessions = session_names(max(1, blocks // 1000))
    per_session = blocks // len(sessions)
    have = count_blocks(store, namespace)
    start = time.perf_counter()
    written = 0
    if have < len(sessions) * per_session:
        for session in sessions:  # one session at a time keeps the payloads in memory small
            evictions = make_evictions(namespace, [session], per_session, 50, seed)
            for ev in evictions:
                store.write_eviction(ev)
                written += len(ev.blocks)
            firsts = [m.id for m in evictions[0].mementos[:5]]
            top = MementoRecord(
                id=memento_id_for(namespace, session, firsts), session_id=session, namespace=namespace,
                text='five mementos, one line', tokens=12, summarizes=tuple(firsts), level=2, compressor='extractive',
            )  # fmt: skip
            store.write_eviction(Eviction(session_id=session, namespace=namespace, mementos=(top,)))
    seconds = time.perf_counter() - start
    return {
        'blocks': count_blocks(store, namespace),
        'written_now': written,
        'seconds': round(seconds, 1),
        'blocks_per_s': round(written / seconds, 1) if written else None,
    }


def bench_recover(store: Neo4jStore, namespace: str, samples: int, seed: int) -> dict[str, Any]:
    ids = [row['id'] for row in store.query(
        "MATCH (b:EvictedBlock {namespace: $namespace, kind: 'block'}) RETURN b.id AS id", namespace=namespace,
        limit=10**7, timeout=120)]  # fmt: skip
    rng = random.Random(seed)
    picks = [rng.choice(ids) for _ in range(samples)]
    for block_id in picks[:50]:  # warm the plan cache and connection pool
        store.recover_block(block_id, namespace=namespace)
    latencies = []
    for block_id in picks:
        start = time.perf_counter()
        recovered = store.recover_block(block_id, namespace=namespace)
        latencies.append(time.perf_counter() - start)
        assert recovered.record.id == block_id
    return {'samples': samples, 'blocks': len(ids), **{k: round(v, 3) for k, v in percentiles(latencies).items()}}


def bench_queries(store: Neo4jStore, namespace: str, runs: int, sessions: int) -> list[dict[str, Any]]:
    session = session_names(sessions)[min(7, sessions - 1)]
    top = store.query(
        'MATCH (m:Memento {namespace: $namespace, session_id: $session_id, level: 2}) RETURN m.id AS id',
        namespace=namespace, session_id=session,
    )[0]['id']  # fmt: skip
    values = {'entity': 'file:src/pkg/mod_7.py', 'page': 3, 'memento': top}
    results = []
    for example in EXAMPLE_QUERIES:
        params = {name: values[name] for name in example.params}

        def run(example: Any = example, params: dict[str, Any] = params) -> int:
            return len(store.query(example.cypher, params, namespace=namespace, session_id=session, timeout=60))

        rows = run()
        latencies = []
        for _ in range(runs):
            start = time.perf_counter()
            run()
            latencies.append(time.perf_counter() - start)
        results.append(
            {'query': example.name, 'rows': rows, **{k: round(v, 2) for k, v in percentiles(latencies).items()}}
        )
    return results


# -- report -----------------------------------------------------------------------------------------------------


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ['  '.join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, '  '.join('-' * w for w in widths))
    return '\n'.join(lines)


def report(result: dict[str, Any]) -> str:
    f, r, q = result['fill'], result['recover'], result['queries']
    out = [
        f'Neo4j {result["server"]} at {result["uri"]}; {result["machine"]}; full-text index: {result["fulltext"]}',
        '',
    ]
    for w in result['writes']:
        out += [
            f"Eviction writes: {w['blocks']} blocks, {w['blocks_per_eviction']} blocks per eviction (+1 memento and "
            '4 entity mentions a block; 1 page and 1 compaction event an eviction), the same payloads for each writer',
            table(
                [(t['name'], t['seconds'], t['blocks_per_s'], t['median_eviction_ms'], t['blocks_per_s_at_median'])
                 for t in w['timings']],
                ('writer', 'seconds', 'blocks/s', 'median eviction ms', 'blocks/s at median'),
            ),
            f"batched vs naive: {w['speedup_vs_naive']}x overall, {w['speedup_vs_naive_at_median']}x at the median "
            f"(target >= 5x); vs per-node statements in one tx: {w['speedup_vs_pernode_tx']}x; batched: "
            f"{w['timings'][0]['blocks_per_s']} blocks/s overall, {w['timings'][0]['blocks_per_s_at_median']} at the "
            'median (target >= 1000)',
            '',
        ]  # fmt: skip
    fill_note = (
        f' (written now at {f["blocks_per_s"]} blocks/s, 50 a eviction)'
        if f['written_now']
        else ' (from an earlier --keep run)'
    )
    out += [
        f"Read namespace: {f['blocks']} blocks{fill_note}",
        '',
        f"recover_block at {r['blocks']} blocks ({r['samples']} random blocks, sha256 checked): "
        f"p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms, p99 {r['p99_ms']} ms (target p95 <= 10 ms)",
        '',
        f"README queries (docs/cypher.md) at {r['blocks']} blocks, {result['query_runs']} runs each",
        table([(x['query'], x['rows'], x['p50_ms'], x['p95_ms']) for x in q], ('query', 'rows', 'p50 ms', 'p95 ms')),
    ]  # fmt: skip
    return '\n'.join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--uri', default=os.environ.get('NEO4J_URI'), help='default: $NEO4J_URI')
    parser.add_argument('--blocks', type=int, default=100_000, help='blocks in the namespace the reads run on')
    parser.add_argument('--write-blocks', type=int, default=1500, help='blocks each writer writes, per batch size')
    parser.add_argument(
        '--batches',
        default='1,5,10,50',
        help='blocks per eviction in the write comparison, comma-separated (default: %(default)s)',
    )
    parser.add_argument('--recover-samples', type=int, default=2000)
    parser.add_argument('--query-runs', type=int, default=30)
    parser.add_argument('--seed', type=int, default=7)
    parser.add_argument('--namespace', default=None, help='read namespace (default: bench-read-<blocks>)')
    parser.add_argument('--keep', action='store_true', help='keep the filled read namespace for the next run')
    parser.add_argument('--output', type=Path, default=REPO / 'bench-results')
    args = parser.parse_args(argv)
    if not args.uri:
        parser.error('no server: set NEO4J_URI (eval "$(scripts/neo4j-server start)") or pass --uri')
    store = Neo4jStore.from_uri(args.uri)
    tag = uuid.uuid4().hex[:8]
    read_ns = args.namespace or f'bench-read-{args.blocks}'
    try:
        server = store._driver.get_server_info().agent
        fulltext = fulltext_mode(store)
        writes = []
        for batch in (int(b) for b in args.batches.split(',')):
            print(f'writes: {args.write_blocks} blocks x 3 writers, {batch} blocks an eviction ...', file=sys.stderr)
            writes.append(bench_writes(store, args, batch, tag))
        print(f'fill: {args.blocks} blocks into {read_ns} ...', file=sys.stderr)
        filled = fill(store, read_ns, args.blocks, args.seed)
        print('recover and queries ...', file=sys.stderr)
        recover = bench_recover(store, read_ns, args.recover_samples, args.seed)
        queries = bench_queries(store, read_ns, args.query_runs, max(1, args.blocks // 1000))
        if not args.keep:
            drop_namespace(store, read_ns)
    finally:
        store.close()
    result = {
        'bench': 'neo4j',
        'when': datetime.now(UTC).isoformat(timespec='seconds'),
        'uri': store.uri,
        'server': server,
        'fulltext': fulltext,
        'machine': f'{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}',
        'command': ' '.join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        'query_runs': args.query_runs,
        'writes': writes,
        'fill': filled,
        'recover': recover,
        'queries': queries,
    }
    print(report(result))
    args.output.mkdir(parents=True, exist_ok=True)
    path = args.output / f'neo4j-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json'
    path.write_text(json.dumps(result, indent=2) + '\n')
    print(f'\nwrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
