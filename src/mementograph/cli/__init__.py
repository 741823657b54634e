"""The `mementograph` command."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from .._tokens import TokenizerUnavailableError
from ..knowledge_graph.store import NotFoundError, StoreError
from . import (
    _eval_cmd,
    _mcp_cmd,
    _plot_cmd,
    _query,
    _recall_cmd,
    _reindex_cmd,
    _replay_cmd,
    _store_commands,
    _verify_cmd,
)
from ._common import CliError

__all__ = ('build_parser', 'main')


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (every subcommand)."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog='mementograph',
        description='Agent memory that forgets nothing: verified mementos in context, every evicted block '
        'recoverable byte for byte from a knowledge graph.',
    )
    parser.add_argument('--version', action='version', version=f'mementograph {__version__}')
    commands = parser.add_subparsers(dest='command', metavar='COMMAND')
    commands.required = True
    from . import _demo

    _demo.register(commands)
    _store_commands.register(commands)
    _replay_cmd.register(commands)
    _query.register(commands)
    _recall_cmd.register(commands)
    _reindex_cmd.register(commands)
    _eval_cmd.register(commands)
    _mcp_cmd.register(commands)
    _plot_cmd.register(commands)
    _verify_cmd.register(commands)
    for command in (parser, *commands.choices.values()):
        command.allow_abbrev = False  # `export --json` must not silently mean `--jsonl`
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; user errors print one line and return a non-zero exit code."""
    import pydantic_ai

    # The first-run banner of pydantic-ai would interleave with our output (replay, demo progress, JSON on stdout).
    pydantic_ai.BANNER_ENABLED = False
    # The Neo4j driver logs a failed connection at WARNING before raising; with no handler configured Python would
    # print that line beside ours, which already says what failed.
    logging.getLogger('neo4j').addHandler(logging.NullHandler())
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except CliError as exc:
        print(f'mementograph: error: {exc}', file=sys.stderr)
        return exc.code
    except NotFoundError as exc:
        print(f'mementograph: not found: {exc}', file=sys.stderr)
        return 3
    except BrokenPipeError:  # e.g. `| head`: the reader is gone, nothing to report
        _quiet_stdout()
        return 141
    except (StoreError, TokenizerUnavailableError, ValueError, OSError) as exc:
        print(f'mementograph: error: {exc}', file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print('mementograph: interrupted', file=sys.stderr)
        return 130
    try:  # output still buffered meets a closed pipe here, not at interpreter exit (an unraisable error then)
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    return code


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush of what is left does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
