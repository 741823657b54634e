"""The `mementograph` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .._tokens import TokenizerUnavailableError
from ..knowledge_graph.store import NotFoundError, StoreError
from . import _eval_cmd, _mcp_cmd, _plot_cmd, _query, _recall_cmd, _replay_cmd, _store_commands, _verify_cmd
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
    _eval_cmd.register(commands)
    _mcp_cmd.register(commands)
    _plot_cmd.register(commands)
    _verify_cmd.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; user errors print one line and return a non-zero exit code."""
    import pydantic_ai

    # The first-run banner of pydantic-ai would interleave with our output (replay, demo progress, JSON on stdout).
    pydantic_ai.BANNER_ENABLED = False
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
    except (StoreError, TokenizerUnavailableError, ValueError, OSError) as exc:
        print(f'mementograph: error: {exc}', file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `| head`: the reader is gone, nothing to report
        sys.stderr.close()
        return 141
    except KeyboardInterrupt:
        print('mementograph: interrupted', file=sys.stderr)
        return 130
    return code


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
