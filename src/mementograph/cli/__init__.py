"""The `mementograph` command."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Final

from .._tokens import TokenizerUnavailableError
from ..knowledge_graph.store import NotFoundError, StoreError
from ._common import CliError

__all__ = ('build_parser', 'main')


_COMMANDS: Final = (
    ('._demo', ('demo',)),
    ('._store_commands', ('stats', 'recover', 'transcript', 'export')),
    ('._replay_cmd', ('replay',)),
    ('._query', ('query',)),
    ('._recall_cmd', ('recall', 'embed', 'pages')),
    ('._reindex_cmd', ('reindex',)),
    ('._eval_cmd', ('eval',)),
    ('._mcp_cmd', ('mcp',)),
    ('._plot_cmd', ('plot',)),
    ('._verify_cmd', ('verify', 'forget')),
)
"""Each module that registers subcommands, with the names it registers, in the order `--help` lists them."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: every subcommand, or only those of the module that defines `command`.

    A command imports only its own module: `demo`, `replay` and `eval` load pydantic-ai's agents (most of a second),
    which `stats`, `query` or `recall` never need. An unknown `command` gets the full parser, so the error lists
    every choice.
    """
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog='mementograph',
        description='Agent memory that forgets nothing: verified mementos in context, every evicted block '
        'recoverable byte for byte from a knowledge graph.',
    )
    parser.add_argument('--version', action='version', version=f'mementograph {__version__}')
    commands = parser.add_subparsers(dest='command', metavar='COMMAND')
    commands.required = True
    owners = [module for module, names in _COMMANDS if command in names] or [module for module, _ in _COMMANDS]
    for module in owners:
        importlib.import_module(module, __name__).register(commands)
    for subparser in (parser, *commands.choices.values()):
        subparser.allow_abbrev = False  # `export --json` must not silently mean `--jsonl`
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names: its first word that is not an option (the top level takes no option values)."""
    return next((word for word in argv if not word.startswith('-')), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; user errors print one line and return a non-zero exit code."""
    # The first-run banner of pydantic-ai would interleave with our output (replay, demo progress, JSON on stdout);
    # its documented off switch is this variable, which also reaches the processes `replay` and `eval` start.
    os.environ.setdefault('PYDANTIC_AI_NO_BANNER', '1')
    # The Neo4j driver logs a failed connection at WARNING before raising; with no handler configured Python would
    # print that line beside ours, which already says what failed.
    logging.getLogger('neo4j').addHandler(logging.NullHandler())
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(_command_of(argv)).parse_args(argv)
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
