"""`plot`: the sawtooth (context tokens per request, with and without compaction) of a stored session, as PNG (or
SVG or PDF)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .._plot import latest_session, save_sawtooth, sawtooth_from_log, sparkline
from ..knowledge_graph.store import NotFoundError
from ._commands import add_command
from ._common import (
    CliError,
    add_store_options,
    check_output_path,
    checked_plot_format,
    emit,
    non_empty,
    store_from,
)

__all__ = ('register',)


def _plot(args: argparse.Namespace) -> int:
    if args.budget is not None and args.budget <= 0:
        raise CliError(f'--budget must be a positive number of tokens, not {args.budget}', code=2)
    if args.out:  # refused before the store is read: the path first (a directory, the store itself), then its format
        check_output_path(args, Path(args.out), '--out')
        checked_plot_format(args.out, '--out')
    with store_from(args) as store:
        session = args.session or latest_session(store, namespace=args.namespace)
        if session is None:
            raise CliError(
                f'no session in namespace {args.namespace!r} of {store.uri} (run `mementograph demo`)', code=3
            )
        try:
            curve = sawtooth_from_log(store, session, namespace=args.namespace, budget=args.budget)
        except NotFoundError as exc:
            raise CliError(f'{exc} (see `mementograph stats`)', code=3) from exc
    if not curve.context_tokens:
        raise CliError(f'session {session!r} has no model request in its log: nothing to plot', code=3)
    out = Path(args.out) if args.out else Path(f'mementograph-{session}.png')
    check_output_path(args, out, '--out')
    save_sawtooth(curve, out)
    path = str(out.resolve())
    data = {**curve.to_json(), 'plot': path}
    text = (
        f'session {session}: {len(curve.context_tokens)} requests, peak {curve.peak:,} tokens '
        f'(without compaction {curve.peak_baseline:,}), {len(curve.compactions)} compactions\n'
        f'{sparkline(curve.context_tokens, top=curve.budget)}\n'
        f'sawtooth plot saved to {path}'
    )
    emit(args, data, text)
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `plot`."""
    plot = add_command(
        commands,
        'plot',
        description='Rebuild context tokens per model request of a stored session from its event log (with memento '
        'compaction, and what it would have been without) and save the plot as PNG, SVG or PDF. Exact: every compaction '
        'step logs the context size after it (logs of older versions: within a few tokens per stub after merges).',
    )
    add_store_options(plot)
    plot.add_argument('--session', type=non_empty, help='the session id (default: the latest session of the namespace)')
    plot.add_argument(
        '--out', metavar='PATH', help='file to save: .png, .svg or .pdf (default: ./mementograph-SESSION.png)'
    )
    plot.add_argument('--budget', type=int, metavar='N', help='draw the high-water mark at N tokens')
    plot.set_defaults(func=_plot)
