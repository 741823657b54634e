"""The `mementograph` command."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Sequence

from ._commands import COMMANDS
from ._interrupt import catch_interrupts, forget_unhandled_interrupt, interrupted

__all__ = ('build_parser', 'main')


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser for `command`: the subcommands of the one module that defines it, imported now.

    With no command, or one that does not exist, every subcommand is listed from `COMMANDS` without its options
    and no command's module is imported: enough for `--help` and for argparse's error, which names every choice.
    A command imports only its own module, so `stats`, `query` or `recall` never load what `demo`, `replay` and
    `eval` need (pydantic-ai's agents, most of a second).
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
    module = next((known.module for known in COMMANDS if known.name == command), None)
    if module is None:
        for known in COMMANDS:
            commands.add_parser(known.name, help=known.help)
    else:
        importlib.import_module(module, __name__).register(commands)
    for subparser in (parser, *commands.choices.values()):
        subparser.allow_abbrev = False  # `export --json` must not silently mean `--jsonl`
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names: its first word, unless that is an option (`-h stats` asks for the top-level
    help, and the top level has no option that takes a value)."""
    return argv[0] if argv and not argv[0].startswith('-') else None


def _subcommand_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            found: argparse.ArgumentParser = action.choices[command]
            return found
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; user errors print one line and return a non-zero exit code."""
    # The first-run banner of pydantic-ai would interleave with our output (replay, demo progress, JSON on stdout);
    # its documented off switch is this variable, which also reaches the processes `replay` and `eval` start.
    os.environ.setdefault('PYDANTIC_AI_NO_BANNER', '1')
    # The Neo4j driver logs a failed connection at WARNING before raising; with no handler configured Python would
    # print that line beside ours, which already says what failed.
    logging.getLogger('neo4j').addHandler(logging.NullHandler())
    argv = sys.argv[1:] if argv is None else argv
    args = argparse.Namespace()
    with catch_interrupts():
        try:
            code = _run(argv, args)
        except KeyboardInterrupt:
            pass
        except Exception:
            if not interrupted():  # a bug: keep the traceback
                raise
            # an extension turned the interrupt into an error of its own
        else:
            if code == 130 or not interrupted():  # 130: `_fail` said so already
                return code
            # something swallowed the interrupt, and the command went on to its end
        return _fail(args, 'interrupted', '', 130)


def _run(argv: Sequence[str], args: argparse.Namespace) -> int:
    """Parse `argv` into `args` and run the command it names; user errors print one line and return a non-zero
    exit code."""
    # imported here, not with this module: until `main` has begun, Ctrl-C would end the process with a traceback
    from .._tokens import TokenizerUnavailableError
    from ..knowledge_graph.store import BlockIntegrityError, NotFoundError, StoreError
    from ._common import CliError

    # importing a command's module (pydantic-ai for `demo`) takes a second or two: Ctrl-C may come then
    parser = build_parser(_command_of(argv))
    _, extras = parser.parse_known_args(argv, namespace=args)
    if extras:  # argparse would print the top level's usage; the subcommand's says what it does take
        _subcommand_parser(parser, args.command).error(f'unrecognized arguments: {" ".join(extras)}')
    try:
        code: int = args.func(args)
    except CliError as exc:
        return _fail(args, 'error', str(exc), exc.code)
    except NotFoundError as exc:
        return _fail(args, 'not found', str(exc), 3)
    except BrokenPipeError:  # e.g. `| head`: the reader is gone, nothing to report
        _quiet_stdout()
        return 141
    except BlockIntegrityError as exc:  # a check failed, as `verify` and `export` report it
        return _fail(args, 'check failed', f'{exc} (`mementograph export` writes its bytes as they are, marked)', 4)
    except (StoreError, TokenizerUnavailableError, ValueError, OSError) as exc:
        return _fail(args, 'error', str(exc), 1)
    try:  # output still buffered meets a closed pipe here, not at interpreter exit (an unraisable error then)
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    return code


_JSON_ERROR_KINDS: dict[int, str] = {2: 'bad_argument', 3: 'not_found', 4: 'check_failed', 130: 'interrupted'}
"""By exit code, as the README lists them: a script tells the cases apart without parsing the message."""


def _fail(args: argparse.Namespace, kind: str, message: str, code: int) -> int:
    """Report a failed command: one line on stderr, and under `--json` also an `{"error": ...}` object on stdout,
    so a script that parses the output reads why it got no answer instead of failing on an empty document.

    After an interrupt, whatever failure it caused is reported as the interrupt (exit 130): a store call cut short
    fails with the store's error, but what the user needs to read is that they stopped the command."""
    if interrupted():
        kind, message, code = 'interrupted', '', 130
    if code == 130:
        forget_unhandled_interrupt()
    print(f'mementograph: {kind}: {message}' if message else f'mementograph: {kind}', file=sys.stderr)
    if getattr(args, 'json', False):
        error = {'kind': _JSON_ERROR_KINDS.get(code, 'error'), 'message': message, 'exit_code': code}
        try:
            json.dump({'error': error}, sys.stdout, ensure_ascii=False)
            print()
        except BrokenPipeError:
            _quiet_stdout()
    return code


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush of what is left does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
