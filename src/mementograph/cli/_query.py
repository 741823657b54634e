"""`query`: read-only Cypher over session memory, on Neo4j or (a documented subset) on the embedded store."""

from __future__ import annotations

import argparse
import base64
import inspect
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..knowledge_graph.store import GraphStore
from ..knowledge_graph.store._cypher import DEFAULT_QUERY_LIMIT, DEFAULT_QUERY_TIMEOUT
from ._commands import add_command
from ._common import CliError, add_store_options, emit, non_empty, store_from

__all__ = ('parse_param', 'register', 'run_query')

_CELL_WIDTH = 60


def parse_param(text: str) -> tuple[str, Any]:
    """`NAME=VALUE`: VALUE is read as JSON when it parses (`5`, `true`, `null`, `[1, 2]`, `"5"`), else as text.

    Raises:
        CliError: no `=`, or an empty name.
    """
    name, sep, raw = text.partition('=')
    name = name.strip().lstrip('$')
    if not sep or not name:
        raise CliError(f'--param takes NAME=VALUE, got {text!r}', code=2)
    try:
        return name, json.loads(raw)
    except ValueError:
        return name, raw


def run_query(
    store: GraphStore,
    cypher: str,
    params: Mapping[str, Any],
    *,
    session_id: str | None,
    namespace: str,
    limit: int | None = None,
    timeout: float | None = None,
) -> list[dict[str, Any]]:
    """Run a query with a row limit and a timeout on the backends that take them (both built-in ones do; the
    `GraphStore` protocol does not require them). `None` leaves the store's own (a Neo4j URI's `query_limit`
    and `query_timeout`, else the defaults)."""
    accepted = inspect.signature(store.query).parameters
    bounds = {name: value for name, value in (('limit', limit), ('timeout', timeout)) if value is not None}
    if bounds and all(name in accepted for name in bounds):
        bounded: Any = store.query
        rows: list[dict[str, Any]] = bounded(cypher, params, session_id=session_id, namespace=namespace, **bounds)
        return rows
    return store.query(cypher, params, session_id=session_id, namespace=namespace)


def _jsonable(value: Any) -> Any:
    """Bytes as text when they are UTF-8 (archived JSON), else base64; everything else as it is."""
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode('utf-8')
        except UnicodeDecodeError:
            return {'base64': base64.b64encode(bytes(value)).decode('ascii')}
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    return value


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(_jsonable(value), ensure_ascii=False, default=str)
    text = ' '.join(text.split())
    return text if len(text) <= _CELL_WIDTH else text[: _CELL_WIDTH - 1] + '…'


def render_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Rows as an aligned text table (long cells cut; `--json` prints them whole)."""
    if not rows:
        return '(no rows)'
    columns = list(dict.fromkeys(key for row in rows for key in row))
    cells = [columns, *[[_cell(row.get(column)) for column in columns] for row in rows]]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    lines = ['  '.join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in cells]
    lines.insert(1, '  '.join('-' * width for width in widths))
    lines.append(f'({len(rows)} row{"s" if len(rows) != 1 else ""})')
    return '\n'.join(lines)


def _query(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise CliError(f'--limit must be at least 1, not {args.limit}', code=2)
    if args.timeout is not None and args.timeout <= 0:
        raise CliError(f'--timeout must be a positive number of seconds, not {args.timeout}', code=2)
    params = dict(parse_param(text) for text in args.param)
    with store_from(args) as store:
        rows = run_query(
            store, args.cypher, params, session_id=args.session, namespace=args.namespace, limit=args.limit,
            timeout=args.timeout,
        )  # fmt: skip
    emit(args, _jsonable(rows), render_table(rows))
    if not rows and args.session is None and 'session_id' not in params and _READS_SESSION.search(args.cypher):
        print(  # the README's per-session examples, run without a session, answer nothing: say why
            'mementograph query: $session_id is null without --session ID (`mementograph stats` lists the sessions)',
            file=sys.stderr,
        )
    return 0


_READS_SESSION: Final = re.compile(r'\$session_id\b')


def _seconds(text: str) -> float:
    """A float, but finite: `inf` failed inside the query (a timestamp out of range, blamed on the query) and `nan`
    exited 1, not as the bad argument it is (zero and negative values are refused with the query's other bounds)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'invalid float value: {text!r}') from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f'expected a finite number of seconds, got {text!r}')
    return value


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `query` command."""
    query = add_command(
        commands,
        'query',
        description='Run a read-only Cypher query. $namespace and $session_id are always defined; pass other '
        'values with --param. Writes, LOAD CSV and admin procedures are refused. Neo4j runs any read query; the '
        'embedded store runs the subset in docs/cypher.md and says when a query needs Neo4j.',
    )
    query.add_argument(
        'cypher', metavar='CYPHER', help="e.g. 'MATCH (m:Memento {namespace: $namespace}) RETURN m.text'"
    )
    add_store_options(query)
    query.add_argument('--session', type=non_empty, help='bound to $session_id (default: null)')
    query.add_argument(
        '--param', action='append', default=[], metavar='NAME=VALUE', help='a query parameter; VALUE is JSON or text'
    )
    query.add_argument(
        '--limit',
        type=int,
        help=f"fail past this many rows (default: a Neo4j URI's query_limit, else {DEFAULT_QUERY_LIMIT})",
    )
    query.add_argument(
        '--timeout',
        type=_seconds,
        help=f"seconds before the query is stopped (default: a Neo4j URI's query_timeout, else {DEFAULT_QUERY_TIMEOUT})",
    )
    query.set_defaults(func=_query)
