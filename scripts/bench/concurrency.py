"""Concurrency benchmark: the issue's 50 sessions x 200 requests at once, on one SQLite file and on Neo4j.

Usage:
    TIKTOKEN_CACHE_DIR=... .venv/bin/python scripts/bench/concurrency.py [--sessions 50] [--requests 200]
        [--runs 4] [--modes sqlite-tasks,sqlite-processes,neo4j-threads] [--profile]

The workload and the checks are the ones of tests/reliability/test_concurrency.py, at full size: each session a
real `Agent` with `MementoCompaction` at a 2,000-token budget, a `FunctionModel` calling tools (files, tests,
`recall`, `recover_block` of its own and of other sessions' blocks), `--runs` runs per session continued with
`message_history`. Modes: `sqlite-tasks` (asyncio tasks sharing one Agent, one store), `sqlite-processes` (4
processes on one SQLite file), `sqlite-threads` and `neo4j-threads` (10 threads, each its own event loop; Neo4j from
NEO4J_URI / NEO4J_USERNAME / NEO4J_PASSWORD, in a namespace of its own, deleted afterwards). After each mode every
session is checked against the store (lost, duplicated, cross-session reads must all be 0); `refused` counts
compactions the store refused under contention (skipped with a warning and retried at a later request).

`--profile` runs `sqlite-tasks` under cProfile and prints where the CPU goes. Writes a table to stdout and JSON to
bench-results/concurrency.json.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
import uuid
import warnings
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # for `tests.reliability`

from tests.reliability.test_concurrency import (  # noqa: E402
    Figures,
    Workload,
    _delete_namespace,
    _sids,
    check,
    run_processes,
    run_tasks,
    run_threads,
)

from mementograph import MementoWarning, open_store  # noqa: E402

MODES = ('sqlite-tasks', 'sqlite-processes', 'sqlite-threads', 'neo4j-threads')


def _area(filename: str) -> str:
    if 'site-packages/' in filename:
        return filename.split('site-packages/')[1].split('/')[0]
    if 'src/mementograph/' in filename:
        return 'mementograph/' + '/'.join(filename.split('src/mementograph/')[1].split('/')[:2])
    return 'python'


def profile_summary(profile: cProfile.Profile, top: int = 12) -> dict[str, Any]:
    """Own CPU time per area (package / mementograph module) and the mementograph functions that cost most."""
    stats = pstats.Stats(profile)
    areas: Counter[str] = Counter()
    functions: list[tuple[float, str]] = []
    for (filename, line, name), (_, _, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        areas[_area(filename)] += own
        if 'src/mementograph/' in filename:
            functions.append((cumulative, f'{filename.split("src/")[1]}:{line} {name}'))
    total = sum(areas.values()) or 1.0
    return {
        'areas': [{'area': a, 'seconds': round(s, 2), 'share': round(s / total, 3)} for a, s in areas.most_common(top)],
        'mementograph_cumulative': [{'function': f, 'seconds': round(s, 2)} for s, f in sorted(functions)[::-1][:top]],
    }


def run_mode(mode: str, workload: Workload, workdir: Path, *, profile: bool) -> tuple[Figures, float, dict[str, Any]]:
    namespace = f'bench-{uuid.uuid4().hex[:10]}'
    uri = os.environ['NEO4J_URI'] if mode.startswith('neo4j') else f'sqlite://{workdir / f"{mode}.db"}'
    started, cpu = time.perf_counter(), time.process_time()
    extra: dict[str, Any] = {}
    if mode == 'sqlite-processes':
        runs = run_processes(uri, namespace, workload, 4, workdir)
        store = open_store(uri)
    else:
        store = open_store(uri)
        if mode == 'sqlite-tasks':
            profiler = cProfile.Profile() if profile else None
            if profiler is not None:
                profiler.enable()
            runs = asyncio.run(run_tasks(store, namespace, workload, _sids(workload), shared_agent=True))
            if profiler is not None:
                profiler.disable()
                extra['profile'] = profile_summary(profiler)
        else:
            runs = run_threads(store, namespace, workload, threads=10)
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu  # this process only (workers of sqlite-processes not included)
    try:
        figures = check(store, namespace, runs, seconds)
    finally:
        if mode.startswith('neo4j'):
            _delete_namespace(store, namespace)
        store.close()
    return figures, cpu_seconds, extra


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sessions', type=int, default=50)
    parser.add_argument('--requests', type=int, default=200, help='model requests per session')
    parser.add_argument('--runs', type=int, default=4, help='agent runs per session')
    parser.add_argument('--modes', default='sqlite-tasks,sqlite-processes,neo4j-threads')
    parser.add_argument('--profile', action='store_true', help='profile sqlite-tasks and print where the CPU goes')
    args = parser.parse_args()
    modes = [m for m in args.modes.split(',') if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f'unknown modes {sorted(unknown)}; choose from {", ".join(MODES)}')
    workload = Workload(sessions=args.sessions, requests=args.requests, runs=args.runs)
    warnings.simplefilter('ignore', MementoWarning)  # failures are counted from the skipped events
    results: list[dict[str, Any]] = []
    header = (
        f'{"mode":<18} {"sessions":>8} {"requests":>8} {"messages":>8} {"blocks":>6} {"parts":>6} {"writes":>7} '
        f'{"lost":>4} {"dup":>4} {"cross":>5} {"probes":>6} {"refused":>7} {"seconds":>8} {"req/s":>6} {"cpu s":>6}'
    )
    print(header)
    print('-' * len(header))
    with tempfile.TemporaryDirectory(prefix='mementograph-concurrency-') as tmp:
        for mode in modes:
            figures, cpu, extra = run_mode(mode, workload, Path(tmp), profile=args.profile)
            rate = figures.requests / figures.seconds if figures.seconds else 0.0
            print(
                f'{mode:<18} {figures.sessions:>8} {figures.requests:>8} {figures.messages:>8} {figures.blocks:>6} '
                f'{figures.parts:>6} {figures.writes:>7} {figures.lost:>4} {figures.duplicated:>4} '
                f'{figures.cross_session_reads:>5} {figures.foreign_probes + figures.recalls:>6} '
                f'{figures.store_failures:>7} '
                f'{figures.seconds:>8.1f} {rate:>6.1f} {cpu:>6.1f}',
                flush=True,
            )
            for problem in figures.problems[:10]:
                print(f'  problem: {problem}')
            results.append({'mode': mode, **asdict(figures), 'cpu_seconds': round(cpu, 1), **extra})
    for result in results:
        if 'profile' in result:
            print(f'\nwhere the CPU of {result["mode"]} goes (own time per area):')
            for row in result['profile']['areas']:
                print(f'  {row["seconds"]:>7.1f} s {row["share"] * 100:5.1f}%  {row["area"]}')
            print('mementograph functions by cumulative time:')
            for row in result['profile']['mementograph_cumulative']:
                print(f'  {row["seconds"]:>7.1f} s  {row["function"]}')
    out = REPO / 'bench-results' / 'concurrency.json'
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({'workload': asdict(workload), 'results': results}, indent=2))
    print(f'\nwrote {out}')
    return 1 if any(r['problems'] or r['lost'] or r['duplicated'] or r['cross_session_reads'] for r in results) else 0


if __name__ == '__main__':
    sys.exit(main())
