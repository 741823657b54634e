"""`_common` -- what every command shares: store options, JSON output, user errors as messages not tracebacks."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..knowledge_graph import DEFAULT_NAMESPACE
from ..knowledge_graph.store import GraphStore, open_store

__all__ = ('CliError', 'add_store_options', 'emit', 'store_from')


class CliError(Exception):
    """A user error: printed as one line, exit code `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def add_store_options(parser: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    """`--store`, `--namespace` (and `--json`) for a subcommand."""
    parser.add_argument(
        '--store',
        metavar='URI',
        help='store URI: sqlite:///path.db, memory://, neo4j://host:7687 '
        '(default: $MEMENTOGRAPH_STORE, else the embedded store in the user data directory)',
    )
    parser.add_argument('--namespace', default=DEFAULT_NAMESPACE, help='namespace to read (default: %(default)s)')
    if json_flag:
        parser.add_argument('--json', action='store_true', help='print JSON instead of text')


@contextmanager
def store_from(args: argparse.Namespace) -> Iterator[GraphStore]:
    """Open the store the arguments name, and close it afterwards."""
    store = open_store(args.store)
    try:
        yield store
    finally:
        store.close()


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    """Print `data` as JSON with `--json`, else `text`."""
    if getattr(args, 'json', False):
        json.dump(data, sys.stdout, ensure_ascii=False, indent=2, default=str)
        sys.stdout.write('\n')
    else:
        sys.stdout.write(text if text.endswith('\n') else text + '\n')
