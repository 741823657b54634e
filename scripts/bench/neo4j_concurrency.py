#!/usr/bin/env python
"""Neo4j: concurrent evictions of several sessions into ONE namespace, whose blocks share their vocabulary.

Usage (a server from `eval "$(scripts/neo4j-server start)"`, or NEO4J_URI/NEO4J_USERNAME/NEO4J_PASSWORD):

    .venv/bin/python scripts/bench/neo4j_concurrency.py                      # 8 threads, 1 session each
    .venv/bin/python scripts/bench/neo4j_concurrency.py --threads 4 --evictions 20

Each of `--threads` threads writes `--evictions` evictions of its own session (`--blocks` blocks each, each block
with its memento, `--mentions` entity mentions and one compaction event) into one fresh namespace, all started
together, after `--history` evictions of another session (one thread) have brought in the common entities, as
in a namespace in use: a new entity is created by a MERGE on its unique id, and two sessions creating the same
one wait for each other whatever the counters. Entities are drawn from a Zipf-like vocabulary (`--vocabulary` keys, weight 1/rank), as words and names
are in agent traces and dialogue: the common ones (the tool, the repo, the user) are mentioned by nearly every
block of every session, so every eviction mentions them. Before the threads, one thread writes the same amount
alone (`solo`, its own namespace) for the latency without contention.

Reported: per-eviction latency p50/p95/max and throughput (blocks/s over the wall time), and lock waits sampled
from `SHOW TRANSACTIONS` every `--poll` seconds (the mementograph write transactions seen blocked, and the largest
`waitTime` and `activeLockCount` seen). Then the namespace's document frequencies are checked against counting
the graph (`entity_postings` against the MENTIONS edges). Prints a table and writes JSON under bench-results/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from mementograph._messages import message_text
from mementograph.knowledge_graph import (
    BlockRecord,
    EntityRecord,
    Eviction,
    MementoRecord,
    Mention,
    SessionEvent,
    memento_id_for,
)
from mementograph.knowledge_graph.store._neo4j import Neo4jStore

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _vocabulary(size: int) -> tuple[list[EntityRecord], list[float]]:
    kinds = ('concept', 'person', 'file', 'symbol', 'command')
    entities = [EntityRecord(key=f'{kinds[i % 5]}:term{i}', name=f'term{i}', kind=kinds[i % 5]) for i in range(size)]
    return entities, [1 / (rank + 1) for rank in range(size)]


def make_evictions(
    namespace: str, session: str, evictions: int, blocks: int, mentions: int, vocabulary: int, seed: int
) -> list[Eviction]:
    """`evictions` evictions of `blocks` blocks each for `session`: deterministic per (seed, session)."""
    rng = random.Random(f'{seed}:{session}')
    entities, weights = _vocabulary(vocabulary)
    out: list[Eviction] = []
    for e in range(evictions):
        recs, mems, ments = [], [], []
        for i in range(e * blocks, (e + 1) * blocks):
            named: dict[str, EntityRecord] = {}
            while len(named) < mentions:
                for entity in rng.choices(entities, weights, k=mentions - len(named)):
                    named[entity.key] = entity
            at = T0 + timedelta(seconds=i * 2)
            words = ' '.join(entity.name for entity in named.values())
            messages = [
                ModelRequest(parts=[UserPromptPart(f'[{session}#{i}] what about {words}?', timestamp=at)]),
                ModelResponse(parts=[TextPart(f'{words}: noted, {rng.randrange(10**6)}.')], timestamp=at),
            ]
            text = '\n'.join(message_text(m) for m in messages)
            block = BlockRecord.from_messages(
                messages, session_id=session, namespace=namespace, seq=i * 2, tokens=200 + rng.randrange(200),
                text=text, started_at=at.isoformat(),
            )  # fmt: skip
            memento = MementoRecord(
                id=memento_id_for(namespace, session, [block.id]), session_id=session, namespace=namespace,
                text=f'talked about {words[:120]}', tokens=30, summarizes=(block.id,), compressor='extractive',
            )  # fmt: skip
            recs.append(block)
            mems.append(memento)
            ments += [Mention(block.id, entity, rng.randrange(1, 4)) for entity in named.values()]
            ments += [Mention(memento.id, entity) for entity in list(named.values())[:5]]
        report = json.dumps({'evicted': [b.id for b in recs]}).encode()
        event = SessionEvent(
            session_id=session, namespace=namespace, kind='auto', payload=report, sha256=str(hash(report)),
            block_ids=tuple(b.id for b in recs),
        )  # fmt: skip
        out.append(
            Eviction(
                session_id=session, namespace=namespace, blocks=tuple(recs), mementos=tuple(mems),
                mentions=tuple(ments), events=(event,),
            )
        )  # fmt: skip
    return out


class LockMonitor:
    """Samples the server's mementograph write transactions: how many are blocked, their lock counts and waits."""

    def __init__(self, store: Neo4jStore, poll: float, prefix: str) -> None:
        self.store, self.poll, self.prefix = store, poll, prefix
        self.samples = 0
        self.blocked_samples = 0
        self.max_blocked = 0
        self.max_locks = 0
        self.waits: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LockMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            records = self.store._driver.execute_query(
                'SHOW TRANSACTIONS YIELD transactionId, status, activeLockCount, waitTime, metaData, parameters '
                "WHERE metaData.op = 'write_eviction' AND parameters.namespace STARTS WITH $prefix "
                'RETURN transactionId, status, activeLockCount, waitTime',
                prefix=self.prefix,
                database_=self.store._database,
            ).records
            blocked = [r for r in records if str(r['status']).startswith('Blocked')]
            self.samples += 1
            self.blocked_samples += bool(blocked)
            self.max_blocked = max(self.max_blocked, len(blocked))
            for r in records:
                self.max_locks = max(self.max_locks, int(r['activeLockCount'] or 0))
                wait = r['waitTime']
                seconds = (wait.seconds + wait.nanoseconds / 1e9) if wait is not None else 0.0
                self.waits[r['transactionId']] = max(self.waits.get(r['transactionId'], 0.0), seconds)
            self._stop.wait(self.poll)

    def summary(self) -> dict[str, Any]:
        waits = [w for w in self.waits.values() if w > 0]
        return {
            'samples': self.samples,
            'samples_with_blocked_tx': self.blocked_samples,
            'max_blocked_at_once': self.max_blocked,
            'max_locks_held': self.max_locks,
            'tx_seen': len(self.waits),
            'tx_seen_waiting': len(waits),
            'max_wait_s': round(max(waits, default=0.0), 3),
            'sum_wait_s': round(sum(waits), 3),
        }


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] * 1000, 1)

    return {'p50_ms': pick(0.5), 'p95_ms': pick(0.95), 'max_ms': round(ordered[-1] * 1000, 1)}


def drop_namespace(store: Neo4jStore, namespace: str) -> None:
    with store._driver.session(database=store._database) as session:
        for label in ('EvictedBlock', 'Memento', 'Page', 'Event', 'Entity', 'Session'):
            session.run(
                f'MATCH (n:{label} {{namespace: $ns}}) CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF 2000 ROWS',
                ns=namespace,
            ).consume()
        session.run(  # per-session entity counts: their id starts with the namespace
            "MATCH (c:EntityCount) WHERE c.id STARTS WITH $ns + '\u001f' CALL (c) { DELETE c } IN TRANSACTIONS OF 2000 ROWS",
            ns=namespace,
        ).consume()


def run(store: Neo4jStore, payloads: Sequence[Sequence[Eviction]], poll: float, prefix: str) -> dict[str, Any]:
    """Every session's evictions in its own thread, started together; latencies per eviction."""
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(payloads))

    def work(evictions: Sequence[Eviction]) -> None:
        barrier.wait()
        for ev in evictions:
            start = time.perf_counter()
            try:
                store.write_eviction(ev)
            except Exception as exc:  # reported, not raised: the other threads go on
                with lock:
                    failures.append(f'{type(exc).__name__}: {exc}'[:200])
                continue
            with lock:
                latencies.append(time.perf_counter() - start)

    threads = [threading.Thread(target=work, args=(evs,)) for evs in payloads]
    with LockMonitor(store, poll, prefix) as monitor:
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - start
    blocks = sum(len(ev.blocks) for evs in payloads for ev in evs)
    return {
        'threads': len(payloads),
        'evictions': len(latencies),
        'failures': failures,
        'wall_s': round(wall, 2),
        'blocks_per_s': round(blocks / wall, 1),
        **percentiles(latencies or [0.0]),
        'locks': monitor.summary(),
    }


def check_frequencies(store: Neo4jStore, namespace: str, keys: Sequence[str]) -> dict[str, Any]:
    """The frequencies recall reads (`entity_postings`, uncapped) against counting the graph's MENTIONS edges."""
    lookup = store.entity_postings(keys, namespace=namespace, limit=0, count_limit=-1)
    kept = {found.entity.key: found.blocks for found in lookup.entities}
    rows = store.query(
        "MATCH (b:EvictedBlock {namespace: $namespace})-[:MENTIONS]->(e:Entity) WHERE b.kind = 'block' "
        'RETURN e.key AS key, count(b) AS n',
        namespace=namespace,
        limit=10**6,
    )
    counted = {row['key']: row['n'] for row in rows}
    wrong = [key for key in keys if kept.get(key, 0) != counted.get(key, 0)]
    return {'entities_checked': len(keys), 'wrong': len(wrong), 'top_frequency': max(counted.values(), default=0)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--uri', default=os.environ.get('NEO4J_URI'), help='default: $NEO4J_URI')
    parser.add_argument('--threads', type=int, default=8, help='sessions written at once, one thread each')
    parser.add_argument('--evictions', type=int, default=15, help='evictions per session')
    parser.add_argument('--blocks', type=int, default=4, help='blocks per eviction')
    parser.add_argument('--mentions', type=int, default=40, help='distinct entities a block mentions')
    parser.add_argument('--vocabulary', type=int, default=3000, help='entity keys to draw from (Zipf-like)')
    parser.add_argument(
        '--history', type=int, default=40, help='evictions written first into the shared namespace, by one thread'
    )
    parser.add_argument('--poll', type=float, default=0.05, help='seconds between SHOW TRANSACTIONS samples')
    parser.add_argument('--seed', type=int, default=7)
    parser.add_argument('--output', type=Path, default=REPO / 'bench-results')
    args = parser.parse_args(argv)
    if not args.uri:
        parser.error('no server: set NEO4J_URI (eval "$(scripts/neo4j-server start)") or pass --uri')
    store = Neo4jStore.from_uri(args.uri)
    tag = uuid.uuid4().hex[:8]
    sessions = [f'session-{i}' for i in range(args.threads)]
    namespaces = {'warm': f'bench-conc-{tag}-warm', 'solo': f'bench-conc-{tag}-solo', 'shared': f'bench-conc-{tag}'}

    def payload(ns: str, session: str) -> list[Eviction]:
        return make_evictions(ns, session, args.evictions, args.blocks, args.mentions, args.vocabulary, args.seed)

    try:
        for ev in payload(namespaces['warm'], 'warm')[:5]:  # plans cached before anything is timed
            store.write_eviction(ev)
        solo_payload = [ev for s in sessions for ev in payload(namespaces['solo'], s)][: args.evictions * 2]
        print(f'solo: {len(solo_payload)} evictions, 1 thread ...', file=sys.stderr)
        solo = run(store, [solo_payload], args.poll, namespaces['solo'])
        print(f'history: {args.history} evictions, 1 thread ...', file=sys.stderr)
        for ev in make_evictions(
            namespaces['shared'], 'history', args.history, args.blocks, args.mentions, args.vocabulary, args.seed
        ):
            store.write_eviction(ev)
        shared_payload = [payload(namespaces['shared'], s) for s in sessions]
        print(f'shared: {args.threads} threads x {args.evictions} evictions, one namespace ...', file=sys.stderr)
        shared = run(store, shared_payload, args.poll, namespaces['shared'])
        keys = [entity.key for entity in _vocabulary(args.vocabulary)[0]][:500]
        checked = check_frequencies(store, namespaces['shared'], keys)
    finally:
        for ns in namespaces.values():
            drop_namespace(store, ns)
        server = store._driver.get_server_info().agent
        store.close()
    result = {
        'bench': 'neo4j_concurrency',
        'when': datetime.now(UTC).isoformat(timespec='seconds'),
        'server': server,
        'machine': f'{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}',
        'load_1min': round(os.getloadavg()[0], 2),
        'command': ' '.join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        'workload': {
            k: getattr(args, k) for k in ('threads', 'evictions', 'blocks', 'mentions', 'vocabulary', 'history')
        },
        'solo': solo,
        'shared': shared,
        'frequencies': checked,
    }
    print(
        f'Neo4j {server}; {result["machine"]}; load {result["load_1min"]}\n'
        f'{args.threads} sessions x {args.evictions} evictions x {args.blocks} blocks, {args.mentions} entities a '
        f'block from {args.vocabulary} (Zipf), after {args.history} evictions of history\n'
    )
    header = ('run', 'threads', 'evictions', 'p50 ms', 'p95 ms', 'max ms', 'blocks/s', 'blocked samples', 'max wait s')
    rows = [
        (name, r['threads'], r['evictions'], r['p50_ms'], r['p95_ms'], r['max_ms'], r['blocks_per_s'],
         f"{r['locks']['samples_with_blocked_tx']}/{r['locks']['samples']} (max {r['locks']['max_blocked_at_once']})",
         r['locks']['max_wait_s'])
        for name, r in (('solo', solo), ('shared', shared))
    ]  # fmt: skip
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print('  '.join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print(f'\nfailures: {len(shared["failures"]) + len(solo["failures"])}; frequencies: {checked}')
    args.output.mkdir(parents=True, exist_ok=True)
    path = args.output / f'neo4j-concurrency-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json'
    path.write_text(json.dumps(result, indent=2) + '\n')
    print(f'wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
