"""`_base` -- behaviour every backend shares on top of its own reads: hash-checked recovery, chain walking."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from itertools import pairwise

from ..._text import IDEOGRAPH_RUN, IDEOGRAPHS, character_pairs, without_particle
from .._schema import DEFAULT_NAMESPACE, BlockRecord, MementoRecord, Mention, PageRecord, SessionEvent
from ._errors import (
    BlockIntegrityError,
    BlockNotFoundError,
    ChainIntegrityError,
    LogConflictError,
    NotFoundError,
    PageConflictError,
)
from ._protocol import GraphStore, RecoveredBlock

__all__ = (
    'branch_events',
    'check_block',
    'check_mention_sources',
    'check_page',
    'fts_terms',
    'is_prefix_term',
    'log_conflict',
    'missing_sources',
    'now_iso',
    'recover_block',
    'recover_chain',
    'search_words',
    'spaced_ideographs',
)


def now_iso() -> str:
    """Current UTC time, ISO-8601 (bookkeeping only; never part of an id or of text the model sees)."""
    return datetime.now(UTC).isoformat()


def log_conflict(event: SessionEvent) -> LogConflictError:
    """The error of an append whose message event finds another message logged at its position."""
    return LogConflictError(
        f'the log of session {event.session_id!r} (namespace {event.namespace!r}) holds another message at position '
        f'{event.message_index}: another run is writing this session at the same time',
        message_index=event.message_index or 0,
    )


def branch_events(events: Sequence[SessionEvent], last: int) -> list[SessionEvent]:
    """`append_branch`'s events placed after position `last`; raises `ValueError` unless they are message events of
    one session."""
    if len({(event.namespace, event.session_id) for event in events}) > 1:
        raise ValueError('append_branch takes the events of one session')
    if any(event.kind != 'message' or event.message_index is None for event in events):
        raise ValueError('append_branch takes message events only')
    return [replace(event, message_index=last + 1 + (event.message_index or 0)) for event in events]


def check_mention_sources(source_ids: Sequence[str], mentions: Sequence[Mention]) -> list[str]:
    """`replace_mentions`' sources without repeats; raises `ValueError` when a mention's source is not one of them
    (its edges would be written without the old ones going)."""
    sources = list(dict.fromkeys(source_ids))
    listed = set(sources)
    stray = sorted({mention.source_id for mention in mentions} - listed)
    if stray:
        raise ValueError(f'mentions from {stray[0]!r}, which is not among the sources to replace')
    return sources


def block_not_found(block_id: str, namespace: str, session_id: str | None) -> BlockNotFoundError:
    """The error of a `get_block` that found nothing; a memento's id gets a pointer to what recovers it."""
    where = f'no evicted block {block_id!r} in namespace {namespace!r}' + (
        f', session {session_id!r}' if session_id else ''
    )
    if block_id.startswith('mem_'):
        where += ': that is a memento id; recover_chain(store, id) recovers every block under it'
    return BlockNotFoundError(where)


def missing_sources(missing: Sequence[str], namespace: str) -> NotFoundError:
    """The error of a `replace_mentions` whose sources are not all in the store."""
    more = f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''
    return NotFoundError(f'no block or memento {missing[0]!r}{more} in namespace {namespace!r}: nothing was replaced')


def check_page(page: PageRecord, held: Mapping[str, int]) -> None:
    """Raise `PageConflictError` unless a page, as it holds its members after an eviction's write (block id ->
    position), agrees with the eviction's record of it: every member of the record at its own position, every other
    member after them. So a record that extends the page as the store held it passes, and so does a retried older
    record (a prefix); one computed from a page another run has grown since does not (the check runs inside the
    write's transaction, which the error rolls back). A member the backend could not link (no such block) is left
    out of `held` and of the check."""
    members = list(dict.fromkeys(page.block_ids))
    place = {block_id: position for position, block_id in enumerate(members)}
    for block_id, position in held.items():
        own = place.get(block_id)
        fits = position == own if own is not None else position >= len(members)
        if not fits:
            raise PageConflictError(
                f'page {page.number} of session {page.session_id!r} (namespace {page.namespace!r}) changed since '
                "this eviction's pages were computed: another run evicted from the session at the same time"
            )


def check_block(record: BlockRecord) -> RecoveredBlock:
    """Verify a block's bytes against its sha256 and decode them; never returns data that fails the check."""
    from ..._messages import deserialize_messages, messages_sha256  # pydantic-ai loads when a block is decoded

    actual = messages_sha256(record.messages_json)
    if actual != record.sha256:
        raise BlockIntegrityError(
            f'block {record.id} of session {record.namespace}/{record.session_id} fails its integrity check: '
            f'stored sha256 {record.sha256}, bytes hash to {actual}; the archive was altered or corrupted'
        )
    try:
        messages = deserialize_messages(record.messages_json)
    except ValueError as exc:
        raise BlockIntegrityError(f'block {record.id} holds bytes that are not pydantic-ai messages: {exc}') from exc
    return RecoveredBlock(record=record, messages=tuple(messages))


def recover_block(
    store: GraphStore, block_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
) -> RecoveredBlock:
    """`store.get_block` then `check_block`."""
    return check_block(store.get_block(block_id, namespace=namespace, session_id=session_id))


def recover_chain(
    store: GraphStore, item_id: str, *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
) -> list[RecoveredBlock]:
    """Recover a block, or every block under a memento (following `SUMMARIZES` through mementos of mementos),
    in session order.

    The mementos are read a level of the chain at a time and the blocks all at once (`get_mementos`,
    `get_blocks`): on a server, a round trip per level where each memento and block took one of its own. The walk
    is the one they were read one by one in, so what it returns and raises is the same.

    Raises:
        BlockIntegrityError: The block failed its check. Under a memento, a `ChainIntegrityError` raised once the
            whole chain was read: it names the blocks that failed and carries the others.
    """
    if not item_id.startswith('mem_'):
        return [store.recover_block(item_id, namespace=namespace, session_id=session_id)]
    mementos = _mementos_under(store, item_id, namespace=namespace, session_id=session_id)
    wanted = [target for memento in mementos.values() for target in memento.summarizes if not target.startswith('mem_')]
    records = {record.id: record for record in store.get_blocks(wanted, namespace=namespace, session_id=session_id)}
    blocks: list[RecoveredBlock] = []
    damaged: dict[str, BlockIntegrityError] = {}
    pending = [item_id]
    seen: set[str] = set()
    while pending:
        current = pending.pop(0)
        if current in seen:
            continue
        seen.add(current)
        # what the batched reads did not find is read alone: the store's own not-found error, at the same point
        if current.startswith('mem_'):
            memento = (
                mementos[current]
                if current in mementos
                else store.get_memento(current, namespace=namespace, session_id=session_id)
            )
            pending[0:0] = list(memento.summarizes)
            continue
        try:
            blocks.append(
                check_block(records[current])
                if current in records
                else store.recover_block(current, namespace=namespace, session_id=session_id)
            )
        except BlockIntegrityError as exc:
            damaged[current] = exc
    blocks.sort(key=lambda block: block.record.seq)
    if damaged:
        raise ChainIntegrityError(
            f'{len(damaged)} of {len(damaged) + len(blocks)} blocks under memento {item_id} failed their integrity '
            f'check and are not returned: ' + '; '.join(str(exc) for exc in damaged.values()),
            recovered=tuple(blocks),
            damaged=tuple(damaged),
        )
    return blocks


def _mementos_under(
    store: GraphStore, memento_id: str, *, namespace: str, session_id: str | None
) -> dict[str, MementoRecord]:
    """A memento and the mementos under it that the store holds in scope, by id: one read per level of the chain."""
    found: dict[str, MementoRecord] = {}
    asked: set[str] = set()
    level = [memento_id]
    while level:
        asked.update(level)
        read = store.get_mementos(level, namespace=namespace, session_id=session_id)
        found.update((memento.id, memento) for memento in read)
        below = (target for memento in read for target in memento.summarizes)
        level = list(dict.fromkeys(target for target in below if target.startswith('mem_') and target not in asked))
    return found


_WORD = re.compile(r'[\w.\-/]+', re.UNICODE)
_IDEOGRAPH = re.compile(f'[{IDEOGRAPHS}]')


_SEPARATORS = re.compile(r'[\W_]+')
_ASCII_SEPARATORS = str.maketrans({chr(code): ' ' for code in range(128) if not chr(code).isalnum()})


def spaced_ideographs(text: str) -> str:
    """`text` with a space on each side of every Han ideograph and Hiragana character, so that FTS5's `unicode61`,
    which reads a run of them as one word (a whole Chinese sentence is one token), reads each as a word, as Lucene
    does. Searches then match them as phrases (`fts_terms`)."""
    if text.isascii():
        return text
    return _IDEOGRAPH.sub(r' \g<0> ', text)


def search_words(text: str) -> str:
    """`text`'s words as the full-text indexes read them, one space between: runs of letters and digits, split at
    everything else, and every Han ideograph and Hiragana character a word of its own (`spaced_ideographs`). Neo4j
    indexes this form, because Lucene's standard analyzer keeps `sql.DeleteQuery`, `apply_discount` and `models.py`
    whole (one token each, per Unicode word breaking), so a search for `DeleteQuery`, `discount` or `models` found
    on SQLite what Neo4j missed."""
    if text.isascii():  # most text: a table lookup per character, a third of the regular expression's time
        return ' '.join(text.translate(_ASCII_SEPARATORS).split())
    return ' '.join(_SEPARATORS.sub(' ', spaced_ideographs(text)).split())


_HANGUL_WORD = re.compile('[\uac00-\ud7a3]{2,}')


PAIR_JOIN = '\u01c2'
"""Joins two tokens into one `unicode61` token (U+01C2, a letter to FTS5, in no word of any language's text)."""
_COMPOUND = re.compile(r'(?<![^\W_])[A-Za-z0-9]++(?:[._/\\:]++[A-Za-z0-9]++)+(?![^\W_])')
"""A compound word: ASCII letters and digits joined by `._/\\:`, not touching another letter or digit (`éfoo.bar`
is the tokens `efoo bar` to FTS5). Possessive, so a word is not tried again from each of its letters. Not a hyphen:
prose writes `stand-up comedy` and `stand up comedy` alike, and a question's `high-end` must find both."""
_ASCII_COMPOUND = re.compile(r'(?<![A-Za-z0-9])[A-Za-z0-9]++(?:[._/\\:]++[A-Za-z0-9]++)+')
"""The same in ASCII text, where no other letter can touch it: 2.3x faster (0.17 ms for a 4.6 KB block)."""
_JOINERS = re.compile(r'[._/\\:]+')
_ASCII_TOKEN = re.compile('[A-Za-z0-9]+')


def _pairs(tokens: Sequence[str]) -> Iterator[str]:
    return map(PAIR_JOIN.join, pairwise(tokens))


def token_pairs(text: str) -> str:
    """Each pair of adjacent tokens inside `text`'s compound words (ASCII words joined by `.`, `_`, `/`, `\\` or
    `:`, as paths, dotted and snake_case names are) as one token, one space between: what SQLite indexes in
    its `pairs` full-text column.

    A search term of several tokens (`django/db/models/sql/query.py`) is a phrase, and FTS5 finds a phrase by
    walking the documents of each of its tokens (`py`, `django`, `db`: tens of thousands at 100k blocks), twice,
    since `bm25()` walks all of a phrase's matches for its IDF. The same phrase made of pairs (`django\u01c2db
    db\u01c2models ...`) walks the documents holding each pair, a few hundred: the same matches inside a compound
    word at a fraction of the cost (at 100k blocks, 3.0 ms against 19.8 for that path ranked alone). A phrase that
    crossed a space or other punctuation no longer matches."""
    compounds = (_ASCII_COMPOUND if text.isascii() else _COMPOUND).findall(text)
    return ' '.join(' '.join(_pairs(_JOINERS.split(compound))) for compound in compounds)


def term_pairs(term: str) -> str:
    """An ASCII search term of several tokens as the phrase of its token pairs (`token_pairs`), or `''` (a term
    with a hyphen too: it is searched as the phrase of its words, which finds it written with or without one)."""
    tokens = _ASCII_TOKEN.findall(term) if term.isascii() and '-' not in term else []
    return ' '.join(_pairs(tokens))


def is_prefix_term(term: str) -> bool:
    """Whether a search term is matched as a word's beginning: a Korean word of two syllables or more. Korean
    writes a noun and its particle as one word (`서울에서`, "in Seoul"), and both FTS5 and Lucene index that word
    whole, so `서울` is searched as `서울*`."""
    return _HANGUL_WORD.fullmatch(term) is not None


def fts_terms(query: str) -> list[str]:
    """Split a free-text query into literal search terms (never interpreted as query syntax).

    A run of Han ideographs or Hiragana (a Chinese or Japanese phrase has no spaces to split at) becomes its
    overlapping pairs, `数据库` -> `数据`, `据库`, each searched as a phrase of two characters: the pairs a
    passage shares with the query rank it, as a bigram index would, with no dictionary. A lone character is
    itself. A Korean word is searched without its particle (`회의가` -> `회의`, then as `회의*`: `is_prefix_term`),
    so it finds the noun with any particle.
    """
    terms: list[str] = []
    for match in _WORD.findall(query):
        terms += [without_particle(term) for piece in IDEOGRAPH_RUN.split(match) if (term := piece.strip('.-/'))]
        for run in IDEOGRAPH_RUN.findall(match):
            terms += character_pairs(run)
    return terms
