#!/usr/bin/env python
"""Benchmark the memento engine on the shared agent trajectories.

Every trajectory is loaded as pydantic-ai messages (bash actions as real tool pairs), segmented with
`segment_blocks`, and every complete block goes through `MementoEngine` (extractive compressor + rubric judge by
default). Reported, over all blocks:

- acceptance: share of blocks verified after 0, 1 and 2 refinements (target: >= 95% within 2);
- fact retention: critical facts kept / critical facts in the blocks (target: >= 98%), and the per-block mean;
- memento/block token ratio: median and quartiles (target: median <= 0.20);
- compress+judge time per block: median ms, and as a multiple of tokenizing the block once (the baseline,
  measured in the same run, because absolute times are noisy on shared machines);
- file reads: of the blocks whose long outputs show definitions (`def`, `class`, ...: a file read, a grep of
  code), the share whose memento names at least one, and the share of those names it names;
- the worst blocks (unverified, lowest retention, highest ratio) and why they fall short.

Usage:
    .venv/bin/python scripts/bench/mementos.py [--data DIR] [--min-tokens 200] [--max-tokens 4000]
        [--target-ratio 0.15] [--worst 8] [--out bench-results/mementos.json]

`--data` defaults to `$MEMENTOGRAPH_DATA_DIR` or `../shared/data` next to the repository; trajectories are read
from its `agent_trajectories/` folder. tiktoken's offline cache is taken from `<data>/tiktoken/cache` when
`TIKTOKEN_CACHE_DIR` is not set.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mementograph._tokens import TokenCounter

REPO = Path(__file__).resolve().parents[2]


@dataclass
class BlockRow:
    trajectory: str
    start: int
    end: int
    block_tokens: int
    memento_tokens: int
    ratio: float
    verified: bool
    iterations: int
    scores: list[float | None]
    facts_total: int
    facts_kept: int
    retention: float
    ms: float
    baseline_ms: float
    feedback: str
    rejects_dropped_exit_code: bool | None
    rejects_invented_path: bool
    truncation_passes: bool
    truncation_retention: float
    definitions_shown: int
    """Names of the definitions the block's long outputs show (`_outline`)."""
    definitions_named: int
    """Of those, named in the memento (as a word)."""


def _corruptions(memento: str, block_text: str, tokens: int, counter: TokenCounter) -> tuple[str | None, str, str]:
    """Three mementos the judge must not pass: the memento with its first exit code removed (None when it has
    none), the memento plus an invented path, and the naive baseline -- the block's head cut to the memento's size."""
    match = re.search(r' -> exit -?\d+', memento)
    dropped = None if match is None else memento[: match.start()] + memento[match.end() :]
    invented = memento + '\nFILES: src/zz_invented_module/helpers_v2.py'
    words = block_text.split(' ')
    low, high = 0, len(words)
    while low < high:  # the longest head of the block within the memento's token count
        middle = (low + high + 1) // 2
        if counter.count_text(' '.join(words[:middle])) <= tokens:
            low = middle
        else:
            high = middle - 1
    return dropped, invented, 'RESULT: ' + ' '.join(words[:low])


def _data_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg).resolve()
    env = os.environ.get('MEMENTOGRAPH_DATA_DIR')
    return Path(env).resolve() if env else (REPO.parent / 'shared' / 'data').resolve()


def _quantiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        value = values[0] if values else 0.0
        return value, value, value
    q1, q2, q3 = statistics.quantiles(values, n=4)
    return q1, q2, q3


async def _run(args: argparse.Namespace, data: Path) -> dict[str, object]:
    from mementograph._tokens import TokenCounter
    from mementograph._transcripts import load_transcript
    from mementograph.knowledge_graph.memory import (
        BlockInput,
        ExtractiveCompressor,
        MementoEngine,
        RubricJudge,
        definitions_shown,
        fact_retention,
        segment_blocks,
    )

    counter = TokenCounter()
    engine = MementoEngine(
        compressor=ExtractiveCompressor(target_ratio=args.target_ratio, counter=counter),
        judge=RubricJudge(counter=counter),
        max_refinements=2,
        counter=counter,
    )
    files = sorted((data / 'agent_trajectories').glob('*.traj.json'))
    if not files:
        raise SystemExit(f'no *.traj.json under {data / "agent_trajectories"} (set --data or MEMENTOGRAPH_DATA_DIR)')
    rows: list[BlockRow] = []
    incomplete = 0
    segment_ms: list[float] = []
    for file in files:
        messages = load_transcript(file)
        started = time.perf_counter()
        segments = segment_blocks(messages, counter, min_tokens=args.min_tokens, max_tokens=args.max_tokens)
        segment_ms.append((time.perf_counter() - started) * 1000)
        for segment in segments:
            if not segment.complete:
                incomplete += 1
                continue
            block = BlockInput.from_messages(messages[segment.start : segment.end], counter)
            started = time.perf_counter()
            counter.count_text(block.text)  # baseline: tokenizing the block once
            baseline = time.perf_counter() - started
            started = time.perf_counter()
            result = await engine.make_memento(block)
            elapsed = time.perf_counter() - started
            dropped, invented, truncated = _corruptions(result.text, block.text, result.tokens, counter)
            judge = engine.judge
            assert isinstance(judge, RubricJudge)
            truncated_verdict = judge.check(block, truncated)
            shown = {
                definition.name
                for definition in definitions_shown(block.text, limit=len(block.text))
                if definition.name
            }
            memento_words = set(re.findall(r'\w+', result.text))
            rows.append(
                BlockRow(
                    trajectory=file.name.removesuffix('.traj.json'),
                    start=segment.start,
                    end=segment.end,
                    block_tokens=block.tokens,
                    memento_tokens=result.tokens,
                    ratio=result.tokens / block.tokens,
                    verified=result.verified,
                    iterations=result.iterations,
                    scores=list(result.scores),
                    facts_total=result.facts_total,
                    facts_kept=result.facts_kept,
                    retention=result.fact_retention,
                    ms=elapsed * 1000,
                    baseline_ms=baseline * 1000,
                    feedback=result.feedback,
                    rejects_dropped_exit_code=None if dropped is None else not judge.check(block, dropped).passed,
                    rejects_invented_path=not judge.check(block, invented).passed,
                    truncation_passes=truncated_verdict.passed,
                    truncation_retention=fact_retention(block.text, truncated),
                    definitions_shown=len(shown),
                    definitions_named=len(shown & memento_words),
                )
            )
    total = len(rows)
    acceptance = {str(k): sum(1 for row in rows if row.verified and row.iterations <= k) / total for k in (0, 1, 2)}
    facts_total = sum(row.facts_total for row in rows)
    facts_kept = sum(row.facts_kept for row in rows)
    ratios = [row.ratio for row in rows]
    times = [row.ms for row in rows]
    slowdowns = [row.ms / row.baseline_ms for row in rows if row.baseline_ms > 0]
    q1, median_ratio, q3 = _quantiles(ratios)
    with_exit = [row for row in rows if row.rejects_dropped_exit_code is not None]
    reads = [row for row in rows if row.definitions_shown]
    summary: dict[str, object] = {
        'trajectories': len(files),
        'blocks': total,
        'incomplete_tail_blocks_skipped': incomplete,
        'block_tokens_median': statistics.median(row.block_tokens for row in rows),
        'acceptance_within_refinements': acceptance,
        'fact_retention': facts_kept / facts_total if facts_total else 1.0,
        'fact_retention_mean_per_block': statistics.mean(row.retention for row in rows),
        'facts_total': facts_total,
        'facts_kept': facts_kept,
        'ratio_median': median_ratio,
        'ratio_q1': q1,
        'ratio_q3': q3,
        'ratio_max': max(ratios),
        'compress_judge_ms_median': statistics.median(times),
        'compress_judge_ms_p90': statistics.quantiles(times, n=10)[-1] if len(times) > 1 else times[0],
        'compress_judge_vs_tokenize_median': statistics.median(slowdowns) if slowdowns else None,
        'segment_ms_per_trajectory_median': statistics.median(segment_ms),
        'judge_rejects_dropped_exit_code': sum(1 for row in with_exit if row.rejects_dropped_exit_code) / len(with_exit)
        if with_exit
        else None,
        'judge_rejects_invented_path': sum(1 for row in rows if row.rejects_invented_path) / total,
        'truncation_baseline_pass_rate': sum(1 for row in rows if row.truncation_passes) / total,
        'truncation_baseline_fact_retention_mean': statistics.mean(row.truncation_retention for row in rows),
        'file_read_blocks': len(reads),
        'file_reads_naming_a_definition': sum(1 for row in reads if row.definitions_named) / len(reads)
        if reads
        else None,
        'file_read_definitions_named': sum(row.definitions_named for row in reads)
        / max(1, sum(row.definitions_shown for row in reads)),
        'targets': {
            'acceptance_within_2': acceptance['2'] >= 0.95,
            'fact_retention': (facts_kept / facts_total if facts_total else 1.0) >= 0.98,
            'ratio_median': median_ratio <= 0.20,
        },
    }
    unverified = [row for row in rows if not row.verified]
    lowest_retention = sorted(rows, key=lambda row: (row.retention, -row.facts_total))[: args.worst]
    highest_ratio = sorted(rows, key=lambda row: -row.ratio)[: args.worst]
    return {
        'config': {
            'data': str(data),
            'min_tokens': args.min_tokens,
            'max_tokens': args.max_tokens,
            'target_tokens': args.max_tokens // 2,
            'target_ratio': args.target_ratio,
            'compressor': engine.compressor.name,
            'judge': 'rubric',
            'encoding': counter.encoding,
            'python': platform.python_version(),
        },
        'summary': summary,
        'worst': {
            'unverified': [asdict(row) for row in unverified[: args.worst]],
            'lowest_retention': [asdict(row) for row in lowest_retention],
            'highest_ratio': [asdict(row) for row in highest_ratio],
        },
        'blocks': [asdict(row) | {'feedback': row.feedback.splitlines()[0]} for row in rows],
    }


def _why(row: dict[str, object]) -> str:
    """One line on why a block falls short: the judge's first complaints, or what made the memento large."""
    feedback = str(row['feedback']).splitlines()
    details = [line for line in feedback[1:] if line.startswith(('- ', 'SIZE'))][:2]
    if details:
        return ' | '.join(details)[:150]
    if float(str(row['ratio'])) > 0.3:
        return f'{row["facts_total"]} critical facts in a {row["block_tokens"]}-token block; all kept (retention first)'
    return feedback[0][:150] if feedback else ''


def _print(report: dict[str, object]) -> None:
    summary = report['summary']
    assert isinstance(summary, dict)
    acceptance = summary['acceptance_within_refinements']
    assert isinstance(acceptance, dict)
    rows = [
        ('trajectories / blocks', f'{summary["trajectories"]} / {summary["blocks"]}', ''),
        ('block tokens (median)', f'{summary["block_tokens_median"]:.0f}', ''),
        ('verified, 0 refinements', f'{acceptance["0"]:.1%}', ''),
        ('verified, <= 1 refinement', f'{acceptance["1"]:.1%}', ''),
        ('verified, <= 2 refinements', f'{acceptance["2"]:.1%}', '>= 95%'),
        (
            'fact retention (all facts)',
            f'{summary["fact_retention"]:.2%} ({summary["facts_kept"]}/{summary["facts_total"]})',
            '>= 98%',
        ),
        ('fact retention (mean per block)', f'{summary["fact_retention_mean_per_block"]:.2%}', ''),
        (
            'memento/block tokens, median [q1, q3]',
            f'{summary["ratio_median"]:.3f} [{summary["ratio_q1"]:.3f}, {summary["ratio_q3"]:.3f}]',
            '<= 0.20',
        ),
        (
            'compress+judge ms/block, median (p90)',
            f'{summary["compress_judge_ms_median"]:.1f} ({summary["compress_judge_ms_p90"]:.1f})',
            '',
        ),
        ('  x tokenizing the block once (median)', f'{summary["compress_judge_vs_tokenize_median"]:.1f}x', ''),
        ('segmentation ms/trajectory (median)', f'{summary["segment_ms_per_trajectory_median"]:.1f}', ''),
        ('judge rejects: exit code dropped', f'{summary["judge_rejects_dropped_exit_code"]:.1%}', '100%'),
        ('judge rejects: invented path added', f'{summary["judge_rejects_invented_path"]:.1%}', '100%'),
        ('baseline: head truncation, same size, passes', f'{summary["truncation_baseline_pass_rate"]:.1%}', ''),
        (
            'baseline: head truncation, fact retention (mean)',
            f'{summary["truncation_baseline_fact_retention_mean"]:.1%}',
            '',
        ),
        (
            f'file reads ({summary["file_read_blocks"]} blocks): naming a definition',
            f'{summary["file_reads_naming_a_definition"] or 0:.1%}',
            '',
        ),
        ('  definitions they show, named', f'{summary["file_read_definitions_named"]:.1%}', ''),
    ]
    width = max(len(name) for name, _, _ in rows)
    value_width = max(len(value) for _, value, _ in rows)
    print(f'{"metric":<{width}}  {"value":<{value_width}}  target')
    print('-' * (width + value_width + 10))
    for name, value, target in rows:
        print(f'{name:<{width}}  {value:<{value_width}}  {target}')
    worst = report['worst']
    assert isinstance(worst, dict)
    for title, key in (
        ('unverified blocks', 'unverified'),
        ('lowest fact retention', 'lowest_retention'),
        ('highest memento/block ratio', 'highest_ratio'),
    ):
        entries = worst[key]
        assert isinstance(entries, list)
        print(f'\nworst: {title}' + ('' if entries else ': none'))
        for row in entries:
            print(
                f'  {row["trajectory"]}[{row["start"]}:{row["end"]}] {row["block_tokens"]} tok, '
                f'ratio {row["ratio"]:.2f}, retention {row["retention"]:.2f}, scores {row["scores"]}: {_why(row)}'
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument('--data', help='shared data folder (holds agent_trajectories/)')
    parser.add_argument('--min-tokens', type=int, default=200)
    parser.add_argument('--max-tokens', type=int, default=4000)
    parser.add_argument('--target-ratio', type=float, default=0.15)
    parser.add_argument('--worst', type=int, default=8)
    parser.add_argument('--out', default=str(REPO / 'bench-results' / 'mementos.json'))
    args = parser.parse_args(argv)
    data = _data_dir(args.data)
    cache = data / 'tiktoken' / 'cache'
    if 'TIKTOKEN_CACHE_DIR' not in os.environ and cache.is_dir():
        os.environ['TIKTOKEN_CACHE_DIR'] = str(cache)
    report = asyncio.run(_run(args, data))
    _print(report)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(f'\nwrote {out}')
    targets = report['summary']['targets']  # type: ignore[index]
    return 0 if all(targets.values()) else 1


if __name__ == '__main__':
    raise SystemExit(main())
