#!/usr/bin/env python
"""Compaction strategies side by side, at one budget, in one run, on the shared agent trajectories.

Every trajectory is replayed through a real pydantic-ai `Agent` (a `FunctionModel` answering with the recorded
turns, real tools returning the recorded observations; see `mementograph._replay`) once per strategy:

- `none` -- no capability (the baseline);
- `sliding` -- pydantic-ai-harness `SlidingWindowCompaction(max_tokens=B, keep_tokens=K)`;
- `clear` -- `ClearToolResults(max_tokens=B)` (harness defaults otherwise: `keep_pairs=3`);
- `tiered` -- `TieredCompaction([ClearToolResults, SlidingWindowCompaction], target_tokens=B)`;
- `memento-embedded` -- `MementoCompaction` on the embedded store (a SQLite file, WAL);
- `memento-neo4j` -- `MementoCompaction` on Neo4j when `NEO4J_URI` (+ `NEO4J_USERNAME`/`NEO4J_PASSWORD`) is set
  (`eval "$(scripts/neo4j-server start)"` starts one); skipped with a note otherwise.

Every harness strategy counts with the same tiktoken tokenizer (`TokenCounter().count_text`, o200k_base), and every
replayed reply reports usage measured in the replay (`input_tokens` = the request's tiktoken count), so the
harness's usage-anchored estimate sees the context that was actually sent. Context tokens are counted the same
way for every strategy (`TokenCounter.count_messages` of the request the model received).

Reported per strategy (files pooled unless said otherwise):

- peak and mean context tokens (mean over files), and the peak cut (mean over files of 1 - peak/peak_baseline);
- `in ctx`: share of the trajectory's critical facts (`critical_facts(render_block(transcript))`) present in the
  last request the model received;
- `avail`: share in that request or recoverable through a tool -- for MementoCompaction, in a block or stubbed part
  that `recover_block` returned byte-exact (compared with the session log and the run's own history); the harness
  strategies keep nothing recoverable inside the run (SlidingWindow needs StepPersistence + ConversationSearch,
  ClearToolResults has the model re-run the tool), so for them it equals `in ctx`;
- cache-prefix stability: share of consecutive requests whose earlier messages were sent unchanged; its upper
  bound given the strategy's floor: a strategy that compacts at budget B down to a floor F must compact at least
  (T_final - B) / (B - F) times, where T_final is the uncompacted context at the end (the measured floor is the
  median size of the requests right after a compaction); and the token-weighted cached-prefix share (tokens of
  the unchanged message prefix shared with the previous request / tokens sent);
- hook overhead: `before_model_request` time per request inside these replays (p50), and a microbenchmark at
  1,000 messages with no eviction due (a history built from the trajectories' action/observation pairs, budget far
  above it, p50 over the requests between `--micro-messages` and `--micro-messages + 2 * --micro-requests`,
  `--micro-rounds` rounds interleaved), as a ratio to `SlidingWindowCompaction` measured in the same run.

A sawtooth plot (context tokens per request: no compaction, the harness strategies, MementoCompaction) of one
trajectory is saved as PNG (needs matplotlib: the `plot` extra). Results go to `bench-results/compaction.json`.

Usage:
    .venv/bin/python scripts/bench/compaction.py [--data DIR] [--budget 8000] [--keep-tokens 2000]
        [--files N] [--micro-messages 1000] [--micro-requests 150] [--micro-rounds 3]
        [--plot-trajectory NAME] [--out-dir bench-results]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
)

REPO = Path(__file__).resolve().parents[2]
HARNESS = ('sliding', 'clear', 'tiered')
MEMENTO = ('memento-embedded', 'memento-neo4j')
STRATEGIES = ('none', *HARNESS, *MEMENTO)
LABELS = {
    'none': 'no compaction',
    'sliding': 'SlidingWindowCompaction',
    'clear': 'ClearToolResults',
    'tiered': 'TieredCompaction(Clear, Sliding)',
    'memento-embedded': 'MementoCompaction (embedded SQLite)',
    'memento-neo4j': 'MementoCompaction (Neo4j)',
}
NAMESPACE = 'bench-compaction'


def _data_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg).resolve()
    env = os.environ.get('MEMENTOGRAPH_DATA_DIR')
    return Path(env).resolve() if env else (REPO.parent / 'shared' / 'data').resolve()


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


# ------------------------------------------------------------------------------------------------ strategies


@dataclass
class Stores:
    """Where the MementoCompaction columns archive; a column with no store is skipped with `notes[name]`."""

    uris: dict[str, str] = field(default_factory=dict[str, str])
    notes: dict[str, str] = field(default_factory=dict[str, str])
    tmp: Path | None = None
    opened: dict[str, Any] = field(default_factory=dict[str, Any])

    def store(self, name: str) -> Any:
        from mementograph import open_store

        if name not in self.opened:
            self.opened[name] = open_store(self.uris[name])
        return self.opened[name]

    def close(self) -> None:
        for name, store in self.opened.items():
            if name == 'memento-neo4j':
                for session in store.list_sessions(namespace=NAMESPACE):
                    store.delete_session(session.id, namespace=NAMESPACE)
            store.close()
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)


def _resolve_stores() -> Stores:
    stores = Stores(tmp=Path(tempfile.mkdtemp(prefix='mementograph-bench-')))
    assert stores.tmp is not None
    stores.uris['memento-embedded'] = f'sqlite://{stores.tmp / "memory.db"}'
    uri = os.environ.get('NEO4J_URI')
    if not uri:
        stores.notes['memento-neo4j'] = 'skipped: NEO4J_URI is not set (eval "$(scripts/neo4j-server start)")'
        return stores
    from mementograph import open_store

    try:
        probe = open_store(uri)
    except ImportError as exc:
        stores.notes['memento-neo4j'] = f'skipped: the Neo4j store is not implemented yet ({exc})'
        return stores
    except Exception as exc:
        stores.notes['memento-neo4j'] = f'skipped: cannot open {uri}: {type(exc).__name__}: {exc}'
        return stores
    stores.uris['memento-neo4j'] = uri
    stores.opened['memento-neo4j'] = probe
    return stores


def _make(
    name: str, budget: int, keep_tokens: int, tokenizer: Callable[[str], int], stores: Stores, session: str
) -> AbstractCapability[Any] | None:
    from pydantic_ai_harness.compaction import ClearToolResults, SlidingWindowCompaction, TieredCompaction

    from mementograph import MementoCompaction

    if name == 'none':
        return None
    if name == 'sliding':
        return SlidingWindowCompaction(max_tokens=budget, keep_tokens=keep_tokens, tokenizer=tokenizer)
    if name == 'clear':
        return ClearToolResults(max_tokens=budget, tokenizer=tokenizer)
    if name == 'tiered':
        return TieredCompaction(
            tiers=[
                ClearToolResults(max_tokens=budget, tokenizer=tokenizer),
                SlidingWindowCompaction(max_tokens=budget, keep_tokens=keep_tokens, tokenizer=tokenizer),
            ],
            target_tokens=budget,
            tokenizer=tokenizer,
        )
    capability: MementoCompaction[Any] = MementoCompaction(
        stores.store(name), max_tokens=budget, session_id=session, namespace=NAMESPACE
    )
    return capability


# ------------------------------------------------------------------------------------------------ replays


@dataclass
class Row:
    """One strategy on one trajectory."""

    trajectory: str
    strategy: str
    requests: int
    peak: int
    peak_baseline: int
    mean: float
    max_message_tokens: int
    within_budget: bool
    facts: int
    facts_in_context: int
    facts_available: int
    stable: int
    transitions: int
    cached_tokens: int
    sent_tokens: int
    compactions: int
    floor: float | None
    min_compactions: float
    """Fewest compactions a policy "compact when above the budget, back down to this strategy's floor" needs
    for this trajectory's growth (simulated request by request)."""
    min_compactions_closed_form: float
    min_compactions_half_budget: float
    """The same simulation with the floor at half the budget (MementoCompaction's default low-water mark); like
    `min_compactions_zero_floor` it depends on the trajectory and the budget only, not on the strategy."""
    min_compactions_zero_floor: float
    """The same with the floor at 0: fewer compactions are impossible for any strategy that compacts only above
    the budget and rewrites the prompt prefix when it does."""
    work_facts: int
    """Critical facts that are not already in the opening request (system prompt and task), which every strategy
    keeps: the facts the agent found while working."""
    work_facts_in_context: int
    """(T_final - budget) / (budget - floor), the closed form (ignores single requests that jump far past the
    budget)."""
    hook_ms: list[float]
    hook_ms_no_compaction: list[float]
    blocks_evicted: int = 0
    blocks_exact: int = 0
    parts_stubbed: int = 0
    parts_exact: int = 0
    fact_retention: float | None = None
    memento_acceptance: float | None = None
    problems: list[str] = field(default_factory=list[str])
    tokens: list[int] = field(default_factory=list[int])


def _min_compactions(tokens: Sequence[int], budget: int, floor: float) -> int:
    """Compactions needed when the context grows as the uncompacted `tokens` do, and each compaction (due when
    the context passes `budget`) brings it back to `floor` -- a lower bound for a strategy with that floor."""
    if not tokens:
        return 0
    count = 0
    size = float(tokens[0])
    if size > budget:
        count, size = 1, floor
    for previous, current in itertools.pairwise(tokens):
        size += current - previous
        if size > budget:
            count += 1
            size = floor
    return count


def _row(
    name: str,
    strategy: str,
    budget: int,
    transcript: Sequence[ModelMessage],
    baseline: Any,
    trace: Any,
    hook_seconds: list[float],
    counter: Any,
    report: Any | None,
) -> Row:
    from mementograph._replay import facts_present, trajectory_facts
    from mementograph.knowledge_graph.memory import render_block

    facts = trajectory_facts(transcript)
    last = facts_present(facts, render_block(trace.requests[-1])) if trace.requests else [False] * len(facts)
    in_context = sum(last)
    opening = next((i for i, m in enumerate(transcript) if isinstance(m, ModelResponse)), len(transcript))
    in_opening = facts_present(facts, render_block(transcript[:opening]))
    work_facts = sum(not flag for flag in in_opening)
    work_in_context = sum(flag and not given for flag, given in zip(last, in_opening, strict=True))
    stable, transitions = trace.stable_transitions()
    cached, sent = trace.cached_prefix_tokens(counter)
    compacted = trace.compaction_requests()
    floor = statistics.median(trace.tokens[i] for i in compacted) if compacted else None
    growth = max(0, baseline.tokens[-1] - budget) if baseline.tokens else 0
    half = float(_min_compactions(baseline.tokens, budget, budget / 2))
    zero = float(_min_compactions(baseline.tokens, budget, 0))
    if strategy == 'none' or not compacted:
        min_compactions = closed_form = 0.0
    else:
        assert floor is not None
        min_compactions = float(_min_compactions(baseline.tokens, budget, floor))
        closed_form = float(transitions) if floor >= budget else min(float(transitions), growth / (budget - floor))
    hook_ms = [s * 1000 for s in hook_seconds]
    compacted_set = set(compacted)
    quiet = [ms for i, ms in enumerate(hook_ms) if i not in compacted_set and i + 1 not in compacted_set]
    max_message = max((counter.count_message(m) for m in baseline.final_history), default=0)
    row = Row(
        trajectory=name,
        strategy=strategy,
        requests=len(trace.requests),
        peak=trace.peak_tokens,
        peak_baseline=baseline.peak_tokens,
        mean=trace.mean_tokens,
        max_message_tokens=max_message,
        within_budget=trace.peak_tokens <= max(budget, max_message) * 1.1,
        facts=len(facts),
        facts_in_context=in_context,
        facts_available=in_context,
        stable=stable,
        transitions=transitions,
        cached_tokens=cached,
        sent_tokens=sent,
        compactions=len(compacted),
        floor=floor,
        min_compactions=min_compactions,
        min_compactions_closed_form=closed_form,
        min_compactions_half_budget=half,
        min_compactions_zero_floor=zero,
        work_facts=work_facts,
        work_facts_in_context=work_in_context,
        hook_ms=hook_ms,
        hook_ms_no_compaction=quiet,
        tokens=list(trace.tokens),
    )
    if report is not None:
        row = replace(
            row,
            facts_available=report.facts_available_count,
            blocks_evicted=report.blocks_evicted,
            blocks_exact=report.blocks_recovered_exact,
            parts_stubbed=report.parts_stubbed,
            parts_exact=report.parts_recovered_exact,
            fact_retention=report.fact_retention,
            memento_acceptance=report.memento_acceptance,
            problems=list(report.problems),
        )
    return row


async def _replay_file(
    path: Path, strategies: Sequence[str], args: argparse.Namespace, stores: Stores, counter: Any
) -> list[Row]:
    from mementograph._replay import replay_messages
    from mementograph._transcripts import load_transcript

    transcript = load_transcript(path)
    name = path.name.removesuffix('.json').removesuffix('.traj')
    baseline = await replay_messages(transcript, counter=counter)
    rows = [_row(name, 'none', args.budget, transcript, baseline, baseline, [], counter, None)]
    for strategy in list(strategies):
        if strategy == 'none':
            continue
        try:
            rows.append(await _replay_strategy(strategy, name, transcript, baseline, args, stores, counter))
        except Exception as exc:
            if strategy != 'memento-neo4j':
                raise
            stores.notes[strategy] = f'failed on {name}: {type(exc).__name__}: {exc}'
            print(f'{LABELS[strategy]}: {stores.notes[strategy]}', file=sys.stderr)
    return rows


async def _replay_strategy(
    strategy: str,
    name: str,
    transcript: Sequence[ModelMessage],
    baseline: Any,
    args: argparse.Namespace,
    stores: Stores,
    counter: Any,
) -> Row:
    from mementograph._replay import TimedCapability, fresh_session_id, measure_replay, replay_messages

    session = ''
    if strategy in MEMENTO:
        session = fresh_session_id(stores.store(strategy), name, namespace=NAMESPACE)
    capability = _make(strategy, args.budget, args.keep_tokens, counter.count_text, stores, session)
    assert capability is not None
    timed = TimedCapability(capability)
    trace = await replay_messages(transcript, capabilities=[timed], counter=counter, record_history=strategy in MEMENTO)
    report = None
    if strategy in MEMENTO:
        report = measure_replay(
            name,
            transcript,
            baseline,
            trace,
            store=stores.store(strategy),
            session_id=session,
            budget=args.budget,
            namespace=NAMESPACE,
            counter=counter,
        )
    return _row(name, strategy, args.budget, transcript, baseline, trace, timed.seconds, counter, report)


def _aggregate(rows: list[Row], budget: int) -> dict[str, Any]:
    files = len(rows)
    facts = sum(r.facts for r in rows)
    transitions = sum(r.transitions for r in rows)
    hook = [ms for r in rows for ms in r.hook_ms]
    quiet = [ms for r in rows for ms in r.hook_ms_no_compaction]
    floors = [r.floor for r in rows if r.floor is not None]
    retention = [r.fact_retention for r in rows if r.fact_retention is not None and r.blocks_evicted]
    return {
        'files': files,
        'peak_mean': sum(r.peak for r in rows) / files,
        'peak_max': max(r.peak for r in rows),
        'peak_cut': sum(1 - r.peak / r.peak_baseline for r in rows if r.peak_baseline) / files,
        'mean_tokens': sum(r.mean for r in rows) / files,
        'within_budget': sum(r.within_budget for r in rows),
        'over_budget_files': [
            {'trajectory': r.trajectory, 'peak': r.peak, 'max_message_tokens': r.max_message_tokens}
            for r in rows
            if not r.within_budget
        ],
        'facts_in_context': sum(r.facts_in_context for r in rows) / facts if facts else 1.0,
        'facts_in_context_file_mean': sum(r.facts_in_context / r.facts for r in rows if r.facts) / files,
        'facts_available': sum(r.facts_available for r in rows) / facts if facts else 1.0,
        'cache_prefix_stability': sum(r.stable for r in rows) / transitions if transitions else 1.0,
        'stability_bound': 1 - sum(r.min_compactions for r in rows) / transitions if transitions else 1.0,
        'stability_bound_half_budget': (
            1 - sum(r.min_compactions_half_budget for r in rows) / transitions if transitions else 1.0
        ),
        'stability_bound_zero_floor': (
            1 - sum(r.min_compactions_zero_floor for r in rows) / transitions if transitions else 1.0
        ),
        'work_facts_in_context': sum(r.work_facts_in_context for r in rows) / max(1, sum(r.work_facts for r in rows)),
        'stability_bound_closed_form': (
            1 - sum(r.min_compactions_closed_form for r in rows) / transitions if transitions else 1.0
        ),
        'compactions': sum(r.compactions for r in rows),
        'floor_median': statistics.median(floors) if floors else None,
        'cached_prefix_share': sum(r.cached_tokens for r in rows) / max(1, sum(r.sent_tokens for r in rows)),
        'hook_p50_ms': _percentile(hook, 0.5),
        'hook_p95_ms': _percentile(hook, 0.95),
        'hook_p50_ms_no_compaction': _percentile(quiet, 0.5),
        'blocks_evicted': sum(r.blocks_evicted for r in rows),
        'blocks_exact': sum(r.blocks_exact for r in rows),
        'parts_stubbed': sum(r.parts_stubbed for r in rows),
        'parts_exact': sum(r.parts_exact for r in rows),
        'fact_retention': sum(retention) / len(retention) if retention else None,
        'problems': sum(len(r.problems) for r in rows),
        'budget': budget,
    }


# ------------------------------------------------------------------------------------------------ microbench


def _long_transcript(paths: Sequence[Path], messages: int) -> list[ModelMessage]:
    """The first trajectory's opening request, then action/observation pairs of every trajectory in turn (tool
    call ids made unique), until the history holds `messages` messages."""
    from mementograph._transcripts import load_transcript

    out: list[ModelMessage] = []
    for number, path in enumerate(paths):
        transcript = load_transcript(path)
        if not out:
            out.append(transcript[0])
        for response, request in itertools.pairwise(transcript):
            if not isinstance(response, ModelResponse) or not isinstance(request, ModelRequest):
                continue
            calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
            returns = [p for p in request.parts if isinstance(p, ToolReturnPart)]
            if not calls or len(returns) != len(request.parts):
                continue
            if {c.tool_call_id for c in calls} != {r.tool_call_id for r in returns}:
                continue
            response = replace(
                response,
                parts=[
                    replace(p, tool_call_id=f'{number}_{p.tool_call_id}') if isinstance(p, ToolCallPart) else p
                    for p in response.parts
                ],
            )
            request = replace(request, parts=[replace(p, tool_call_id=f'{number}_{p.tool_call_id}') for p in returns])
            out.extend((response, request))
            if len(out) >= messages:
                return out
    return out


async def _microbench(
    paths: Sequence[Path], strategies: Sequence[str], args: argparse.Namespace, stores: Stores, counter: Any
) -> dict[str, Any]:
    from mementograph._replay import TimedCapability, replay_messages

    low, high = args.micro_messages, args.micro_messages + 2 * args.micro_requests
    transcript = _long_transcript(paths, high + 2)
    if len(transcript) < high:
        return {'skipped': f'the trajectories hold only {len(transcript)} messages of action/observation pairs'}
    trigger = 10_000_000
    micro_strategies = [s for s in strategies if s != 'none']
    samples: dict[str, list[float]] = {s: [] for s in micro_strategies}
    tokens_at_low = 0
    for round_number in range(args.micro_rounds):
        for strategy in micro_strategies:
            session = f'micro-{round_number}-{uuid.uuid4().hex[:8]}'
            capability = _make(strategy, trigger, args.keep_tokens, counter.count_text, stores, session)
            assert capability is not None
            timed = TimedCapability(capability)
            trace = await replay_messages(transcript, capabilities=[timed], counter=counter)
            if trace.compaction_requests():
                raise RuntimeError(f'{strategy} compacted in the microbenchmark; raise the trigger')
            for index, request in enumerate(trace.requests):
                if low <= len(request) < high:
                    samples[strategy].append(timed.seconds[index])
                    if not tokens_at_low:
                        tokens_at_low = trace.tokens[index]
            print(
                f'  micro round {round_number + 1}/{args.micro_rounds} {strategy}: {len(trace.requests)} requests',
                file=sys.stderr,
            )
    reference = _percentile(samples.get('sliding', []), 0.5)
    result: dict[str, Any] = {
        'messages': [low, high],
        'tokens_at_start': tokens_at_low,
        'trigger_tokens': trigger,
        'rounds': args.micro_rounds,
        'strategies': {},
    }
    for strategy, values in samples.items():
        p50 = _percentile(values, 0.5)
        result['strategies'][strategy] = {
            'samples': len(values),
            'p50_us': p50 * 1e6,
            'p95_us': _percentile(values, 0.95) * 1e6,
            'ratio_vs_sliding': p50 / reference if reference else None,
        }
    return result


# ------------------------------------------------------------------------------------------------ output


def _plot(rows: list[Row], trajectory: str, budget: int, out: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return 'matplotlib is not installed (pip install "mementograph[plot]"): no PNG'
    mine = {r.strategy: r for r in rows if r.trajectory == trajectory}
    fig, ax = plt.subplots(figsize=(11, 5.5), dpi=120)
    styles = {
        'none': ('#888888', 1.2, '-'),
        'sliding': ('#1f77b4', 1.0, '-'),
        'clear': ('#ff7f0e', 1.0, '-'),
        'tiered': ('#9467bd', 1.0, ':'),
        'memento-embedded': ('#d62728', 2.0, '-'),
        'memento-neo4j': ('#2ca02c', 1.2, '--'),
    }
    for strategy in STRATEGIES:
        row = mine.get(strategy)
        if row is None:
            continue
        color, width, style = styles[strategy]
        ax.plot(range(1, len(row.tokens) + 1), row.tokens, style, color=color, linewidth=width, label=LABELS[strategy])
    ax.axhline(budget, color='black', linewidth=0.8, linestyle='--', label=f'budget {budget:,} tokens')
    ax.set_xlabel('model request')
    ax.set_ylabel('context tokens (o200k_base)')
    ax.set_title(f'Context per request, {trajectory} (high-water {budget:,} tokens)')
    ax.grid(alpha=0.3)
    ax.legend(loc='upper left', fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return None


def _pct(value: float | None) -> str:
    return '—' if value is None else f'{value * 100:.1f}%'


def _markdown(
    summary: dict[str, dict[str, Any]], micro: dict[str, Any], notes: dict[str, str], budget: int, keep: int
) -> str:
    lines = [
        f'Budget (high-water) {budget:,} o200k tokens; harness `keep_tokens` {keep:,}; '
        f'{next(iter(summary.values()))["files"]} trajectories.',
        '',
        '| strategy | peak ctx (mean / max) | peak cut | mean ctx | within budget | facts in ctx (found while working) '
        '| facts available | cache-prefix stability (bound at its floor) | cached-prefix share | hook p50 per request '
        '| hook p50 @1k msgs (x Sliding) |',
        '|---|---|---|---|---|---|---|---|---|---|---|',
    ]
    strategies = micro.get('strategies', {})
    for strategy in STRATEGIES:
        if strategy in notes and strategy not in summary:
            lines.append(f'| {LABELS[strategy]} | {notes[strategy]} |||||||||| ')
            continue
        s = summary.get(strategy)
        if s is None:
            continue
        m = strategies.get(strategy)
        micro_text = '—' if m is None else f'{m["p50_us"]:.0f} µs ({m["ratio_vs_sliding"]:.2f}x)'
        bound = '' if strategy == 'none' else f' ({s["stability_bound"]:.3f})'
        lines.append(
            f'| {LABELS[strategy]} | {s["peak_mean"]:,.0f} / {s["peak_max"]:,} | {_pct(s["peak_cut"])} | '
            f'{s["mean_tokens"]:,.0f} | {s["within_budget"]}/{s["files"]} | {_pct(s["facts_in_context"])} '
            f'({_pct(s["work_facts_in_context"])}) | '
            f'{_pct(s["facts_available"])} | {s["cache_prefix_stability"]:.3f}{bound} | '
            f'{_pct(s["cached_prefix_share"])} | {s["hook_p50_ms"]:.2f} ms | {micro_text} |'
        )
    base = summary.get('none')
    if base is not None:
        lines += [
            '',
            f'Cache-prefix stability ceiling for any strategy that compacts only above the budget and rewrites the '
            f'prefix when it does (simulated on the uncompacted growth): {base["stability_bound_zero_floor"]:.3f} '
            f'with a floor of 0 tokens, {base["stability_bound_half_budget"]:.3f} with a floor of half the budget.',
        ]
    return '\n'.join(lines)


def _targets(summary: dict[str, dict[str, Any]], micro: dict[str, Any]) -> list[dict[str, Any]]:
    ours = summary.get('memento-embedded')
    sliding = summary.get('sliding')
    if ours is None or sliding is None:
        return []
    micro_ours = micro.get('strategies', {}).get('memento-embedded', {})
    ratio = micro_ours.get('ratio_vs_sliding')
    checks = [
        (
            'peak within 10% of the budget (unless one message alone exceeds it)',
            f'{ours["within_budget"]}/{ours["files"]} files',
            f'{ours["files"]}/{ours["files"]}',
            ours['within_budget'] == ours['files'],
        ),
        (
            "peak cut >= SlidingWindow's - 5 points",
            _pct(ours['peak_cut']),
            f'>= {_pct(sliding["peak_cut"] - 0.05)}',
            ours['peak_cut'] >= sliding['peak_cut'] - 0.05,
        ),
        (
            "critical facts in context >= 3x SlidingWindow's",
            f'{_pct(ours["facts_in_context"])} ({ours["facts_in_context"] / max(sliding["facts_in_context"], 1e-9):.2f}x); '
            f'found while working: {_pct(ours["work_facts_in_context"])} '
            f'({ours["work_facts_in_context"] / max(sliding["work_facts_in_context"], 1e-9):.2f}x)',
            f'>= {_pct(3 * sliding["facts_in_context"])}',
            ours['facts_in_context'] >= 3 * sliding['facts_in_context'],
        ),
        (
            '100% available (every evicted block recovered exactly)',
            f'{_pct(ours["facts_available"])}; {ours["blocks_exact"]}/{ours["blocks_evicted"]} blocks, '
            f'{ours["parts_exact"]}/{ours["parts_stubbed"]} parts exact',
            '100%',
            ours['facts_available'] >= 0.99995 and ours['blocks_exact'] == ours['blocks_evicted'],
        ),
        (
            'cache-prefix stability >= 0.95',
            f'{ours["cache_prefix_stability"]:.3f} (bound at its floor {ours["stability_bound"]:.3f}; '
            f'any strategy, floor 0: {ours["stability_bound_zero_floor"]:.3f})',
            '>= 0.95',
            ours['cache_prefix_stability'] >= 0.95,
        ),
        (
            'hook overhead p50, no eviction due, 1,000 messages <= 1.5x SlidingWindow',
            '—' if ratio is None else f'{ratio:.2f}x',
            '<= 1.5x',
            ratio is not None and ratio <= 1.5,
        ),
    ]
    return [{'target': t, 'measured': m, 'goal': g, 'met': ok} for t, m, g, ok in checks]


async def _main(args: argparse.Namespace) -> int:
    from mementograph import TokenCounter

    data = _data_dir(args.data)
    cache = data / 'tiktoken' / 'cache'
    if 'TIKTOKEN_CACHE_DIR' not in os.environ and cache.is_dir():
        os.environ['TIKTOKEN_CACHE_DIR'] = str(cache)
    paths = sorted((data / 'agent_trajectories').glob('*.traj.json'))
    if not paths:
        print(
            f'no trajectories under {data / "agent_trajectories"} (set --data or MEMENTOGRAPH_DATA_DIR)',
            file=sys.stderr,
        )
        return 2
    if args.files:
        paths = paths[: args.files]
    counter = TokenCounter()
    stores = _resolve_stores()
    strategies = [s for s in STRATEGIES if s not in stores.notes]
    for name, note in stores.notes.items():
        print(f'{LABELS[name]}: {note}', file=sys.stderr)
    started = time.perf_counter()
    rows: list[Row] = []
    try:
        for number, path in enumerate(paths, 1):
            t0 = time.perf_counter()
            file_rows = await _replay_file(path, strategies, args, stores, counter)
            rows.extend(file_rows)
            strategies = [s for s in strategies if s not in stores.notes]
            brief = ', '.join(f'{r.strategy} {r.peak}' for r in file_rows)
            print(
                f'[{number}/{len(paths)}] {path.name}: peak {brief} ({time.perf_counter() - t0:.1f}s)',
                file=sys.stderr,
                flush=True,
            )
        print('microbenchmark (hook overhead, no eviction due) ...', file=sys.stderr)
        micro = await _microbench(
            sorted((data / 'agent_trajectories').glob('*.traj.json')), strategies, args, stores, counter
        )
    finally:
        stores.close()

    rows = [r for r in rows if r.strategy in strategies]  # a column that failed part-way is dropped, with its note
    summary = {s: _aggregate([r for r in rows if r.strategy == s], args.budget) for s in strategies}
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plot_name = (
        args.plot_trajectory
        or max((r for r in rows if r.strategy == 'none'), key=lambda r: (r.requests, r.trajectory)).trajectory
    )
    png = out_dir / 'compaction-sawtooth.png'
    plot_note = _plot(rows, plot_name, args.budget, png)
    targets = _targets(summary, micro)
    table = _markdown(summary, micro, stores.notes, args.budget, args.keep_tokens)

    result = {
        'command': 'python scripts/bench/compaction.py ' + ' '.join(sys.argv[1:]),
        'budget': args.budget,
        'keep_tokens': args.keep_tokens,
        'encoding': counter.encoding,
        'trajectories': len(paths),
        'seconds': time.perf_counter() - started,
        'python': platform.python_version(),
        'machine': platform.machine(),
        'notes': stores.notes,
        'summary': summary,
        'targets': targets,
        'microbench': micro,
        'plot': None if plot_note else str(png),
        'plot_trajectory': plot_name,
        'rows': [
            {k: v for k, v in asdict(r).items() if k not in ('hook_ms', 'hook_ms_no_compaction', 'tokens')}
            for r in rows
        ],
        'tokens_per_request': {f'{r.trajectory}/{r.strategy}': r.tokens for r in rows if r.trajectory == plot_name},
    }
    json_path = out_dir / 'compaction.json'
    json_path.write_text(json.dumps(result, indent=2, default=str) + '\n', encoding='utf-8')

    print(table)
    print()
    for name, note in stores.notes.items():
        print(f'- {LABELS[name]}: {note}')
    if targets:
        print()
        print('| target (MementoCompaction, embedded) | measured | goal | met |')
        print('|---|---|---|---|')
        for t in targets:
            print(f'| {t["target"]} | {t["measured"]} | {t["goal"]} | {"yes" if t["met"] else "**no**"} |')
    ours = summary.get('memento-embedded')
    if ours and ours['over_budget_files']:
        print()
        print(
            'Over budget (peak > 110% of the budget, no single message above it): '
            + ', '.join(
                f'{f["trajectory"]} {f["peak"]:,} (largest message {f["max_message_tokens"]:,})'
                for f in ours['over_budget_files']
            )
        )
    if ours and ours['problems']:
        print()
        first = next(p for r in rows if r.strategy == 'memento-embedded' for p in r.problems)
        print(f'Archive problems: {ours["problems"]} (first: {first})')
    print()
    print(f'Sawtooth plot: {plot_note or png} ({plot_name}); JSON: {json_path}; {result["seconds"]:.0f}s')
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--data', help='shared data dir (default: $MEMENTOGRAPH_DATA_DIR or ../shared/data)')
    parser.add_argument('--budget', type=int, default=8_000, help='high-water mark in tokens (default: %(default)s)')
    parser.add_argument(
        '--keep-tokens', type=int, default=2_000, help='SlidingWindow keep_tokens (default: %(default)s)'
    )
    parser.add_argument('--files', type=int, default=0, help='only the first N trajectories (default: all)')
    parser.add_argument('--micro-messages', type=int, default=1_000, help='history size of the microbenchmark')
    parser.add_argument('--micro-requests', type=int, default=150, help='timed requests per round from that size')
    parser.add_argument('--micro-rounds', type=int, default=3, help='rounds, strategies interleaved')
    parser.add_argument('--plot-trajectory', help='trajectory stem to plot (default: the one with most requests)')
    parser.add_argument('--out-dir', default=str(REPO / 'bench-results'), help='where the PNG and JSON go')
    args = parser.parse_args(argv)
    return asyncio.run(_main(args))


if __name__ == '__main__':
    sys.exit(main())
