"""`_cypher` -- read-only Cypher over session memory, shared by every backend.

Both backends refuse a write *before* anything reaches a database: a small lexer splits the query into tokens
(string literals, comments and backtick-quoted names are single tokens, so `'CREATE'` in a string is harmless)
and `check_read_only` rejects write clauses, `LOAD CSV`, admin commands, `CALL { … } IN TRANSACTIONS` and
admin/write procedures. The Neo4j backend then runs the query in a READ transaction, so the server refuses what
the lexer might miss; the embedded backend runs a documented subset through `grand-cypher` over its networkx view
(`run_embedded`) and says plainly when a query needs Neo4j.

`EXAMPLE_QUERIES` are the queries the README and `docs/cypher.md` show; tests and the benchmark run them.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from .._schema import DEFAULT_NAMESPACE
from ._errors import QueryError, ReadOnlyViolationError, UnsupportedQueryError

__all__ = (
    'DEFAULT_QUERY_LIMIT',
    'DEFAULT_QUERY_TIMEOUT',
    'EMBEDDED_SUBSET',
    'EXAMPLE_QUERIES',
    'ExampleQuery',
    'Token',
    'check_read_only',
    'prepare_query',
    'run_embedded',
    'scoped_params',
    'sqlite_graph_view',
    'tokenize',
)

DEFAULT_QUERY_LIMIT: Final = 1000
"""Rows a query may return before it fails (add `LIMIT`, or raise the limit)."""
DEFAULT_QUERY_TIMEOUT: Final = 10.0
"""Seconds a query may run before the server (or the embedded runner) gives up."""

TokenKind = Literal['word', 'quoted', 'string', 'number', 'param', 'punct']


@dataclass(frozen=True)
class Token:
    """One lexical token of a Cypher query, with its place in the source (for messages and rewriting)."""

    kind: TokenKind
    text: str
    """The source text (for `string`: with its quotes; for `quoted`: with its backticks)."""
    start: int
    end: int
    value: str = ''
    """Decoded value: the string's content, the name inside backticks, the parameter's name, the word itself."""


_WORD = re.compile(r'[^\W\d]\w*', re.UNICODE)
_NUMBER = re.compile(r'0x[0-9a-fA-F]+|0o[0-7]+|(?:\d+\.\d+|\.\d+|\d+)(?:[eE][+-]?\d+)?')
_PUNCT = ('<>', '<=', '>=', '=~', '..', '->', '<-', '+=', '::', '!=')
_STRING_ESCAPES: Final = {'t': '\t', 'b': '\b', 'n': '\n', 'r': '\r', 'f': '\f', "'": "'", '"': '"', '\\': '\\'}


def _position(source: str, offset: int) -> str:
    line = source.count('\n', 0, offset) + 1
    column = offset - (source.rfind('\n', 0, offset) + 1) + 1
    return f'line {line}, column {column}'


def _scan_string(source: str, start: int) -> tuple[int, str]:
    quote = source[start]
    out: list[str] = []
    i = start + 1
    while i < len(source):
        char = source[i]
        if char == quote:
            return i + 1, ''.join(out)
        if char == '\\' and i + 1 < len(source):
            nxt = source[i + 1]
            if nxt in 'uU':
                width = 4 if nxt == 'u' else 8
                digits = source[i + 2 : i + 2 + width]
                if len(digits) == width and all(c in '0123456789abcdefABCDEF' for c in digits):
                    out.append(chr(int(digits, 16)))
                    i += 2 + width
                    continue
            out.append(_STRING_ESCAPES.get(nxt, '\\' + nxt))
            i += 2
            continue
        out.append(char)
        i += 1
    raise QueryError(f'unterminated string literal starting at {_position(source, start)}')


def _scan_backticks(source: str, start: int) -> tuple[int, str]:
    out: list[str] = []
    i = start + 1
    while i < len(source):
        if source[i] == '`':
            if source.startswith('``', i):
                out.append('`')
                i += 2
                continue
            return i + 1, ''.join(out)
        out.append(source[i])
        i += 1
    raise QueryError(f'unterminated `quoted name` starting at {_position(source, start)}')


def _skip_comment(source: str, i: int) -> int | None:
    if source.startswith('//', i):
        end = source.find('\n', i)
        return len(source) if end < 0 else end + 1
    if source.startswith('/*', i):
        end = source.find('*/', i + 2)
        if end < 0:
            raise QueryError(f'unterminated /* comment starting at {_position(source, i)}')
        return end + 2
    return None


def tokenize(source: str) -> list[Token]:
    """Split a Cypher query into tokens; comments and whitespace are dropped.

    Raises:
        QueryError: an unterminated string, quoted name or comment (with its line and column).
    """
    tokens: list[Token] = []
    i = 0
    while i < len(source):
        char = source[i]
        if char.isspace():
            i += 1
            continue
        after_comment = _skip_comment(source, i)
        if after_comment is not None:
            i = after_comment
            continue
        if char in '\'"':
            end, value = _scan_string(source, i)
            tokens.append(Token('string', source[i:end], i, end, value))
        elif char == '`':
            end, value = _scan_backticks(source, i)
            tokens.append(Token('quoted', source[i:end], i, end, value))
        elif char == '$':
            end, name = _scan_param(source, i)
            tokens.append(Token('param', source[i:end], i, end, name))
        elif (match := _NUMBER.match(source, i)) is not None and not (char == '.' and tokens and _is_name(tokens[-1])):
            end = match.end()
            tokens.append(Token('number', source[i:end], i, end, source[i:end]))
        elif (match := _WORD.match(source, i)) is not None:
            end = match.end()
            tokens.append(Token('word', source[i:end], i, end, source[i:end]))
        else:
            end = i + next((len(p) for p in _PUNCT if source.startswith(p, i)), 1)
            tokens.append(Token('punct', source[i:end], i, end, source[i:end]))
        i = end
    return tokens


def _scan_param(source: str, start: int) -> tuple[int, str]:
    i = start + 1
    if source.startswith('`', i):
        return _scan_backticks(source, i)
    match = _WORD.match(source, i) or re.compile(r'\d+').match(source, i)
    if match is None:
        raise QueryError(f'a $ at {_position(source, start)} names no parameter')
    return match.end(), match.group()


def _is_name(token: Token) -> bool:
    return token.kind in ('word', 'quoted')


# -- the read-only check ---------------------------------------------------------------------------------------

_WRITE_CLAUSES: Final = frozenset({'CREATE', 'MERGE', 'DELETE', 'DETACH', 'SET', 'REMOVE', 'DROP', 'FOREACH'})
_ADMIN_COMMANDS: Final = frozenset(
    {'ALTER', 'GRANT', 'DENY', 'REVOKE', 'RENAME', 'START', 'STOP', 'TERMINATE', 'ENABLE', 'DEALLOCATE',
     'REALLOCATE', 'DRYRUN', 'USE'}
)  # fmt: skip
_FORBIDDEN_PROCEDURES: Final = (
    'dbms.', 'tx.', 'db.create', 'db.clearquerycaches', 'db.checkpoint', 'db.index.vector.create',
    'db.index.fulltext.create', 'db.index.fulltext.drop', 'db.awaitindex', 'db.resampleindex',
    'db.resampleoutdatedindexes', 'db.prepareforreplanning',
    'apoc.create.', 'apoc.merge.', 'apoc.refactor.', 'apoc.periodic.', 'apoc.load.', 'apoc.import.',
    'apoc.export.', 'apoc.cypher.', 'apoc.trigger.', 'apoc.schema.', 'apoc.atomic.', 'apoc.lock.', 'apoc.nodes.',
    'apoc.do.', 'apoc.custom.', 'apoc.uuid.', 'apoc.systemdb.', 'apoc.log.', 'apoc.static.', 'apoc.graph.',
    'apoc.util.sleep', 'apoc.ttl.', 'gds.',
)  # fmt: skip
_READ_ONLY_HINT: Final = (
    'queries over session memory are read-only (mementograph never lets a query write, load files, '
    'or call admin and write procedures)'
)


def _refuse(source: str, token: Token, what: str) -> ReadOnlyViolationError:
    return ReadOnlyViolationError(f'{what} at {_position(source, token.start)}: {_READ_ONLY_HINT}')


def _keyword(tokens: Sequence[Token], index: int) -> str | None:
    """The upper-cased keyword at `index`, or `None` where the word can only be a name (a label, a property key,
    a map key, a relationship type)."""
    token = tokens[index]
    if token.kind != 'word':
        return None
    before = tokens[index - 1].text if index > 0 else ''
    after = tokens[index + 1].text if index + 1 < len(tokens) else ''
    if before in ('.', ':', '::') or after == ':':
        return None
    return token.text.upper()


def _dotted_name(tokens: Sequence[Token], index: int) -> tuple[str, int]:
    """The dotted name (`db.index.fulltext.queryNodes`) starting at `index`, lower-cased, and the index after it."""
    parts: list[str] = []
    i = index
    while i < len(tokens) and _is_name(tokens[i]):
        parts.append(tokens[i].value)
        if i + 2 < len(tokens) and tokens[i + 1].text == '.' and _is_name(tokens[i + 2]):
            i += 2
            continue
        i += 1
        break
    return '.'.join(parts).lower(), i


def _check_procedure(source: str, tokens: Sequence[Token], index: int) -> None:
    name, _ = _dotted_name(tokens, index)
    if name and name.startswith(_FORBIDDEN_PROCEDURES):
        raise _refuse(source, tokens[index], f'procedure or function {name} is an admin or write procedure')


def check_read_only(source: str, tokens: Sequence[Token] | None = None) -> list[Token]:
    """Refuse anything but a read query, before it is sent anywhere.

    Write clauses (`CREATE`, `MERGE`, `DELETE`, `DETACH`, `SET`, `REMOVE`, `DROP`, `FOREACH`), `LOAD CSV`, admin
    commands (`ALTER`, `GRANT`, `USE`, `TERMINATE`, …), `CALL { … } IN TRANSACTIONS` and admin/write procedures
    (`dbms.*`, `db.create*`, `apoc.create.*`, `apoc.cypher.*`, …) are refused wherever they appear outside string
    literals, comments and backtick-quoted names. A label or property key that happens to be such a word
    (`n.set`, `(:Drop)`, `{create: 1}`) is a name, not a clause.

    Returns:
        The query's tokens.

    Raises:
        ReadOnlyViolationError: the query writes or reaches outside the graph (message names what and where).
        QueryError: the query cannot be tokenized (unterminated string or comment), or holds several statements.
    """
    tokens = tokenize(source) if tokens is None else list(tokens)
    for index, token in enumerate(tokens):
        if token.text == ';' and index != len(tokens) - 1:
            raise QueryError(f'one statement per query: a ";" at {_position(source, token.start)} separates two')
        keyword = _keyword(tokens, index)
        if keyword is None:
            continue
        previous = _keyword(tokens, index - 1) if index > 0 else None
        if keyword in _WRITE_CLAUSES:
            raise _refuse(source, token, f'{keyword} clause')
        if keyword == 'CSV' and previous == 'LOAD':
            raise _refuse(source, tokens[index - 1], 'LOAD CSV')
        if keyword in _ADMIN_COMMANDS and (index == 0 or tokens[index - 1].text == '{'):
            raise _refuse(source, token, f'{keyword} command')
        if keyword == 'TRANSACTIONS' and (previous in ('IN', 'CONCURRENT') or tokens[index - 1].kind == 'number'):
            raise _refuse(source, token, 'CALL { … } IN TRANSACTIONS')
        if keyword == 'CALL' and index + 1 < len(tokens) and _is_name(tokens[index + 1]):
            _check_procedure(source, tokens, index + 1)
        elif index + 1 < len(tokens) and tokens[index + 1].text == '.':
            name, after = _dotted_name(tokens, index)
            if after < len(tokens) and tokens[after].text == '(' and '.' in name:
                _check_procedure(source, tokens, index)
    return tokens


# -- parameters -----------------------------------------------------------------------------------------------

_SCALARS = (str, int, float, bool, bytes, type(None))


def _check_param_value(name: str, value: Any, depth: int = 0) -> None:
    if isinstance(value, _SCALARS):
        return
    if depth < 8 and isinstance(value, list | tuple):
        for item in value:
            _check_param_value(name, item, depth + 1)
        return
    if depth < 8 and isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise QueryError(f'parameter ${name}: map keys must be strings, got {key!r}')
            _check_param_value(name, item, depth + 1)
        return
    raise QueryError(
        f'parameter ${name} has a {type(value).__name__}; parameters are strings, numbers, booleans, null, '
        'bytes, and lists and maps of those'
    )


def scoped_params(params: Mapping[str, Any] | None, *, session_id: str | None, namespace: str | None) -> dict[str, Any]:
    """The parameters a query runs with: the caller's plus `$namespace` and `$session_id` (always defined).

    Values are passed to the database as parameters, never spliced into the query text.

    Raises:
        QueryError: a parameter that is not a plain value, or `namespace`/`session_id` given twice with
            different values.
    """
    merged: dict[str, Any] = {}
    for name, value in (params or {}).items():
        if not isinstance(name, str) or not name:
            raise QueryError(f'parameter names are non-empty strings, got {name!r}')
        _check_param_value(name, value)
        merged[name] = value
    if namespace is not None:
        _set_scope(merged, 'namespace', namespace)
    else:
        merged.setdefault('namespace', DEFAULT_NAMESPACE)
    if session_id is not None:
        _set_scope(merged, 'session_id', session_id)
    else:
        merged.setdefault('session_id', None)
    return merged


def _set_scope(merged: dict[str, Any], name: str, value: str) -> None:
    if name in merged and merged[name] != value:
        raise QueryError(
            f'${name} is given both as a parameter ({merged[name]!r}) and as the {name} argument ({value!r})'
        )
    merged[name] = value


def prepare_query(cypher: str) -> tuple[str, list[Token]]:
    """Check a query is read-only and strip a trailing `;`; returns the text to run and its tokens.

    Raises:
        QueryError: empty query, or untokenizable.
        ReadOnlyViolationError: the query would write (see `check_read_only`).
    """
    if not isinstance(cypher, str) or not cypher.strip():
        raise QueryError('empty query: give a Cypher read query, e.g. MATCH (m:Memento) RETURN m.text LIMIT 5')
    tokens = check_read_only(cypher)
    if not tokens:
        raise QueryError('the query holds only comments')
    if tokens[-1].text == ';':
        cypher = cypher[: tokens[-1].start] + cypher[tokens[-1].end :]
        tokens = tokens[:-1]
    return cypher, tokens


# -- the embedded subset (grand-cypher over the networkx view) --------------------------------------------------

EMBEDDED_SUBSET: Final = (
    'the embedded store runs a read-only subset of Cypher through grand-cypher: one or more MATCH patterns '
    '(labels, {property: value} maps, -[:TYPE]->, -[:TYPE*1..3]->), WHERE with comparisons, AND/OR/NOT, IN [...], '
    'STARTS WITH/ENDS WITH/CONTAINS, IS NULL, RETURN [DISTINCT] properties or nodes with AS, count/sum/avg/min/'
    'max/collect, ORDER BY, SKIP and LIMIT; OPTIONAL MATCH, WITH, UNWIND, CALL, UNION, CASE, arithmetic in RETURN '
    'and other functions need the Neo4j backend (--store neo4j://HOST:7687). See docs/cypher.md'
)
_NEEDS_NEO4J: Final = frozenset(
    {'OPTIONAL', 'WITH', 'UNWIND', 'CALL', 'UNION', 'CASE', 'SHOW', 'EXISTS', 'COUNT', 'COLLECT', 'REDUCE',
     'SHORTESTPATH', 'ALLSHORTESTPATHS', 'YIELD'}
)  # fmt: skip
"""Keywords grand-cypher cannot run the way Neo4j does: refused up front rather than answered differently.
(`count(`/`collect(` as aggregates are fine; `COUNT {`/`COLLECT {` subqueries are not.)"""
_AGGREGATES: Final = frozenset({'COUNT', 'SUM', 'AVG', 'MIN', 'MAX', 'COLLECT'})
_SUPPORTED_FUNCTIONS: Final = frozenset(
    {'ID', 'TOLOWER', 'TOUPPER', 'TRIM', 'COALESCE', 'SIZE', 'TYPE', 'RELATIONSHIPS'}
)
_CLAUSE_WORDS: Final = frozenset(
    {'MATCH', 'WHERE', 'RETURN', 'DISTINCT', 'AND', 'OR', 'XOR', 'NOT', 'IN', 'AS', 'IS', 'CONTAINS', 'WITH',
     'STARTS', 'ENDS', 'ORDER', 'BY', 'SKIP', 'LIMIT', 'ASC', 'DESC'}
)  # fmt: skip
_PLAIN_NAME: Final = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')


def _unsupported(source: str, token: Token, what: str) -> UnsupportedQueryError:
    return UnsupportedQueryError(f'{what} at {_position(source, token.start)}: {EMBEDDED_SUBSET}')


def _literal(name: str, value: Any, *, in_list: bool = False) -> str:
    """A parameter value as a grand-cypher literal: JSON-quoted strings, so a value is never read as syntax."""
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UnsupportedQueryError(f'parameter ${name} is {value}: the embedded store takes finite numbers')
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple) and not in_list:
        return '[' + ', '.join(_literal(name, item, in_list=True) for item in value) + ']'
    raise UnsupportedQueryError(
        f'parameter ${name} is a {type(value).__name__}; the embedded store takes strings, numbers, booleans, null '
        'and flat lists (use the Neo4j backend for maps and bytes)'
    )


def _translate_token(source: str, tokens: Sequence[Token], index: int, params: Mapping[str, Any]) -> str | None:
    """The replacement text of one token for grand-cypher, or `None` to keep it as written."""
    token = tokens[index]
    following = tokens[index + 1].text if index + 1 < len(tokens) else ''
    if token.kind == 'param':
        if token.value not in params:
            raise QueryError(f'parameter ${token.value} at {_position(source, token.start)} is not given')
        return _literal(token.value, params[token.value])
    if token.kind == 'string':
        return json.dumps(token.value)
    if token.kind == 'quoted':
        if _PLAIN_NAME.fullmatch(token.value) is None:
            raise _unsupported(source, token, 'a `quoted name` that is not a plain identifier')
        return token.value
    keyword = _keyword(tokens, index)
    if keyword is None or (index > 0 and tokens[index - 1].text == '.'):
        return None
    if keyword in _NEEDS_NEO4J and not (keyword in _AGGREGATES and following == '('):
        raise _unsupported(source, token, keyword)
    if following == '(' and keyword in _AGGREGATES:
        return keyword
    if following == '(' and keyword not in _SUPPORTED_FUNCTIONS and keyword not in _CLAUSE_WORDS:
        raise _unsupported(source, token, f'function {token.text}()')
    return None


def _translate(source: str, tokens: Sequence[Token], params: Mapping[str, Any]) -> str:
    """Rewrite a checked query for grand-cypher: parameters become safely quoted literals, single-quoted strings
    double-quoted, aggregate names upper-cased, comments dropped. Everything else stays byte for byte (grand-cypher
    needs `-[` and `]-` unsplit)."""
    pieces: list[str] = []
    cursor = 0
    distinct: Token | None = None
    for index, token in enumerate(tokens):
        keyword = _keyword(tokens, index)
        if keyword == 'DISTINCT':
            distinct = token
        elif keyword == 'AS' and distinct is not None:
            raise _unsupported(source, distinct, 'RETURN DISTINCT with AS aliases (grand-cypher mis-handles them)')
        replacement = _translate_token(source, tokens, index, params)
        gap = source[cursor : token.start]
        pieces.append(' ' if gap and not gap.isspace() else gap)  # a comment becomes a space
        pieces.append(token.text if replacement is None else replacement)
        cursor = token.end
    return ''.join(pieces)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if k != '__labels__'}
    if isinstance(value, set | frozenset):
        return sorted(_plain(v) for v in value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _rows(columns: Mapping[Any, Sequence[Any]]) -> list[dict[str, Any]]:
    names = [str(name) for name in columns]
    values = [list(column) for column in columns.values()]
    count = min((len(column) for column in values), default=0)
    return [{name: _plain(column[i]) for name, column in zip(names, values, strict=True)} for i in range(count)]


def _run_with_timeout(work: Callable[[], Any], timeout: float) -> Any:
    """Run `work` in a daemon thread and give up after `timeout` seconds (the thread is abandoned: grand-cypher
    cannot be interrupted, but the caller gets its answer, or its error, on time)."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome['value'] = work()
        except BaseException as exc:  # handed to the caller below
            outcome['error'] = exc

    thread = threading.Thread(target=target, name='mementograph-embedded-query', daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise QueryError(
            f'the query ran longer than its {timeout:g} s timeout on the embedded store; narrow the MATCH '
            '(labels and {property: value} maps), add LIMIT, raise the timeout, or use the Neo4j backend'
        )
    if 'error' in outcome:
        raise outcome['error']
    return outcome['value']


def run_embedded(
    graph: Any,
    cypher: str,
    params: Mapping[str, Any],
    *,
    limit: int = DEFAULT_QUERY_LIMIT,
    timeout: float = DEFAULT_QUERY_TIMEOUT,
) -> list[dict[str, Any]]:
    """Run a read-only query with grand-cypher over a networkx `MultiDiGraph` whose nodes and edges carry
    `__labels__`.

    Raises:
        ReadOnlyViolationError: the query would write.
        UnsupportedQueryError: the query needs a construct the subset does not run (message: what, where, and
            that the Neo4j backend runs it).
        QueryError: a missing parameter, too many rows, or the timeout.
    """
    from grandcypher import GrandCypher  # type: ignore[import-untyped]
    from lark.exceptions import LarkError, UnexpectedInput

    source, tokens = prepare_query(cypher)
    translated = _translate(source, tokens, params)

    def work() -> list[dict[str, Any]]:
        engine = GrandCypher(graph, limit=limit + 1)
        # grand-cypher's experimental property-map hints prune candidates pairwise: a 5,000-node MATCH took 6 s
        # with them and 0.09 s without.
        engine.auto_node_jsondata_hints = False
        return _rows(engine.run(translated))

    try:
        rows: list[dict[str, Any]] = _run_with_timeout(work, timeout)
    except UnexpectedInput as exc:
        line, column = exc.line, exc.column
        raise UnsupportedQueryError(
            f'the embedded store cannot run this query (line {line}, column {column}: not in its subset, or not '
            f'valid Cypher); {EMBEDDED_SUBSET}'
        ) from exc
    except QueryError:
        raise
    except (LarkError, Exception) as exc:  # grand-cypher's own failures: say so, never a half-answer
        raise UnsupportedQueryError(f'the embedded store failed on this query ({exc!r}); {EMBEDDED_SUBSET}') from exc
    if len(rows) > limit:
        raise QueryError(row_limit_message(limit))
    return rows


def row_limit_message(limit: int) -> str:
    """Why a query failed on rows, and the two ways out."""
    return (
        f'the query returned more than {limit} rows; add LIMIT to the query, or raise the row limit '
        f'(limit=N in store.query, --limit N on the command line)'
    )


# -- the README queries -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExampleQuery:
    """A query the README shows, with the parameters it takes and whether the embedded store runs it."""

    name: str
    title: str
    cypher: str
    params: tuple[str, ...] = ()
    embedded: bool = True


EXAMPLE_QUERIES: Final[tuple[ExampleQuery, ...]] = (
    ExampleQuery(
        'recent_mementos',
        'The most recent mementos of a session',
        'MATCH (m:Memento {namespace: $namespace, session_id: $session_id})\n'
        'RETURN m.id AS memento, m.text AS text, m.tokens AS tokens, m.verified AS verified\n'
        'ORDER BY m.ordinal DESC LIMIT 5',
    ),
    ExampleQuery(
        'blocks_mentioning',
        'Blocks that mention an entity',
        'MATCH (e:Entity {namespace: $namespace, key: $entity})<-[r:MENTIONS]-(b:EvictedBlock)\n'
        'RETURN b.id AS block, b.session_id AS session, b.seq AS seq, r.count AS mentions\n'
        'ORDER BY mentions DESC, seq LIMIT 25',
        ('entity',),
    ),
    ExampleQuery(
        'co_occurring_entities',
        'Entities that co-occur with an entity in the same blocks',
        'MATCH (e:Entity {namespace: $namespace, key: $entity})<-[:MENTIONS]-(b:EvictedBlock)-[:MENTIONS]->(o:Entity)\n'
        'RETURN o.key AS entity, count(b) AS blocks\n'
        'ORDER BY blocks DESC, entity LIMIT 10',
        ('entity',),
    ),
    ExampleQuery(
        'page_blocks',
        "A page's blocks, in order",
        'MATCH (p:Page {namespace: $namespace, session_id: $session_id, number: $page})-[c:CONTAINS]->(b:EvictedBlock)\n'
        'RETURN b.id AS block, b.first_message AS first_message, b.last_message AS last_message, b.tokens AS tokens\n'
        'ORDER BY c.position',
        ('page',),
    ),
    ExampleQuery(
        'largest_blocks',
        'The largest evicted blocks',
        "MATCH (b:EvictedBlock {namespace: $namespace, kind: 'block'})\n"
        'RETURN b.id AS block, b.session_id AS session, b.tokens AS tokens\n'
        'ORDER BY tokens DESC, block LIMIT 5',
    ),
    ExampleQuery(
        'unverified_mementos',
        'Mementos no judge passed (kept, but worth a look)',
        'MATCH (m:Memento {namespace: $namespace, verified: false})\n'
        'RETURN m.id AS memento, m.session_id AS session, m.score AS score, m.level AS level\n'
        'ORDER BY session, memento LIMIT 25',
    ),
    ExampleQuery(
        'tokens_saved',
        'Tokens saved per session',
        'MATCH (s:Session {namespace: $namespace})\n'
        "OPTIONAL MATCH (b:EvictedBlock {namespace: s.namespace, session_id: s.id, kind: 'block'})\n"
        'WITH s, sum(b.tokens) AS block_tokens\n'
        'OPTIONAL MATCH (m:Memento {namespace: s.namespace, session_id: s.id, level: 1})\n'
        'WITH s, block_tokens, sum(m.tokens) AS memento_tokens\n'
        'RETURN s.id AS session, block_tokens, memento_tokens, block_tokens - memento_tokens AS saved\n'
        'ORDER BY saved DESC, session LIMIT 25',
        embedded=False,
    ),
    ExampleQuery(
        'memento_chain',
        'The memento-to-block chain: every block under a memento, through mementos of mementos',
        'MATCH (m:Memento {namespace: $namespace, id: $memento})-[:SUMMARIZES*1..8]->(b:EvictedBlock)\n'
        'RETURN b.id AS block, b.seq AS seq, b.tokens AS tokens\n'
        'ORDER BY seq',
        ('memento',),
    ),
)


# -- the embedded store's networkx view ---------------------------------------------------------------------------


def _session_node(namespace: str, session_id: str) -> str:
    return f'{namespace}\x1f{session_id}'


def _add_sessions(graph: Any, conn: sqlite3.Connection, namespace: str) -> None:
    rows = conn.execute(
        'SELECT s.id, s.created_at, '
        '(SELECT count(*) FROM events e WHERE e.namespace = s.namespace AND e.session_id = s.id) AS events, '
        '(SELECT count(*) FROM mementos m WHERE m.namespace = s.namespace AND m.session_id = s.id) AS mementos '
        'FROM sessions s WHERE s.namespace = ?',
        (namespace,),
    )
    for session_id, created_at, events, mementos in rows:
        key = _session_node(namespace, session_id)
        graph.add_node(
            key, __labels__={'Session'}, key=key, id=session_id, namespace=namespace, created_at=created_at,
            event_count=events, memento_count=mementos,
        )  # fmt: skip


def _add_blocks(graph: Any, conn: sqlite3.Connection, namespace: str) -> None:
    rows = conn.execute(
        'SELECT id, session_id, seq, kind, first_message, last_message, tokens, sha256, text, started_at, created_at '
        'FROM blocks WHERE namespace = ? ORDER BY session_id, kind, seq, id',
        (namespace,),
    )
    previous: tuple[str, str] | None = None  # (session_id, block id) of the last 'block' seen
    for row in rows:
        block_id, session_id, kind = row[0], row[1], row[3]
        props = dict(zip(_VIEW_BLOCK_COLUMNS, row, strict=True))
        graph.add_node(block_id, __labels__={'EvictedBlock'}, namespace=namespace, **_present(props))
        graph.add_edge(block_id, _session_node(namespace, session_id), __labels__={'IN_SESSION'})
        if kind != 'block':
            continue
        if previous is not None and previous[0] == session_id:
            graph.add_edge(previous[1], block_id, __labels__={'NEXT'})
        previous = (session_id, block_id)


_VIEW_BLOCK_COLUMNS: Final = (
    'id', 'session_id', 'seq', 'kind', 'first_message', 'last_message', 'tokens', 'sha256', 'text', 'started_at',
    'created_at',
)  # fmt: skip
_VIEW_MEMENTO_COLUMNS: Final = (
    'id', 'session_id', 'text', 'tokens', 'score', 'verified', 'iterations', 'compressor', 'level', 'created_at',
)  # fmt: skip


def _present(props: Mapping[str, Any]) -> dict[str, Any]:
    """Properties as Neo4j holds them: a null property is an absent one."""
    return {key: value for key, value in props.items() if value is not None}


def _add_mementos(graph: Any, conn: sqlite3.Connection, namespace: str) -> None:
    targets: dict[str, list[tuple[str, int]]] = {}
    for memento_id, target_id, position in conn.execute(
        'SELECT s.memento_id, s.target_id, s.position FROM summarizes s JOIN mementos m ON m.id = s.memento_id '
        'WHERE m.namespace = ? ORDER BY s.memento_id, s.position',
        (namespace,),
    ):
        targets.setdefault(memento_id, []).append((target_id, position))
    ordinals: dict[str, int] = {}
    for row in conn.execute(
        f'SELECT {", ".join(_VIEW_MEMENTO_COLUMNS)} FROM mementos WHERE namespace = ? ORDER BY rid', (namespace,)
    ):
        props = dict(zip(_VIEW_MEMENTO_COLUMNS, row, strict=True))
        props['verified'] = bool(props['verified'])
        ordinal = ordinals.get(props['session_id'], 0)
        ordinals[props['session_id']] = ordinal + 1
        summarized = targets.get(props['id'], [])
        graph.add_node(
            props['id'], __labels__={'Memento'}, namespace=namespace, ordinal=ordinal,
            summarizes=[target for target, _ in summarized], **_present(props),
        )  # fmt: skip
    for memento_id, summarized in targets.items():
        for target_id, position in summarized:
            if target_id in graph:
                graph.add_edge(memento_id, target_id, __labels__={'SUMMARIZES'}, position=position)


def _add_entities_and_pages(graph: Any, conn: sqlite3.Connection, namespace: str) -> None:
    for entity_id, key, name, kind in conn.execute(
        'SELECT id, key, name, kind FROM entities WHERE namespace = ?', (namespace,)
    ):
        graph.add_node(
            entity_id, __labels__={'Entity'}, id=entity_id, key=key, name=name, kind=kind, namespace=namespace
        )
    for source_id, entity_id, count in conn.execute(
        'SELECT m.source_id, m.entity_id, m.count FROM mentions m JOIN entities e ON e.id = m.entity_id '
        'WHERE e.namespace = ?',
        (namespace,),
    ):
        if source_id in graph:
            graph.add_edge(source_id, entity_id, __labels__={'MENTIONS'}, count=count)
    for page_id, session_id, number, first_turn, last_turn, summary, topics in conn.execute(
        'SELECT id, session_id, number, first_turn, last_turn, summary, topics_json FROM pages WHERE namespace = ?',
        (namespace,),
    ):
        graph.add_node(
            page_id, __labels__={'Page'}, id=page_id, namespace=namespace, session_id=session_id, number=number,
            first_turn=first_turn, last_turn=last_turn, summary=summary, topics=json.loads(topics),
        )  # fmt: skip
    for page_id, block_id, position in conn.execute(
        'SELECT pb.page_id, pb.block_id, pb.position FROM page_blocks pb JOIN pages p ON p.id = pb.page_id '
        'WHERE p.namespace = ?',
        (namespace,),
    ):
        if block_id in graph:
            graph.add_edge(page_id, block_id, __labels__={'CONTAINS'}, position=position)


def _add_events(graph: Any, conn: sqlite3.Connection, namespace: str) -> None:
    for session_id, seq, key, kind, message_index, sha256, block_ids, created_at in conn.execute(
        'SELECT session_id, seq, key, kind, message_index, sha256, block_ids_json, created_at FROM events '
        'WHERE namespace = ?',
        (namespace,),
    ):
        uid = f'{namespace}\x1f{session_id}\x1f{key}'
        props = {
            'uid': uid, 'key': key, 'namespace': namespace, 'session_id': session_id, 'seq': seq, 'kind': kind,
            'message_index': message_index, 'sha256': sha256, 'block_ids': json.loads(block_ids),
            'created_at': created_at,
        }  # fmt: skip
        graph.add_node(uid, __labels__={'Event'}, **_present(props))
        graph.add_edge(uid, _session_node(namespace, session_id), __labels__={'IN_SESSION'})


def sqlite_graph_view(conn: sqlite3.Connection, namespace: str) -> Any:
    """The embedded store's graph of one namespace as a networkx `MultiDiGraph`, shaped like the Neo4j graph.

    Nodes are keyed by record id and carry their properties plus `__labels__` (grand-cypher's convention), edges
    carry `__labels__` and their properties. Everything is there except the archived bytes (`messages_json`,
    event `payload`): traversal never needs them, and recovery reads them hash-checked from SQLite.
    """
    import networkx as nx  # type: ignore[import-untyped,unused-ignore]

    graph = nx.MultiDiGraph()
    _add_sessions(graph, conn, namespace)
    _add_blocks(graph, conn, namespace)
    _add_mementos(graph, conn, namespace)
    _add_entities_and_pages(graph, conn, namespace)
    _add_events(graph, conn, namespace)
    return graph
