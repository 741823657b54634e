"""`_server` -- the memory tools over one store, scoped to one namespace (and optionally one session).

Every tool reads through the store's scoped reads, so a block, memento or page of another namespace (or, when the
server is pinned to a session, of another session) is simply not found. Answers are sized for a context window
(~3k tokens, like the agent's own memory tools) and long ones are split into parts the caller asks for in turn.
Anticipated failures (unknown id, refused write, bad Cypher, store down) come back as MCP tool errors with a
message saying what to do; the SDK turns anything else into a generic tool error, so no call ends the server.
A store that stops answering (a frozen Neo4j server, a lock never released) is waited for at most `store_timeout`
per call, as the capability waits for it: the call fails with a message, and while the call given up on has not
returned, the calls after it fail at once instead of each holding a thread for as long as the store hangs.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from .._text import echo
from .._threads import StoreCalls
from .._tokens import TokenizerUnavailableError
from ..knowledge_graph import DEFAULT_NAMESPACE, PageRecord, item_id
from ..knowledge_graph.recall import (
    EMPTY_QUERY,
    AmbiguousPageError,
    NoSuchPartError,
    find_page,
    out_of_range,
    page_part,
    recall,
    render_recall,
)
from ..knowledge_graph.store import (
    NEO4J_SCHEMES,
    BlockIntegrityError,
    ChainIntegrityError,
    GraphStore,
    NotFoundError,
    ReadOnlyViolationError,
    ScopeViolationError,
    StoreError,
    StoreTimeoutError,
    recover_chain,
)
from ..knowledge_graph.store._conform import require_store
from ..knowledge_graph.store._cypher import DEFAULT_QUERY_TIMEOUT, check_scope

if TYPE_CHECKING:  # pydantic-ai's embeddings load only when a model is given: a server without one starts faster
    from pydantic_ai.embeddings import EmbeddingModel

    from ..knowledge_graph.dense import DenseIndex

__all__ = ('OUTPUT_CHARS', 'MemoryScope', 'MemoryTools', 'create_server')

logger = logging.getLogger('mementograph')

OUTPUT_CHARS: Final = 12_000
"""Characters one tool answer carries (~3k tokens, the agent tools' budget); longer answers come in parts."""

MAX_RECALL_K: Final = 20
SYNC_WAIT_SECONDS: Final = 5.0
"""How long a recall waits for new blocks to be embedded before answering with the vectors it has."""
DEFAULT_QUERY_ROWS: Final = 100
MAX_QUERY_ROWS: Final = 1_000
MAX_CELL_CHARS: Final = 2_000
"""A query cell longer than this is cut in the answer (archived messages are one `recover_block` away)."""
MAX_SESSIONS_LISTED: Final = 50

_READ_ONLY: Final = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)
_TOOLS: Final = ('recall', 'recover_block', 'list_pages', 'retrieve_page', 'query_memory', 'stats')

T = TypeVar('T')


@dataclass(frozen=True)
class MemoryScope:
    """What a server may read: one namespace, and one session of it or (`session_id=None`) all of them."""

    namespace: str = DEFAULT_NAMESPACE
    session_id: str | None = None


def _parts(text: str, limit: int | None = None) -> list[str]:
    """`text` in pieces of at most `limit` (default `OUTPUT_CHARS`) characters, cut after a newline when one is in
    the second half."""
    limit = OUTPUT_CHARS if limit is None else limit
    pieces: list[str] = []
    while len(text) > limit:
        cut = text.rfind('\n', limit // 2, limit)
        cut = limit if cut < 0 else cut + 1
        pieces.append(text[:cut])
        text = text[cut:]
    pieces.append(text)
    return pieces


def _pick(pieces: Sequence[str], part: int) -> tuple[int, str]:
    """Part `part` (1-based) of an answer; one past the last is an error that says how many there are."""
    if not 1 <= part <= len(pieces):
        raise ToolError(f'{out_of_range(len(pieces), part)}.')
    return part, pieces[part - 1]


def _cut_cells(value: Any) -> Any:
    """Query values as JSON-ready data with long strings cut (bytes as UTF-8 text when they are, else a note)."""
    if isinstance(value, bytes | bytearray):
        try:
            value = bytes(value).decode('utf-8')
        except UnicodeDecodeError:
            return f'<{len(value)} bytes>'
    if isinstance(value, str):
        if len(value) > MAX_CELL_CHARS:
            return value[:MAX_CELL_CHARS] + f'...[{len(value) - MAX_CELL_CHARS} more characters cut]'
        return value
    if isinstance(value, dict):
        return {str(key): _cut_cells(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_cut_cells(item) for item in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return str(value)


class MemoryTools:
    """The six read-only memory tools, bound to one open store and one scope.

    Library code can call the methods directly; `create_server` registers them on an `MCPServer`.
    """

    def __init__(
        self,
        store: GraphStore,
        scope: MemoryScope | None = None,
        dense: DenseIndex | None = None,
        *,
        sync_wait: float = SYNC_WAIT_SECONDS,
    ) -> None:
        self.store = require_store(store)  # a store lacking a member would fail a tool call, not the start
        self.scope = scope or MemoryScope()
        self.sync_wait = sync_wait
        """Seconds a recall waits for the vectors to catch up before it answers with those embedded so far."""
        self._background = None
        if dense is not None:
            from ..knowledge_graph.dense import BackgroundSync

            self._background = BackgroundSync(dense)

    @property
    def dense(self) -> DenseIndex | None:
        """Vectors for `hybrid` recall (entity graph + full text + meaning), kept up to date at each call."""
        return None if self._background is None else self._background.index

    # -- scope ------------------------------------------------------------------------------------------------

    def _session(self, requested: str | None) -> str | None:
        """The session a call reads: the pinned one, else the caller's, else `None` (the whole namespace)."""
        requested = (requested or '').strip() or None
        pinned = self.scope.session_id
        if requested is None:
            return pinned
        if pinned is not None and requested != pinned:
            raise ToolError(f'This server serves session {pinned!r} only; leave session_id out.')
        if pinned is None:  # a misspelt id would otherwise read as an empty session
            with self._store_errors():
                known = any(s.id == requested for s in self.store.list_sessions(namespace=self.scope.namespace))
            if not known:
                raise ToolError(f'No session {requested!r} in {self._where(None)}; stats() lists the recent ones.')
        return requested

    def _where(self, session_id: str | None) -> str:
        where = f'namespace {self.scope.namespace!r}'
        return where + (f', session {session_id!r}' if session_id else '')

    @contextmanager
    def _store_errors(self) -> Iterator[None]:
        """Store failures, and a tokenizer that cannot load (offline), as tool errors with their own message (it says
        what to check or set)."""
        try:
            yield
        except (StoreError, TokenizerUnavailableError, ValueError) as exc:
            raise ToolError(str(exc)) from exc

    # -- tools ------------------------------------------------------------------------------------------------

    def recall(
        self,
        query: Annotated[str, Field(description='What to look for: names, files, symbols, errors, values, dates.')],
        k: Annotated[
            int, Field(description=f'How many blocks to return (1-{MAX_RECALL_K}).', ge=1, le=MAX_RECALL_K)
        ] = 5,
        session_id: Annotated[str | None, Field(description='Only this session (default: all in scope).')] = None,
        since: Annotated[str | None, Field(description='Only blocks that started at/after this ISO-8601 time.')] = None,
        until: Annotated[str | None, Field(description='Only blocks that started before this ISO-8601 time.')] = None,
    ) -> str:
        """Find archived conversation blocks by the entities and words they mention (entity graph + BM25, fused;
        by meaning too when the server has an embedding model), best first, each with its memento and why it
        matched. Recover any hit exactly with `recover_block`."""
        if not query.strip():
            raise ToolError(EMPTY_QUERY)
        session = self._session(session_id)
        since, until = (since or '').strip() or None, (until or '').strip() or None
        with self._store_errors():
            dense, note = self._synced_dense(session)
            hits = recall(
                self.store,
                query,
                max(1, min(k, MAX_RECALL_K)),
                method='fused' if dense is None else 'hybrid',
                namespace=self.scope.namespace,
                session_id=session,
                since=since,
                until=until,
                now=datetime.now(UTC),
                dense=dense,
            )
        text = render_recall(hits, query, max_chars=OUTPUT_CHARS - len(note), since=since, until=until)
        return f'{note}\n{text}' if note else text

    def _synced_dense(self, session_id: str | None) -> tuple[DenseIndex | None, str]:
        """The dense index with the scope's archived blocks embedded, and a note for the answer; `(None, '')`
        (lexical recall) when the model fails.

        The sync runs in a thread of its own, and the recall waits for it at most `sync_wait` seconds: a scope
        that no capability embedded (hours for 100,000 blocks) is answered at once from what is embedded so far,
        while the rest is embedded in the background; the note says so. The thread is stopped at exit
        (`BackgroundSync`), after its current chunk; what it embedded is stored (with `DenseIndex.persist`) per
        session as it goes, so a restart goes on from there."""
        background = self._background
        if background is None:
            return None, ''
        namespace = self.scope.namespace
        try:
            complete = background.synced(self.store, namespace=namespace, session_id=session_id, wait=self.sync_wait)
        except StoreError:
            raise
        except Exception as exc:  # a model failing costs the meaning, not the recall
            logger.warning(
                'mementograph mcp: dense recall unavailable, ranking lexically: %s: %s', type(exc).__name__, exc
            )
            return None, ''
        if complete:
            return background.index, ''
        count = self.store.count_blocks(namespace=namespace, session_id=session_id)
        once = 'once, stored for later' if background.index.persist else 'once per server'
        return background.index, (
            f'[meaning: still embedding the {count} archived blocks in scope ({once}); until then, '
            'blocks not embedded yet are found by their entities and words only]'
        )

    def warm_up(self) -> None:
        """Start reading (and embedding what is missing of) the scope's vectors now, so the first recall finds them
        ready: a client asks its first question minutes after starting the server, and a 100k-block archive takes
        seconds to read. `create_server` calls it; without an embedding model it does nothing."""
        if self._background is not None:
            self._background.request(self.store, namespace=self.scope.namespace, session_id=self.scope.session_id)

    def stop_syncs(self) -> None:
        """Stop the background embedding (at its next chunk) and wait for it; also done at exit."""
        if self._background is not None:
            self._background.stop()

    def recover_block(
        self,
        block_id: Annotated[str, Field(description='A block id (blk_..., prt_...) or a memento id (mem_...).')],
        part: Annotated[
            int, Field(description='Part of a long answer (1-based); the header names the next.', ge=1)
        ] = 1,
        session_id: Annotated[str | None, Field(description='Only look in this session.')] = None,
    ) -> CallToolResult:
        """Recover an archived block (or every block under a memento) exactly as it was: the original pydantic-ai
        messages as JSON, after checking each block's sha256. Long answers come in parts; concatenating the JSON
        of all parts in order gives the whole document."""
        session = self._session(session_id)
        wanted = item_id(block_id)
        damaged: tuple[str, ...] = ()
        with self._store_errors():
            try:
                blocks = recover_chain(self.store, wanted, namespace=self.scope.namespace, session_id=session)
            except ChainIntegrityError as exc:  # the blocks that passed are still returned
                blocks, damaged = list(exc.recovered), exc.damaged
            except NotFoundError:
                raise ToolError(
                    f'No archived block {echo(wanted)} in {self._where(session)}. Use an id that a memento, '
                    '`recall` or `retrieve_page` names (blk_..., prt_... or mem_...).'
                ) from None
            except BlockIntegrityError as exc:
                raise ToolError(f'Block {echo(wanted)} failed its sha256 check and was not returned: {exc}') from exc
        document = {
            'id': wanted,
            'namespace': self.scope.namespace,
            'blocks': [
                {
                    'block_id': block.record.id,
                    'session_id': block.record.session_id,
                    'kind': block.record.kind,
                    'seq': block.record.seq,
                    'first_message': block.record.first_message,
                    'last_message': block.record.last_message,
                    'sha256': block.record.sha256,
                    'sha256_verified': True,
                    'messages': json.loads(block.record.messages_json),
                }
                for block in blocks
            ],
        }
        if damaged:
            document['failed_sha256_check'] = list(damaged)
        pieces = _parts(json.dumps(document, ensure_ascii=False))
        index, piece = _pick(pieces, part)
        listed = [
            f'{b.record.id} (session {b.record.session_id}, messages {b.record.first_message}-'
            f'{b.record.last_message}, sha256 {b.record.sha256[:16]}...)'
            for b in blocks[:10]
        ]
        if len(blocks) > 10:
            listed.append(f'and {len(blocks) - 10} more')
        header = (
            f'Recovered {len(blocks)} block{"s" if len(blocks) != 1 else ""} for {wanted}, sha256 verified, '
            f'byte-exact: {", ".join(listed)}. JSON part {index} of {len(pieces)}'
        )
        if damaged:
            header += (
                f'; {len(damaged)} more block{"s" if len(damaged) != 1 else ""} failed the sha256 check and '
                f'{"are" if len(damaged) != 1 else "is"} not returned: {", ".join(damaged)}'
            )
        header += f'; next: recover_block("{wanted}", part={index + 1})' if index < len(pieces) else ''
        return CallToolResult(
            content=[TextContent(type='text', text=header + '.'), TextContent(type='text', text=piece)]
        )

    def list_pages(
        self,
        session_id: Annotated[str | None, Field(description='Only this session (default: all in scope).')] = None,
        part: Annotated[int, Field(description='Part of a long listing (1-based).', ge=1)] = 1,
    ) -> str:
        """List the paged index of archived conversation: per session, each page's id, turns, block count, summary
        and topics. `retrieve_page` returns a page's blocks; `recall` searches all of them."""
        session = self._session(session_id)
        with self._store_errors():
            pages = self.store.list_pages(namespace=self.scope.namespace, session_id=session)
        if not pages:
            return f'No pages archived yet in {self._where(session)}.'
        by_session: dict[str, list[PageRecord]] = {}
        for page in pages:
            by_session.setdefault(page.session_id, []).append(page)
        lines = [
            f'MEMORY PAGES in {self._where(session)}: {len(pages)} page{"s" if len(pages) != 1 else ""} in '
            f'{len(by_session)} session{"s" if len(by_session) != 1 else ""}. retrieve_page(page_id) returns a '
            "page's blocks; recall(query) searches all of them."
        ]
        for sid, records in by_session.items():
            lines.append(f'session {sid} ({len(records)} pages):')
            for page in records:
                size = f'{len(page.block_ids)} block{"s" if len(page.block_ids) != 1 else ""}'
                head = f'page {page.number} {page.id} (turns {page.first_turn}-{page.last_turn}, {size})'
                if page.summary:
                    lines.append(f'  {head}: {page.summary} | topics: {", ".join(page.topics) or "-"}')
                else:
                    lines.append(f'  (open) {head}')
        pieces = _parts('\n'.join(lines))
        index, piece = _pick(pieces, part)
        if len(pieces) == 1:
            return piece
        footer = f'\n[pages: part {index} of {len(pieces)}'
        scope = f'session_id="{session}", ' if session and not self.scope.session_id else ''
        footer += f'; next: list_pages({scope}part={index + 1})]' if index < len(pieces) else ']'
        return piece.rstrip('\n') + footer

    def retrieve_page(
        self,
        page_id: Annotated[str, Field(description='A page id (pg_...) from list_pages, or its number.')],
        part: Annotated[int, Field(description='Part of a long page (1-based); the header names the next.', ge=1)] = 1,
        session_id: Annotated[str | None, Field(description='The session a page number belongs to.')] = None,
    ) -> str:
        """Return the archived blocks of one page of the memory index, rendered as text and hash-checked, within a
        token cap per part."""
        session = self._session(session_id)
        wanted = item_id(page_id)
        with self._store_errors():
            pages = self.store.list_pages(namespace=self.scope.namespace, session_id=session)
            try:
                record = find_page(pages, wanted)
            except AmbiguousPageError as exc:
                raise ToolError(str(exc)) from None
            if record is None:
                raise ToolError(
                    f'No page {echo(wanted)} in {self._where(session)} ({len(pages)} pages); list_pages() names them.'
                )
            try:  # the page as read above: listing the pages again would cost a second read
                return page_part(self.store, record, part, namespace=self.scope.namespace)
            except NoSuchPartError as exc:
                raise ToolError(str(exc)) from None

    def query_memory(
        self,
        cypher: Annotated[str, Field(description='A read-only Cypher query; $namespace and $session_id are bound.')],
        params: Annotated[dict[str, Any] | None, Field(description='Other query parameters by name.')] = None,
        session_id: Annotated[
            str | None, Field(description='Only this session: bound to $session_id, and every node must be in it.')
        ] = None,
        limit: Annotated[
            int, Field(description=f'Most rows (1-{MAX_QUERY_ROWS}); more rows is an error.', ge=1, le=MAX_QUERY_ROWS)
        ] = 100,
    ) -> str:
        """Run a read-only Cypher query over the memory graph and return its rows as JSON.

        Graph: (:Session {id, namespace}), (:EvictedBlock {id, session_id, seq, kind, tokens, sha256}),
        (:Memento {id, session_id, text, score, verified}), (:Page {id, session_id, number, summary, topics}),
        (:Entity {key, name, kind}); edges SUMMARIZES (Memento->EvictedBlock), IN_SESSION, NEXT, CONTAINS
        (Page->EvictedBlock), MENTIONS {count}. The query sees only this server's namespace: give one node of each
        pattern {namespace: $namespace} (Neo4j refuses a pattern without it). With a session in effect, every node
        must be in it: {session_id: $session_id}, reached over NEXT/SUMMARIZES/CONTAINS/IN_SESSION, or an Entity
        one MENTIONS hop away. Writes, LOAD CSV and procedures are refused. The embedded store runs a documented
        subset of Cypher; Neo4j runs any read query.
        """
        session = self._session(session_id)
        rows_limit = max(1, min(limit, MAX_QUERY_ROWS))
        try:
            if session is not None:  # the store keeps the namespace; the session is this server's promise
                check_scope(cypher, namespace=False, session=True)
            rows = self.store.query(
                cypher,
                params or {},
                session_id=session,
                namespace=self.scope.namespace,
                limit=rows_limit,
                timeout=DEFAULT_QUERY_TIMEOUT,
            )
        except ReadOnlyViolationError as exc:
            raise ToolError(f'Refused, query_memory is read-only: {exc}') from exc
        except ScopeViolationError as exc:
            raise ToolError(f'Refused, query_memory stays in {self._where(session)}: {exc}') from exc
        except (StoreError, ValueError) as exc:
            raise ToolError(f'Query failed: {_tool_hints(str(exc))}') from exc
        shown: list[Any] = []
        used = 0
        for row in rows:
            cells = _cut_cells(row)
            size = len(json.dumps(cells, ensure_ascii=False, default=str)) + 2
            if shown and used + size > OUTPUT_CHARS:
                break
            shown.append(cells)
            used += size
        answer: dict[str, Any] = {'row_count': len(rows), 'rows': shown}
        if len(shown) < len(rows):
            answer['note'] = (
                f'showing {len(shown)} of {len(rows)} rows to fit the answer; return fewer columns or page with '
                'ORDER BY ... SKIP ... LIMIT'
            )
        return json.dumps(answer, ensure_ascii=False, indent=1, default=str)

    def stats(
        self, session_id: Annotated[str | None, Field(description='Only this session.')] = None
    ) -> dict[str, Any]:
        """Counts of what the memory holds in scope (sessions, blocks, mementos, pages, entities, tokens saved),
        with the newest session ids, newest first."""
        session = self._session(session_id)
        with self._store_errors():
            counts = self.store.stats(namespace=self.scope.namespace, session_id=session)
            sessions = [s.id for s in self.store.list_sessions(namespace=self.scope.namespace)]
        if session is not None:
            sessions = [sid for sid in sessions if sid == session]
        scheme = self.store.uri.partition('://')[0].lower()
        data: dict[str, Any] = {
            'backend': 'neo4j' if scheme in NEO4J_SCHEMES else scheme,
            'namespace': self.scope.namespace,
            'session_id': session,
            **asdict(counts),
            'tokens_saved': counts.tokens_saved,
            'newest_sessions': sessions[::-1][:MAX_SESSIONS_LISTED],  # newest first, as `mementograph stats`
        }
        data.pop('details', None)
        return data


def _instructions(scope: MemoryScope) -> str:
    where = f'namespace {scope.namespace!r}' + (f', session {scope.session_id!r}' if scope.session_id else '')
    return (
        'Long-term memory of past agent conversations (mementograph), read-only, scoped to '
        f'{where}. Completed conversation blocks were archived with a short memento each; every block is '
        'recoverable byte for byte. recall(query) finds blocks by the entities and words they mention; '
        'recover_block(id) returns a block (or all blocks under a memento) exactly, sha256-checked; list_pages() '
        'and retrieve_page(page_id) browse the paged index; query_memory(cypher) runs read-only Cypher over the '
        'memory graph; stats() counts what is stored.'
    )


def create_server(
    store: GraphStore,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    session_id: str | None = None,
    embedding: EmbeddingModel | str | None = None,
    store_vectors: bool = True,
    store_timeout: float | None = 30.0,
) -> MCPServer[Any]:
    """An MCP server exposing `store` read-only through `recall`, `recover_block`, `list_pages`, `retrieve_page`,
    `query_memory` and `stats`.

    The caller owns `store` (opens it before serving, closes it after). Run the server with `run_stdio` or
    `run_http`, or mount `http_app(...)` in an ASGI application.

    Args:
        store: an open graph store.
        namespace: the only namespace the tools read.
        session_id: when given, the only session the tools read; `None` lets them read every session of the
            namespace (and narrow to one with their `session_id` argument).
        embedding: an embedding model (or its name; `onnx:PATH` for a local one) to make `recall` rank `hybrid`:
            the scope's stored vectors are read and its other blocks embedded in a background thread from now
            on (a recall waits at most `SYNC_WAIT_SECONDS` for them), new blocks at the next recall.
        store_vectors: write the vectors this server makes beside their blocks, so the next server (or
            `mementograph recall`) reads them instead of embedding again (a 100k-block archive takes hours).
            Derived data, as an index is: the tools still never change memory. `False` leaves the store as it is.
        store_timeout: seconds a tool call waits for the store; past it the call fails with a message saying so,
            and so does every call while the one given up on has not returned. `None` waits as long as it takes.
    """
    from .. import __version__

    calls = StoreCalls(store_timeout)  # a bad value fails here, before anything starts
    scope = MemoryScope(namespace=namespace, session_id=session_id or None)
    dense = None
    if embedding is not None:
        from ..knowledge_graph.dense import DenseIndex, embedding_model

        dense = DenseIndex(embedding_model(embedding), persist=store_vectors)
    tools = MemoryTools(store, scope, dense)
    tools.warm_up()
    server: MCPServer[Any] = _Server(
        'mementograph', instructions=_instructions(scope), version=__version__, log_level='WARNING'
    )
    for name in _TOOLS:
        tool = _bounded(getattr(tools, name), calls)
        server.add_tool(tool, name=name, annotations=_READ_ONLY, structured_output=name == 'stats')
    return server


class _Server(MCPServer[Any]):
    """An `MCPServer` whose answer to arguments outside a tool's schema names each argument and what it takes, in
    a sentence, where the SDK passes on pydantic's report (its model name, error types and a documentation URL)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            raise ToolError(_wrong_arguments(name, exc.__cause__)) from exc.__cause__


_LIBRARY_HINTS: Final = (
    ('(limit=N in store.query, --limit N on the command line)', "(this tool's limit argument, up to 1000)"),
    (' or raise the timeout (timeout=SECONDS, --timeout SECONDS)', f' (a query may run {DEFAULT_QUERY_TIMEOUT:g} s)'),
    (', raise the timeout,', ','),
)
"""The store's advice names the library's and the command line's options; a tool's caller has only its arguments."""


def _tool_hints(message: str) -> str:
    for library, tool in _LIBRARY_HINTS:
        message = message.replace(library, tool)
    return message


def _wrong_arguments(tool: str, error: ValidationError) -> str:
    """`recall was called with wrong arguments: k should be less than or equal to 20, not 1000000.`"""
    problems: list[str] = []
    for item in error.errors(include_url=False):
        field = '.'.join(str(part) for part in item['loc']) or 'the arguments'
        message = str(item['msg'])
        if item['type'] == 'missing':
            problems.append(f'{field} is required')
        elif message.startswith('Input should'):
            problems.append(f'{field} should{message.removeprefix("Input should")}, not {echo(item.get("input"))}')
        else:
            problems.append(f'{field}: {message}')
    return f'{tool} was called with wrong arguments: {"; ".join(problems)}.'


def _bounded(tool: Callable[..., T], calls: StoreCalls) -> Callable[..., Awaitable[T]]:
    """`tool` in a thread of its own, waited for at most `calls.timeout` (its signature, hence its schema, kept)."""

    @functools.wraps(tool)
    async def bounded(**arguments: Any) -> T:
        try:
            return await calls(tool, **arguments)
        except StoreTimeoutError as exc:
            raise ToolError(f'{exc}. Try again once the store answers.') from exc

    return bounded
