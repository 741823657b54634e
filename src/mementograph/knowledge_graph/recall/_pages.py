"""`_pages` -- the paged index: evicted blocks grouped into numbered pages, each with a short summary and topics.

Why pages: a model that has lost a block from its context needs to know *that* it exists and roughly what it
holds before it can ask for it. `page_index_text` is that table of contents, small enough to sit in the context.

Cache-friendliness: the index lists **closed** pages only, and a page closes once (when it holds
`blocks_per_page` blocks or `tokens_per_page` archived tokens), so the index text changes only when a page closes,
not at every eviction, and the prompt prefix that holds it stays cached in between. Once more than `meta_after`
pages are closed, older pages fold into groups of `group_size` (the meta-index: one line per group, its range and
topics), keeping the newest `group_size` pages listed one by one; folding also happens only when a page closes.

A page is *open* while its `summary` is empty; `pages_for_eviction` extends the open page with each eviction's
blocks and closes it (summary and topics set) when full. A closed page is never written again: the stores keep the
turns, summary and topics it closed with, also against a record another run of the session computed from the page
before it closed, so its line of the index stays as it was. Everything is deterministic (no timestamps, counters
or random ids), so a replay writes the same pages.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Final

from ..._text import echo
from ..._tokens import TokenCounter
from .._schema import DEFAULT_NAMESPACE, BlockRecord, MementoRecord, Mention, PageRecord, page_id_for
from ..store import BlockIntegrityError, GraphStore, NotFoundError

__all__ = (
    'PagePolicy',
    'page_header',
    'page_index_text',
    'page_parts',
    'pages_for_eviction',
    'retrieve_page',
)

_NAMED: Final = frozenset({'file', 'sym', 'cmd', 'err', 'url', 'num', 'ver', 'date', 'name', 'term'})
_RESULT = re.compile(r'^RESULT:\s*(.*)$', re.MULTILINE)


@dataclass(frozen=True)
class PagePolicy:
    """When pages close and how the index is shown."""

    blocks_per_page: int = 8
    tokens_per_page: int = 16_000
    """A page also closes once its blocks hold this many archived tokens."""
    topics: int = 6
    summary_chars: int = 200
    group_size: int = 8
    """Pages per meta-index line."""
    meta_after: int = 16
    """Closed pages listed one by one before older ones fold into groups."""

    def __post_init__(self) -> None:
        if self.blocks_per_page < 1 or self.group_size < 1 or self.topics < 0 or self.summary_chars < 20:
            raise ValueError('blocks_per_page and group_size must be >= 1, topics >= 0, summary_chars >= 20')


def _summary(mementos: Sequence[MementoRecord], limit: int) -> str:
    """The mementos' result lines in order, cut to `limit` characters at a word."""
    pieces: list[str] = []
    for memento in mementos:
        match = _RESULT.search(memento.text)
        line = (match.group(1) if match else memento.text.strip().split('\n', 1)[0]).strip()
        if line and line not in pieces:
            pieces.append(line)
    text = ' | '.join(pieces) or 'no summary'
    if len(text) > limit:
        cut = text[: limit - 3]
        space = cut.rfind(' ')
        text = (cut[:space] if space > limit // 2 else cut).rstrip(' |') + '...'
    return text


_LITERALS: Final = frozenset(
    {'none', 'null', 'nil', 'true', 'false', 'undefined', 'nan', 'self', 'cls', 'this', 'class', 'def', 'return'}
)
"""Words of code (literals, keywords, receivers) that turn up in nearly every page of a coding session."""


def _topical(name: str) -> bool:
    """Whether an entity can name what a page is about: not a single character, not a word of code itself."""
    return len(name) > 1 and name.lower() not in _LITERALS


def _topics(
    per_block: Sequence[Sequence[tuple[str, str, int]]], count: int, earlier: AbstractSet[str] = frozenset()
) -> tuple[str, ...]:
    """Top entities of a page: named things before plain concepts, frequent before rare; an entity every block of a
    page of three or more mentions (a speaker, the repository), or a topic of an earlier page of the session (lower
    case in `earlier`), tells this page from the others less well and is demoted."""
    totals: Counter[str] = Counter()
    spread: Counter[str] = Counter()
    names: dict[str, str] = {}
    for entities in per_block:
        seen: set[str] = set()
        for key, name, mentions in entities:
            totals[key] += mentions
            names.setdefault(key, name)
            if key not in seen:
                spread[key] += 1
                seen.add(key)
    blocks = len(per_block)

    def weight(key: str) -> float:
        value = totals[key] * (2.0 if key.partition(':')[0] in _NAMED else 1.0)
        if blocks >= 3 and spread[key] == blocks:
            value *= 0.25
        if names[key].lower() in earlier:
            value *= 0.25
        return value

    ranked = sorted((key for key in totals if _topical(names[key])), key=lambda key: (-weight(key), key))
    chosen: list[str] = []
    for key in ranked:
        name = names[key]
        if name.lower() not in (c.lower() for c in chosen):
            chosen.append(name)
        if len(chosen) >= count:
            break
    return tuple(chosen)


def pages_for_eviction(
    store: GraphStore,
    *,
    session_id: str,
    blocks: Sequence[BlockRecord],
    mementos: Sequence[MementoRecord],
    mentions: Sequence[Mention],
    namespace: str = DEFAULT_NAMESPACE,
    policy: PagePolicy | None = None,
    earlier_mentions: Mapping[str, Sequence[Mention]] | None = None,
    earlier_tokens: Mapping[str, int] | None = None,
) -> tuple[PageRecord, ...]:
    """The page records to write in the same `Eviction` as `blocks`: the open page extended with them, closed (and
    a new one opened) whenever it fills up.

    Args:
        store: read for the session's open page and, when it closes, its earlier blocks' mementos and entities.
        session_id: the session being evicted from.
        blocks: this eviction's blocks (kind `block`), in session order.
        mementos: their mementos (matched to blocks by `summarizes`).
        mentions: this eviction's `MENTIONS` (of blocks and mementos).
        namespace: the session's namespace.
        policy: page size and index shape.
        earlier_mentions: `MENTIONS` of earlier blocks by block id, as the caller still holds them: a page closing
            over them reads no entities back from the store (which would first index every pending mention).
        earlier_tokens: tokens of earlier blocks by block id, as the caller knows them: the open page's blocks
            among them are not read back to size the page.
    """
    policy = policy or PagePolicy()
    blocks = [block for block in blocks if block.kind == 'block']
    if not blocks:
        return ()
    memento_of = {target: memento for memento in mementos for target in memento.summarizes}
    entities_of: dict[str, list[tuple[str, str, int]]] = {}
    for mention in mentions:
        entities_of.setdefault(mention.source_id, []).append((mention.entity.key, mention.entity.name, mention.count))
    for block_id, earlier in (earlier_mentions or {}).items():
        if block_id not in entities_of:
            entities_of[block_id] = [(m.entity.key, m.entity.name, m.count) for m in earlier]
    pages = store.list_pages(namespace=namespace, session_id=session_id)
    # A retried eviction whose first attempt committed (its caller never heard back) holds blocks already paged:
    # listing them again would put them on two pages, or twice and out of order on the open one.
    paged = {block_id for page in pages for block_id in page.block_ids}
    blocks = [block for block in blocks if block.id not in paged]
    if not blocks:
        return ()
    current = pages[-1] if pages and not pages[-1].summary else None
    number = current.number if current is not None else (pages[-1].number + 1 if pages else 1)
    members: list[str] = list(current.block_ids) if current is not None else []
    first_turn = current.first_turn if current is not None else blocks[0].first_message
    tokens = 0
    if members:
        known = earlier_tokens or {}
        unknown = [block_id for block_id in members if block_id not in known]
        tokens = sum(known[block_id] for block_id in members if block_id in known)
        tokens += sum(info.tokens for info in _block_infos(store, unknown, namespace, session_id))
    out: list[PageRecord] = []
    last_turn = current.last_turn if current is not None else blocks[0].last_message
    for block in blocks:
        if not members:
            first_turn, last_turn = block.first_message, block.last_message
        members.append(block.id)
        tokens += block.tokens
        # one run's blocks come in log order; two runs writing one session at once interleave their positions
        first_turn, last_turn = min(first_turn, block.first_message), max(last_turn, block.last_message)
        if len(members) >= policy.blocks_per_page or tokens >= policy.tokens_per_page:
            out.append(
                _close(
                    store,
                    number,
                    members,
                    first_turn,
                    last_turn,
                    memento_of,
                    entities_of,
                    namespace,
                    session_id,
                    policy,
                    {topic.lower() for page in [*pages, *out] for topic in page.topics},
                )
            )
            number += 1
            members = []
            tokens = 0
    if members:
        out.append(
            PageRecord(
                id=page_id_for(namespace, session_id, number),
                session_id=session_id,
                namespace=namespace,
                number=number,
                first_turn=first_turn,
                last_turn=last_turn,
                summary='',
                topics=(),
                block_ids=tuple(members),
            )
        )
    return tuple(out)


def _block_infos(store: GraphStore, block_ids: Sequence[str], namespace: str, session_id: str) -> list[BlockRecord]:
    infos: list[BlockRecord] = []
    for block_id in block_ids:
        try:
            infos.append(store.get_block(block_id, namespace=namespace, session_id=session_id))
        except NotFoundError:
            continue
    return infos


def _close(
    store: GraphStore,
    number: int,
    members: Sequence[str],
    first_turn: int,
    last_turn: int,
    memento_of: dict[str, MementoRecord],
    entities_of: dict[str, list[tuple[str, str, int]]],
    namespace: str,
    session_id: str,
    policy: PagePolicy,
    earlier_topics: AbstractSet[str],
) -> PageRecord:
    mementos: list[MementoRecord] = []
    per_block: list[list[tuple[str, str, int]]] = []
    for block_id in members:
        memento = memento_of.get(block_id) or store.memento_of(block_id, namespace=namespace, session_id=session_id)
        if memento is not None:
            mementos.append(memento)
        entities = entities_of.get(block_id)
        if entities is None:
            entities = [(e.key, e.name, c) for e, c in store.entities_of(block_id, namespace=namespace)]
        per_block.append(entities)
    return PageRecord(
        id=page_id_for(namespace, session_id, number),
        session_id=session_id,
        namespace=namespace,
        number=number,
        first_turn=first_turn,
        last_turn=last_turn,
        summary=_summary(mementos, policy.summary_chars),
        topics=_topics(per_block, policy.topics, earlier_topics),
        block_ids=tuple(members),
    )


PAGE_INDEX_HEADER: Final = 'MEMORY INDEX: '
"""How the page index starts (the capability finds the index a request was sent with by it)."""


def page_index_text(
    store: GraphStore,
    *,
    session_id: str,
    namespace: str = DEFAULT_NAMESPACE,
    policy: PagePolicy | None = None,
    max_tokens: int | None = None,
    counter: TokenCounter | None = None,
) -> str:
    """The compact index of a session's closed pages ('' when none is closed yet); changes only when a page closes.

    Shape (one line each)::

        MEMORY INDEX: 20 archived pages. retrieve_page(page) returns a page's blocks; recall(query) searches.
        pages 1-8 (turns 0-211): topics a, b, c
        page 9 pg_... (turns 212-240, 8 blocks): summary | topics: x, y

    With `max_tokens`, cut to fit as `fit_index` does (counted with `counter`, o200k by default).
    """
    policy = policy or PagePolicy()
    closed = [page for page in store.list_pages(namespace=namespace, session_id=session_id) if page.summary]
    if not closed:
        return ''
    lines = [
        f'{PAGE_INDEX_HEADER}{len(closed)} archived page{"s" if len(closed) != 1 else ""}. '
        "retrieve_page(page) returns a page's blocks; recall(query) searches all of them."
    ]
    folded = 0
    if len(closed) > policy.meta_after:
        folded = (len(closed) - policy.group_size) // policy.group_size * policy.group_size
    for start in range(0, folded, policy.group_size):
        group = closed[start : start + policy.group_size]
        counts: Counter[str] = Counter()
        for rank_page in group:
            for position, topic in enumerate(rank_page.topics):
                counts[topic] += len(rank_page.topics) - position
        topics = [topic for topic, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))][: policy.topics]
        lines.append(
            f'pages {group[0].number}-{group[-1].number} (turns {group[0].first_turn}-{group[-1].last_turn}): '
            f'topics {", ".join(topics) or "-"}'
        )
    for page in closed[folded:]:
        lines.append(
            f'page {page.number} {page.id} (turns {page.first_turn}-{page.last_turn}, {len(page.block_ids)} blocks): '
            f'{page.summary} | topics: {", ".join(page.topics) or "-"}'
        )
    text = '\n'.join(lines)
    return text if max_tokens is None else fit_index(text, max_tokens, counter or TokenCounter())


_PAGE_LINE: Final = re.compile(r'^(page \d+ \S+ \(turns \d+-\d+), \d+ blocks?\): .* \| topics: (.*)$')
"""A page's line in `page_index_text`; its short form keeps number, id, turns and topics."""


def _short_line(line: str) -> str:
    """`page 3 pg_x (turns 1-9, 8 blocks): summary | topics: a, b` -> `page 3 pg_x (turns 1-9): topics: a, b`; other
    lines (the folded groups) are short already."""
    match = _PAGE_LINE.match(line)
    return f'{match.group(1)}): topics: {match.group(2)}' if match else line


def fit_index(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The index cut to `max_tokens`: its header, the newest page lines whole, older ones without their summary
    (number, turns and topics), and a note on how many lines did not fit; '' when not even the header and the note
    fit (~70 tokens: the capability's 5% share of a mark under ~1,300 tokens), as an index over its share would
    leave the history less than the mark it compacts to, or none."""
    if not text or counter.count_text(text) <= max_tokens:
        return text
    header, *lines = text.split('\n')
    used = counter.count_text(header) + 24  # room for the note on what was left out
    if used > max_tokens:
        return ''
    kept: list[str] = []
    shortening = False  # once a line had to be shortened, older ones are not shown whole
    for line in reversed(lines):
        for form in (_short_line(line),) if shortening else (line, _short_line(line)):
            cost = counter.count_text(form) + 1
            if used + cost <= max_tokens:
                break
        else:
            break
        used += cost
        shortening = shortening or form is not line
        kept.append(form)
    left_out = len(lines) - len(kept)
    note = f'({left_out} older index line{"s" if left_out != 1 else ""} left out; retrieve_page(number) reaches every page)'
    return '\n'.join([header, *([note] if left_out else []), *reversed(kept)])


class AmbiguousPageError(LookupError):
    """A page number that several sessions have, asked for without a session: the page id tells them apart."""


def find_page(pages: Sequence[PageRecord], page: str | int) -> PageRecord | None:
    """The page `page` names among `pages`: by id (`pg_...`), else by number (`3`, `p3`, `page 3`).

    Raises:
        AmbiguousPageError: `page` is a number and `pages` (several sessions' pages) hold it more than once; a
            silent pick could show the agent another conversation's page.
    """
    text = str(page).strip()
    found = [record for record in pages if record.id == text]
    if not found:
        number = text.removeprefix('page ').removeprefix('p').strip()
        found = [record for record in pages if str(record.number) == number]
    sessions = sorted({record.session_id for record in found})
    if len(sessions) > 1:
        raise AmbiguousPageError(
            f'Page number {echo(text)} exists in sessions {", ".join(sessions)}: pass the page id (pg_...) or a session.'
        )
    return found[0] if found else None


def page_parts(
    store: GraphStore, record: PageRecord, *, namespace: str, max_tokens: int, counter: TokenCounter
) -> list[str]:
    """A page's archived blocks, each read back hash-checked (`recover_block`) and rendered, grouped into parts of
    at most `max_tokens` (never fewer than 20); at least one part, empty when none of its blocks is left. A block
    that fails its check is named in its place, never shown: the page's other blocks stay readable."""
    from ..memory import render_block  # pydantic-ai, as the recovered messages themselves

    chunks: list[str] = []
    for block_id in record.block_ids:
        try:
            recovered = store.recover_block(block_id, namespace=namespace, session_id=record.session_id)
        except NotFoundError:
            continue
        except BlockIntegrityError as exc:
            chunks.append(f'[block {block_id}: not shown, {exc}]')
            continue
        chunks.append(f'{block_heading(recovered.record)}\n{render_block(recovered.messages)}')
    return _split(chunks, max(20, max_tokens), counter)


def block_heading(record: BlockRecord, *, verified: bool = False) -> str:
    """`[block blk_...: messages 12-15, from 2023-05-08T13:56]`: where a recovered block sits in its session, and
    when it started, so that its "yesterday" or "last Friday" can be dated by whoever reads it."""
    started = f', from {record.started_at[:16]}' if record.started_at else ''
    check = ', sha256 verified' if verified else ''
    return f'[block {record.id}: messages {record.first_message}-{record.last_message}{started}{check}]'


def retrieve_page(
    store: GraphStore,
    page: str | int | PageRecord,
    *,
    session_id: str | None,
    namespace: str = DEFAULT_NAMESPACE,
    part: int = 1,
    max_tokens: int = 3_000,
    counter: TokenCounter | None = None,
) -> str:
    """A page's archived blocks, rendered, within `max_tokens` per part; `part` pages through longer pages.

    Every block is read back hash-checked (`recover_block`). The answer starts with a header naming the page, the
    part and how to get the next part. A page that is not there, or a part past the last, is said in the answer:
    this is the agent's tool, which must not raise.

    Args:
        store: the store.
        page: a page id (`pg_...`) or number, or the page itself when the caller already read it.
        session_id: the session (`None`: any session of the namespace, ids are unique).
        namespace: the namespace.
        part: which part of a long page (1-based).
        max_tokens: size of one part.
        counter: counts tokens (a default `TokenCounter()` otherwise).
    """
    counter = counter or TokenCounter()
    if isinstance(page, PageRecord):
        record = page
    else:
        pages = store.list_pages(namespace=namespace, session_id=session_id)
        try:
            found = find_page(pages, page)
        except AmbiguousPageError as exc:
            return str(exc)
        if found is None:
            return f'No page {echo(page)} in this session ({len(pages)} pages).'
        record = found
    try:
        return page_part(store, record, part, namespace=namespace, max_tokens=max_tokens, counter=counter)
    except NoSuchPartError as exc:
        return str(exc)


class NoSuchPartError(LookupError):
    """A part past a page's last (or below 1); the message says how many there are."""


def page_part(
    store: GraphStore,
    record: PageRecord,
    part: int,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    max_tokens: int = 3_000,
    counter: TokenCounter | None = None,
) -> str:
    """Part `part` of a page, under its header (`retrieve_page` once the page is found).

    Raises:
        NoSuchPartError: the page has no such part.
    """
    parts = page_parts(store, record, namespace=namespace, max_tokens=max_tokens, counter=counter or TokenCounter())
    if not 1 <= part <= len(parts):
        raise NoSuchPartError(f'{out_of_range(len(parts), part)} (page {record.number}, {record.id}).')
    hint = f'; next: retrieve_page("{record.id}", part={part + 1})' if part < len(parts) else ''
    return page_header(record, part, len(parts), hint) + f'\n\n{parts[part - 1]}'


def out_of_range(total: int, asked: int, noun: str = 'part') -> str:
    """`There are 3 parts, not 9`: what a paginated answer says to a part or page it does not have, rather than
    handing over another one the caller did not ask for."""
    return f'There {"is" if total == 1 else "are"} {total} {noun}{"s" * (total != 1)}, not {asked}'


def page_header(record: PageRecord, index: int, total: int, hint: str) -> str:
    """`[page N pg_...: turns a-b, n blocks; part i of t<hint>]`, and the page's summary under its first part."""
    header = (
        f'[page {record.number} {record.id}: turns {record.first_turn}-{record.last_turn}, '
        f'{len(record.block_ids)} blocks; part {index} of {total}{hint}]'
    )
    return header + (f'\n{record.summary}' if record.summary and index == 1 else '')


def _split(chunks: Sequence[str], max_tokens: int, counter: TokenCounter) -> list[str]:
    """Group rendered blocks into parts of at most `max_tokens`; a block larger than that is cut by lines."""
    parts: list[str] = []
    current: list[str] = []
    used = 0
    for chunk in chunks:
        size = counter.count_text(chunk)
        if size > max_tokens:
            if current:
                parts.append('\n\n'.join(current))
                current, used = [], 0
            parts.extend(_cut_lines(chunk, max_tokens, counter))
            continue
        if current and used + size > max_tokens:
            parts.append('\n\n'.join(current))
            current, used = [], 0
        current.append(chunk)
        used += size
    if current:
        parts.append('\n\n'.join(current))
    return parts or ['(the page holds no recoverable block)']


def _cut_lines(text: str, max_tokens: int, counter: TokenCounter) -> list[str]:
    pieces: list[str] = []
    current: list[str] = []
    used = 0
    for line in text.split('\n'):
        size = counter.count_text(line) + 1
        while size > max_tokens:  # one enormous line: cut by characters (about 4 a token)
            cut = max_tokens * 3
            if current:
                pieces.append('\n'.join(current))
                current, used = [], 0
            pieces.append(line[:cut])
            line = line[cut:]
            size = counter.count_text(line) + 1
        if current and used + size > max_tokens:
            pieces.append('\n'.join(current))
            current, used = [], 0
        current.append(line)
        used += size
    if current:
        pieces.append('\n'.join(current))
    return pieces
