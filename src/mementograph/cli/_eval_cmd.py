"""`eval locomo` and `eval longmemeval`: retrieval recall of every method on the same data in one run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic_ai.embeddings import EmbeddingModel

from ..eval import (
    ALL_METHODS,
    EVAL_METHODS,
    EngineSpec,
    LocomoReport,
    LongMemEvalReport,
    default_workers,
    evaluate_locomo,
    evaluate_longmemeval,
    format_table,
    locomo_tables,
    longmemeval_tables,
)
from ..knowledge_graph.recall import DENSE_METHODS, Method
from ..knowledge_graph.store import check_store_uri
from ._commands import add_command
from ._common import (
    CliError,
    add_embedding_option,
    add_memento_model_options,
    checked_model_names,
    emit,
    load_embedding,
    refuse_unused_embedding,
)
from ._progress import progress_bar, wants_progress

__all__ = ('register',)


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(',') if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected comma-separated integers, got {text!r}') from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f'expected positive integers, got {text!r}')
    return values


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected a positive integer, got {text!r}') from None
    if value < 1:
        raise argparse.ArgumentTypeError(f'expected a positive integer, got {text!r}')
    return value


def _scored_any(path: Path, questions: dict[str, int], args: argparse.Namespace) -> None:
    """A run that scored no question has no figures to show: say why instead of a table of zeros.

    Exit 1, as for any file whose content cannot be used (`replay` of a transcript holding no request): the
    arguments were well formed, the data was not; 2 is for bad arguments.
    """
    if not questions.get('overall'):
        limited = f' among the first {args.limit}' if args.limit else ''
        raise CliError(f'{path}: no question to score{limited} (is it an empty benchmark file?)')


def _methods(text: str) -> tuple[Method, ...]:
    names = tuple(part.strip() for part in text.split(',') if part.strip())
    unknown = [name for name in names if name not in ALL_METHODS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f'unknown method {", ".join(unknown) or text!r}; choose from {", ".join(ALL_METHODS)}'
        )
    return names  # type: ignore[return-value]


def _path(args: argparse.Namespace) -> Path:
    path = Path(args.path)
    if not path.is_file():
        raise CliError(f'{path}: cannot read: no such file')
    return path


def _embedding(args: argparse.Namespace) -> EmbeddingModel | None:
    """The embedding model asked for, loaded before any ingest. Dense methods without one are a user error, and
    so is one named on the command line with `--methods` that use none: it would be loaded and never used (one from
    the environment is a default for the runs that use it, and is then not loaded)."""
    needing = [m for m in args.methods or () if m in DENSE_METHODS]
    if needing and not args.embedding:
        raise CliError(f'methods {", ".join(needing)} need --embedding MODEL', code=2)
    if args.methods is not None and not needing:
        refuse_unused_embedding(args, f'--methods {",".join(args.methods)}')
        return None
    return load_embedding(args.embedding)


def _progress(args: argparse.Namespace, message: str) -> None:
    if not args.json:
        print(message, file=sys.stderr, flush=True)


def _locomo(args: argparse.Namespace) -> int:
    path = _path(args)
    try:
        check_store_uri(args.store)  # before the ingest, and a bad argument as for every other command
    except ValueError as exc:
        raise CliError(f'{exc} (from --store)', code=2) from None
    embedding = _embedding(args)  # a bad argument is refused before the run is announced
    _progress(args, f'ingesting {path.name} through the memento engine ({args.workers} workers), then ranking ...')
    with progress_bar(f'LoCoMo: {path.name}', None, enabled=wants_progress(args.json)) as advance:
        report = evaluate_locomo(
            path,
            ks=args.k,
            methods=args.methods,
            store_uri=args.store,
            limit=args.limit,
            workers=args.workers,
            embedding=embedding,
            engine=_engine(args),
            progress=lambda doing: advance(0, f'LoCoMo: {path.name}: {doing}'),
        )
    _scored_any(path, report.questions, args)
    text = '\n\n'.join(format_table(table) for table in locomo_tables(report))
    text += (
        f'\n\n{report.conversations} conversations, {report.turns} turns, {report.blocks} blocks '
        f'({report.verified} verified mementos), {report.dialogue_tokens} dialogue tokens; '
        f'ingest {report.seconds_ingest:.1f} s{_embedded(report)}, retrieval {report.seconds_retrieval:.1f} s'
        f'{_written_by(report)}'
    )
    emit(args, report.to_json(), text)
    return 0


def _embedded(report: LocomoReport | LongMemEvalReport) -> str:
    if report.embedding_model is None:
        return ''
    return f', embedding ({report.embedding_model}) {report.seconds_embed:.1f} s'


def _longmemeval(args: argparse.Namespace) -> int:
    path = _path(args)
    scope = 'per question and pooled' if args.pooled else 'per question'
    embedding = _embedding(args)
    _progress(args, f'ingesting {path.name} ({args.workers} workers), then ranking {scope} ...')
    with progress_bar(f'LongMemEval: {path.name}', None, enabled=wants_progress(args.json)) as advance:
        report = evaluate_longmemeval(
            path,
            pooled=args.pooled,
            ks=args.k,
            methods=args.methods,
            time_filter=not args.no_time_filter,
            limit=args.limit,
            workers=args.workers,
            embedding=embedding,
            engine=_engine(args),
            progress=lambda doing: advance(0, f'LongMemEval: {path.name}: {doing}'),
        )
    _scored_any(path, report.questions, args)
    text = '\n\n'.join(format_table(table) for table in longmemeval_tables(report))
    text += (
        f'\n\n{report.questions["overall"]} questions ({report.abstention_excluded} abstention questions excluded), '
        f'{report.sessions} sessions, {report.turns} turns, {report.blocks} blocks, {report.dialogue_tokens} tokens; '
        f'ingest {report.seconds_ingest:.1f} s{_embedded(report)}, retrieval {report.seconds_retrieval:.1f} s'
        f'{_written_by(report)}'
    )
    emit(args, report.to_json(), text)
    return 0


def _engine(args: argparse.Namespace) -> EngineSpec:
    compressor, judge = checked_model_names(args)
    return EngineSpec(compressor=compressor, judge=judge)


def _written_by(report: LocomoReport | LongMemEvalReport) -> str:
    text = ''
    if report.compressor != 'extractive' or report.judge != 'rubric':
        text = f'; mementos by {report.compressor}, judged by {report.judge}: {report.usage_tokens} LLM tokens'
    if report.memento_errors:  # the blocks are archived and ranked all the same, by their own text
        first = report.memento_errors[0]
        text += f'\n{len(report.memento_errors)} blocks without a memento, the compressor failed: {first}'
    return text


def _common(parser: argparse.ArgumentParser, ks: Sequence[int]) -> None:
    parser.add_argument('path', help='the benchmark JSON file')
    parser.add_argument('--k', type=_ints, default=tuple(ks), help=f'cut-offs (default: {",".join(map(str, ks))})')
    parser.add_argument(
        '--methods',
        type=_methods,
        default=None,
        help=f'methods to compare (default: {",".join(EVAL_METHODS)}, and {",".join(DENSE_METHODS)} with --embedding)',
    )
    add_embedding_option(parser, 'adds the methods dense and hybrid (refused with --methods that use none)')
    parser.add_argument('--limit', type=_positive, help='only the first N conversations / questions (a quick look)')
    add_memento_model_options(parser, 'answer retention and recall')
    parser.add_argument(
        '--workers',
        type=_positive,
        default=default_workers(),
        help="processes for ingest (default: %(default)s; each sends a session's blocks to a model at once)",
    )
    parser.add_argument('--json', action='store_true', help='print JSON instead of tables')


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `eval locomo` and `eval longmemeval`."""
    parser = add_command(commands, 'eval')
    benchmarks = parser.add_subparsers(dest='benchmark', metavar='BENCHMARK')
    benchmarks.required = True

    locomo = benchmarks.add_parser('locomo', help='dialog-turn evidence recall@k per category, answer retention')
    _common(locomo, (5, 10, 25, 50))
    locomo.add_argument('--store', default='memory://', help='where to archive (default: %(default)s)')
    locomo.set_defaults(func=_locomo)

    longmemeval = benchmarks.add_parser('longmemeval', help='session-level recall_all@k and ndcg_any@k')
    _common(longmemeval, (5, 10))
    longmemeval.add_argument(
        '--pooled', action='store_true', help='also rank against every session of the file in one store'
    )
    longmemeval.add_argument(
        '--no-time-filter',
        action='store_true',
        help='let a question see sessions dated after its day (by default memory holds only the past)',
    )
    longmemeval.set_defaults(func=_longmemeval)
