"""`_cypher` -- read-only Cypher over session memory, shared by every backend.

Both backends refuse a write *before* anything reaches a database: a small lexer splits the query into tokens
(string literals, comments and backtick-quoted names are single tokens, so `'CREATE'` in a string is harmless)
and `check_read_only` rejects write clauses, `LOAD CSV`, admin commands, `CALL { … } IN TRANSACTIONS` and
admin/write procedures. The Neo4j backend then runs the query in a READ transaction, so the server refuses what
the lexer might miss; the embedded backend runs a documented subset through `grand-cypher` over its networkx view
(`run_embedded`) and says plainly when a query needs Neo4j.

A Neo4j database holds every namespace, so `check_scope` also refuses, before sending, any query that could read
outside `$namespace`: every pattern must be anchored by a node with `{namespace: $namespace}` (or bound from one).
With `session=True` (what the MCP server adds when it serves one session) every node must be in `$session_id`.

`EXAMPLE_QUERIES` are the queries the README and `docs/cypher.md` show; tests and the benchmark run them.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .._schema import DEFAULT_NAMESPACE
from ._errors import QueryError, ReadOnlyViolationError, ScopeViolationError, UnsupportedQueryError

__all__ = (
    'DEFAULT_QUERY_LIMIT',
    'DEFAULT_QUERY_TIMEOUT',
    'EMBEDDED_SUBSET',
    'EXAMPLE_QUERIES',
    'ExampleQuery',
    'ScopeViolationError',
    'Token',
    'check_read_only',
    'check_scope',
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

_WRITE_CLAUSES: Final = frozenset(
    {'CREATE', 'INSERT', 'MERGE', 'DELETE', 'DETACH', 'SET', 'REMOVE', 'DROP', 'FOREACH'}
)  # INSERT: GQL's CREATE, which Neo4j 5 runs
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

    Write clauses (`CREATE` and GQL's `INSERT`, `MERGE`, `DELETE`, `DETACH`, `SET`, `REMOVE`, `DROP`, `FOREACH`),
    `LOAD CSV`, admin commands (`ALTER`, `GRANT`, `USE`, `TERMINATE`, …), `CALL { … } IN TRANSACTIONS` and
    admin/write procedures (`dbms.*`, `db.create*`, `apoc.create.*`, `apoc.cypher.*`, …) are refused wherever they
    appear outside string literals, comments and backtick-quoted names. A label or property key that happens to be
    such a word (`n.set`, `(:Drop)`, `{create: 1}`) is a name, not a clause.

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


def query_bounds(limit: int, timeout: float) -> tuple[int, float]:
    """`(limit, timeout)` checked alike on every backend: at least one row, a positive number of seconds.

    Raises:
        QueryError: either is out of range or not a number.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise QueryError(f'the row limit must be a whole number of rows, 1 or more, not {limit!r}')
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise QueryError(f'the timeout must be a positive number of seconds, not {timeout!r}')
    return limit, timeout


def scoped_params(params: Mapping[str, Any] | None, *, session_id: str | None, namespace: str | None) -> dict[str, Any]:
    """The parameters a query runs with: the caller's plus `$namespace` and `$session_id` (always defined).

    Values are passed to the database as parameters, never spliced into the query text.

    Raises:
        QueryError: a parameter that is not a plain value, or `namespace`/`session_id` given twice with
            different values.
    """
    if params is not None and not isinstance(params, Mapping):
        raise QueryError(f'params must map parameter names to values, not a {type(params).__name__}')
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


# -- scope: every pattern stays in $namespace (and, when a session is pinned, in $session_id) ---------------------


_NAMESPACE_HINT: Final = (
    'a query over session memory reads one namespace: give one node of each pattern {namespace: $namespace} '
    '(or bind it from a pattern that has it, or filter it with WHERE x.namespace = $namespace), e.g. '
    'MATCH (b:EvictedBlock {namespace: $namespace})-[:MENTIONS]->(e:Entity)'
)
_SESSION_HINT: Final = (
    'with a session pinned, every node must be in it: give the node {session_id: $session_id} (a Session node '
    '{id: $session_id}), or reach it from such a node over :NEXT, :SUMMARIZES, :CONTAINS or :IN_SESSION; an Entity '
    'is visible one :MENTIONS hop from such a node'
)
_UNPARSED_HINT: Final = (
    'the scope check reads MATCH, OPTIONAL MATCH, WITH, UNWIND, CALL { … }, RETURN and UNION with node patterns '
    '(x:Label {key: value}), relationship patterns -[r:TYPE*1..3]-> and built-in functions'
)
_SESSION_PRESERVING: Final = frozenset({'NEXT', 'SUMMARIZES', 'CONTAINS', 'IN_SESSION'})
"""Relationship types whose two ends always belong to one session (MENTIONS leads to namespace-wide entities)."""
_SCOPED_PROCEDURES: Final = frozenset({'db.index.fulltext.querynodes', 'db.index.vector.querynodes'})
"""Procedures whose output a scoped query can filter: one row per node, the node in a column named `node`."""
_BUILTIN_FUNCTION_NAMESPACES: Final = (
    'date.', 'datetime.', 'localdatetime.', 'localtime.', 'time.', 'duration.', 'point.', 'vector.similarity.',
)  # fmt: skip
"""Dotted names of built-in functions; every other dotted name is a user-defined function (APOC, plugins), which may
read the graph behind the patterns' back. (User functions always live in a namespace, so undotted names are
built-ins.)"""
_QUERY_CLAUSES: Final = frozenset({'MATCH', 'OPTIONAL', 'WITH', 'RETURN', 'UNWIND', 'CALL'})
_PATH_SELECTORS: Final = frozenset({'ANY', 'ALL', 'SHORTEST', 'GROUP', 'GROUPS', 'PATH', 'PATHS'})
_PROJECTION_END: Final = frozenset({'ORDER', 'SKIP', 'LIMIT', 'OFFSET', 'WHERE'})
_OPENERS: Final = {'(': ')', '[': ']', '{': '}'}

_OUTSIDE, _VISIBLE, _IN_SESSION = 0, 1, 2
"""Session levels of a node: possibly outside the pinned session; visible (an entity one MENTIONS hop from the
session, or a value the query computed from what it read); in the session."""


@dataclass(frozen=True)
class _Var:
    """What the checker knows of a variable in scope."""

    node: bool
    """Bound by a node pattern (or an alias of one), so `x.namespace` is the namespace of a node the query read."""
    level: int = _VISIBLE
    session_node: bool = False
    """A `:Session` node (its `id` is a session id)."""


_VALUE: Final = _Var(node=False)


@dataclass(frozen=True)
class _NodePattern:
    at: int
    """Index of its `(` token (for messages)."""
    var: str | None
    labels: frozenset[str]
    """The labels of a plain `:A:B` conjunction (empty for any other label expression)."""
    entries: tuple[tuple[str, tuple[Token, ...]], ...]
    """Literal property-map entries whose key appears once (`{namespace: $namespace}`)."""


@dataclass(frozen=True)
class _RelPattern:
    at: int
    var: str | None
    types: frozenset[str] | None
    """The types of a plain `:A|B` disjunction; None when any type can match."""
    variable: bool
    left: int
    right: int


@dataclass
class _Pattern:
    """The node and relationship patterns of one MATCH (or subquery, comprehension, predicate)."""

    nodes: list[_NodePattern] = field(default_factory=list)
    rels: list[_RelPattern] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    nested: list[tuple[int, int]] = field(default_factory=list)
    """Token ranges of expressions inside the patterns (property values, inline WHERE)."""


def _meet(one: Mapping[str, _Var], other: Mapping[str, _Var]) -> dict[str, _Var]:
    """The variables of two UNION branches: each as weak as it is in the weaker branch."""
    met: dict[str, _Var] = {}
    for name in one.keys() | other.keys():
        a, b = one.get(name, _VALUE), other.get(name, _VALUE)
        met[name] = _Var(
            node=a.node and b.node, level=min(a.level, b.level), session_node=a.session_node and b.session_node
        )
    return met


def _is_param(value: Sequence[Token], name: str) -> bool:
    return len(value) == 1 and value[0].kind == 'param' and value[0].value == name


def _property_of(value: Sequence[Token]) -> tuple[str, str] | None:
    """`(variable, key)` when `value` is exactly `variable.key`."""
    if len(value) == 3 and _is_name(value[0]) and value[1].text == '.' and _is_name(value[2]):
        return value[0].value, value[2].value
    return None


class _ScopeChecker:
    """A recursive reader of just enough Cypher to find every pattern and the variables each one starts from.

    Sound by construction rather than complete: every `(` of the query is tried as the start of a pattern, so a
    relationship pattern is found wherever it hides (predicates, `NOT(a)--(b)`, comprehensions, subqueries); what
    the reader does not understand is refused, never guessed. A variable counts as bound only where Cypher binds
    it (after WITH only what it projects, in `CALL { … }` only what is imported), so a name reused after it left
    scope is a new, unscoped node.
    """

    def __init__(self, source: str, tokens: Sequence[Token], *, namespace: bool, session: bool) -> None:
        self.source = source
        self.tokens = list(tokens)
        self.namespace = namespace
        self.session = session
        self.close = self._brackets()

    # -- errors and small readers ---------------------------------------------------------------------------------

    def _at(self, index: int) -> Token:
        return self.tokens[min(index, len(self.tokens) - 1)]

    def unparsed(self, index: int, what: str) -> ScopeViolationError:
        where = _position(self.source, self._at(index).start) if index < len(self.tokens) else 'the end'
        return ScopeViolationError(
            f'cannot check that this query stays in its scope: {what} at {where}; {_UNPARSED_HINT}', understood=False
        )

    def refuse(self, index: int, what: str, hint: str) -> ScopeViolationError:
        return ScopeViolationError(f'{what} at {_position(self.source, self._at(index).start)}: {hint}')

    def _brackets(self) -> dict[int, int]:
        close: dict[int, int] = {}
        stack: list[int] = []
        for index, token in enumerate(self.tokens):
            if token.kind != 'punct':
                continue
            if token.text in _OPENERS:
                stack.append(index)
            elif token.text in (')', ']', '}'):
                if not stack or _OPENERS[self.tokens[stack[-1]].text] != token.text:
                    raise self.unparsed(index, f'an unmatched {token.text!r}')
                close[stack.pop()] = index
        if stack:
            raise self.unparsed(stack[-1], f'a {self.tokens[stack[-1]].text!r} that is never closed')
        return close

    def kw(self, index: int) -> str | None:
        return _keyword(self.tokens, index) if 0 <= index < len(self.tokens) else None

    def text(self, index: int) -> str:
        return self.tokens[index].text if 0 <= index < len(self.tokens) else ''

    def name(self, index: int) -> str | None:
        return self.tokens[index].value if 0 <= index < len(self.tokens) and _is_name(self.tokens[index]) else None

    def opener(self, index: int, char: str) -> bool:
        return 0 <= index < len(self.tokens) and self.tokens[index].kind == 'punct' and self.tokens[index].text == char

    def skip(self, index: int) -> int:
        """The index after the token at `index`, or after its whole bracket group."""
        token = self.tokens[index]
        return self.close[index] + 1 if token.kind == 'punct' and token.text in _OPENERS else index + 1

    def find(self, start: int, end: int, words: frozenset[str] = frozenset(), punct: str = '') -> int:
        """The first depth-0 index in [start, end) holding one of `words` (keywords) or `punct`, else `end`."""
        index = start
        while index < end:
            token = self.tokens[index]
            if (token.kind == 'punct' and token.text == punct) or (words and self.kw(index) in words):
                return index
            index = self.skip(index)
        return end

    def split(self, start: int, end: int, separator: str = ',') -> list[tuple[int, int]]:
        parts: list[tuple[int, int]] = []
        while True:
            stop = self.find(start, end, punct=separator)
            parts.append((start, stop))
            if stop >= end:
                return parts
            start = stop + 1

    # -- queries and clauses --------------------------------------------------------------------------------------

    def check(self) -> None:
        self.query(0, len(self.tokens), {}, None)

    def query(
        self, start: int, end: int, scope: dict[str, _Var], importable: dict[str, _Var] | None
    ) -> dict[str, _Var]:
        """A query, its UNION branches each from `scope`; returns the variables its RETURN binds (for CALL)."""
        returned: dict[str, _Var] | None = None
        branch = start
        index = start
        while True:
            index = self.find(index, end, frozenset({'UNION'}))
            columns = self.single_query(branch, index, dict(scope), importable)
            returned = columns if returned is None else _meet(returned, columns)
            if index >= end:
                return returned
            index += 1
            if self.kw(index) in ('ALL', 'DISTINCT'):
                index += 1
            branch = index

    def clauses(self, start: int, end: int) -> list[tuple[str, int, int]]:
        starts: list[tuple[str, int]] = []
        index = start
        while index < end:
            keyword = self.kw(index)
            previous = self.kw(index - 1) if index > start else None
            if keyword in _QUERY_CLAUSES and not (
                (keyword == 'WITH' and previous in ('STARTS', 'ENDS'))
                or (keyword in ('MATCH', 'CALL') and previous == 'OPTIONAL')
            ):
                starts.append((keyword, index))
            index = self.skip(index)
        if not starts or starts[0][1] != start:
            raise self.unparsed(start, 'a query that does not start with MATCH, WITH, UNWIND, CALL or RETURN')
        bounds = [index for _, index in starts[1:]] + [end]
        return [(keyword, index, stop) for (keyword, index), stop in zip(starts, bounds, strict=True)]

    def single_query(
        self, start: int, end: int, scope: dict[str, _Var], importable: dict[str, _Var] | None
    ) -> dict[str, _Var]:
        returned: dict[str, _Var] | None = None
        for number, (keyword, begin, stop) in enumerate(self.clauses(start, end)):
            if returned is not None:
                raise self.unparsed(begin, f'{keyword} after RETURN')
            if keyword == 'OPTIONAL':
                keyword = self.kw(begin + 1) or ''
                begin += 1
                if keyword not in ('MATCH', 'CALL'):
                    raise self.unparsed(begin, 'OPTIONAL without MATCH or CALL')
            if keyword == 'MATCH':
                scope = self.match(begin + 1, stop, scope)
            elif keyword == 'CALL':
                scope = self.call(begin + 1, stop, scope)
            elif keyword == 'WITH':
                # an importing WITH (first clause of a `CALL { … }`) projects the outer variables
                source = importable if number == 0 and importable is not None else scope
                scope = self.projection(begin + 1, stop, source)
            elif keyword == 'UNWIND':
                scope = self.unwind(begin + 1, stop, scope)
            else:
                returned = self.projection(begin + 1, stop, scope)
        return returned or {}

    def match(self, start: int, end: int, scope: dict[str, _Var]) -> dict[str, _Var]:
        """`MATCH patterns [WHERE predicate]` (also the body of `EXISTS { … }` and `COUNT { … }`)."""
        where = self.find(start, end, frozenset({'WHERE'}))
        pattern = self.patterns(start, where)
        entries = self.where_entries(where + 1, end) if where < end else {}
        bound = self.resolve(pattern, scope, entries)
        for begin, stop in pattern.nested:  # property values and inline WHERE: only what was bound before
            self.expression(begin, stop, scope)
        inner = {**scope, **bound}
        if where < end:
            self.expression(where + 1, end, inner)
        return inner

    def projection(self, start: int, end: int, scope: dict[str, _Var]) -> dict[str, _Var]:
        """The items of WITH or RETURN; returns the variables after it (only what it projects)."""
        if self.kw(start) == 'DISTINCT':
            start += 1
        tail = self.find(start, end, _PROJECTION_END)
        projected: dict[str, _Var] = {}
        for begin, stop in self.split(start, tail):
            if stop - begin == 1 and self.text(begin) == '*':
                projected.update(scope)
                continue
            alias = None
            if stop - begin >= 3 and self.kw(stop - 2) == 'AS' and self.name(stop - 1) is not None:
                alias, stop = self.name(stop - 1), stop - 2
            if begin >= stop:
                raise self.unparsed(begin, 'an empty projection item')
            self.expression(begin, stop, scope)
            variable = self.name(begin) if stop - begin == 1 else None
            status = scope.get(variable, _VALUE) if variable is not None else _VALUE
            if alias or variable:
                projected[alias or variable or ''] = status
        self.expression(tail, end, projected)
        return projected

    def unwind(self, start: int, end: int, scope: dict[str, _Var]) -> dict[str, _Var]:
        alias = end - 2
        if alias <= start or self.kw(alias) != 'AS' or self.name(end - 1) is None:
            raise self.unparsed(start, 'UNWIND without `AS name`')
        self.expression(start, alias, scope)
        return {**scope, self.name(end - 1) or '': _VALUE}

    def call(self, start: int, end: int, scope: dict[str, _Var]) -> dict[str, _Var]:
        if self.opener(start, '{'):
            body, after = start, self.close[start] + 1
            returned = self.query(body + 1, self.close[body], {}, scope)
        elif self.opener(start, '(') and self.opener(self.close[start] + 1, '{'):
            imported: dict[str, _Var] = {}
            for begin, stop in self.split(start + 1, self.close[start]):
                if begin == stop:
                    continue
                if stop - begin == 1 and self.text(begin) == '*':
                    imported.update(scope)
                elif stop - begin == 1 and (name := self.name(begin)) is not None:
                    if name in scope:
                        imported[name] = scope[name]
                else:
                    raise self.unparsed(begin, 'a CALL (…) scope item that is not a variable')
            body = self.close[start] + 1
            after = self.close[body] + 1
            returned = self.query(body + 1, self.close[body], imported, None)
        else:
            return self.procedure(start, end, scope)
        if after != end:
            raise self.unparsed(after, 'something after a CALL { … } subquery')
        return {**scope, **returned}

    def procedure(self, start: int, end: int, scope: dict[str, _Var]) -> dict[str, _Var]:
        """`CALL db.index.fulltext.queryNodes(…) YIELD node, score WHERE node.namespace = $namespace`: the one kind
        of procedure call a scoped query may make, because its rows can be filtered like a pattern's."""
        name, after = _dotted_name(self.tokens, start)
        if not name:
            raise self.unparsed(start, 'CALL without a procedure name or a { … } subquery')
        usage = (
            'a scoped query may call only db.index.fulltext.queryNodes and db.index.vector.queryNodes, as '
            'CALL db.index.fulltext.queryNodes(…) YIELD node, score WHERE node.namespace = $namespace'
            + (' AND node.session_id = $session_id' if self.session else '')
        )
        if name not in _SCOPED_PROCEDURES:
            raise self.refuse(start, f'procedure {name}', usage + ' (other procedures read outside its patterns)')
        if not self.opener(after, '('):
            raise self.refuse(start, f'procedure {name} without arguments in parentheses', usage)
        self.expression(after + 1, self.close[after], scope)
        index = self.close[after] + 1
        if self.kw(index) != 'YIELD':
            raise self.refuse(start, f'procedure {name} without YIELD', usage)
        where = self.find(index + 1, end, frozenset({'WHERE'}))
        yielded: dict[str, _Var] = {}
        node_alias = None
        for begin, stop in self.split(index + 1, where):
            column = self.name(begin)
            alias = column if stop - begin == 1 else self.name(begin + 2) if self.kw(begin + 1) == 'AS' else None
            if column is None or alias is None or stop - begin not in (1, 3):
                raise self.refuse(begin, 'a YIELD item other than `column [AS name]`', usage)
            if column == 'node':
                node_alias = alias
            yielded[alias] = _VALUE
        entries = self.where_entries(where + 1, end) if where < end else {}
        found = entries.get(node_alias or '', [])
        scoped_ns = any(key == 'namespace' and self.namespace_value(value, scope, {}) for key, value in found)
        scoped_session = any(key == 'session_id' and self.session_value(value, scope) for key, value in found)
        if node_alias is None or (self.namespace and not scoped_ns) or (self.session and not scoped_session):
            raise self.refuse(start, f'procedure {name} whose node is not filtered to the scope', usage)
        yielded[node_alias] = _Var(node=True, level=_IN_SESSION if scoped_session else _VISIBLE)
        inner = {**scope, **yielded}
        if where < end:
            self.expression(where + 1, end, inner)
        return inner

    # -- expressions ----------------------------------------------------------------------------------------------

    def expression(self, start: int, end: int, scope: dict[str, _Var]) -> None:
        """Find every pattern, subquery and user function inside an expression and check it."""
        index = start
        while index < end:
            token = self.tokens[index]
            if token.kind == 'punct' and token.text == '(':
                after = self.pattern_predicate(index, end, scope)
                if after is None:
                    self.group(index, scope)
                    after = self.close[index] + 1
                index = after
                continue
            if token.kind == 'punct' and token.text == '[':
                self.bracket(index, scope)
                index = self.close[index] + 1
                continue
            if token.kind == 'punct' and token.text == '{':
                if index > 0 and self.kw(index - 1) in ('EXISTS', 'COUNT', 'COLLECT'):
                    self.subquery(index, scope)
                else:  # a map literal or a map projection
                    self.expression(index + 1, self.close[index], scope)
                index = self.close[index] + 1
                continue
            if _is_name(token) and (index == 0 or self.text(index - 1) != '.'):
                name, after = _dotted_name(self.tokens, index)
                if '.' in name and self.opener(after, '(') and not name.startswith(_BUILTIN_FUNCTION_NAMESPACES):
                    raise self.refuse(
                        index, f'function {name}()', 'a scoped query calls built-in functions only (a user-defined '
                        'function may read outside its patterns)',
                    )  # fmt: skip
            index += 1

    def pattern_predicate(self, start: int, end: int, scope: dict[str, _Var]) -> int | None:
        """A pattern used as an expression (`WHERE (a)-->(:X)`): checked with what is bound; it binds nothing."""
        found = self.path(start, end)
        if found is None or not found[0].rels:
            return None
        pattern, after = found
        self.resolve(pattern, scope, {})
        for begin, stop in pattern.nested:
            self.expression(begin, stop, scope)
        return after

    def group(self, start: int, scope: dict[str, _Var]) -> None:
        """Parentheses that hold no pattern: a sub-expression, call arguments, or `x IN list WHERE …` of any()/all()/
        none()/single(), or `acc = init, x IN list | …` of reduce() (their variables are local)."""
        end = self.close[start]
        begin = start + 1
        local = dict(scope)
        if self.name(begin) is not None and self.text(begin + 1) == '=' and self.kw(start - 1) == 'REDUCE':
            comma = self.find(begin + 2, end, punct=',')
            self.expression(begin + 2, comma, scope)
            local[self.name(begin) or ''] = _VALUE
            begin = comma + 1
        if self.name(begin) is not None and self.kw(begin + 1) == 'IN':
            body = min(self.find(begin + 2, end, frozenset({'WHERE'})), self.find(begin + 2, end, punct='|'))
            self.expression(begin + 2, body, scope)
            local[self.name(begin) or ''] = _VALUE
            self.expression(body, end, local)
            return
        self.expression(begin, end, local)

    def bracket(self, start: int, scope: dict[str, _Var]) -> None:
        """`[…]`: a pattern comprehension, a list comprehension, or a list / index / slice."""
        end = self.close[start]
        begin = start + 1
        path_variable = None
        if self.name(begin) is not None and self.text(begin + 1) == '=' and self.opener(begin + 2, '('):
            path_variable, begin = self.name(begin), begin + 2
        if self.opener(begin, '('):
            found = self.path(begin, end)
            if found is not None:
                pattern, after = found
                if after < end and (self.kw(after) == 'WHERE' or self.text(after) == '|'):
                    if path_variable is not None:
                        pattern.paths.append(path_variable)
                    body = self.find(after, end, punct='|')
                    entries = self.where_entries(after + 1, body) if self.kw(after) == 'WHERE' else {}
                    local = {**scope, **self.resolve(pattern, scope, entries)}
                    for nested_start, nested_end in pattern.nested:
                        self.expression(nested_start, nested_end, scope)
                    self.expression(after, end, local)
                    return
        if path_variable is None and self.name(begin) is not None and self.kw(begin + 1) == 'IN':
            body = min(self.find(begin + 2, end, frozenset({'WHERE'})), self.find(begin + 2, end, punct='|'))
            self.expression(begin + 2, body, scope)
            self.expression(body, end, {**scope, self.name(begin) or '': _VALUE})
            return
        self.expression(start + 1, end, scope)

    def subquery(self, start: int, scope: dict[str, _Var]) -> None:
        """`EXISTS { … }`, `COUNT { … }`, `COLLECT { … }`: a whole query, or a bare pattern with WHERE; both see the
        outer variables, and bind nothing outside."""
        begin, end = start + 1, self.close[start]
        if begin < end and self.kw(begin) in _QUERY_CLAUSES:
            self.query(begin, end, scope, None)
        else:
            self.match(begin, end, scope)

    def where_entries(self, start: int, end: int) -> dict[str, list[tuple[str, tuple[Token, ...]]]]:
        """`x.key = value` conjuncts of a WHERE, as if `{key: value}` were in x's map. Only when no OR or XOR sits at
        the top (AND binds tighter, so `a OR x.ns = $ns AND b` scopes nothing)."""
        conjuncts: list[tuple[int, int]] = []
        depth = 0
        begin = index = start
        while index < end:
            keyword = self.kw(index)
            if keyword == 'CASE':
                depth += 1
            elif keyword == 'END' and depth:
                depth -= 1
            elif depth == 0 and keyword in ('OR', 'XOR'):
                return {}
            elif depth == 0 and keyword == 'AND':
                conjuncts.append((begin, index))
                begin = index + 1
            index = self.skip(index)
        conjuncts.append((begin, end))
        entries: dict[str, list[tuple[str, tuple[Token, ...]]]] = {}
        for begin, stop in conjuncts:
            equals = self.find(begin, stop, punct='=')
            if equals >= stop:
                continue
            sides = (tuple(self.tokens[begin:equals]), tuple(self.tokens[equals + 1 : stop]))
            for one, other in (sides, sides[::-1]):
                owner = _property_of(one)
                if owner is not None and (other and (_property_of(other) or _is_param(other, other[0].value))):
                    entries.setdefault(owner[0], []).append((owner[1], other))
        return entries

    # -- patterns -------------------------------------------------------------------------------------------------

    def patterns(self, start: int, end: int) -> _Pattern:
        """The comma-separated path patterns of a MATCH (`p = …`, path selectors and shortestPath() included)."""
        pattern = _Pattern()
        if start >= end:
            raise self.unparsed(start, 'MATCH without a pattern')
        for begin, stop in self.split(start, end):
            index = begin
            if self.name(index) is not None and self.text(index + 1) == '=':
                pattern.paths.append(self.name(index) or '')
                index += 2
            while index < stop and (self.kw(index) in _PATH_SELECTORS or self.tokens[index].kind == 'number'):
                index += 1
            inner_end = stop
            if self.kw(index) in ('SHORTESTPATH', 'ALLSHORTESTPATHS') and self.opener(index + 1, '('):
                inner_end = self.close[index + 1]
                if inner_end + 1 != stop:
                    raise self.unparsed(inner_end + 1, 'something after shortestPath(…)')
                index += 2
            if not self.opener(index, '('):
                raise self.unparsed(index, 'a pattern that does not start with a node (…)')
            found = self.path(index, inner_end)
            if found is None or found[1] != inner_end:
                raise self.unparsed(index if found is None else found[1], 'a pattern the checker cannot read')
            self.merge(pattern, found[0])
        return pattern

    @staticmethod
    def merge(into: _Pattern, path: _Pattern) -> None:
        offset = len(into.nodes)
        into.nodes.extend(path.nodes)
        for rel in path.rels:
            into.rels.append(
                _RelPattern(rel.at, rel.var, rel.types, rel.variable, rel.left + offset, rel.right + offset)
            )
        into.nested.extend(path.nested)

    def path(self, start: int, end: int) -> tuple[_Pattern, int] | None:
        """The path pattern starting with the `(` at `start`; None when that `(` is not a node pattern (nor followed by
        a relationship). A relationship after anything the reader cannot take as a node is refused."""
        pattern = _Pattern()
        node = self.node(start, pattern)
        after = self.close[start] + 1
        if node is None:
            if self.rel_starts(after, end):
                raise self.unparsed(start, 'a node pattern the checker cannot read')
            return None
        pattern.nodes.append(node)
        while self.rel_starts(after, end):
            rel, after = self.rel(after, end, len(pattern.nodes) - 1, pattern)
            if not self.opener(after, '(') or after >= end:
                raise self.unparsed(after, 'a relationship pattern not followed by a node pattern')
            following = self.node(after, pattern)
            if following is None:
                raise self.unparsed(after, 'a node pattern the checker cannot read (quantified path patterns '
                                    '((a)-->(b)){1,3} are not supported: write -[:TYPE*1..3]->)')  # fmt: skip
            pattern.nodes.append(following)
            pattern.rels.append(rel)
            after = self.close[after] + 1
        return pattern, after

    def rel_starts(self, index: int, end: int) -> bool:
        return (
            index + 1 < end
            and self.tokens[index].kind == 'punct'
            and self.text(index) in ('-', '<-')
            and self.text(index + 1) in ('-', '->', '[')
        )

    def labels(self, start: int, end: int) -> tuple[list[str], set[str], int]:
        """A label or type expression (`:A:B`, `:A|B`, `IS A&!B`, `:(A|B)`): its names, its operators, and the index
        after it."""
        names: list[str] = []
        operators: set[str] = set()
        index = start
        expect_name = True
        while index < end:
            token = self.tokens[index]
            if token.kind == 'punct' and token.text in (':', '|', '&', '!', '%'):
                operators.add(token.text)
                expect_name = token.text != '%'
            elif token.kind == 'punct' and token.text == '(':
                operators.add('(')
                index = self.close[index] + 1
                expect_name = False
                continue
            elif _is_name(token) and expect_name:
                names.append(token.value)
                expect_name = False
            else:
                break
            index += 1
        return names, operators, index

    def props(self, start: int, pattern: _Pattern) -> tuple[tuple[str, tuple[Token, ...]], ...] | None:
        """A literal property map `{key: value, …}`: its entries whose key is written once; None when unreadable."""
        entries: list[tuple[str, tuple[Token, ...]]] = []
        end = self.close[start]
        if start + 1 == end:
            return ()
        for begin, stop in self.split(start + 1, end):
            key = self.name(begin)
            if key is None or self.text(begin + 1) != ':' or begin + 2 >= stop:
                return None
            entries.append((key, tuple(self.tokens[begin + 2 : stop])))
            pattern.nested.append((begin + 2, stop))
        keys = [key for key, _ in entries]
        return tuple((key, value) for key, value in entries if keys.count(key) == 1)

    def node(self, start: int, pattern: _Pattern) -> _NodePattern | None:
        """`( [var] [labels] [{map} | $map] [WHERE …] )`, or None when the parentheses hold anything else."""
        end = self.close[start]
        index = start + 1
        var = None
        if index < end and _is_name(self.tokens[index]) and self.kw(index) not in ('WHERE', 'IS'):
            var, index = self.tokens[index].value, index + 1
        labels: frozenset[str] = frozenset()
        if index < end and (self.text(index) == ':' or self.kw(index) == 'IS'):
            names, operators, index = self.labels(index + 1 if self.kw(index) == 'IS' else index, end)
            if not names and '%' not in operators:
                return None
            labels = frozenset(names) if operators <= {':'} else frozenset()
        entries: tuple[tuple[str, tuple[Token, ...]], ...] = ()
        nested_mark = len(pattern.nested)
        if self.opener(index, '{'):
            read = self.props(index, pattern)
            if read is None:
                del pattern.nested[nested_mark:]
                return None
            entries, index = read, self.close[index] + 1
        elif index < end and self.tokens[index].kind == 'param':
            index += 1
        if index < end and self.kw(index) == 'WHERE':  # `(x WHERE x.namespace = $namespace)` scopes like a map
            pattern.nested.append((index + 1, end))
            if var is not None:
                entries += tuple(self.where_entries(index + 1, end).get(var, ()))
            index = end
        if index != end:
            del pattern.nested[nested_mark:]
            return None
        return _NodePattern(start, var, labels, entries)

    def rel(self, start: int, end: int, left: int, pattern: _Pattern) -> tuple[_RelPattern, int]:
        """`-[…]->`, `<-[…]-`, `--`, `-->`, `<--`, `<-->`, with an optional quantifier (`+`, `*`, `{1,3}`)."""
        index = start + 1
        var = None
        types: frozenset[str] | None = None
        variable = False
        if self.opener(index, '['):
            close = self.close[index]
            inner = index + 1
            if inner < close and _is_name(self.tokens[inner]) and self.kw(inner) not in ('WHERE', 'IS'):
                var, inner = self.tokens[inner].value, inner + 1
            if inner < close and (self.text(inner) == ':' or self.kw(inner) == 'IS'):
                names, operators, inner = self.labels(inner + 1 if self.kw(inner) == 'IS' else inner, close)
                if not names:
                    raise self.unparsed(inner, 'a relationship type expression the checker cannot read')
                types = frozenset(names) if operators <= {':', '|'} else None
            if inner < close and self.text(inner) == '*':
                variable = True
                inner += 1
                while inner < close and (self.tokens[inner].kind == 'number' or self.text(inner) == '..'):
                    inner += 1
            if self.opener(inner, '{'):
                if self.props(inner, pattern) is None:
                    raise self.unparsed(inner, 'a relationship property map the checker cannot read')
                inner = self.close[inner] + 1
            elif inner < close and self.tokens[inner].kind == 'param':
                inner += 1
            if inner < close and self.kw(inner) == 'WHERE':
                pattern.nested.append((inner + 1, close))
                inner = close
            if inner != close:
                raise self.unparsed(inner, 'a relationship pattern the checker cannot read')
            index = close + 1
        if self.text(index) not in ('-', '->'):
            raise self.unparsed(index, 'a relationship pattern that does not end in - or ->')
        index += 1
        if index < end and self.text(index) in ('+', '*'):
            variable, index = True, index + 1
        elif self.opener(index, '{'):
            if any(t.kind != 'number' and t.text != ',' for t in self.tokens[index + 1 : self.close[index]]):
                raise self.unparsed(index, 'a relationship quantifier other than {m,n}')
            variable, index = True, self.close[index] + 1
        return _RelPattern(start, var, types, variable, left, left + 1), index

    # -- the rule -------------------------------------------------------------------------------------------------

    def namespace_value(self, value: Sequence[Token], scope: dict[str, _Var], scoped: dict[str, bool]) -> bool:
        """`$namespace`, or `x.namespace` of a node the query read in its namespace."""
        if _is_param(value, 'namespace'):
            return True
        owner = _property_of(value)
        if owner is None or owner[1] != 'namespace':
            return False
        if owner[0] in scope:
            return scope[owner[0]].node
        return scoped.get(owner[0], False)

    def session_value(
        self, value: Sequence[Token], scope: dict[str, _Var], levels: dict[str, _Var] | None = None
    ) -> bool:
        """`$session_id`, `x.session_id` of a node in the session, or `x.id` of the session's `Session` node."""
        if _is_param(value, 'session_id'):
            return True
        owner = _property_of(value)
        if owner is None:
            return False
        known = scope.get(owner[0]) or (levels or {}).get(owner[0])
        if known is None or not known.node or known.level < _IN_SESSION:
            return False
        return owner[1] == 'session_id' or (owner[1] == 'id' and known.session_node)

    def resolve(
        self,
        pattern: _Pattern,
        scope: dict[str, _Var],
        where: Mapping[str, Sequence[tuple[str, tuple[Token, ...]]]],
    ) -> dict[str, _Var]:
        """Check one pattern (all the paths of a MATCH together) and return the variables it binds.

        Namespace: the paths form components (joined by relationships and shared variables, since edges never cross
        namespaces); each needs a node pinned to `$namespace` or bound before. Session: levels spread from pinned
        nodes over session-preserving relationship types; one hop of any type makes a node visible.
        """
        nodes = pattern.nodes
        entries = [list(node.entries) + list(where.get(node.var or '', ())) for node in nodes]
        groups: dict[str, list[int]] = {}
        for index, node in enumerate(nodes):
            if node.var is not None:
                groups.setdefault(node.var, []).append(index)
        if self.namespace:
            self.check_namespace(pattern, scope, entries, groups)
        levels = self.session_levels(pattern, scope, entries, groups) if self.session else [_IN_SESSION] * len(nodes)
        bound: dict[str, _Var] = {}
        for var, members in groups.items():
            session_node = any('Session' in nodes[i].labels for i in members) or (
                var in scope and scope[var].session_node
            )
            bound[var] = _Var(node=True, level=levels[members[0]], session_node=session_node)
        for rel in pattern.rels:
            if rel.var is not None and rel.var not in bound:
                bound[rel.var] = _Var(node=False, level=min(levels[rel.left], levels[rel.right]))
        for path_variable in pattern.paths:
            bound[path_variable] = _VALUE
        return bound

    def check_namespace(
        self,
        pattern: _Pattern,
        scope: dict[str, _Var],
        entries: list[list[tuple[str, tuple[Token, ...]]]],
        groups: dict[str, list[int]],
    ) -> None:
        nodes = pattern.nodes
        parent = list(range(len(nodes)))

        def root(index: int) -> int:
            while parent[index] != index:
                parent[index] = parent[parent[index]]
                index = parent[index]
            return index

        for members in groups.values():
            for member in members[1:]:
                parent[root(member)] = root(members[0])
        for rel in pattern.rels:
            parent[root(rel.right)] = root(rel.left)
        seeded: set[int] = set()
        for rel in pattern.rels:
            if rel.var is not None and rel.var in scope:
                seeded.add(root(rel.left))
        changed = True
        while changed:
            changed = False
            scoped_vars = {var: root(members[0]) in seeded for var, members in groups.items()}
            for index, node in enumerate(nodes):
                if root(index) in seeded:
                    continue
                if (node.var is not None and node.var in scope) or any(
                    key == 'namespace' and self.namespace_value(value, scope, scoped_vars)
                    for key, value in entries[index]
                ):
                    seeded.add(root(index))
                    changed = True
        for index, node in enumerate(nodes):
            if root(index) not in seeded:
                raise self.refuse(node.at, 'this pattern can read other namespaces', _NAMESPACE_HINT)

    def session_levels(
        self,
        pattern: _Pattern,
        scope: dict[str, _Var],
        entries: list[list[tuple[str, tuple[Token, ...]]]],
        groups: dict[str, list[int]],
    ) -> list[int]:
        nodes, rels = pattern.nodes, pattern.rels
        for rel in rels:
            if rel.variable and (rel.types is None or not rel.types <= _SESSION_PRESERVING):
                raise self.refuse(
                    rel.at, 'a variable-length relationship that can leave the session',
                    'give it session-preserving types only: -[:NEXT|SUMMARIZES|CONTAINS|IN_SESSION*1..3]->',
                )  # fmt: skip
        levels = [_OUTSIDE] * len(nodes)
        session_nodes = [
            'Session' in node.labels or (node.var in scope and scope[node.var].session_node) for node in nodes
        ]
        for members in groups.values():
            if any(session_nodes[i] for i in members):
                for member in members:
                    session_nodes[member] = True
        for index, node in enumerate(nodes):
            if node.var is not None and node.var in scope:
                levels[index] = scope[node.var].level
        for rel in rels:
            if rel.var is not None and rel.var in scope:
                for end in (rel.left, rel.right):
                    levels[end] = max(levels[end], min(scope[rel.var].level, _IN_SESSION))

        def unify() -> None:
            for members in groups.values():
                top = max(levels[i] for i in members)
                for member in members:
                    levels[member] = top

        changed = True
        while changed:
            before = list(levels)
            unify()
            known = {
                var: _Var(node=True, level=levels[members[0]], session_node=session_nodes[members[0]])
                for var, members in groups.items()
            }
            for index in range(len(nodes)):
                for key, value in entries[index]:
                    if (key == 'session_id' or (key == 'id' and session_nodes[index])) and self.session_value(
                        value, scope, known
                    ):
                        levels[index] = _IN_SESSION
            for rel in rels:
                preserving = rel.types is not None and rel.types <= _SESSION_PRESERVING
                if preserving and _IN_SESSION in (levels[rel.left], levels[rel.right]):
                    levels[rel.left] = levels[rel.right] = _IN_SESSION
            unify()
            changed = levels != before
        for rel in rels:
            if not rel.variable:
                for near, far in ((rel.left, rel.right), (rel.right, rel.left)):
                    if levels[near] == _IN_SESSION:
                        levels[far] = max(levels[far], _VISIBLE)
        unify()
        for index, node in enumerate(nodes):
            if levels[index] < _VISIBLE:
                raise self.refuse(node.at, 'this node can be outside the pinned session', _SESSION_HINT)
        return levels


def check_scope(
    cypher: str, tokens: Sequence[Token] | None = None, *, namespace: bool = True, session: bool = False
) -> None:
    """Refuse a query that could read outside `$namespace` (and, with `session=True`, outside `$session_id`), before
    it is sent anywhere.

    Namespace (what `Neo4jStore.query` always applies): every MATCH / OPTIONAL MATCH pattern, pattern predicate,
    pattern comprehension and `EXISTS`/`COUNT`/`COLLECT` subquery must be anchored in the namespace: each connected
    part of it needs a node with `{namespace: $namespace}` (or `{namespace: x.namespace}` of a node read in it, or a
    top-level `WHERE x.namespace = $namespace`), or a variable bound earlier, because every relationship joins two
    nodes of one namespace. Procedures are refused but full-text / vector index queries filtered the same way;
    user-defined (dotted) functions are refused.

    Session (what the MCP server adds when a session is in effect; namespace-blind, so pair it with the namespace
    check or a one-namespace view): every node must be pinned with `{session_id: $session_id}` (a `:Session` with
    `{id: $session_id}`), reached from a pinned node over NEXT, SUMMARIZES, CONTAINS or IN_SESSION, or be one hop
    from one (an Entity the session MENTIONS: entities are shared by the namespace's sessions, so a second hop
    from an entity is refused).

    Anything the checker cannot read is refused with `understood=False` (fail closed).

    Raises:
        ScopeViolationError: what could leave the scope, where, and what to add.
        ReadOnlyViolationError, QueryError: from `prepare_query` when `tokens` is not given.
    """
    if tokens is None:
        cypher, tokens = prepare_query(cypher)
    if not tokens or not (namespace or session):
        return
    _ScopeChecker(cypher, tokens, namespace=namespace, session=session).check()


# -- the embedded subset (grand-cypher over the networkx view) --------------------------------------------------

EMBEDDED_SUBSET: Final = (
    'the embedded store runs a read-only subset of Cypher through grand-cypher: one or more MATCH patterns '
    '(labels, {property: value} maps, -[:TYPE]->, -[:TYPE*1..3]->), WHERE with comparisons, AND/OR/NOT, IN [...], '
    'STARTS WITH/ENDS WITH/CONTAINS, IS NULL, RETURN properties or nodes with AS (RETURN DISTINCT without AS), '
    'count/sum/avg/min/max/collect, ORDER BY, SKIP and LIMIT; OPTIONAL MATCH, WITH, UNWIND, CALL, UNION, CASE, '
    'arithmetic in RETURN '
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
        # raw non-ASCII: grand-cypher reads each \uXXXX alone, so an escaped emoji would split into two surrogates
        return json.dumps(value, ensure_ascii=False)
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
        return json.dumps(token.value, ensure_ascii=False)
    if token.kind == 'quoted':
        if _PLAIN_NAME.fullmatch(token.value) is None:
            raise _unsupported(source, token, 'a `quoted name` that is not a plain identifier')
        return token.value
    keyword = _keyword(tokens, index)
    if keyword is None or (index > 0 and tokens[index - 1].text == '.'):
        return None
    if keyword == 'WITH' and index > 0 and _keyword(tokens, index - 1) in ('STARTS', 'ENDS'):
        return None  # the string operator, not the clause
    if keyword in _NEEDS_NEO4J and not (keyword in _AGGREGATES and following == '('):
        raise _unsupported(source, token, keyword)
    if following == '(' and keyword in _AGGREGATES:
        return keyword
    if following == '(' and keyword not in _SUPPORTED_FUNCTIONS and keyword not in _CLAUSE_WORDS:
        raise _unsupported(source, token, f'function {token.text}()')
    return None


_MATCH_ENDS: Final = frozenset({'WHERE', 'RETURN', 'WITH', 'ORDER', 'SKIP', 'LIMIT', 'UNWIND', 'CALL', 'UNION'})


def _relabelled(source: str, tokens: Sequence[Token]) -> dict[int, str]:
    """Replacements that give a node variable reused in a later `MATCH` clause the label it was bound with.

    grand-cypher joins `MATCH (b:EvictedBlock …) MATCH (b)-->(e)` with the label dropped (`b` then binds mementos
    too); written `(b:EvictedBlock)` again it keeps it. Clauses sharing no variable stay as they are, but are
    refused with ORDER BY, which grand-cypher applies wrongly to their combinations.
    """
    clauses: list[tuple[int, list[tuple[int, str, str | None]]]] = []  # MATCH index, (token index, name, label)
    nodes: list[tuple[int, str, str | None]] | None = None
    for index, token in enumerate(tokens):
        keyword = _keyword(tokens, index)
        if keyword == 'MATCH':
            nodes = []
            clauses.append((index, nodes))
        elif keyword in _MATCH_ENDS:
            nodes = None
        elif nodes is not None and token.kind == 'word' and index and tokens[index - 1].text == '(':
            labelled = index + 2 < len(tokens) and tokens[index + 1].text == ':'
            nodes.append((index, token.text, tokens[index + 2].text if labelled else None))
    labels: dict[str, str | None] = {}
    replacements: dict[int, str] = {}
    apart: list[int] = []
    for position, (match_index, clause_nodes) in enumerate(clauses):
        if position and not any(name in labels for _, name, _ in clause_nodes):
            apart.append(match_index)
        for index, name, label in clause_nodes:
            bound = labels.get(name)
            if label is None and bound is not None:
                replacements[index] = f'{name}:{bound}'
        for _, name, label in clause_nodes:
            labels.setdefault(name, label)
    if apart and any(_keyword(tokens, i) == 'ORDER' for i in range(len(tokens))):
        raise _unsupported(source, tokens[apart[0]], 'ORDER BY over MATCH clauses that share no variable')
    return replacements


def _counted_rows(source: str, tokens: Sequence[Token]) -> dict[int, str]:
    """Replacements that make `count(*)` (which grand-cypher cannot parse) `count(v)` of a node variable of the
    query: every variable is bound in every row (no OPTIONAL MATCH here), so both count the rows. Not one the query
    counts itself: grand-cypher would return the two as one column."""
    stars = [
        index + 2
        for index in range(len(tokens) - 3)
        if _keyword(tokens, index) == 'COUNT' and [t.text for t in tokens[index + 1 : index + 4]] == ['(', '*', ')']
    ]
    if not stars:
        return {}
    first_match = next((index for index in range(len(tokens)) if _keyword(tokens, index) == 'MATCH'), len(tokens))
    nodes = [
        token.text
        for index, token in enumerate(tokens)
        if index > first_match and token.kind == 'word' and tokens[index - 1].text == '('
        and _keyword(tokens, index - 2) not in _AGGREGATES | _SUPPORTED_FUNCTIONS
    ]  # fmt: skip
    counted = {
        tokens[index + 2].text
        for index in range(len(tokens) - 3)
        if _keyword(tokens, index) in _AGGREGATES and tokens[index + 1].text == '(' and tokens[index + 3].text == ')'
    }
    variable = next((name for name in nodes if name not in counted), None)
    if variable is None:
        raise _unsupported(
            source, tokens[stars[0]], 'count(*) without a node variable it does not also count (name one: (m:Memento))'
        )
    return dict.fromkeys(stars, variable)


def _translate(
    source: str, tokens: Sequence[Token], params: Mapping[str, Any], counted: Mapping[int, str] | None = None
) -> str:
    """Rewrite a checked query for grand-cypher: parameters become safely quoted literals, single-quoted strings
    double-quoted, aggregate names upper-cased, comments dropped, a variable reused in a later `MATCH` given its
    label (`_relabelled`), `count(*)` counting the variable `counted` gives (`_counted_rows`). Everything else
    stays byte for byte (grand-cypher needs `-[` and `]-` unsplit)."""
    pieces: list[str] = []
    cursor = 0
    distinct: Token | None = None
    # each token's own refusal (OPTIONAL, WITH, a function) first: it names the cause, where the shape of the
    # MATCH clauses `_relabelled` reads may be off only because of it
    translated = [_translate_token(source, tokens, index, params) for index in range(len(tokens))]
    relabelled = _relabelled(source, tokens) | dict(counted or {})
    for index, token in enumerate(tokens):
        keyword = _keyword(tokens, index)
        if keyword == 'DISTINCT' and index > 0 and tokens[index - 1].text == '(':
            raise _unsupported(
                source, token, 'DISTINCT inside an aggregate (`RETURN DISTINCT` the values and count the rows)'
            )
        if keyword == 'DISTINCT':
            distinct = token
        elif keyword == 'AS' and distinct is not None:
            raise _unsupported(source, distinct, 'RETURN DISTINCT with AS aliases (grand-cypher mis-handles them)')
        replacement = relabelled.get(index) or translated[index]
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


_COMPUTED_OVER_MATCHES: Final = re.compile(r'\b(?:count|sum|avg|min|max|collect)\s*\(|\bDISTINCT\b', re.IGNORECASE)
"""Aggregations and DISTINCT: a query using them is matched whole on the embedded store (a string or name
holding one of these words only costs the early stop)."""


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

    from ._cypher_nulls import apply as apply_null_semantics

    apply_null_semantics()
    source, tokens = prepare_query(cypher)
    _refuse_undirected(source, tokens)
    # grand-cypher stops matching at its limit: fine for plain rows (one more than the cap says "too many"), wrong
    # for what is computed over every match (a count, DISTINCT rows), which would come out of the first few, and
    # for a query of several MATCH clauses, whose patterns it cuts at the limit each before WHERE joins them. The
    # query's own SKIP / LIMIT likewise cut the matches there, so they are applied to the rows here instead.
    matches = sum(_keyword(tokens, index) == 'MATCH' for index in range(len(tokens)))
    whole = _COMPUTED_OVER_MATCHES.search(source) is not None or matches > 1
    window = slice(None)
    if whole:
        tokens, window = _rows_window(tokens, params)
    counted = _counted_rows(source, tokens)
    translated = _translate(source, tokens, params, counted)

    def work() -> list[dict[str, Any]]:
        engine = GrandCypher(graph, limit=None if whole else limit + 1)
        # grand-cypher's experimental property-map hints prune candidates pairwise: a 5,000-node MATCH took 6 s
        # with them and 0.09 s without.
        engine.auto_node_jsondata_hints = False
        return _rows(engine.run(translated))

    try:
        rows: list[dict[str, Any]] = _run_with_timeout(work, timeout)
    except UnexpectedInput as exc:
        where = 'at its end' if exc.line < 0 else f'line {exc.line}, column {exc.column}'  # lark: -1 when input ran out
        raise UnsupportedQueryError(
            f'the embedded store cannot run this query ({where}: not in its subset, or not valid Cypher); '
            f'{EMBEDDED_SUBSET}'
        ) from exc
    except QueryError:
        raise
    except (LarkError, Exception) as exc:  # grand-cypher's own failures: say so, never a half-answer
        raise UnsupportedQueryError(f'the embedded store failed on this query ({exc!r}); {EMBEDDED_SUBSET}') from exc
    items = _return_items(source, tokens)
    rows = _source_names(rows, items, next(iter(counted.values()), None)) or _empty_aggregation(items)
    rows = rows[window]
    if len(rows) > limit:
        raise QueryError(row_limit_message(limit))
    return rows


def _refuse_undirected(source: str, tokens: Sequence[Token]) -> None:
    """grand-cypher matches a relationship without a direction (`(a)-[:MENTIONS]-(b)`, `(a)--(b)`) to nothing: an
    empty answer, where Neo4j matches both directions. Refused, naming the direction to write."""
    for index in range(len(tokens) - 2):
        if tokens[index].text != ')' or tokens[index + 1].text != '-':
            continue
        end = index + 2
        if tokens[end].text == '[':
            depth = 0
            while end < len(tokens):
                depth += (tokens[end].text == '[') - (tokens[end].text == ']')
                if depth == 0:
                    break
                end += 1
            end += 1
            if end >= len(tokens) or tokens[end].text != '-':
                continue  # `]->`: directed
            end += 1
        elif tokens[end].text == '-':
            end += 1
        else:
            continue
        if end < len(tokens) and tokens[end].text == '(':
            raise _unsupported(
                source,
                tokens[index + 1],
                'a relationship without a direction (write it: `(b)-[:MENTIONS]->(e)`, `(m)-[:SUMMARIZES]->(b)`, '
                '`(b)-[:NEXT]->(c)`; for either direction, run the query once each way)',
            )


def _rows_window(tokens: list[Token], params: Mapping[str, Any]) -> tuple[list[Token], slice]:
    """The query without its trailing `SKIP n` / `LIMIT n`, and those as a slice of the rows."""
    values: dict[str, int] = {}
    end = len(tokens)
    while end >= 2 and _keyword(tokens, end - 2) in ('SKIP', 'LIMIT'):
        token = tokens[end - 1]
        keyword = str(_keyword(tokens, end - 2))
        raw = params.get(token.value) if token.kind == 'param' else token.text
        value = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
        if token.kind != 'param' and str(raw).isdigit():
            value = int(str(raw))
        if value is None or value < 0:
            raise QueryError(f'{keyword} takes a whole number of rows, 0 or more, not {raw!r}')
        values[keyword] = value
        end -= 2
    skip = values.get('SKIP', 0)
    stop = None if 'LIMIT' not in values else skip + values['LIMIT']
    return tokens[:end], slice(skip, stop)


_EMPTY_AGGREGATE: Final = {'COUNT': 0, 'SUM': 0}
"""What an aggregate gives over no rows in Cypher (`collect`: an empty list; `avg`, `min`, `max`: null)."""


def _return_items(source: str, tokens: Sequence[Token]) -> list[tuple[str, str | None, str | None]]:
    """The RETURN items of a query as `(source text, alias, aggregate)`: the aggregate's name when the item is one
    plain aggregate call (`count(m)`), else `None`. Empty when there is not exactly one RETURN."""
    starts = [i for i in range(len(tokens)) if _keyword(tokens, i) == 'RETURN']
    if len(starts) != 1:
        return []
    items: list[tuple[str, str | None, str | None]] = []
    item_start, depth = starts[0] + 1, 0
    for end in range(item_start, len(tokens) + 1):
        keyword = _keyword(tokens, end) if end < len(tokens) else None
        text = tokens[end].text if end < len(tokens) else ''
        depth += (text in '([{') - (text in ')]}') if text else 0
        if end < len(tokens) and (depth > 0 or (text != ',' and keyword not in ('ORDER', 'SKIP', 'LIMIT'))):
            continue
        item = tokens[item_start:end]
        if item:
            aliased = len(item) >= 3 and _keyword(tokens, end - 2) == 'AS'
            expression = item[:-2] if aliased else item
            name = _keyword(tokens, item_start)
            plain = (
                name in _AGGREGATES
                and len(expression) >= 3
                and expression[1].text == '('
                and expression[-1].text == ')'
            )
            items.append(
                (
                    source[expression[0].start : expression[-1].end],
                    item[-1].text if aliased else None,
                    name if plain else None,
                )
            )
        if end == len(tokens) or text != ',':
            break
        item_start = end + 1
    return items


def _source_names(
    rows: list[dict[str, Any]], items: Sequence[tuple[str, str | None, str | None]], counted: str | None = None
) -> list[dict[str, Any]]:
    """Columns named as the query wrote them: grand-cypher names an unaliased aggregate as translated (`COUNT(b)`,
    and `count(*)` after the variable `counted` it counts), Neo4j as written (`count(b)`, `count(*)`)."""
    written = {text.upper(): text for text, alias, aggregate in items if alias is None and aggregate is not None}
    for key in list(written):
        if counted is not None and re.fullmatch(r'COUNT\s*\(\s*\*\s*\)', key):
            written[f'COUNT({counted.upper()})'] = written.pop(key)
    if not rows or not written:
        return rows
    return [{written.get(key.upper(), key): value for key, value in row.items()} for row in rows]


def _empty_aggregation(items: Sequence[tuple[str, str | None, str | None]]) -> list[dict[str, Any]]:
    """Over no match, a RETURN of aggregates only is one row in Cypher (`count(m)` is 0), which grand-cypher
    leaves out; a RETURN with any grouping key is no row, as it returns."""
    if not items or any(aggregate is None for _, _, aggregate in items):
        return []
    return [
        {
            alias or text: [] if aggregate == 'COLLECT' else _EMPTY_AGGREGATE.get(str(aggregate))
            for text, alias, aggregate in items
        }
    ]


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
    # a block's (or a micro-compacted part's) text is not stored on its row (the eviction's write stays small): the
    # full-text index holds it, as rendered from the archived messages, ideographs spaced apart as FTS5 needs them
    # (`text_columns`)
    texts = dict(
        conn.execute(
            'SELECT item_id, text FROM text_fts WHERE namespace = ? AND ('
            "(item_id >= 'blk_' AND item_id < 'blk`') OR (item_id >= 'prt_' AND item_id < 'prt`'))",
            (namespace,),
        )
    )
    previous: tuple[str, str] | None = None  # (session_id, block id) of the last 'block' seen
    for row in rows:
        block_id, session_id, kind = row[0], row[1], row[3]
        props = dict(zip(_VIEW_BLOCK_COLUMNS, row, strict=True))
        props['text'] = texts.get(block_id, props['text'])
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
