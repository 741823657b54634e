"""`Neo4jStore` -- the graph in Neo4j 5.x through the official driver: for teams, scale and ad-hoc Cypher.

Same semantics as the embedded store (the shared contract suite checks both): ids are derived from content, so
every write is a `MERGE … ON CREATE SET` and a retried eviction changes nothing; one eviction is one managed
write transaction holding one statement of batched `UNWIND … MERGE` parts (two round trips: the statement with
its BEGIN, then the commit), committed whole or rolled back whole. The driver retries transient failures
(deadlocks, leader switches, dropped connections) by re-running the whole transaction, which is safe precisely
because it is idempotent. Writes of one session are serialized by a write lock on its `Session`
node, which also makes the store-assigned event `seq` and memento `ordinal` gap-free under concurrency.

Reads run in READ transactions; `query()` runs user Cypher there too, after the lexer-level check of `_cypher`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, Final, LiteralString, TypeVar
from urllib.parse import parse_qs, quote, unquote, urlsplit

import neo4j
from neo4j import Driver, GraphDatabase, ManagedTransaction
from neo4j import exceptions as neo4j_errors
from neo4j.graph import Node, Path, Relationship
from neo4j.spatial import Point
from neo4j.time import Date, DateTime, Duration, Time

from .._schema import (
    DEFAULT_NAMESPACE,
    BlockKind,
    BlockRecord,
    EntityRecord,
    Eviction,
    MementoRecord,
    Mention,
    PageRecord,
    SessionEvent,
    SessionRecord,
    StoreStats,
    entity_id_for,
)
from ._base import (
    block_not_found,
    branch_events,
    check_block,
    check_mention_sources,
    check_page,
    fts_terms,
    is_prefix_term,
    log_conflict,
    missing_sources,
    now_iso,
    search_words,
)
from ._cypher import (
    DEFAULT_QUERY_LIMIT,
    DEFAULT_QUERY_TIMEOUT,
    ScopeViolationError,
    check_scope,
    prepare_query,
    query_bounds,
    row_limit_message,
    scoped_params,
)
from ._errors import (
    MementoNotFoundError,
    QueryError,
    ReadOnlyViolationError,
    StoreError,
    StoreUnavailableError,
)
from ._open import check_store_uri
from ._protocol import BlockLink, GraphLinks, MementoLink, PageLink, RecoveredBlock, TextHit

if TYPE_CHECKING:  # recall reads (section at the end of the reads); a runtime import would be circular
    from ..recall._values import BlockInfo, EntityLookup

__all__ = ('FULLTEXT_INDEX', 'Neo4jStore', 'session_key')

T = TypeVar('T')
_Run = Callable[[LiteralString, Mapping[str, Any]], list[neo4j.Record]]
"""Runs one read statement with its parameters and returns its records (`Neo4jStore._quick_read`)."""

FULLTEXT_INDEX: Final = 'mementograph_text'
CONNECTION_TIMEOUT: Final = 5.0
"""Seconds to wait for a TCP/TLS connection: an unreachable server fails fast, with what to check."""
RETRY_TIME: Final = 15.0
"""Seconds the driver keeps retrying a transaction that failed transiently (then the caller gets the error)."""
WRITE_TIMEOUT: Final = 120.0
"""Server-side timeout of one write transaction (a stuck write is rolled back, never left holding locks)."""
_APP: Final = {'app': 'mementograph'}

_SCHEMA: Final = (
    ('mementograph_session_key', 'CREATE CONSTRAINT mementograph_session_key IF NOT EXISTS FOR (n:Session) REQUIRE n.key IS UNIQUE'),
    ('mementograph_block_id', 'CREATE CONSTRAINT mementograph_block_id IF NOT EXISTS FOR (n:EvictedBlock) REQUIRE n.id IS UNIQUE'),
    ('mementograph_memento_id', 'CREATE CONSTRAINT mementograph_memento_id IF NOT EXISTS FOR (n:Memento) REQUIRE n.id IS UNIQUE'),
    ('mementograph_page_id', 'CREATE CONSTRAINT mementograph_page_id IF NOT EXISTS FOR (n:Page) REQUIRE n.id IS UNIQUE'),
    ('mementograph_entity_id', 'CREATE CONSTRAINT mementograph_entity_id IF NOT EXISTS FOR (n:Entity) REQUIRE n.id IS UNIQUE'),
    ('mementograph_event_uid', 'CREATE CONSTRAINT mementograph_event_uid IF NOT EXISTS FOR (n:Event) REQUIRE n.uid IS UNIQUE'),
    ('mementograph_block_order', 'CREATE INDEX mementograph_block_order IF NOT EXISTS FOR (n:EvictedBlock) ON (n.namespace, n.session_id, n.kind, n.seq)'),
    ('mementograph_block_scope', 'CREATE INDEX mementograph_block_scope IF NOT EXISTS FOR (n:EvictedBlock) ON (n.namespace, n.session_id)'),
    ('mementograph_block_namespace', 'CREATE INDEX mementograph_block_namespace IF NOT EXISTS FOR (n:EvictedBlock) ON (n.namespace)'),
    ('mementograph_memento_scope', 'CREATE INDEX mementograph_memento_scope IF NOT EXISTS FOR (n:Memento) ON (n.namespace, n.session_id)'),
    ('mementograph_memento_namespace', 'CREATE INDEX mementograph_memento_namespace IF NOT EXISTS FOR (n:Memento) ON (n.namespace)'),
    ('mementograph_page_scope', 'CREATE INDEX mementograph_page_scope IF NOT EXISTS FOR (n:Page) ON (n.namespace, n.session_id)'),
    ('mementograph_page_namespace', 'CREATE INDEX mementograph_page_namespace IF NOT EXISTS FOR (n:Page) ON (n.namespace)'),
    ('mementograph_event_order', 'CREATE INDEX mementograph_event_order IF NOT EXISTS FOR (n:Event) ON (n.namespace, n.session_id, n.seq)'),
    ('mementograph_entity_key', 'CREATE INDEX mementograph_entity_key IF NOT EXISTS FOR (n:Entity) ON (n.namespace, n.key)'),
    ('mementograph_entity_namespace', 'CREATE INDEX mementograph_entity_namespace IF NOT EXISTS FOR (n:Entity) ON (n.namespace)'),
    ('mementograph_session_namespace', 'CREATE INDEX mementograph_session_namespace IF NOT EXISTS FOR (n:Session) ON (n.namespace)'),
    (FULLTEXT_INDEX, f'CREATE FULLTEXT INDEX {FULLTEXT_INDEX} IF NOT EXISTS FOR (n:Memento|EvictedBlock) '
                     'ON EACH [n.words, n.namespace, n.session_id] OPTIONS {indexConfig: {`fulltext.eventually_consistent`: true}}'),
)  # fmt: skip
_OBSOLETE_INDEXES: Final = (
    'mementograph_block_session', 'mementograph_memento_session', 'mementograph_page_session',
    'mementograph_event_session',
)  # fmt: skip
"""Single-property session_id indexes of earlier versions: the planner preferred them (or the namespace index) to
the composite (namespace, session_id) ones, and every extra index slows writes."""
_SCHEMA_RACE_CODES: Final = frozenset(
    {
        'Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists',
        'Neo.ClientError.Schema.ConstraintAlreadyExists',
        'Neo.ClientError.Schema.IndexAlreadyExists',
        'Neo.ClientError.Schema.ConstraintWithNameAlreadyExists',
        'Neo.ClientError.Schema.IndexWithNameAlreadyExists',
    }
)


def _q(text: str) -> LiteralString:
    """Statement text for the driver. Every statement here is built from constants and fixed fragments
    (`_scope`); values only ever travel as parameters, so this cast hides no injection."""
    return text


def session_key(namespace: str, session_id: str) -> str:
    """The unique key of a `(:Session)`: session ids repeat across namespaces, the pair never does."""
    return f'{namespace}\x1f{session_id}'


def _event_uid(namespace: str, session_id: str, key: str) -> str:
    return f'{namespace}\x1f{session_id}\x1f{key}'


def _is_memento_id(item_id: str) -> bool:
    return item_id.startswith('mem_')


_FULLTEXT_PROPERTIES: Final = ['words', 'namespace', 'session_id']
"""What the full-text index covers: the text's words (`search_words`: split where SQLite's FTS5 splits them), and
the namespace and session, so that a search filters its scope inside Lucene (one index serves every namespace of
the server: filtering the top hits afterwards read other namespaces' or sessions' matches)."""
_BACKFILL_BATCH: Final = 500
"""Nodes per transaction when schema setup gives the records of an older version their `words`."""


def _lucene_phrase(text: str) -> str:
    """`text` as a Lucene phrase query (quoted, with its backslashes and quotes escaped)."""
    return '"' + text.replace('\\', '\\\\').replace('"', '\\"') + '"'


def _lucene_filter(field: str, value: str | None) -> str:
    """` AND field:"value"^0`: only documents of that scope reach Lucene's ranking, with their scores the text's
    alone; a phrase of the value's words may also match another value (`a-b` and `a b`), so callers still check
    the scope on every hit. Empty for no value or one without a word character (nothing to match)."""
    if value is None or not re.search(r'\w', value):
        return ''
    return f' AND {field}:{_lucene_phrase(value)}^0'


def _fulltext_is_current(options: Mapping[str, Any] | None, properties: Sequence[str] | None) -> bool:
    """Whether a full-text index is configured as `_SCHEMA` creates it: over `_FULLTEXT_PROPERTIES`, and eventually
    consistent (updated after commit; `search_text` waits for it), so a commit does not wait for the index."""
    config = (options or {}).get('indexConfig') or {}
    return config.get('fulltext.eventually_consistent') is True and list(properties or ()) == _FULLTEXT_PROPERTIES


# -- statements -----------------------------------------------------------------------------------------------

_WRITE_MENTIONS: Final = """
CALL () {
  UNWIND $entities AS row
  MERGE (e:Entity {id: row.id})
  ON CREATE SET e.key = row.key, e.name = row.name, e.kind = row.kind, e.namespace = $namespace, e.blocks = 0
}
CALL () {
  UNWIND $block_mentions AS row
  MATCH (src:EvictedBlock {id: row.source}) USING INDEX src:EvictedBlock(id) WHERE src.namespace = $namespace
  MATCH (e:Entity {id: row.entity_id})
  WITH src, e, row, src.kind = 'block' AND NOT EXISTS { (src)-[:MENTIONS]->(e) } AS counted
  MERGE (src)-[r:MENTIONS]->(e)
  ON CREATE SET r.count = row.count
  WITH e, sum(CASE WHEN counted THEN 1 ELSE 0 END) AS added
  WHERE added > 0
  WITH e, added ORDER BY e.id
  SET e.blocks = CASE WHEN e.blocks IS NULL THEN COUNT { (e)<-[:MENTIONS]-(:EvictedBlock {kind: 'block'}) }
                 ELSE e.blocks + added END
}
CALL () {
  UNWIND $memento_mentions AS row
  MATCH (src:Memento {id: row.source}) USING INDEX src:Memento(id) WHERE src.namespace = $namespace
  MATCH (e:Entity {id: row.entity_id})
  MERGE (src)-[r:MENTIONS]->(e)
  ON CREATE SET r.count = row.count
}
"""
"""Entities, then `MENTIONS` edges from blocks and from mementos (`$entities`, `$block_mentions`,
`$memento_mentions`: `_mention_rows`), each source matched through its own unique index; each entity's `blocks`
grows by the edges from blocks of kind 'block' created here (see `_WRITE_EVICTION`)."""

_WRITE_EVICTION: Final = (
    """
MERGE (s:Session {key: $key})
ON CREATE SET s.id = $session_id, s.namespace = $namespace, s.created_at = $created,
              s.event_count = 0, s.memento_count = 0, s.block_count = 0
SET s.updated_at = $created
WITH s,
     [row IN $events WHERE NOT EXISTS { MATCH (e:Event {uid: row.uid}) }] AS events,
     [row IN $mementos WHERE NOT EXISTS { MATCH (m:Memento {id: row.id}) }] AS mementos,
     size([id IN $block_ids WHERE NOT EXISTS { MATCH (b:EvictedBlock {id: id}) }]) AS new_blocks,
     COLLECT {
       MATCH (p:EvictedBlock {namespace: $namespace, session_id: $session_id, kind: 'block'})
       USING INDEX p:EvictedBlock(namespace, session_id, kind, seq)
       WHERE p.seq < $low
       RETURN [p.seq, p.id] AS link
       ORDER BY p.namespace DESC, p.session_id DESC, p.kind DESC, p.seq DESC, p.id DESC LIMIT 1
     } + COLLECT {
       UNWIND COLLECT {
         MATCH (x:EvictedBlock {namespace: $namespace, session_id: $session_id, kind: 'block'})
         USING INDEX x:EvictedBlock(namespace, session_id, kind, seq)
         WHERE $low <= x.seq <= $high
         RETURN [x.seq, x.id] AS link
       } + $chained AS link
       WITH DISTINCT link
       RETURN link ORDER BY link[0], link[1]
     } + COLLECT {
       MATCH (n:EvictedBlock {namespace: $namespace, session_id: $session_id, kind: 'block'})
       USING INDEX n:EvictedBlock(namespace, session_id, kind, seq)
       WHERE n.seq > $high
       RETURN [n.seq, n.id] AS link
       ORDER BY n.namespace, n.session_id, n.kind, n.seq, n.id LIMIT 1
     } AS chain
WITH s, events, mementos, new_blocks, chain, s.event_count AS first_seq, s.memento_count AS first_ordinal
SET s.event_count = first_seq + size(events), s.memento_count = first_ordinal + size(mementos),
    s.block_count = CASE WHEN s.block_count IS NULL
      THEN COUNT { MATCH (b:EvictedBlock {namespace: $namespace, session_id: $session_id, kind: 'block'}) }
      ELSE s.block_count END + new_blocks
WITH s, events, mementos, first_seq, first_ordinal,
     [i IN range(0, size(chain) - 2) | [chain[i][1], chain[i + 1][1]]] AS pairs
CALL (s) {
  UNWIND $blocks AS row
  MERGE (b:EvictedBlock {id: row.id})
  ON CREATE SET b += row.props, b.created_at = $created
  MERGE (b)-[:IN_SESSION]->(s)
}
CALL (pairs) {
  UNWIND pairs AS pair
  MATCH (a:EvictedBlock {id: pair[0]})
  MATCH (b:EvictedBlock {id: pair[1]})
  CALL (a, b) {
    MATCH (a)-[r:NEXT]->(x) WHERE x <> b
    DELETE r
  }
  MERGE (a)-[:NEXT]->(b)
}
CALL (mementos, first_ordinal) {
  UNWIND range(0, size(mementos) - 1) AS i
  WITH mementos[i] AS row, first_ordinal + i AS ordinal
  MERGE (m:Memento {id: row.id})
  ON CREATE SET m += row.props, m.ordinal = ordinal, m.created_at = $created
}
CALL () {
  UNWIND $summarizes AS row
  MATCH (m:Memento {id: row.source})
  OPTIONAL MATCH (tb:EvictedBlock {id: row.target})
  OPTIONAL MATCH (tm:Memento {id: row.target})
  WITH m, row, coalesce(tb, tm) AS t
  WHERE t IS NOT NULL AND t.namespace = m.namespace
  MERGE (m)-[r:SUMMARIZES]->(t)
  ON CREATE SET r.position = row.position
}
"""
    + _WRITE_MENTIONS
    + """CALL () {
  UNWIND $pages AS row
  MERGE (p:Page {id: row.id})
  ON CREATE SET p.namespace = $namespace, p.session_id = $session_id, p.number = row.number
  FOREACH (still_open IN CASE coalesce(p.summary, '') WHEN '' THEN [true] ELSE [] END |
    SET p.first_turn = row.first_turn, p.last_turn = row.last_turn, p.summary = row.summary, p.topics = row.topics)
  WITH p, row
  UNWIND row.members AS member
  MATCH (b:EvictedBlock {id: member.id}) USING INDEX b:EvictedBlock(id)
  WHERE b.namespace = $namespace
  MERGE (p)-[c:CONTAINS]->(b)
  ON CREATE SET c.position = member.position
}
CALL (s, events, first_seq) {
  UNWIND range(0, size(events) - 1) AS i
  WITH s, events[i] AS row, first_seq + i AS seq
  MERGE (e:Event {uid: row.uid})
  ON CREATE SET e += row.props, e.seq = seq
  MERGE (e)-[:IN_SESSION]->(s)
}
"""
)
"""Everything an eviction writes, in ONE statement: one round trip, and one transaction the driver begins in the
same round trip (`Neo4jStore._write_statement`). In clause order:
- the session is created if needed and write-locked (the first SET), so writers of one session queue; everything
  read after that is read under the lock: which of the events, mementos and blocks exist, the counters, and the
  blocks of the NEXT chain around the new blocks' seq range (ordering by the whole composite index key reads the
  nearest ones straight off the index);
- new events and mementos take the session's next seqs and ordinals (write order), and the counters move on,
  among them `block_count`, the session's blocks of kind 'block' (recall's N, summed over the namespace's sessions
  instead of counting its blocks; a session written before the counter existed is counted once here);
- blocks, first write wins, each linked IN_SESSION;
- the NEXT chain spliced around them: each consecutive pair of the chain (the nearest block before, every block
  in the range, new or not, the nearest after, by (seq, id)) becomes an edge, and the edge it replaces goes;
- mementos (existing ones left as they are) and their SUMMARIZES edges to blocks or mementos;
- entities (written even when the mentioning record is not in the store, as on SQLite), then MENTIONS edges from
  blocks and from mementos, each matched through its own unique index; each entity's `blocks` (how many blocks of
  kind 'block' mention it: recall's document frequency, read without expanding its edges) grows by the edges from
  blocks this statement created. That SET reads the property it writes, so Cypher write-locks the entity before
  reading (no lost update between sessions), in entity id order. An entity written before the property existed is
  counted whole once, here;
- pages (upserted; a closed page keeps the turns, summary and topics it closed with) and their CONTAINS edges;
  events with their seq, linked IN_SESSION.
Every part is a batched UNWIND … MERGE, so a retried eviction changes nothing. `append_events` runs the same
statement with only events, and `_LOGGED_SHAS` after it."""

_MISSING_SOURCES: Final = """
UNWIND $ids AS sid
OPTIONAL MATCH (b:EvictedBlock {id: sid})
OPTIONAL MATCH (m:Memento {id: sid})
WITH sid, coalesce(b.namespace, m.namespace) AS namespace
WHERE namespace IS NULL OR namespace <> $namespace
RETURN collect(sid) AS missing
"""

_DROP_MENTIONS: Final = """
CALL () {
  UNWIND $ids AS sid
  MATCH (b:EvictedBlock {id: sid})-[r:MENTIONS]->(e:Entity)
  WITH e, collect(r) AS edges, sum(CASE WHEN b.kind = 'block' THEN 1 ELSE 0 END) AS n
  ORDER BY e.id
  SET e.blocks = CASE WHEN e.blocks IS NULL THEN null ELSE e.blocks - n END
  FOREACH (r IN edges | DELETE r)
  RETURN collect(e.id) AS from_blocks
}
CALL () {
  UNWIND $ids AS sid
  MATCH (:Memento {id: sid})-[r:MENTIONS]->(e:Entity)
  DELETE r
  RETURN collect(DISTINCT e.id) AS from_mementos
}
RETURN from_blocks + from_mementos AS touched
"""
"""Deletes the `MENTIONS` edges from `$ids`, taking the blocks' off their entities' `blocks` (locked in id order,
as `_WRITE_EVICTION` takes them); returns the entities they led to."""

_DROP_ORPHAN_ENTITIES: Final = (
    'UNWIND $ids AS eid MATCH (e:Entity {id: eid}) WHERE NOT EXISTS { (e)<-[:MENTIONS]-() } DELETE e'
)

_PAGE_MEMBERS: Final = """
WITH count(*) AS written
UNWIND $page_ids AS page_id
MATCH (p:Page {id: page_id})-[c:CONTAINS]->(b:EvictedBlock)
RETURN page_id AS page, collect([b.id, c.position]) AS members
"""
"""Appended to `_WRITE_EVICTION` when the eviction writes pages: each page's members and their positions as it
holds them now, read in the same transaction (under the session's lock) for `check_page`."""

_LOCK_SESSION_LAST_MESSAGE: Final = """
MERGE (s:Session {key: $key})
ON CREATE SET s.id = $session_id, s.namespace = $namespace, s.created_at = $created,
              s.event_count = 0, s.memento_count = 0, s.block_count = 0
SET s.updated_at = $created
WITH s
OPTIONAL MATCH (e:Event {namespace: $namespace, session_id: $session_id}) WHERE e.seq >= 0
RETURN max(e.message_index) AS last
"""
"""`append_branch`'s first statement: the session write-locked (as `_WRITE_EVICTION` locks it), then where its log
ends."""

_LOGGED_SHAS: Final = """
WITH count(*) AS written
UNWIND $logged AS uid
MATCH (e:Event {uid: uid})
RETURN e.uid AS uid, e.sha256 AS sha256
"""
"""Appended to `_WRITE_EVICTION` by `append_events`: what the log holds at the positions of its message events,
read in the same transaction (so under the session's lock), to tell a retry (the same sha256) from another run's
message (`LogConflictError`, and the transaction is rolled back)."""


_BLOCK_FIELDS: Final = (
    'b{.id, .session_id, .namespace, .seq, .first_message, .last_message, .tokens, .sha256, .messages_json, .kind, '
    '.text, .started_at} AS record'
)
_MEMENTO_FIELDS: Final = (
    'm{.id, .session_id, .namespace, .text, .tokens, .summarizes, .score, .verified, .iterations, .compressor, '
    '.level} AS record'
)


_UNLIMITED: Final = 2**63 - 1
"""A LIMIT that never binds: a negative limit means none, as in SQLite (Cypher refuses a negative LIMIT)."""

_FIND_ENTITIES: Final = """
UNWIND $keys AS key
MATCH (e:Entity {namespace: $namespace, key: key})
RETURN e
"""
_FIND_ENTITIES_BY_PREFIX: Final = """
UNWIND $keys AS prefix
CALL (prefix) {
  MATCH (e:Entity) WHERE e.namespace = $namespace AND e.key STARTS WITH prefix
  RETURN e ORDER BY e.namespace, e.key LIMIT $max_entities
}
RETURN e
"""
_TOTAL_BLOCKS: Final = """COLLECT {
         MATCH (s:Session {namespace: $namespace})
         RETURN sum(CASE WHEN s.block_count IS NULL
           THEN COUNT { MATCH (b:EvictedBlock {namespace: $namespace, session_id: s.id, kind: 'block'}) }
           ELSE s.block_count END)
       }[0]"""
"""The namespace's blocks: the sum of its sessions' counters (`_WRITE_EVICTION` keeps them), a few reads where
counting the blocks scanned 100,000 index entries at 100k blocks (~40-50 ms); a session written before the
counter existed is counted."""
_ENTITY_POSTINGS: Final = """
RETURN {total} AS total,
       COLLECT {{
         CALL () {{ {find} }}
         WITH DISTINCT e
         RETURN {{
           key: e.key, name: e.name, kind: e.kind,
           blocks: CASE
             WHEN e.blocks IS NULL
               THEN COUNT {{ MATCH (e)<-[:MENTIONS]-(b:EvictedBlock {{kind: 'block'}}) RETURN b LIMIT $count_limit }}
             WHEN e.blocks < $count_limit THEN e.blocks
             ELSE $count_limit END,
           postings: {postings}
         }} AS entity
       }} AS entities
"""
"""`entity_postings` in one round trip: the namespace's block count (`{total}`), then per entity found (by `{find}`)
its document frequency, capped at `count_limit` as the protocol says: the entity's `blocks` counter where it has one
(kept by `_WRITE_EVICTION`; expanding a common entity's edges cost up to 2,001 reads), else counted; and
`{postings}`, the blocks in scope mentioning it (most mentions first, then id)."""
_POSTINGS: Final = """COLLECT {{
             MATCH (e)<-[r:MENTIONS]-(b:EvictedBlock) WHERE b.id STARTS WITH 'blk_' AND {scope}
             RETURN [b.id, r.count] AS posting ORDER BY r.count DESC, b.id LIMIT $limit
           }}"""
"""An entity's postings. A common entity has up to ~2,000 block edges (and as many from mementos), so each read
per edge counts: blocks of kind 'block' are told by their id, which is read anyway (`blk_`, as SQLite tells them),
not by `kind`; and the namespace is not checked, since a `MENTIONS` edge never leaves its namespace (the entity's
id is derived from it, and `_WRITE_EVICTION` links only sources of that namespace): only a session scope filters."""

_BLOCK_INFO: Final = """
UNWIND $ids AS block_id
MATCH (b:EvictedBlock {{id: block_id}}) WHERE b.kind = 'block' AND {scope}
RETURN b{{.id, .session_id, .seq, .first_message, .last_message, .tokens, .started_at}} AS record,
       [(p:EvictedBlock)-[:NEXT]->(b) | p.id] AS previous,
       [(b)-[:NEXT]->(n:EvictedBlock) | n.id] AS following
"""
"""Blocks by id in scope, each with its neighbours in the session: the ends of its `NEXT` edges, which
`_WRITE_EVICTION` keeps spliced in (seq, id) order, so they are the nearest blocks before and after it by `seq`, as
SQLite reads them. Following the edges costs a fraction of seeking the block-order index twice per block (recall
asks for up to 60 blocks at once: ~3 ms against ~8 ms)."""


def _scope(variable: str, namespace: str | None, session_id: str | None, *, session_field: str = 'session_id') -> str:
    """A WHERE fragment over fixed property names; the values always travel as `$namespace`/`$session_id`."""
    clauses = []
    if namespace is not None:
        clauses.append(f'{variable}.namespace = $namespace')
    if session_id is not None:
        clauses.append(f'{variable}.{session_field} = $session_id')
    return ' AND '.join(clauses) or 'true'


def _block_scope(namespace: str, session_id: str | None, kind: BlockKind | None) -> str:
    """`_scope` for blocks `b`, of one kind (`$kind`) unless `kind` is `None`."""
    return _scope('b', namespace, session_id) + (' AND b.kind = $kind' if kind is not None else '')


def _block(data: Mapping[str, Any]) -> BlockRecord:
    return BlockRecord(
        id=data['id'],
        session_id=data['session_id'],
        namespace=data['namespace'],
        seq=data['seq'],
        first_message=data['first_message'],
        last_message=data['last_message'],
        tokens=data['tokens'],
        sha256=data['sha256'],
        messages_json=bytes(data['messages_json']),
        kind=data['kind'],
        text=data['text'] or '',
        started_at=data['started_at'],
    )


def _memento(data: Mapping[str, Any]) -> MementoRecord:
    return MementoRecord(
        id=data['id'],
        session_id=data['session_id'],
        namespace=data['namespace'],
        text=data['text'],
        tokens=data['tokens'],
        summarizes=tuple(data['summarizes'] or ()),
        score=data['score'],
        verified=bool(data['verified']),
        iterations=data['iterations'],
        compressor=data['compressor'],
        level=data['level'],
    )


def _event(data: Mapping[str, Any]) -> SessionEvent:
    return SessionEvent(
        session_id=data['session_id'],
        namespace=data['namespace'],
        kind=data['kind'],
        payload=bytes(data['payload']),
        sha256=data['sha256'],
        message_index=data.get('message_index'),
        block_ids=tuple(data['block_ids'] or ()),
        seq=data['seq'],
        created_at=data['created_at'],
    )


def plain_value(value: Any) -> Any:
    """A driver value as plain Python: nodes and relationships become dicts of their properties, paths lists of
    those, temporal values ISO-8601 strings (to the microsecond), points `{srid, coordinates}`; bytes stay bytes."""
    if isinstance(value, Node | Relationship):
        properties: dict[str, Any] = dict(value)
        return {key: plain_value(item) for key, item in properties.items()}
    if isinstance(value, Path):
        items: list[Any] = [plain_value(value.start_node)]
        for relationship in value.relationships:
            items.append(plain_value(relationship))
            items.append(plain_value(relationship.end_node))
        return items
    if isinstance(value, DateTime | Date | Time):
        return value.to_native().isoformat()
    if isinstance(value, Duration):
        return value.iso_format()
    if isinstance(value, Point):
        return {'srid': value.srid, 'coordinates': list(value)}
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list | tuple):
        return [plain_value(item) for item in value]
    if isinstance(value, dict):
        return {key: plain_value(item) for key, item in value.items()}
    return value


# -- errors -----------------------------------------------------------------------------------------------------


def _code(exc: BaseException) -> str:
    return getattr(exc, 'code', None) or ''


def _server_message(exc: BaseException) -> str:
    return getattr(exc, 'message', None) or str(exc)


class Neo4jStore:
    """Graph store on a Neo4j 5.x server (or cluster, or Aura).

    Open it with `open_store('neo4j://host:7687')` (or `bolt://`, `neo4j+s://`): credentials come from the URI
    (`neo4j://user:password@host`) or `NEO4J_USERNAME`/`NEO4J_PASSWORD`; `?database=NAME` picks a database,
    `?query_limit=ROWS&query_timeout=SECONDS` change the defaults of `query()`, `?retry_time=SECONDS` how long a
    transiently failing transaction is retried (default 15) before the caller gets the error.
    """

    def __init__(
        self,
        driver: Driver,
        *,
        uri: str,
        database: str | None = None,
        query_limit: int = DEFAULT_QUERY_LIMIT,
        query_timeout: float = DEFAULT_QUERY_TIMEOUT,
        setup_schema: bool = True,
    ) -> None:
        """Wrap a connected driver (use `from_uri` to connect); sets up constraints and indexes if missing.

        Raises:
            StoreUnavailableError: the server cannot be reached or refuses the credentials.
        """
        self._driver = driver
        self._uri = uri
        self._database = database
        self.query_limit = query_limit
        self.query_timeout = query_timeout
        self._closed = False
        if setup_schema:
            self.ensure_schema()

    @classmethod
    def from_uri(cls, uri: str) -> Neo4jStore:
        """Connect to the server a URI names and check it answers with these credentials.

        Raises:
            StoreUnavailableError: unreachable (names the URI and what to check) or authentication failed.
            ValueError: a malformed option in the URI.
        """
        parts = urlsplit(uri)
        options = parse_qs(parts.query)
        check_store_uri(uri)  # a misspelt option would otherwise be ignored in silence
        user = unquote(parts.username) if parts.username else os.environ.get('NEO4J_USERNAME', 'neo4j')
        password = unquote(parts.password) if parts.password is not None else os.environ.get('NEO4J_PASSWORD', '')
        host = parts.hostname or 'localhost'
        netloc = f'[{host}]' if ':' in host else host
        if parts.port is not None:
            netloc += f':{parts.port}'
        clean = f'{parts.scheme}://{netloc}'
        database = options.get('database', [None])[-1]
        shown = clean + (f'?database={quote(database)}' if database else '')
        query_limit = _int_option(options, 'query_limit') if 'query_limit' in options else DEFAULT_QUERY_LIMIT
        query_timeout = _float_option(options, 'query_timeout') if 'query_timeout' in options else DEFAULT_QUERY_TIMEOUT
        try:  # a bound no query could run under is refused now, not at every query
            query_bounds(query_limit, query_timeout)
        except QueryError as exc:
            raise ValueError(f'store URI {shown}: {exc} (?query_limit, ?query_timeout)') from None
        try:
            driver = GraphDatabase.driver(
                clean,
                auth=(user, password),
                connection_timeout=CONNECTION_TIMEOUT,
                max_transaction_retry_time=_float_option(options, 'retry_time')
                if 'retry_time' in options
                else RETRY_TIME,
                connection_acquisition_timeout=CONNECTION_TIMEOUT * 3,
                user_agent='mementograph',
                notifications_min_severity='OFF',
            )
        except (neo4j_errors.ConfigurationError, ValueError) as exc:
            raise StoreUnavailableError(f'cannot use the Neo4j URI {shown}: {exc}') from exc
        try:
            driver.verify_connectivity()
            return cls(driver, uri=shown, database=database, query_limit=query_limit, query_timeout=query_timeout)
        except BaseException as exc:
            driver.close()
            if isinstance(exc, StoreError):
                raise
            if isinstance(exc, neo4j_errors.Neo4jError | neo4j_errors.DriverError | OSError):
                error = _unavailable(exc, shown, user, 'connecting')
                if not password and isinstance(exc, neo4j_errors.AuthError):
                    error = StoreUnavailableError(f'no Neo4j password was given (set NEO4J_PASSWORD); {error}')
                raise error from exc
            raise

    # -- plumbing -------------------------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        return self._uri

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._driver.close()

    def __enter__(self) -> Neo4jStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f'Neo4jStore({self._uri!r})'

    @contextmanager
    def _session(self, mode: str) -> Iterator[neo4j.Session]:
        if self._closed:
            raise StoreUnavailableError(f'the store {self._uri} is closed')
        with self._driver.session(
            database=self._database,
            default_access_mode=mode,
            bookmark_manager=self._driver.execute_query_bookmark_manager,
        ) as session:
            yield session

    def _write(self, action: str, work: Callable[[ManagedTransaction], T]) -> T:
        """Run `work` as one write transaction (retried whole on transient errors); failures become typed errors
        that say nothing was written."""
        unit = neo4j.unit_of_work(metadata={**_APP, 'op': action}, timeout=WRITE_TIMEOUT)(work)
        try:
            with self._session(neo4j.WRITE_ACCESS) as session:
                return session.execute_write(unit)
        except StoreError:
            raise
        except Exception as exc:
            error = self._write_error(exc, action)
            if error is None:
                raise
            raise error from exc

    def _write_statement(
        self,
        action: str,
        cypher: str,
        params: Mapping[str, Any],
        check: Callable[[neo4j.Result], object] = neo4j.Result.consume,
    ) -> None:
        """Run one write statement as a transaction of its own, with `_write`'s retries and errors. Through
        `execute_query`, which sends BEGIN in the same round trip as the statement: a write costs two round trips
        (statement, commit) where `_write` with one statement takes three. `check` reads the result before the
        commit; an error it raises rolls the transaction back."""
        if self._closed:
            raise StoreUnavailableError(f'the store {self._uri} is closed')
        query = neo4j.Query(_q(cypher), metadata={**_APP, 'op': action}, timeout=WRITE_TIMEOUT)
        try:
            self._driver.execute_query(
                query,
                parameters_=dict(params),
                routing_=neo4j.RoutingControl.WRITE,
                database_=self._database,
                bookmark_manager_=self._driver.execute_query_bookmark_manager,  # the one `_session` uses
                result_transformer_=check,
            )
        except StoreError:
            raise
        except Exception as exc:
            error = self._write_error(exc, action)
            if error is None:
                raise
            raise error from exc

    def _read(
        self,
        work: Callable[[ManagedTransaction], T],
        *,
        op: str = 'read',
        timeout: float | None = None,
        translate: Callable[[neo4j_errors.Neo4jError], StoreError] | None = None,
    ) -> T:
        unit = neo4j.unit_of_work(metadata={**_APP, 'op': op}, timeout=timeout)(work)
        try:
            with self._session(neo4j.READ_ACCESS) as session:
                return session.execute_read(unit)
        except StoreError:
            raise
        except (neo4j_errors.Neo4jError, neo4j_errors.DriverError, OSError) as exc:
            query_failed = isinstance(exc, neo4j_errors.Neo4jError) and not isinstance(exc, neo4j_errors.AuthError)
            if translate is not None and isinstance(exc, neo4j_errors.Neo4jError) and query_failed:
                raise translate(exc) from exc
            raise _unavailable(exc, self._uri, None, f'reading ({op})') from exc

    def _write_error(self, exc: Exception, action: str) -> StoreError | None:
        """The typed error a failed write raises (whether anything of it may have been written, and what to do);
        None for a fault of this code or the driver's, not the server's, which rises as it is."""
        if self._closed:  # closed by another thread meanwhile: the driver then fails in ways of its own
            return StoreUnavailableError(
                f'{action} on {self._uri}: the store was closed while writing, so the server may or may not have '
                'committed it; writes are idempotent, a retry never duplicates anything',
                maybe_written=True,
            )
        if isinstance(exc, neo4j_errors.IncompleteCommit):
            return StoreUnavailableError(
                f'{action} on {self._uri}: the connection dropped while committing, so the server may or may not '
                'have committed it; retry it (writes are idempotent, a retry never duplicates anything)',
                maybe_written=True,
            )
        if not isinstance(exc, neo4j_errors.Neo4jError | neo4j_errors.DriverError | OSError):
            return None
        code = _code(exc)
        if code.endswith(('Transaction.Terminated', 'Transaction.LockClientStopped')) or 'Terminated' in code:
            return StoreUnavailableError(
                f'{action} on {self._uri} was aborted by the server ({code}); the transaction was rolled back and '
                'nothing of it was written; retry when the server is healthy'
            )
        if isinstance(exc, neo4j_errors.ClientError) and not isinstance(exc, neo4j_errors.AuthError):
            return StoreError(f'{action} on {self._uri} was refused, nothing was written: {_server_message(exc)}')
        error = _unavailable(exc, self._uri, None, action)
        return StoreUnavailableError(f'{error}; the transaction was rolled back, nothing of it was written')

    # -- schema ---------------------------------------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Create the constraints, range indexes and full-text index that are missing, and wait until online.

        A full-text index left by an earlier version is rebuilt: one with synchronous updates (updating it inside
        every commit cost ~8 ms an eviction, most of a small eviction's time), one without the namespace, or one
        over the text as written (blocks and mementos of that version get their `words` first, in batches).
        Idempotent and safe to race: another process creating the same schema at the same time is not an error.
        """
        try:
            with self._session(neo4j.WRITE_ACCESS) as session:
                indexes = {
                    record['name']: (record['options'], record['properties'])
                    for record in session.run('SHOW INDEXES YIELD name, options, properties')
                }
                existing = {record['name'] for record in session.run('SHOW CONSTRAINTS YIELD name')} | indexes.keys()
                stale = FULLTEXT_INDEX in indexes and not _fulltext_is_current(*indexes[FULLTEXT_INDEX])
                if stale:  # the old index serves searches until the records it is replaced for are ready
                    _backfill_words(session)
                missing = [f'DROP INDEX {FULLTEXT_INDEX} IF EXISTS'] if stale else []
                missing += [
                    statement
                    for name, statement in _SCHEMA
                    if name not in existing or (stale and name == FULLTEXT_INDEX)
                ]
                missing += [f'DROP INDEX {name} IF EXISTS' for name in _OBSOLETE_INDEXES if name in existing]
                for statement in missing:
                    try:
                        session.run(statement).consume()
                    except neo4j_errors.ClientError as exc:
                        if _code(exc) not in _SCHEMA_RACE_CODES:
                            raise
                if missing:
                    session.run('CALL db.awaitIndexes(300)').consume()
        except (neo4j_errors.Neo4jError, neo4j_errors.DriverError, OSError) as exc:
            if isinstance(exc, neo4j_errors.Forbidden):
                raise StoreUnavailableError(
                    f'{self._uri}: the user may not create the mementograph constraints and indexes '
                    f'({_server_message(exc)}); let an admin open the store once, or grant schema privileges'
                ) from exc
            raise _unavailable(exc, self._uri, None, 'setting up the schema') from exc

    # -- writes ---------------------------------------------------------------------------------------------

    def write_eviction(self, eviction: Eviction) -> None:
        params = _eviction_params(eviction, now_iso())
        if not eviction.pages:
            self._write_statement('write_eviction', _WRITE_EVICTION, params)
            return
        pages = {page.id: page for page in eviction.pages}

        def check(result: neo4j.Result) -> None:
            for row in result:  # raised inside the transaction: rolled back
                check_page(pages[row['page']], {block_id: position for block_id, position in row['members']})

        self._write_statement(
            'write_eviction', _WRITE_EVICTION + _PAGE_MEMBERS, {**params, 'page_ids': list(pages)}, check
        )

    def append_events(self, events: Sequence[SessionEvent]) -> None:
        if not events:
            return
        created = now_iso()
        by_session: dict[tuple[str, str], list[SessionEvent]] = {}
        for event in events:
            by_session.setdefault((event.namespace, event.session_id), []).append(event)
        batches = [
            _eviction_params(Eviction(session_id=session_id, namespace=namespace, events=tuple(batch)), created)
            for (namespace, session_id), batch in sorted(by_session.items())  # one lock order: fewer deadlocks
        ]
        messages = {
            _event_uid(event.namespace, event.session_id, event.key): event
            for event in events
            if event.kind == 'message'
        }
        for params in batches:
            params['logged'] = [row['uid'] for row in params['events'] if row['uid'] in messages]

        def check(result: neo4j.Result) -> None:
            for row in result:
                event = messages[row['uid']]
                if row['sha256'] != event.sha256:  # raised inside the transaction: rolled back
                    raise log_conflict(event)

        if len(batches) == 1:
            self._write_statement('append_events', _WRITE_EVICTION + _LOGGED_SHAS, batches[0], check)
            return

        def work(tx: ManagedTransaction) -> None:
            for params in batches:
                check(tx.run(_q(_WRITE_EVICTION + _LOGGED_SHAS), params))

        self._write('append_events', work)

    def append_branch(self, events: Sequence[SessionEvent]) -> int:
        if not events:
            raise ValueError('append_branch needs at least one event')
        created = now_iso()
        first = events[0]
        branch_events(events, -1)  # checked before anything is sent

        def work(tx: ManagedTransaction) -> int:
            # the session's write lock first (the SET), held to the commit: no other append can come between
            row = tx.run(
                _q(_LOCK_SESSION_LAST_MESSAGE),
                key=session_key(first.namespace, first.session_id),
                namespace=first.namespace,
                session_id=first.session_id,
                created=created,
            ).single()
            last = None if row is None else row['last']
            placed = branch_events(events, -1 if last is None else int(last))
            params = _eviction_params(
                Eviction(session_id=first.session_id, namespace=first.namespace, events=tuple(placed)), created
            )
            tx.run(_q(_WRITE_EVICTION), params).consume()
            return placed[0].message_index or 0

        return self._write('append_branch', work)

    def delete_session(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> int:
        return self._write('delete_session', lambda tx: _delete_session(tx, namespace, session_id))

    def replace_mentions(
        self, source_ids: Sequence[str], mentions: Sequence[Mention], *, namespace: str = DEFAULT_NAMESPACE
    ) -> int:
        sources = check_mention_sources(source_ids, mentions)
        rows = _mention_rows(namespace, mentions)

        def work(tx: ManagedTransaction) -> int:
            params = {'namespace': namespace, 'ids': sources}
            missing = tx.run(_q(_MISSING_SOURCES), params).single(strict=True)['missing']
            if missing:
                raise missing_sources(missing, namespace)  # nothing written yet: the transaction rolls back
            touched = tx.run(_q(_DROP_MENTIONS), params).single(strict=True)['touched']
            tx.run(_q(_WRITE_MENTIONS + 'RETURN 0'), {'namespace': namespace, **rows}).consume()
            tx.run(_q(_DROP_ORPHAN_ENTITIES), ids=sorted(set(touched))).consume()
            return len(rows['block_mentions']) + len(rows['memento_mentions'])

        return self._write('replace_mentions', work)

    # -- reads ----------------------------------------------------------------------------------------------

    def _quick_read(self, work: Callable[[_Run], T], *, op: str) -> T:
        """Run `work`'s statements as auto-commit transactions: one round trip each (RUN and PULL go together) where
        a managed read adds BEGIN and COMMIT, and recall makes ~9 reads. A failure the driver would retry (a dropped
        connection, a transient error) runs `work` again in a managed read, with `_read`'s retries; any other failure
        is reported as `_read` reports it. For reads of one statement, or whose statements need no common snapshot."""
        try:
            with self._session(neo4j.READ_ACCESS) as session:

                def run(cypher: LiteralString, params: Mapping[str, Any]) -> list[neo4j.Record]:
                    return list(session.run(neo4j.Query(cypher, metadata={**_APP, 'op': op}), dict(params)))

                return work(run)
        except StoreError:
            raise
        except (neo4j_errors.Neo4jError, neo4j_errors.DriverError, OSError) as exc:
            if not isinstance(exc, OSError) and not exc.is_retryable():
                raise _unavailable(exc, self._uri, None, f'reading ({op})') from exc
        return self._read(lambda tx: work(lambda cypher, params: list(tx.run(cypher, dict(params)))), op=op)

    def _rows(self, cypher: str, op: str, **params: Any) -> list[dict[str, Any]]:
        """One read statement's rows (`_quick_read`)."""

        def work(run: _Run) -> list[dict[str, Any]]:
            return [dict(zip(record.keys(), record.values(), strict=True)) for record in run(_q(cypher), params)]

        return self._quick_read(work, op=op)

    def read_events(
        self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE, since_seq: int = 0
    ) -> list[SessionEvent]:
        rows = self._rows(
            'MATCH (e:Event {namespace: $namespace, session_id: $session_id}) WHERE e.seq >= $since '
            'RETURN e{.*} AS e ORDER BY e.seq',
            'read_events',
            namespace=namespace,
            session_id=session_id,
            since=since_seq,
        )
        return [_event(row['e']) for row in rows]

    def last_message_index(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> int:
        rows = self._rows(
            'MATCH (e:Event {namespace: $namespace, session_id: $session_id}) WHERE e.seq >= 0 '
            'RETURN max(e.message_index) AS last',
            'last_message_index',
            namespace=namespace,
            session_id=session_id,
        )
        last = rows[0]['last'] if rows else None
        return -1 if last is None else int(last)

    def message_indices_of(self, session_id: str, sha256: str, *, namespace: str = DEFAULT_NAMESPACE) -> list[int]:
        rows = self._rows(
            "MATCH (e:Event {namespace: $namespace, session_id: $session_id}) WHERE e.kind = 'message' "
            'AND e.sha256 = $sha256 RETURN e.message_index AS position ORDER BY position DESC',
            'message_indices_of',
            namespace=namespace,
            session_id=session_id,
            sha256=sha256,
        )
        return [int(row['position']) for row in rows]

    def get_block(
        self, block_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> BlockRecord:
        rows = self._rows(
            f'MATCH (b:EvictedBlock {{id: $id}}) WHERE {_scope("b", namespace, session_id)} RETURN {_BLOCK_FIELDS}',
            'get_block',
            id=block_id,
            namespace=namespace,
            session_id=session_id,
        )
        if not rows:
            raise block_not_found(block_id, namespace, session_id)
        return _block(rows[0]['record'])

    def recover_block(
        self, block_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> RecoveredBlock:
        return check_block(self.get_block(block_id, namespace=namespace, session_id=session_id))

    def _mementos(self, where: str, op: str, **params: Any) -> list[MementoRecord]:
        rows = self._rows(
            f'MATCH (m:Memento) WHERE {where} RETURN {_MEMENTO_FIELDS} ORDER BY m.created_at, m.ordinal, m.id',
            op,
            **params,
        )
        return [_memento(row['record']) for row in rows]

    def get_memento(
        self, memento_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> MementoRecord:
        found = self._mementos(
            f'm.id = $id AND {_scope("m", namespace, session_id)}',
            'get_memento',
            id=memento_id,
            namespace=namespace,
            session_id=session_id,
        )
        if not found:
            raise MementoNotFoundError(f'no memento {memento_id!r} in namespace {namespace!r}')
        return found[0]

    def get_blocks(
        self, block_ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[BlockRecord]:
        return self._by_ids(
            block_ids, 'b:EvictedBlock', _BLOCK_FIELDS, _block, 'get_blocks', namespace=namespace, session_id=session_id
        )

    def get_mementos(
        self, memento_ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[MementoRecord]:
        return self._by_ids(
            memento_ids,
            'm:Memento',
            _MEMENTO_FIELDS,
            _memento,
            'get_mementos',
            namespace=namespace,
            session_id=session_id,
        )

    def _by_ids(
        self,
        ids: Sequence[str],
        node: str,
        fields: str,
        record: Callable[[Any], T],
        operation: str,
        *,
        namespace: str,
        session_id: str | None,
    ) -> list[T]:
        """`get_blocks` / `get_mementos`: the `node`s (`variable:Label`) of `ids` in scope, in one statement through
        the label's unique id index, in the order of `ids` (duplicates once, ids not found left out)."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        variable = node.split(':', 1)[0]
        rows = self._rows(
            f'UNWIND $ids AS item_id MATCH ({node} {{id: item_id}}) USING INDEX {node}(id) '
            f'WHERE {_scope(variable, namespace, session_id)} RETURN {fields}',
            operation,
            ids=unique,
            namespace=namespace,
            session_id=session_id,
        )
        found = {row['record']['id']: record(row['record']) for row in rows}
        return [found[item_id] for item_id in unique if item_id in found]

    def memento_of(
        self, target_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> MementoRecord | None:
        label = 'Memento' if _is_memento_id(target_id) else 'EvictedBlock'
        rows = self._rows(
            f'MATCH (m:Memento)-[:SUMMARIZES]->(:{label} {{id: $id}}) WHERE {_scope("m", namespace, session_id)} '
            f'RETURN {_MEMENTO_FIELDS} ORDER BY m.created_at, m.ordinal, m.id LIMIT 1',
            'memento_of',
            id=target_id,
            namespace=namespace,
            session_id=session_id,
        )
        return _memento(rows[0]['record']) if rows else None

    def list_sessions(self, *, namespace: str | None = DEFAULT_NAMESPACE) -> list[SessionRecord]:
        rows = self._rows(
            f'MATCH (s:Session) WHERE {_scope("s", namespace, None)} '
            'RETURN s.id AS id, s.namespace AS namespace, s.created_at AS created_at ORDER BY s.created_at, s.id',
            'list_sessions',
            namespace=namespace,
        )
        return [SessionRecord(id=row['id'], namespace=row['namespace'], created_at=row['created_at']) for row in rows]

    def list_blocks(
        self,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        kind: BlockKind | None = 'block',
    ) -> list[BlockRecord]:
        where = _block_scope(namespace, session_id, kind)
        rows = self._rows(
            f'MATCH (b:EvictedBlock) WHERE {where} RETURN {_BLOCK_FIELDS} ORDER BY b.session_id, b.seq, b.kind',
            'list_blocks',
            namespace=namespace,
            session_id=session_id,
            kind=kind,
        )
        return [_block(row['record']) for row in rows]

    def write_vectors(
        self, model: str, vectors: Sequence[tuple[str, bytes]], *, namespace: str = DEFAULT_NAMESPACE
    ) -> int:
        # on the block itself: it goes with the block (`forget`), and one model's vector replaces another's
        rows = [{'id': block_id, 'data': data} for block_id, data in vectors]

        def work(tx: ManagedTransaction) -> int:
            record = tx.run(
                _q(
                    'UNWIND $rows AS row MATCH (b:EvictedBlock {id: row.id}) WHERE b.namespace = $namespace '
                    'SET b.vector = row.data, b.vector_model = $model RETURN count(b) AS n'
                ),
                rows=rows,
                namespace=namespace,
                model=model,
            ).single(strict=True)
            return int(record['n'])

        return self._write('write_vectors', work) if rows else 0

    def read_vectors(
        self,
        model: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        block_ids: Collection[str] | None = None,
    ) -> list[tuple[str, str, bytes]]:
        # given ids are looked up by the unique id constraint's index, not by scanning the scope
        match = 'MATCH (b:EvictedBlock) WHERE' if block_ids is None else 'MATCH (b:EvictedBlock) WHERE b.id IN $ids AND'
        rows = self._rows(
            f'{match} {_scope("b", namespace, session_id)} AND b.vector_model = $model '
            'RETURN b.id AS id, b.session_id AS session_id, b.vector AS data',
            'read_vectors',
            namespace=namespace,
            session_id=session_id,
            model=model,
            ids=None if block_ids is None else list(dict.fromkeys(block_ids)),
        )
        return [(str(row['id']), str(row['session_id']), bytes(row['data'])) for row in rows]

    def block_counts(self, *, namespace: str = DEFAULT_NAMESPACE) -> dict[str, int]:
        rows = self._rows(
            f'MATCH (b:EvictedBlock) WHERE {_block_scope(namespace, None, "block")} '
            'RETURN b.session_id AS session_id, count(b) AS n',
            'block_counts',
            namespace=namespace,
            kind='block',
        )
        return {str(row['session_id']): int(row['n']) for row in rows}

    def list_block_ids(
        self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[tuple[str, str]]:
        rows = self._rows(
            f'MATCH (b:EvictedBlock) WHERE {_block_scope(namespace, session_id, "block")} '
            'RETURN b.id AS id, b.session_id AS session_id ORDER BY b.session_id, b.seq',
            'list_block_ids',
            namespace=namespace,
            session_id=session_id,
            kind='block',
        )
        return [(str(row['id']), str(row['session_id'])) for row in rows]

    def count_blocks(
        self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None, kind: BlockKind | None = 'block'
    ) -> int:
        where = _block_scope(namespace, session_id, kind)
        rows = self._rows(
            f'MATCH (b:EvictedBlock) WHERE {where} RETURN count(b) AS n',
            'count_blocks',
            namespace=namespace,
            session_id=session_id,
            kind=kind,
        )
        return int(rows[0]['n']) if rows else 0

    def list_mementos(
        self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[MementoRecord]:
        return self._mementos(
            _scope('m', namespace, session_id), 'list_mementos', namespace=namespace, session_id=session_id
        )

    def list_pages(self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None) -> list[PageRecord]:
        rows = self._rows(
            f'MATCH (p:Page) WHERE {_scope("p", namespace, session_id)} '
            'RETURN p{.*} AS p, COLLECT { MATCH (p)-[c:CONTAINS]->(b:EvictedBlock) RETURN b.id ORDER BY c.position } '
            'AS block_ids ORDER BY p.session_id, p.number',
            'list_pages',
            namespace=namespace,
            session_id=session_id,
        )
        return [
            PageRecord(
                id=row['p']['id'],
                session_id=row['p']['session_id'],
                namespace=row['p']['namespace'],
                number=row['p']['number'],
                first_turn=row['p']['first_turn'],
                last_turn=row['p']['last_turn'],
                summary=row['p']['summary'],
                topics=tuple(row['p'].get('topics') or ()),
                block_ids=tuple(row['block_ids']),
            )
            for row in rows
        ]

    # integrity reads (issue 8: `mementograph verify`)

    def check_storage(self) -> tuple[str, ...]:
        """`GraphStore.check_storage` on Neo4j: nothing a client can run (the server checks its store files itself,
        and `neo4j-admin database check` runs on a stopped database)."""
        return ()

    def scan_blocks(
        self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None, after: str = '', limit: int = 256
    ) -> list[BlockRecord]:
        """`GraphStore.scan_blocks` on Neo4j: a range seek on the unique id index, which also gives the order (the
        hint keeps the planner off the scope indexes, whose order would mean sorting the whole scope per page)."""
        rows = self._rows(
            'MATCH (b:EvictedBlock) USING INDEX b:EvictedBlock(id) '
            f'WHERE b.id > $after AND {_scope("b", namespace, session_id)} '
            f'RETURN {_BLOCK_FIELDS} ORDER BY b.id LIMIT $limit',
            'scan_blocks',
            after=after,
            limit=max(limit, 0),
            namespace=namespace,
            session_id=session_id,
        )
        return [_block(row['record']) for row in rows]

    def graph_links(self, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None) -> GraphLinks:
        """`GraphStore.graph_links` on Neo4j: the edges themselves, to any node (a `CONTAINS` or `NEXT` that leads
        somewhere unexpected shows up as such), in one READ transaction."""
        params = {'namespace': namespace, 'session_id': session_id}
        blocks_cypher = _q(
            f'MATCH (b:EvictedBlock) WHERE {_scope("b", namespace, session_id)} '
            'RETURN b.id AS id, b.session_id AS session_id, b.kind AS kind, b.seq AS seq, '
            'b.first_message AS first_message, b.last_message AS last_message, '
            "COLLECT { MATCH (b)-[:NEXT]->(n) RETURN coalesce(n.id, '') } AS next_ids, "
            'EXISTS { MATCH (b)-[:IN_SESSION]->(s:Session) WHERE s.id = b.session_id AND s.namespace = b.namespace } '
            'AS in_session ORDER BY b.session_id, b.kind, b.seq, b.id'
        )
        mementos_cypher = _q(
            f'MATCH (m:Memento) WHERE {_scope("m", namespace, session_id)} '
            'RETURN m.id AS id, m.session_id AS session_id, coalesce(m.level, 1) AS level, m.summarizes AS summarizes, '
            "COLLECT { MATCH (m)-[r:SUMMARIZES]->(t) RETURN coalesce(t.id, '') AS target ORDER BY r.position } "
            'AS targets ORDER BY m.session_id, m.id'
        )
        pages_cypher = _q(
            f'MATCH (p:Page) WHERE {_scope("p", namespace, session_id)} '
            'RETURN p.id AS id, p.session_id AS session_id, p.number AS number, p.first_turn AS first_turn, '
            "p.last_turn AS last_turn, COLLECT { MATCH (p)-[c:CONTAINS]->(b) RETURN [coalesce(b.id, ''), "
            'coalesce(c.position, -1)] AS member ORDER BY c.position } AS members ORDER BY p.session_id, p.number'
        )

        def work(tx: ManagedTransaction) -> GraphLinks:
            blocks = tuple(
                BlockLink(
                    id=r['id'], session_id=r['session_id'], kind=r['kind'], seq=r['seq'],
                    first_message=r['first_message'], last_message=r['last_message'], next_ids=tuple(r['next_ids']),
                    in_session=bool(r['in_session']),
                )
                for r in tx.run(blocks_cypher, params)
            )  # fmt: skip
            mementos = tuple(
                MementoLink(
                    id=r['id'], session_id=r['session_id'], level=int(r['level']),
                    # a memento written without the property (edges only) declares what its edges say
                    summarizes=tuple(r['targets'] if r['summarizes'] is None else r['summarizes']),
                    targets=tuple(r['targets']),
                )
                for r in tx.run(mementos_cypher, params)
            )  # fmt: skip
            pages = tuple(
                PageLink(
                    id=r['id'], session_id=r['session_id'], number=r['number'], first_turn=r['first_turn'],
                    last_turn=r['last_turn'], members=tuple((str(m[0]), int(m[1])) for m in r['members']),
                )
                for r in tx.run(pages_cypher, params)
            )  # fmt: skip
            return GraphLinks(blocks=blocks, mementos=mementos, pages=pages)

        return self._read(work, op='graph_links')

    def entities_of(self, source_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> list[tuple[EntityRecord, int]]:
        label = 'Memento' if _is_memento_id(source_id) else 'EvictedBlock'
        rows = self._rows(
            f'MATCH (:{label} {{id: $id}})-[r:MENTIONS]->(e:Entity {{namespace: $namespace}}) '
            'RETURN e.key AS key, e.name AS name, e.kind AS kind, r.count AS count ORDER BY count DESC, key',
            'entities_of',
            id=source_id,
            namespace=namespace,
        )
        return [(EntityRecord(key=row['key'], name=row['name'], kind=row['kind']), row['count']) for row in rows]

    def search_text(
        self, query: str, *, k: int = 10, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[TextHit]:
        """`GraphStore.search_text` on Neo4j: Lucene over an OR of the query's rarer words, top `k` inside Lucene.

        As on SQLite, words in more than `TEXT_MAX_DF` documents are left out when rarer ones exist (frequencies
        counted up to that cap, in the same round trip as the search). The search asks Lucene for the top `k`
        only (`limit`, so it can skip documents that cannot reach them) of the namespace's documents (the namespace
        and session are indexed beside the text and filtered with boost 0, so scores are the text's alone) and
        checks the scope on those; only when some fall outside it (another session) does Lucene rank the session's
        own. If the rarer words then find fewer than `k` documents in the scope (at most `TEXT_ENOUGH_HITS`) while
        their best matches across the store lie elsewhere, it ranks the scope on all of the query's words (the
        common ones may be common only elsewhere), as SQLite does.
        """
        from ..recall._values import TEXT_ENOUGH_HITS, TEXT_MAX_DF, TEXT_MAX_TERMS, TEXT_MIN_DOCS

        terms = list(dict.fromkeys(fts_terms(query)))
        if not terms or k <= 0:
            return []
        phrases = [
            f'words:{words}*' if is_prefix_term(words) else f'words:{_lucene_phrase(words)}'
            for words in dict.fromkeys(map(search_words, terms))
            if words
        ]
        if not phrases:
            return []
        returns = (
            'RETURN node.id AS id, CASE WHEN node:Memento THEN node.summarizes ELSE [node.id] END AS block_ids, '
            'node.namespace AS namespace, node.session_id AS session_id, score'
        )
        # One round trip: wait for the index, count each word's documents up to the cap, keep the rarer words
        # (the rarest alone if none is rare), and ask Lucene for the top k of their OR.
        top = _q(
            'CALL db.index.fulltext.awaitEventuallyConsistentIndexRefresh() '
            'CALL () { MATCH (b:EvictedBlock) RETURN count(b) AS blocks } '  # label counts: O(1) reads
            'CALL () { MATCH (m:Memento) RETURN count(m) AS mementos } '
            'WITH blocks + mementos > $min_docs AS large '
            'UNWIND range(0, size($phrases) - 1) AS i '
            'CALL (i, large) { WITH i WHERE large '
            'CALL db.index.fulltext.queryNodes($index, $phrases[i], {limit: $cap}) YIELD node '
            'RETURN count(node) AS df UNION WITH i WHERE NOT large RETURN 1 AS df } '
            'WITH large, i, df WHERE df > 0 ORDER BY df, i '
            'WITH large, collect(i) AS order, collect(df) AS dfs '
            'WITH large, [j IN range(0, size(order) - 1) WHERE dfs[j] < $cap | $phrases[order[j]]][..$max_terms] '
            'AS rare, order WHERE size(order) > 0 '
            'WITH CASE WHEN NOT large THEN $phrases WHEN size(rare) > 0 THEN rare ELSE [$phrases[order[0]]] END '
            'AS picked, [j IN range(0, size($phrases) - 1) WHERE j IN order | $phrases[j]] AS present '
            "WITH reduce(s = '', p IN picked | CASE s WHEN '' THEN p ELSE s + ' OR ' + p END) AS lucene, "
            "reduce(s = '', p IN present | CASE s WHEN '' THEN p ELSE s + ' OR ' + p END) AS every "
            f"CALL db.index.fulltext.queryNodes($index, '(' + lucene + ')' + $in_namespace, {{limit: $k}}) "
            f'YIELD node, score {returns}, lucene, every ORDER BY score DESC, id'
        )
        wider = _q(
            "CALL db.index.fulltext.queryNodes($index, '(' + $lucene + ')' + $in_namespace, {limit: $limit}) "
            f'YIELD node, score {returns} ORDER BY score DESC, id'
        )
        scoped = _q(
            "CALL db.index.fulltext.queryNodes($index, '(' + $lucene + ')' + $in_namespace + $in_session) "
            'YIELD node, score '
            f'WHERE {_scope("node", namespace, session_id)} {returns} ORDER BY score DESC, id LIMIT $k'
        )
        outside = _q(  # whether the top k across the whole store, unfiltered, reach outside the scope
            'CALL db.index.fulltext.queryNodes($index, $lucene, {limit: $k}) YIELD node '
            f'RETURN count(CASE WHEN NOT ({_scope("node", namespace, session_id)}) THEN 1 END) > 0 AS found'
        )
        params = {
            'index': FULLTEXT_INDEX,
            'phrases': phrases,
            'cap': TEXT_MAX_DF + 1,
            'max_terms': TEXT_MAX_TERMS,
            'min_docs': TEXT_MIN_DOCS,
            # only the namespace's documents reach the ranking (boost 0: the scores stay the text's alone); the
            # scope is still checked on every hit, as a phrase of the namespace's words could match another one
            'in_namespace': _lucene_filter('namespace', namespace),
            'in_session': _lucene_filter('session_id', session_id),
            'namespace': namespace,
            'session_id': session_id,
            'k': k,
        }

        def hits(records: list[neo4j.Record]) -> list[TextHit]:
            return [
                TextHit(id=record['id'], block_ids=tuple(record['block_ids'] or ()), score=float(record['score']))
                for record in records
            ]

        def work(run: _Run) -> list[TextHit]:
            # The index is eventually consistent (a synchronous full-text update cost ~8 ms a commit, more than the
            # rest of an eviction); waiting for it (in `top`) gives read-your-writes where it matters, at search time.
            def in_scope(record: neo4j.Record) -> bool:
                return bool(record['namespace'] == namespace and session_id in (None, record['session_id']))

            records = run(top, params)
            enough = min(k, TEXT_ENOUGH_HITS)
            if not records:
                # the rarer words match only other namespaces (Lucene left those out), so the words left out as
                # common may be common only there: the scope is ranked on all of its words (as on SQLite)
                return hits(run(scoped, {**params, 'lucene': ' OR '.join(phrases)}))
            lucene, every = records[0]['lucene'], records[0]['every']
            if not all(in_scope(record) for record in records):
                if session_id is not None:
                    # other sessions hold better matches: Lucene ranks the session's own (filtered in the index)
                    records = run(scoped, {**params, 'lucene': lucene})
                else:
                    # a namespace whose name reads the same holds better matches: 20 times as many from Lucene,
                    # then every match in scope
                    wide = run(wider, {**params, 'lucene': lucene, 'limit': 20 * k})
                    kept = [record for record in wide if in_scope(record)]
                    exact = len(kept) >= k or len(wide) < 20 * k  # the top k in scope, or every match there is
                    records = kept[:k] if exact else run(scoped, {**params, 'lucene': lucene})
                if len(records) < enough and every != lucene:
                    records = run(scoped, {**params, 'lucene': every})  # as below
            elif len(records) < enough and every != lucene and run(outside, {**params, 'lucene': lucene})[0]['found']:
                # fewer than k matches here, and the rarer words' best matches across the store reach other
                # scopes: the words left out were common across the store, maybe through other scopes alone, and
                # may be the only ones that match here, so the scope is ranked on all of its words (as on SQLite)
                records = run(scoped, {**params, 'lucene': every})
            return hits(records)

        return self._quick_read(work, op='search_text')

    def stats(self, *, namespace: str | None = DEFAULT_NAMESPACE, session_id: str | None = None) -> StoreStats:
        def scope(variable: str) -> str:
            return _scope(variable, namespace, session_id)

        rows = self._rows(
            f"""
            RETURN
              COUNT {{ MATCH (s:Session) WHERE {_scope('s', namespace, session_id, session_field='id')} }} AS sessions,
              COUNT {{ MATCH (b:EvictedBlock) WHERE {scope('b')} AND b.kind = 'block' }} AS blocks,
              COUNT {{ MATCH (b:EvictedBlock) WHERE {scope('b')} AND b.kind = 'part' }} AS parts,
              COUNT {{ MATCH (m:Memento) WHERE {scope('m')} }} AS mementos,
              COUNT {{ MATCH (m:Memento) WHERE {scope('m')} AND m.verified }} AS verified_mementos,
              COUNT {{ MATCH (b:EvictedBlock)-[:MENTIONS]->(e:Entity) WHERE {scope('b')} RETURN DISTINCT e }}
                AS entities,
              COUNT {{ MATCH (p:Page) WHERE {scope('p')} }} AS pages,
              COUNT {{ MATCH (e:Event) WHERE {scope('e')} AND e.seq >= 0 }} AS events,
              COLLECT {{ MATCH (b:EvictedBlock) WHERE {scope('b')} AND b.kind = 'block' RETURN sum(b.tokens) }}[0]
                AS block_tokens,
              COLLECT {{ MATCH (m:Memento) WHERE {scope('m')} AND m.level = 1 RETURN sum(m.tokens) }}[0]
                AS memento_tokens
            """,
            'stats',
            namespace=namespace,
            session_id=session_id,
        )
        counts = {name: int(value or 0) for name, value in rows[0].items()}
        return StoreStats(
            sessions=counts['sessions'],
            blocks=counts['blocks'],
            parts=counts['parts'],
            mementos=counts['mementos'],
            verified_mementos=counts['verified_mementos'],
            entities=counts['entities'],
            pages=counts['pages'],
            events=counts['events'],
            block_tokens=counts['block_tokens'],
            memento_tokens=counts['memento_tokens'],
        )

    # -- recall reads (issue 6): entity postings and block neighbours ---------------------------------------------
    # Recall itself is Python over these two reads (knowledge_graph/recall), so every backend ranks identically.

    def entity_postings(
        self,
        keys: Sequence[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        prefix: bool = False,
        limit: int = 200,
        max_entities: int = 64,
        count_limit: int = 10_000,
        count_total: bool = True,
    ) -> EntityLookup:
        """`RecallStore.entity_postings` on Neo4j."""
        from ..recall._values import EntityLookup, EntityPostings, Posting

        postings = _POSTINGS.format(scope=_scope('b', None, session_id)) if limit > 0 else '[]'
        cypher = _ENTITY_POSTINGS.format(
            total=_TOTAL_BLOCKS if count_total else '0',  # the caller knows N otherwise
            find=_FIND_ENTITIES_BY_PREFIX if prefix else _FIND_ENTITIES,
            postings=postings,
        )
        rows = self._rows(
            cypher,
            'entity_postings',
            keys=list(dict.fromkeys(keys)),
            namespace=namespace,
            session_id=session_id,
            limit=max(limit, 0),
            max_entities=max_entities if max_entities >= 0 else _UNLIMITED,
            count_limit=count_limit if count_limit >= 0 else _UNLIMITED,
        )
        found = {entity['key']: entity for entity in rows[0]['entities']}
        entities: list[EntityPostings] = []
        for key in sorted(found):
            entity = found[key]
            blocks = int(entity['blocks'])
            entities.append(
                EntityPostings(
                    entity=EntityRecord(key=key, name=entity['name'], kind=entity['kind']),
                    blocks=blocks,
                    postings=tuple(
                        Posting(block_id=block_id, count=int(count)) for block_id, count in entity['postings']
                    )
                    if blocks
                    else (),
                )
            )
        return EntityLookup(total_blocks=int(rows[0]['total']), entities=tuple(entities))

    def mention_keys(
        self,
        block_ids: Sequence[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        entity_classes: Collection[str] | None = None,
    ) -> dict[str, tuple[tuple[str, int], ...]]:
        """`RecallStore.mention_keys` on Neo4j: one round trip, what `block_info(..., entities=True)` collects."""
        ids = list(dict.fromkeys(block_ids))
        if not ids:
            return {}
        rows = self._rows(
            "UNWIND $ids AS block_id MATCH (b:EvictedBlock {id: block_id}) WHERE b.kind = 'block' AND "
            + _scope('b', namespace, session_id)
            + ' MATCH (b)-[r:MENTIONS]->(e:Entity {namespace: $namespace}) '
            + ('' if entity_classes is None else "WHERE split(e.key, ':')[0] IN $classes ")
            + 'WITH b, e, r ORDER BY r.count DESC, e.key RETURN b.id AS block, collect([e.key, r.count]) AS mentions',
            'mention_keys',
            ids=ids,
            namespace=namespace,
            session_id=session_id,
            classes=sorted(entity_classes or ()),
        )
        found = {row['block']: tuple((key, count) for key, count in row['mentions']) for row in rows}
        return {block_id: found[block_id] for block_id in ids if block_id in found}

    def block_info(
        self,
        block_ids: Sequence[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        session_id: str | None = None,
        mementos: bool = False,
        entities: bool = False,
        entity_classes: Collection[str] | None = None,
    ) -> list[BlockInfo]:
        """`RecallStore.block_info` on Neo4j, in one round trip with what is asked: with `mementos`, the memento made
        of the block alone, else the first that `SUMMARIZES` it (as `memento_of` orders them); with `entities`, what
        `entities_of` answers (of `entity_classes` only, when given)."""
        from ..recall._values import BlockInfo

        ids = list(dict.fromkeys(block_ids))
        if not ids:
            return []
        cypher = _BLOCK_INFO.format(scope=_scope('b', namespace, session_id))
        if mementos:
            cypher += (
                ', COLLECT { MATCH (m:Memento)-[:SUMMARIZES]->(b) WHERE '
                + _scope('m', namespace, session_id)
                + ' WITH m, (m.summarizes = [b.id] AND m.session_id = b.session_id) AS own '
                f'RETURN {_MEMENTO_FIELDS} ORDER BY own DESC, m.created_at, m.ordinal, m.id LIMIT 1 }} AS memento'
            )
        if entities:
            cypher += (
                ', COLLECT { MATCH (b)-[r:MENTIONS]->(e:Entity {namespace: $namespace}) '
                + ('' if entity_classes is None else "WHERE split(e.key, ':')[0] IN $classes ")
                + 'RETURN [e.key, e.name, e.kind, r.count] AS entity ORDER BY r.count DESC, e.key } AS entities'
            )
        rows = self._rows(
            cypher,
            'block_info',
            ids=ids,
            namespace=namespace,
            session_id=session_id,
            classes=sorted(entity_classes or ()),
        )
        found: dict[str, BlockInfo] = {}
        for row in rows:
            record = row['record']
            found[record['id']] = BlockInfo(
                id=record['id'],
                session_id=record['session_id'],
                seq=record['seq'],
                first_message=record['first_message'],
                last_message=record['last_message'],
                tokens=record['tokens'],
                started_at=record['started_at'],
                previous_id=row['previous'][0] if row['previous'] else None,
                next_id=row['following'][0] if row['following'] else None,
                memento=_memento(row['memento'][0]) if mementos and row['memento'] else None,
                entities=tuple(
                    (EntityRecord(key=key, name=name, kind=kind), count)
                    for key, name, kind, count in (row['entities'] if entities else ())
                ),
            )
        return [found[block_id] for block_id in ids if block_id in found]

    # -- Cypher -----------------------------------------------------------------------------------------------

    def query(
        self,
        cypher: str,
        params: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
        namespace: str | None = None,
        limit: int | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """Run a read-only Cypher query in a READ transaction, inside one namespace; rows as plain dicts.

        `$namespace` (default `'default'`) and `$session_id` (default null) are always defined, and values only ever
        travel as parameters. The database holds every namespace, so before anything is sent `check_scope` makes
        sure the query cannot read outside `$namespace`: each pattern needs a node with `{namespace: $namespace}`
        (or one bound from such a pattern); procedures other than full-text/vector index queries filtered on
        `node.namespace`, and user-defined functions, are refused. `$session_id` is a binding here, not a limit
        (the MCP server adds the session check when it serves one session).

        Args:
            cypher: a read query (write clauses, LOAD CSV, admin commands and write procedures are refused).
            params: query parameters.
            session_id: bound to `$session_id`.
            namespace: bound to `$namespace`: the only namespace the query can read.
            limit: most rows returned before the query fails (default `query_limit`, 1000).
            timeout: seconds before the server terminates the query (default `query_timeout`, 10).

        Raises:
            ReadOnlyViolationError: the query would write (refused before sending, or by the server).
            ScopeViolationError: the query could read another namespace (refused before it runs; says what to add).
            QueryError: Cypher syntax error (with the server's line/column), more rows than `limit`, timeout,
                or another error reported by the server.
            StoreUnavailableError: the server cannot be reached.
        """
        source, tokens = prepare_query(cypher)
        merged = scoped_params(params, session_id=session_id, namespace=namespace)
        row_limit, seconds = query_bounds(
            self.query_limit if limit is None else limit, self.query_timeout if timeout is None else timeout
        )
        try:
            check_scope(source, tokens)
        except ScopeViolationError as refusal:
            # A query the checker cannot read is often just mistyped: the server's syntax error (from EXPLAIN,
            # which plans without running anything) says more than "cannot check"; a valid one stays refused.
            if not refusal.understood and (syntax := self._syntax_error(source, merged, seconds)) is not None:
                raise syntax from refusal
            raise

        def work(tx: ManagedTransaction) -> list[dict[str, Any]]:
            result = tx.run(_q(source), merged)
            records = result.fetch(row_limit + 1)
            if len(records) > row_limit:
                raise QueryError(row_limit_message(row_limit))
            return [dict(zip(record.keys(), map(plain_value, record.values()), strict=True)) for record in records]

        return self._read(work, op='query', timeout=seconds, translate=lambda exc: _query_error(exc, seconds))

    def _syntax_error(self, source: str, params: Mapping[str, Any], seconds: float) -> QueryError | None:
        """The server's syntax error for `source`, or None when the server can plan it. `EXPLAIN` never executes
        the query, so nothing is read; positions are given back as they are in `source`."""
        prefix = 'EXPLAIN\n'  # on its own line: only line numbers and offsets move, never columns
        caught: list[neo4j_errors.Neo4jError] = []

        def keep(exc: neo4j_errors.Neo4jError) -> QueryError:
            caught.append(exc)
            return QueryError('planning failed')

        with suppress(QueryError):
            self._read(lambda tx: tx.run(_q(prefix + source), dict(params)).consume(), op='query', timeout=seconds,
                       translate=keep)  # fmt: skip
        if not caught or not (
            isinstance(caught[0], neo4j_errors.CypherSyntaxError) or _code(caught[0]).endswith('Statement.SyntaxError')
        ):
            return None

        def unshift(match: re.Match[str]) -> str:
            line, column, offset = (int(group) for group in match.groups())
            return f'line {max(1, line - 1)}, column {column} (offset: {max(0, offset - len(prefix))})'

        message = re.sub(r'line (\d+), column (\d+) \(offset: (\d+)\)', unshift, _server_message(caught[0]))
        return QueryError(f'Cypher syntax error: {message}')


def _int_option(options: Mapping[str, list[str]], name: str) -> int:
    try:
        return int(options[name][-1])
    except ValueError:
        raise ValueError(f'store URI option {name}={options[name][-1]!r} is not a whole number') from None


def _float_option(options: Mapping[str, list[str]], name: str) -> float:
    try:
        return float(options[name][-1])
    except ValueError:
        raise ValueError(f'store URI option {name}={options[name][-1]!r} is not a number') from None


def _unavailable(exc: BaseException, uri: str, user: str | None, action: str) -> StoreError:
    """A driver failure as a typed error that says what to check."""
    if isinstance(exc, neo4j_errors.AuthError):
        return StoreUnavailableError(
            f'Neo4j at {uri} rejected the credentials{f" of user {user!r}" if user else ""} ({_server_message(exc)}); '
            'credentials come from the URI (neo4j://USER:PASSWORD@host:7687) or NEO4J_USERNAME/NEO4J_PASSWORD '
            '(scripts/neo4j-server env prints those of the local server)'
        )
    if isinstance(exc, neo4j_errors.ServiceUnavailable | neo4j_errors.SessionExpired | OSError):
        return StoreUnavailableError(
            f'cannot reach Neo4j at {uri} while {action} ({exc}); check that the server is running and listening '
            'on that host and port (bolt, usually 7687), that the scheme fits it (bolt:// for one server, neo4j:// '
            'for routing, +s for TLS), and for a local server run `eval "$(scripts/neo4j-server start)"`'
        )
    if isinstance(exc, neo4j_errors.ClientError):
        return StoreError(f'Neo4j at {uri} refused {action}: {_server_message(exc)}')
    return StoreUnavailableError(f'Neo4j at {uri} failed while {action}: {exc}')


def _query_error(exc: neo4j_errors.Neo4jError, timeout: float) -> QueryError:
    code = _code(exc)
    message = _server_message(exc)
    if isinstance(exc, neo4j_errors.CypherSyntaxError) or code.endswith('Statement.SyntaxError'):
        return QueryError(f'Cypher syntax error: {message}')
    if code.endswith(('Statement.AccessMode', 'Security.Forbidden')) or 'AccessMode' in code:
        return ReadOnlyViolationError(f'the server refused a write in a read-only query: {message}')
    if 'TransactionTimedOut' in code:
        return QueryError(
            f'the query ran longer than its {timeout:g} s timeout and the server stopped it; narrow it (labels, '
            'property filters, LIMIT) or raise the timeout (timeout=SECONDS, --timeout SECONDS)'
        )
    if code.endswith('Statement.ParameterMissing'):
        return QueryError(f'{message} (pass it with params={{...}} or --param NAME=VALUE)')
    return QueryError(f'the query failed on the server ({code}): {message}')


# -- transaction bodies -----------------------------------------------------------------------------------------


def _block_row(block: BlockRecord) -> dict[str, Any]:
    props = {
        'id': block.id,
        'session_id': block.session_id,
        'namespace': block.namespace,
        'seq': block.seq,
        'kind': block.kind,
        'first_message': block.first_message,
        'last_message': block.last_message,
        'tokens': block.tokens,
        'sha256': block.sha256,
        'messages_json': block.messages_json,
        'text': block.text,
        'words': search_words(block.text),
        'started_at': block.started_at,
    }
    return {'id': block.id, 'props': {key: value for key, value in props.items() if value is not None}}


def _memento_row(memento: MementoRecord) -> dict[str, Any]:
    props = {
        'id': memento.id,
        'session_id': memento.session_id,
        'namespace': memento.namespace,
        'text': memento.text,
        'words': search_words(memento.text),
        'tokens': memento.tokens,
        'summarizes': list(memento.summarizes),
        'score': memento.score,
        'verified': memento.verified,
        'iterations': memento.iterations,
        'compressor': memento.compressor,
        'level': memento.level,
    }
    return {'id': memento.id, 'props': {key: value for key, value in props.items() if value is not None}}


def _event_row(event: SessionEvent, uid: str, created: str) -> dict[str, Any]:
    props = {
        'uid': uid,
        'key': event.key,
        'namespace': event.namespace,
        'session_id': event.session_id,
        'kind': event.kind,
        'message_index': event.message_index,
        'sha256': event.sha256,
        'payload': event.payload,
        'block_ids': list(event.block_ids),
        'created_at': event.created_at or created,
    }
    return {'uid': uid, 'props': {key: value for key, value in props.items() if value is not None}}


def _write_eviction(tx: ManagedTransaction, eviction: Eviction, created: str) -> None:
    """The eviction's statement inside a transaction someone else manages (`Neo4jStore.write_eviction` runs the
    same statement as a transaction of its own, with one round trip less)."""
    tx.run(_q(_WRITE_EVICTION), _eviction_params(eviction, created)).consume()


def _eviction_params(eviction: Eviction, created: str) -> dict[str, Any]:
    """The parameters of `_WRITE_EVICTION`: what Python settles without reading the store (rows, duplicates
    dropped, the new blocks' `(seq, id)` links in chain order). What depends on the store (which events and
    mementos exist, the counters, the chain around the new blocks) the statement reads under the session lock."""
    ns, sid = eviction.namespace, eviction.session_id
    chained = sorted({(block.seq, block.id) for block in eviction.blocks if block.kind == 'block'})
    first: dict[str, BlockRecord] = {}
    for block in eviction.blocks:
        first.setdefault(block.id, block)  # the row MERGE creates a block from (first write wins)
    return {
        'key': session_key(ns, sid),
        'namespace': ns,
        'session_id': sid,
        'created': created,
        'low': chained[0][0] if chained else None,
        'high': chained[-1][0] if chained else None,
        'chained': [[seq, block_id] for seq, block_id in chained],
        'blocks': [_block_row(block) for block in eviction.blocks],
        'block_ids': [block_id for block_id, block in first.items() if block.kind == 'block'],  # counted if new
        # one row per id, at its first position with its last value (new ones get ordinals in this order)
        'mementos': [_memento_row(memento) for memento in {m.id: m for m in eviction.mementos}.values()],
        'summarizes': [
            {'source': memento.id, 'target': target, 'position': position}
            for memento in eviction.mementos
            for position, target in enumerate(memento.summarizes)
        ],
        'pages': _page_rows(eviction.pages),
        'events': _event_rows(eviction.events, created),
        **_mention_rows(ns, eviction.mentions),
    }


def _event_rows(events: Sequence[SessionEvent], created: str) -> list[dict[str, Any]]:
    """One row per event key, the first (a later event with the same key is a retry of it); seqs are assigned
    by the statement, in this order, to the events the session's log does not hold yet."""
    rows: dict[str, dict[str, Any]] = {}
    for event in events:
        uid = _event_uid(event.namespace, event.session_id, event.key)
        if uid not in rows:
            rows[uid] = _event_row(event, uid, created)
    return list(rows.values())


def _mention_rows(namespace: str, mentions: Sequence[Mention]) -> dict[str, list[dict[str, Any]]]:
    """Entity rows and MENTIONS rows from blocks and from mementos, in entity order (one lock order across
    concurrent writers: fewer deadlocks)."""
    entities = {
        entity_id_for(namespace, m.entity.key): {
            'id': entity_id_for(namespace, m.entity.key), 'key': m.entity.key, 'name': m.entity.name,
            'kind': m.entity.kind,
        }
        for m in reversed(mentions)  # the first mention of an entity names it, as on SQLite
    }  # fmt: skip
    edges: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    seen: set[tuple[str, str]] = set()
    for mention in sorted(mentions, key=lambda m: m.entity.key):
        entity_id = entity_id_for(namespace, mention.entity.key)
        if (mention.source_id, entity_id) in seen:
            continue  # MERGE keeps the first anyway; one row per edge lets the statement count the edges it creates
        seen.add((mention.source_id, entity_id))
        edges[_is_memento_id(mention.source_id)].append(
            {'source': mention.source_id, 'entity_id': entity_id, 'count': mention.count}
        )
    return {
        'entities': sorted(entities.values(), key=lambda row: row['id']),
        'block_mentions': edges[False],
        'memento_mentions': edges[True],
    }


def _page_rows(pages: Sequence[PageRecord]) -> list[dict[str, Any]]:
    return [
        {
            'id': page.id,
            'number': page.number,
            'first_turn': page.first_turn,
            'last_turn': page.last_turn,
            'summary': page.summary,
            'topics': list(page.topics),
            'members': [{'id': block_id, 'position': pos} for pos, block_id in enumerate(page.block_ids)],
        }
        for page in pages
    ]


def _backfill_words(session: neo4j.Session) -> None:
    """Give every block and memento without `words` (written by a version that indexed `text`) its `words`, in
    batches along the id index: idempotent, so an interrupted setup is finished by the next one."""
    for label in ('EvictedBlock', 'Memento'):
        after = ''
        while True:
            rows = session.run(
                _q(
                    f'MATCH (n:{label}) USING INDEX n:{label}(id) WHERE n.id > $after '
                    'RETURN n.id AS id, n.text AS text, n.words IS NULL AS missing ORDER BY n.id LIMIT $batch'
                ),
                after=after,
                batch=_BACKFILL_BATCH,
            ).data()
            missing = [{'id': row['id'], 'words': search_words(row['text'] or '')} for row in rows if row['missing']]
            if missing:
                session.run(
                    _q(f'UNWIND $rows AS row MATCH (n:{label} {{id: row.id}}) SET n.words = row.words'), rows=missing
                ).consume()
            if len(rows) < _BACKFILL_BATCH:
                break
            after = rows[-1]['id']


def _delete_session(tx: ManagedTransaction, namespace: str, session_id: str) -> int:
    params = {'namespace': namespace, 'session_id': session_id}
    entity_ids = tx.run(
        _q(
            'MATCH (x:EvictedBlock|Memento {namespace: $namespace, session_id: $session_id})-[:MENTIONS]->(e:Entity) '
            'RETURN collect(DISTINCT e.id) AS ids'
        ),
        params,
    ).single(strict=True)['ids']
    # the entities' document frequencies lose this session's blocks (`_WRITE_EVICTION` keeps them); SET reads the
    # property it writes, so Cypher locks each entity first, in id order
    tx.run(
        _q(
            "MATCH (:EvictedBlock {namespace: $namespace, session_id: $session_id, kind: 'block'})"
            '-[:MENTIONS]->(e:Entity) '
            'WITH e, count(*) AS n ORDER BY e.id '
            'SET e.blocks = CASE WHEN e.blocks IS NULL THEN null ELSE e.blocks - n END'
        ),
        params,
    ).consume()
    removed = 0
    for label, index_hint in (('EvictedBlock', ''), ('Memento', ''), ('Page', ''), ('Event', 'WHERE n.seq >= 0 ')):
        counters = (
            tx.run(
                _q(f'MATCH (n:{label} {{namespace: $namespace, session_id: $session_id}}) {index_hint}DETACH DELETE n'),
                params,
            )
            .consume()
            .counters
        )
        removed += counters.nodes_deleted + counters.relationships_deleted
    counters = (
        tx.run(
            _q('MATCH (s:Session {key: $key}) DETACH DELETE s'),
            key=session_key(namespace, session_id),
        )
        .consume()
        .counters
    )
    removed += counters.nodes_deleted + counters.relationships_deleted
    counters = (
        tx.run(
            _q(_DROP_ORPHAN_ENTITIES),
            ids=entity_ids,
        )
        .consume()
        .counters
    )
    return removed + counters.nodes_deleted
