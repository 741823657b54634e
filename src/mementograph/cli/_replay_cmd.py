"""`replay`: run recorded transcripts through a real Agent with and without `MementoCompaction` and report."""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import shlex
import sys
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .._replay import (
    DEFAULT_BUDGET,
    DEFAULT_REPLAY_NAMESPACE,
    ReplayReport,
    replay_report,
    session_base,
    summarize_reports,
)
from .._tokens import TokenCounter
from .._transcripts import TranscriptError, load_transcript
from ..knowledge_graph.memory import CombinedJudge, Judge, LLMCompressor, LLMJudge
from ..knowledge_graph.store import GraphStore, open_store
from ._commands import add_command
from ._common import CliError, add_memento_model_options, check_entity_model_setting, checked_model_names, emit
from ._interrupt import run_cancellable
from ._progress import progress_bar, wants_progress

__all__ = ('register',)

_DESCRIPTION = """\
Replay recorded transcripts -- OpenAI-chat JSON lists, mini-swe-agent .traj.json and pydantic-ai messages JSON --
through a real pydantic-ai Agent whose FunctionModel answers with the recorded assistant turns and whose tools
return the recorded observations, once without any capability (the baseline) and once with MementoCompaction at
the budget; then recover every evicted block and compare it byte for byte with the session log and the run.

Fields (per file, and under "total" with --json):
  peak_tokens_baseline, peak_tokens  largest request without / with compaction (tiktoken o200k_base)
  reduction                          1 - peak_tokens / peak_tokens_baseline
  blocks_evicted                     blocks replaced by mementos
  blocks_recovered_exact             evicted blocks recovered equal to the session log and to the run history
  fact_retention                     mean over evicted blocks of the critical facts kept by their memento
  facts_in_context                   share of the transcript's critical facts in the last request the model saw
  facts_available                    share in that request or in a block that recovered exactly
  memento_acceptance                 share of mementos the judge verified
  cache_prefix_stability             share of consecutive requests sent the same instructions and, unchanged,
                                     the earlier messages (a provider's cached prompt prefix survives)
  instruction_breaks                 consecutive requests whose messages were unchanged but instructions not
                                     (a prefix break the instructions alone caused; counted in the stability)
  llm_tokens                         tokens --compressor / --judge models spent on the mementos (0 without)
Under "total": peaks are the largest, reduction is the mean over files, counts are summed, shares are pooled.
A replay is reproducible: the same files and code give the same output but "seconds" (wall-clock time), the
replayed messages carrying the transcript's recorded times rather than the replay's, and each file on a memory://
store of its own. (Into a --store, a file's figures may move with what the store holds: its sessions share their
entities, which name the topics of pages, and a fresh session id goes into the block ids the context shows.)

The store defaults to memory:// (nothing is written anywhere); MEMENTOGRAPH_STORE is deliberately ignored so a
measurement never writes into your agents' store by accident. With --store, each file gets a fresh session
(its file stem, or stem.2, stem.3, ... when taken) in the namespace given by --namespace.

Exit status: 0 after a measurement (problems are listed in the output), 1 for an unreadable or malformed file
(named with its position), 2 for bad arguments, 4 with --check when any archived block did not recover exactly.
"""


def _load_all(paths: list[str]) -> None:
    """Fail before any replay when a file is missing or malformed (one line, file and position)."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            raise CliError(f'{path}: is a directory; pass transcript files (e.g. {path}/*.traj.json)')
        load_transcript(path)


def _fmt_share(value: float, *, of: int = 1) -> str:
    """A share as a percentage; `-` when it is a share of nothing (`of` 0), which would otherwise read 100%."""
    return f'{value * 100:5.1f}%' if of else '-'


def _text(reports: list[ReplayReport], total: dict[str, Any], store_uri: str, namespace: str) -> str:
    header = (
        f'{"file":<34} {"peak base":>9} {"peak":>6} {"cut":>6} {"evicted":>7} {"exact":>5} {"retain":>6} '
        f'{"in ctx":>6} {"avail":>6} {"accept":>6} {"stable":>6}'
    )
    lines = [header, '-' * len(header)]
    for r in reports:
        name = Path(r.source).name
        name = name if len(name) <= 34 else name[:33] + '~'
        lines.append(
            f'{name:<34} {r.peak_tokens_baseline:>9} {r.peak_tokens:>6} {_fmt_share(r.reduction):>6} '
            f'{r.blocks_evicted:>7} {r.blocks_recovered_exact:>5} {_fmt_share(r.fact_retention, of=r.blocks_evicted):>6} '
            f'{_fmt_share(r.facts_in_context):>6} {_fmt_share(r.facts_available):>6} '
            f'{_fmt_share(r.memento_acceptance, of=r.blocks_evicted):>6} {r.cache_prefix_stability:>6.3f}'
        )
    if len(reports) > 1:
        lines.append('-' * len(header))
        lines.append(
            f'{"total (" + str(total["files"]) + " files)":<34} {total["peak_tokens_baseline"]:>9} '
            f'{total["peak_tokens"]:>6} {_fmt_share(total["reduction"]):>6} {total["blocks_evicted"]:>7} '
            f'{total["blocks_recovered_exact"]:>5} {_fmt_share(total["fact_retention"], of=total["blocks_evicted"]):>6} '
            f'{_fmt_share(total["facts_in_context"]):>6} {_fmt_share(total["facts_available"]):>6} '
            f'{_fmt_share(total["memento_acceptance"], of=total["blocks_evicted"]):>6} {total["cache_prefix_stability"]:>6.3f}'
        )
    lines.append(
        f'budget {total["budget"]} tokens, store {store_uri}, namespace {namespace!r}'
        + (f', {total["llm_tokens"]} LLM tokens spent on mementos' if total['llm_tokens'] else '')
    )
    if not store_uri.startswith('memory://'):  # the other commands read the default namespace unless told
        lines.append(
            f'read the sessions with: mementograph stats --store {shlex.quote(store_uri)} --namespace {shlex.quote(namespace)}'
        )
    problems = [(r.source, p) for r in reports for p in r.problems]
    for source, problem in problems[:20]:
        lines.append(f'problem: {source}: {problem}')
    if len(problems) > 20:
        lines.append(f'... and {len(problems) - 20} more problems (see --json)')
    return '\n'.join(lines)


@dataclass(frozen=True)
class _Job:
    """What a replay needs, by value, so a worker process can rebuild it."""

    store_uri: str
    budget: int
    namespace: str
    models: tuple[str | None, str | None]
    settings: Mapping[str, float] = field(default_factory=dict[str, float])

    def compressor(self) -> LLMCompressor | None:
        return None if self.models[0] is None else LLMCompressor(self.models[0])

    def judge(self) -> Judge | Literal['default']:
        return 'default' if self.models[1] is None else CombinedJudge(llm=LLMJudge(self.models[1]))

    async def run(self, path: str, store: GraphStore, counter: TokenCounter) -> ReplayReport:
        return await replay_report(
            path, store=store, budget=self.budget, namespace=self.namespace, counter=counter,
            compressor=self.compressor(), judge=self.judge(), settings=self.settings,
        )  # fmt: skip


def _replay_in_worker(job: _Job, path: str) -> ReplayReport:
    """One file in a worker process, on its own connection to the store (its own store, for `memory://`)."""
    store = open_store(job.store_uri)
    try:
        return asyncio.run(job.run(path, store, TokenCounter()))
    finally:
        store.close()


async def _replay_here(job: _Job, path: str, store: GraphStore, counter: TokenCounter) -> ReplayReport:
    """One file in this process: on `store`, or on a fresh store of its own for `memory://`, as in a worker. A
    store's sessions share its entities (and so the topics of their pages), so a file's figures would otherwise
    depend on the files replayed before it, and differ between `--jobs 1` and more."""
    if not store.uri.startswith('memory://'):
        return await job.run(path, store, counter)
    own = open_store(job.store_uri)
    try:
        return await job.run(path, own, counter)
    finally:
        own.close()


_DEFAULT_MAX_JOBS = 4
"""Worker processes by default, at most: each holds its own agent, store connection and caches (~250 MB)."""


def _jobs(args: argparse.Namespace) -> int:
    """Worker processes: one per core (at most 4) by default, one when two files could take one session id."""
    wanted = args.jobs or min(os.cpu_count() or 1, _DEFAULT_MAX_JOBS)
    stems = [session_base(path) for path in args.paths]
    if len(set(stems)) < len(stems):  # two files would race for the same fresh session id
        return 1
    return max(1, min(wanted, len(args.paths)))


def _replay_all(args: argparse.Namespace, store: GraphStore, job: _Job) -> list[ReplayReport]:
    reports: dict[int, ReplayReport] = {}
    total = len(args.paths)
    workers = _jobs(args)

    def done(number: int, report: ReplayReport) -> None:
        reports[number] = report
        if total > 1 or args.verbose:
            print(
                f'[{len(reports)}/{total}] {report.source}: peak {report.peak_tokens_baseline} -> '
                f'{report.peak_tokens} ({report.reduction * 100:.0f}% cut), {report.blocks_evicted} blocks '
                f'evicted, {report.blocks_recovered_exact} exact, {report.seconds:.1f}s',
                file=sys.stderr,
                flush=True,
            )

    with progress_bar('replaying', total, enabled=wants_progress(args.json)) as advance:
        if workers == 1:
            counter = TokenCounter()
            for number, path in enumerate(args.paths):
                advance(0, f'replaying {Path(path).name}')
                done(number, run_cancellable(_replay_here(job, path, store, counter)))
                advance()
        else:
            # spawned, not forked: a fork copies whatever threads and locks this process holds
            context = multiprocessing.get_context('spawn')
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
            try:
                futures = {pool.submit(_replay_in_worker, job, path): number for number, path in enumerate(args.paths)}
                advance(0, f'replaying {total} files in {workers} processes')
                for future in as_completed(futures):
                    done(futures[future], future.result())
                    advance()
            except BaseException:  # Ctrl-C (the workers get it too) or a failed file: the files not begun are dropped
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            pool.shutdown()
    return [reports[number] for number in range(total)]


def _replay(args: argparse.Namespace) -> int:
    if args.budget <= 0:
        raise CliError(f'--budget must be a positive number of tokens, not {args.budget}', code=2)
    if args.low_water is not None and not 0 <= args.low_water < 1:
        raise CliError(f'--low-water must be in [0, 1), not {args.low_water}', code=2)
    for flag, share in (
        ('--memento-share', args.memento_share),
        ('--conversation-memento-share', args.conversation_memento_share),
    ):
        if share is not None and not 0 < share <= 1:
            raise CliError(f'{flag} must be in (0, 1], not {share}', code=2)
    try:
        _load_all(args.paths)
    except TranscriptError as exc:
        raise CliError(str(exc)) from exc
    if args.jobs is not None and args.jobs < 1:
        raise CliError(f'--jobs must be at least 1, not {args.jobs}', code=2)
    models = checked_model_names(args)
    check_entity_model_setting()  # the capability reads it in each worker: refused once, here
    settings = {
        name: value
        for name, value in (
            ('low_water', args.low_water),
            ('memento_share', args.memento_share),
            ('conversation_memento_share', args.conversation_memento_share),
        )
        if value is not None
    }
    store = open_store(args.store or 'memory://')  # created here, before any worker opens it
    try:
        job = _Job(store.uri, args.budget, args.namespace, models, settings)
        reports = _replay_all(args, store, job)
        uri = store.uri
    finally:
        store.close()
    total = summarize_reports(reports)
    data = {
        'budget': args.budget,
        'store': uri,
        'namespace': args.namespace,
        'files': [r.to_dict() for r in reports],
        'total': total,
    }
    emit(args, data, _text(reports, total, uri, args.namespace))
    if args.check and any(r.problems for r in reports):
        print(
            f'mementograph: check failed: {total["problems"]} archive problems '
            f'({total["blocks_recovered_exact"]} of {total["blocks_evicted"]} evicted blocks recovered exactly)',
            file=sys.stderr,
        )
        return 4
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `replay`."""
    replay = add_command(
        commands,
        'replay',
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    replay.add_argument(
        'paths', nargs='+', metavar='PATH', help='transcript files (.traj.json, OpenAI chat, pydantic-ai)'
    )
    replay.add_argument(
        '--store',
        metavar='URI',
        help='archive into this store: sqlite:///path.db, memory://, neo4j://host:7687 (default: memory://, '
        'nothing written; MEMENTOGRAPH_STORE is ignored)',
    )
    replay.add_argument(
        '--budget',
        type=int,
        default=DEFAULT_BUDGET,
        metavar='N',
        help='high-water mark in tokens (default: %(default)s)',
    )
    replay.add_argument(
        '--namespace',
        default=DEFAULT_REPLAY_NAMESPACE,
        help='namespace of the replayed sessions in the store (default: %(default)s)',
    )
    replay.add_argument(
        '--low-water',
        type=float,
        metavar='F',
        help="evict down to this fraction of the budget (default: the capability's, 0.5)",
    )
    replay.add_argument(
        '--memento-share',
        type=float,
        metavar='F',
        help="mementos may take this share of the budget before the oldest are merged (default: the capability's, "
        '0.3; more keeps more facts in context and evicts more often)',
    )
    replay.add_argument(
        '--conversation-memento-share',
        type=float,
        metavar='F',
        help="the same share when a conversation's mementos (speakers' lines) hold most of the mementos' tokens "
        "(default: the capability's, 0.6)",
    )
    add_memento_model_options(replay, 'fact retention and the facts in context')
    replay.add_argument('--json', action='store_true', help='print JSON: "files" (one object per file) and "total"')
    replay.add_argument(
        '--check',
        action='store_true',
        help='exit 4 unless every archived block recovered exactly and the session log equals the run history',
    )
    replay.add_argument(
        '--jobs',
        type=int,
        metavar='N',
        help='replay N files at a time, each in a process of its own (default: one per CPU core, at most 4; 1 '
        'replays them in turn in this process)',
    )
    replay.add_argument('-v', '--verbose', action='store_true', help='progress on stderr even for one file')
    replay.set_defaults(func=_replay)
