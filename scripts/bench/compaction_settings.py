"""Compaction settings against each other: facts in the last context and cache-prefix stability per setting.

Usage:
    TIKTOKEN_CACHE_DIR=... .venv/bin/python scripts/bench/compaction_settings.py \
        [--budget 8000] [--data DIR] SETTINGS [SETTINGS ...]

Each SETTINGS is a JSON object of `MementoCompaction` keyword arguments (`'{}'` is the defaults), e.g.
`'{"memento_share": 0.5}'` or `'{"memento_share": 0.45, "low_water": 0.45}'` (one file at a time:
`mementograph replay PATH --memento-share 0.5 --low-water 0.45`). Every shared trajectory is
replayed through a real `Agent` (`replay_report`, as `mementograph replay` does) on `memory://`, once per setting,
and the pooled totals are printed as a table and written to bench-results/compaction_settings.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from mementograph import open_store
from mementograph._replay import replay_report, summarize_reports

REPO = Path(__file__).resolve().parents[2]
FIELDS = ('facts_in_context', 'facts_available', 'cache_prefix_stability', 'peak_tokens', 'within_budget')


async def measure(files: list[Path], settings: dict[str, Any], budget: int) -> dict[str, Any]:
    reports = [
        await replay_report(path, store=open_store('memory://'), budget=budget, settings=settings) for path in files
    ]
    total = summarize_reports(reports)
    return {'settings': settings, 'budget': budget, **{name: total[name] for name in FIELDS}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('settings', nargs='+', type=json.loads, help='JSON objects of MementoCompaction arguments')
    parser.add_argument('--budget', type=int, default=8000)
    parser.add_argument('--data', type=Path, default=REPO.parent / 'shared' / 'data')
    args = parser.parse_args()
    files = sorted((args.data / 'agent_trajectories').glob('*.traj.json'))
    if not files:
        parser.error(f'no *.traj.json under {args.data / "agent_trajectories"}')
    rows = [asyncio.run(measure(files, settings, args.budget)) for settings in args.settings]
    print(f'| settings ({len(files)} trajectories, mark {args.budget}) | ' + ' | '.join(FIELDS) + ' |')
    print('|---' * (len(FIELDS) + 1) + '|')
    for row in rows:
        values = [f'{row[name]:.4f}' if isinstance(row[name], float) else str(row[name]) for name in FIELDS]
        print(f'| {json.dumps(row["settings"])} | ' + ' | '.join(values) + ' |')
    out = REPO / 'bench-results' / 'compaction_settings.json'
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))


if __name__ == '__main__':
    main()
