#!/usr/bin/env python
"""Neo4j round trips of mementos of mementos: the reads of a merge, and recovering a merged memento's chain.

Usage (a server from `eval "$(scripts/neo4j-server start)"`, or NEO4J_URI/NEO4J_USERNAME/NEO4J_PASSWORD):

    .venv/bin/python scripts/bench/neo4j_chains.py                  # 200 mementos, 5 rounds
    .venv/bin/python scripts/bench/neo4j_chains.py --mementos 1000

A session of `--mementos` blocks, each with its memento (written a few blocks an eviction, as compaction writes
them), is folded the way `MementoCompaction` folds a run of adjacent stubs that outgrew their share: the oldest
half of the run, plus one, becomes a memento of mementos, until one stub is left (a chain about as deep as the
number of merges, each merge nesting the one before). Each merge reads its children as the compactor does
(`SessionCompactor._mementos_of`) and writes the merged memento (`write_eviction`); then `recover_chain` reads back
every block under the top memento, and under the first merge. Each step is timed (median over `--rounds`, in
fresh namespaces) and its Cypher statements counted: every `Session.run` and transaction `run` of the driver, so a
managed transaction's BEGIN and COMMIT are not counted, only the statements.

Prints a table and writes JSON under bench-results/ (git-ignored). Times are noisy on a shared machine; the
statement counts are not.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from neo4j._sync.work.session import Session
from neo4j._sync.work.transaction import TransactionBase
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart

from mementograph._tokens import TokenCounter
from mementograph.capabilities._compactor import CompactionPolicy, SessionCompactor
from mementograph.capabilities._layout import StubInfo
from mementograph.knowledge_graph import BlockRecord, Eviction, MementoRecord, memento_id_for
from mementograph.knowledge_graph.memory import ExtractiveCompressor, MementoEngine
from mementograph.knowledge_graph.store import recover_chain
from mementograph.knowledge_graph.store._neo4j import Neo4jStore

T = TypeVar('T')
REPO = Path(__file__).resolve().parents[2]
SESSION = 's'


class Statements:
    """Counts the driver's statements while `counting` (the script's own wrapping: the store is not changed)."""

    def __init__(self) -> None:
        self.count = 0

    @contextmanager
    def counting(self) -> Iterator[None]:
        session_run, tx_run = Session.run, TransactionBase.run

        def counted_session(session: Session, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return session_run(session, *args, **kwargs)

        def counted_tx(tx: TransactionBase, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return tx_run(tx, *args, **kwargs)

        Session.run, TransactionBase.run = counted_session, counted_tx  # type: ignore[method-assign]
        try:
            yield
        finally:
            Session.run, TransactionBase.run = session_run, tx_run  # type: ignore[method-assign]


@dataclass
class Step:
    name: str
    seconds: list[float]
    statements: int
    detail: str


def block_messages(step: int) -> list[Any]:
    """A tool call and its ~1.5 KB result: one block."""
    output = '\n'.join(f'tests/test_module_{step}.py::test_case_{i} PASSED' for i in range(30))
    return [
        ModelRequest(parts=[UserPromptPart(f'Run the tests of module {step}.')]),
        ModelResponse(parts=[ToolCallPart('bash', {'command': f'pytest tests/test_module_{step}.py'}, f'c{step}')]),
        ModelRequest(parts=[ToolReturnPart('bash', output, f'c{step}')]),
        ModelResponse(parts=[TextPart(f'Module {step}: 30 passed.')]),
    ]


def fill(store: Neo4jStore, namespace: str, count: int, per_eviction: int) -> list[MementoRecord]:
    """`count` blocks with their level-1 mementos, `per_eviction` blocks an eviction."""
    mementos: list[MementoRecord] = []
    for start in range(0, count, per_eviction):
        blocks, own = [], []
        for step in range(start, min(count, start + per_eviction)):
            block = BlockRecord.from_messages(
                block_messages(step),
                session_id=SESSION,
                namespace=namespace,
                seq=step * 4,
                tokens=400,
                text=f'module {step} tests',
            )
            blocks.append(block)
            own.append(
                MementoRecord(
                    id=memento_id_for(namespace, SESSION, [block.id]),
                    session_id=SESSION,
                    namespace=namespace,
                    text=f'RESULT: module {step}: 30 passed.',
                    tokens=12,
                    summarizes=(block.id,),
                    compressor='extractive',
                )
            )
        store.write_eviction(
            Eviction(session_id=SESSION, namespace=namespace, blocks=tuple(blocks), mementos=tuple(own))
        )
        mementos += own
    return mementos


def fold(
    store: Neo4jStore, namespace: str, level1: list[MementoRecord], count: Statements
) -> tuple[list[str], list[int]]:
    """Merge the run of stubs as the compactor does until one is left; the merged ids and each merge's width."""
    compactor = SessionCompactor(
        store=store,
        session_id=SESSION,
        namespace=namespace,
        counter=TokenCounter(),
        engine=MementoEngine(compressor=ExtractiveCompressor()),
        policy=CompactionPolicy(high_water_tokens=10_000, low_water_tokens=5_000),
    )
    stubs = [StubInfo(m.id, m.id, i * 4, i * 4 + 3, 1, 400) for i, m in enumerate(level1)]
    merged: list[str] = []
    widths: list[int] = []
    while len(stubs) > 1:
        run = stubs[: len(stubs) // 2 + 1] if len(stubs) > 3 else stubs
        with count.counting():
            children = compactor._mementos_of(run)
            level = max(info.level for info in run) + 1
            memento = MementoRecord(
                id=memento_id_for(namespace, SESSION, [c.id for c in children]),
                session_id=SESSION,
                namespace=namespace,
                text='\n\n'.join(c.text for c in children)[:2_000],
                tokens=200,
                summarizes=tuple(c.id for c in children),
                compressor='extractive',
                level=level,
            )
            store.write_eviction(Eviction(session_id=SESSION, namespace=namespace, mementos=(memento,)))
        info = StubInfo(memento.id, memento.id, run[0].first_message, run[-1].last_message, level, 400 * len(run))
        stubs = [info, *stubs[len(run) :]]
        merged.append(memento.id)
        widths.append(len(run))
    return merged, widths


def timed(count: Statements, action: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[float, int, T]:
    before = count.count
    with count.counting():
        start = time.perf_counter()
        out = action(*args, **kwargs)
        seconds = time.perf_counter() - start
    return seconds, count.count - before, out


def run(store: Neo4jStore, args: argparse.Namespace) -> list[Step]:
    count = Statements()
    steps: dict[str, Step] = {}

    def record(name: str, seconds: float, statements: int, detail: str) -> None:
        step = steps.setdefault(name, Step(name, [], statements, detail))
        step.seconds.append(seconds)
        if step.statements != statements:
            raise SystemExit(f'{name}: {statements} statements in one round, {step.statements} in another')

    for _ in range(args.rounds):
        namespace = f'bench-chains-{uuid.uuid4().hex[:8]}'
        try:
            level1 = fill(store, namespace, args.mementos, args.per_eviction)
            before = count.count
            start = time.perf_counter()
            merged, widths = fold(store, namespace, level1, count)
            record(
                f'fold {args.mementos} mementos',
                time.perf_counter() - start,
                count.count - before,
                f'{len(widths)} merges of {"+".join(map(str, widths))} children',
            )
            seconds, statements, chain = timed(count, recover_chain, store, merged[-1], namespace=namespace)
            assert len(chain) == args.mementos
            record('recover_chain(top)', seconds, statements, f'{len(chain)} blocks, {len(merged)} levels of merges')
            seconds, statements, chain = timed(count, recover_chain, store, merged[0], namespace=namespace)
            assert len(chain) == widths[0]
            record('recover_chain(first merge)', seconds, statements, f'{len(chain)} blocks, one level')
        finally:
            with store._driver.session(database=store._database) as session:
                session.run('MATCH (n {namespace: $ns}) DETACH DELETE n', ns=namespace).consume()
    return list(steps.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--uri', default=os.environ.get('NEO4J_URI'), help='default: $NEO4J_URI')
    parser.add_argument('--mementos', type=int, default=200)
    parser.add_argument('--per-eviction', type=int, default=4, help='blocks an eviction writes when filling')
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--output', type=Path, default=REPO / 'bench-results')
    args = parser.parse_args(argv)
    if not args.uri:
        parser.error('no server: set NEO4J_URI (eval "$(scripts/neo4j-server start)") or pass --uri')
    store = Neo4jStore.from_uri(args.uri)
    try:
        server = store._driver.get_server_info().agent
        steps = run(store, args)
    finally:
        store.close()
    result = {
        'bench': 'neo4j_chains',
        'when': datetime.now(UTC).isoformat(timespec='seconds'),
        'server': server,
        'machine': f'{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}',
        'command': ' '.join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        'steps': [
            {
                'step': s.name,
                'statements': s.statements,
                'median_ms': round(statistics.median(s.seconds) * 1000, 1),
                'min_ms': round(min(s.seconds) * 1000, 1),
                'detail': s.detail,
            }
            for s in steps
        ],
    }
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / 'neo4j_chains.json').write_text(json.dumps(result, indent=2) + '\n')
    print(f'{server}, {args.rounds} rounds')
    for s in result['steps']:
        print(
            f'{s["step"]:<28} {s["statements"]:>6} statements  {s["median_ms"]:>9} ms (min {s["min_ms"]})  {s["detail"]}'
        )
    return 0


if __name__ == '__main__':
    sys.exit(main())
