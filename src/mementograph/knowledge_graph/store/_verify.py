"""`verify_store` -- prove an archive whole: every block's bytes, every memento's `SUMMARIZES`, `NEXT` chains, pages.

The promise is that every evicted block comes back byte for byte; recovery checks one block's sha256 when it is
read, `verify_store` checks all of them ahead of need, and the links that make them findable: the memento that
stands in for each block, the session order (`NEXT`) and the paged index. It only reads, through three protocol
reads: `check_storage` (the database engine's own check of its files), `scan_blocks` (bytes, page by page, so
memory stays bounded at any archive size) and `graph_links` (the edges without bytes or text).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from .._schema import DEFAULT_NAMESPACE, BlockRecord
from ._errors import StoreCorruptError
from ._protocol import BlockLink, GraphLinks, GraphStore, MementoLink, PageLink

__all__ = ('PROBLEM_KINDS', 'VerifyProblem', 'VerifyReport', 'verify_store')

SCAN_BATCH: Final = 256
"""Blocks read per `scan_blocks` page: a few MB of messages at a time, whatever the archive holds."""

PROBLEM_KINDS: Final = (
    'corrupt_file',
    'hash_mismatch',
    'undecodable_block',
    'missing_summarizes',
    'extra_summarizes',
    'orphan_memento',
    'orphan_block',
    'broken_next_chain',
    'page_missing_block',
    'block_without_page',
    'block_in_many_pages',
    'log_hash_mismatch',
)
"""Every `VerifyProblem.kind`:

- `corrupt_file`: the database engine finds its storage damaged (SQLite: a page `PRAGMA integrity_check` faults,
  a file it cannot read, a record that no longer decodes); the subject is the store's URI, which names the file.
  When the damage stops a read, the checks after it are not run, so other problems may go unreported;
- `hash_mismatch`: a block's bytes no longer hash to its stored sha256 (recovery would refuse it);
- `undecodable_block`: the bytes match the hash but are not pydantic-ai messages;
- `missing_summarizes`: a block (kind `block`) no memento stands in for, or a memento without the `SUMMARIZES`
  edge to a target it declares;
- `extra_summarizes`: a `SUMMARIZES` edge to something the memento does not declare;
- `orphan_memento`: a memento whose target is not in its session (deleted block or memento), that summarizes
  nothing, or whose session record is gone;
- `orphan_block`: a block not linked to its session record;
- `broken_next_chain`: the session's `NEXT` chain does not link its blocks in `seq` order one by one, or two
  blocks' message ranges overlap;
- `page_missing_block`: a page's `CONTAINS` leads to no block of its session, skips a position, or its blocks
  do not span its turn range;
- `block_without_page` / `block_in_many_pages`: in a session that has pages, a block in none or in several;
- `log_hash_mismatch`: a message of the session log no longer hashes to the sha256 logged with it (`transcript`
  would show altered text).
"""


@dataclass(frozen=True)
class VerifyProblem:
    """One thing that does not hold."""

    kind: str
    """One of `PROBLEM_KINDS`."""
    subject_id: str
    """The block, memento or page at fault (for a chain problem: the block whose link is wrong)."""
    session_id: str
    detail: str
    """What was found, and what was expected, in words."""


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of `verify_store`: `ok` only when no problem was found."""

    ok: bool
    blocks_checked: int
    """Blocks (and stubbed parts) whose bytes were hashed."""
    mementos_checked: int
    pages_checked: int
    sessions_checked: int
    problems: tuple[VerifyProblem, ...]


def verify_store(
    store: GraphStore,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    session_id: str | None = None,
    check_storage: bool = True,
) -> VerifyReport:
    """Check every evicted block's sha256, every memento's `SUMMARIZES`, complete `NEXT` chains, page membership,
    and find orphans, in one namespace (and one session when `session_id` is given). Read-only.

    Why both reads: a hash proves a block's bytes, but a block no memento points at, or that the chain skips, is
    one the agent can no longer find; a problem of either kind means the archive no longer keeps its promise.

    A damaged file (`StoreCorruptError` from a read) is a problem in the data too: it is reported as
    `corrupt_file`, with what was checked before the read that met it. `check_storage` runs the database engine's
    own check of the whole file first, whatever the scope: it reads every page, about as long again as the other
    checks (SQLite's `integrity_check` took 207 s on a 3.9 GB file of 100k blocks here, its cache cold).

    Raises:
        StoreError: the store could not be read (a problem *in* the data is reported, never raised).
    """
    problems: list[VerifyProblem] = []
    checked = _Checked()
    try:
        findings = store.check_storage() if check_storage else ()
    except StoreCorruptError as exc:
        findings = (str(exc),)
    if findings:
        problems.append(
            VerifyProblem(
                'corrupt_file', store.uri, '', f'the database engine finds its file damaged: {"; ".join(findings)}'
            )
        )
    try:  # the reads below may still work around a damaged page, and find what else does not hold
        problems += _verify(store, namespace, session_id, checked)
    except StoreCorruptError as exc:
        problems.append(
            VerifyProblem('corrupt_file', store.uri, '', f'{exc} (the checks after this read were not run)')
        )
    return VerifyReport(
        ok=not problems,
        blocks_checked=checked.blocks,
        mementos_checked=checked.mementos,
        pages_checked=checked.pages,
        sessions_checked=checked.sessions,
        problems=tuple(problems),
    )


@dataclass
class _Checked:
    """What `_verify` checked so far: kept when a damaged read stops it, so the report says what was done."""

    blocks: int = 0
    mementos: int = 0
    pages: int = 0
    sessions: int = 0


def _verify(store: GraphStore, namespace: str, session_id: str | None, checked: _Checked) -> list[VerifyProblem]:
    """Every check but the engine's own."""
    problems: list[VerifyProblem] = []
    seen_sessions: set[str] = set()
    for record in _scan(store, namespace, session_id):
        checked.blocks += 1
        seen_sessions.add(record.session_id)
        problem = _check_bytes(record)
        if problem is not None:
            problems.append(problem)

    links = store.graph_links(namespace=namespace, session_id=session_id)
    checked.mementos, checked.pages = len(links.mementos), len(links.pages)
    recorded = {s.id for s in store.list_sessions(namespace=namespace)}
    if session_id is not None:
        recorded &= {session_id}
    sessions = (
        recorded
        | seen_sessions
        | {b.session_id for b in links.blocks}
        | {m.session_id for m in links.mementos}
        | {p.session_id for p in links.pages}
    )
    checked.sessions = len(sessions)
    problems += _check_links(links, recorded)
    problems += [problem for session in sorted(recorded) for problem in _check_log(store, namespace, session)]
    return problems


def _scan(store: GraphStore, namespace: str, session_id: str | None) -> Iterable[BlockRecord]:
    after = ''
    while True:
        page = store.scan_blocks(namespace=namespace, session_id=session_id, after=after, limit=SCAN_BATCH)
        yield from page
        if len(page) < SCAN_BATCH:
            return
        after = page[-1].id


def _check_bytes(record: BlockRecord) -> VerifyProblem | None:
    from ..._messages import deserialize_messages, messages_sha256  # pydantic-ai loads when a block is decoded

    actual = messages_sha256(record.messages_json)
    if actual != record.sha256:
        return VerifyProblem(
            'hash_mismatch',
            record.id,
            record.session_id,
            f'stored sha256 {record.sha256}, bytes hash to {actual}: the archive was altered or corrupted',
        )
    try:
        deserialize_messages(record.messages_json)
    except ValueError as exc:
        return VerifyProblem('undecodable_block', record.id, record.session_id, f'not pydantic-ai messages: {exc}')
    return None


def _check_log(store: GraphStore, namespace: str, session_id: str) -> list[VerifyProblem]:
    """Each logged message's bytes against the sha256 logged with it: the log is the full record, `transcript`
    rebuilds the session from it, and an edit on the disk would otherwise pass unseen."""
    from ..._messages import messages_sha256

    return [
        VerifyProblem(
            'log_hash_mismatch',
            f'message {event.message_index}',
            session_id,
            f'logged sha256 {event.sha256}, bytes hash to {actual}: the session log was altered or corrupted',
        )
        for event in store.read_events(session_id, namespace=namespace)
        if event.kind == 'message' and (actual := messages_sha256(event.payload)) != event.sha256
    ]


def _check_links(links: GraphLinks, recorded_sessions: set[str]) -> list[VerifyProblem]:
    blocks_by_session: dict[str, list[BlockLink]] = defaultdict(list)
    for block in links.blocks:
        blocks_by_session[block.session_id].append(block)
    pages_by_session: dict[str, list[PageLink]] = defaultdict(list)
    for page in links.pages:
        pages_by_session[page.session_id].append(page)
    blocks = {block.id: block for block in links.blocks}
    mementos = {memento.id: memento for memento in links.mementos}

    problems: list[VerifyProblem] = []
    for block in links.blocks:
        if not block.in_session:
            problems.append(
                VerifyProblem(
                    'orphan_block',
                    block.id,
                    block.session_id,
                    f'not linked to a record of session {block.session_id!r}',
                )
            )
    problems += _check_mementos(links.mementos, blocks, mementos, recorded_sessions)
    for sid in sorted(blocks_by_session.keys() | pages_by_session.keys()):
        problems += _check_chain(blocks_by_session[sid])
        problems += _check_pages(sid, pages_by_session[sid], blocks_by_session[sid], blocks)
    return problems


def _check_mementos(
    links: Sequence[MementoLink],
    blocks: dict[str, BlockLink],
    mementos: dict[str, MementoLink],
    recorded_sessions: set[str],
) -> list[VerifyProblem]:
    problems: list[VerifyProblem] = []
    covered: set[str] = set()
    for memento in links:
        sid = memento.session_id

        def problem(kind: str, detail: str, memento: MementoLink = memento) -> None:
            problems.append(VerifyProblem(kind, memento.id, memento.session_id, detail))

        if sid not in recorded_sessions:
            problem('orphan_memento', f'its session {sid!r} has no record')
        if not memento.summarizes and not memento.targets:
            problem('orphan_memento', 'summarizes nothing')
        edges = set(memento.targets)
        for target in memento.summarizes:
            found = blocks.get(target) or mementos.get(target)
            if found is None:
                problem('orphan_memento', f'summarizes {target}, which is not in the store')
            elif found.session_id != sid:
                problem('orphan_memento', f'summarizes {target} of another session ({found.session_id!r})')
            else:
                covered.add(target)
                if target not in edges:
                    problem('missing_summarizes', f'declares {target} but has no SUMMARIZES edge to it')
        for target in sorted(edges - set(memento.summarizes)):
            problem(
                'extra_summarizes', f'has a SUMMARIZES edge to {target or "a node without an id"} it does not declare'
            )
        covered |= {target for target in edges if target in blocks and blocks[target].session_id == sid}
    for block in blocks.values():
        if block.kind == 'block' and block.id not in covered:
            problems.append(
                VerifyProblem('missing_summarizes', block.id, block.session_id, 'no memento SUMMARIZES this block')
            )
    return problems


def _check_chain(session_blocks: Sequence[BlockLink]) -> list[VerifyProblem]:
    """The session's blocks (kind `block`) in `(seq, id)` order, each `NEXT` to the following one only, with
    non-overlapping message ranges; stubbed parts sit outside the chain."""
    problems: list[VerifyProblem] = []
    chain = sorted((b for b in session_blocks if b.kind == 'block'), key=lambda b: (b.seq, b.id))
    for position, block in enumerate(chain):

        def problem(detail: str, block: BlockLink = block) -> None:
            problems.append(VerifyProblem('broken_next_chain', block.id, block.session_id, detail))

        if block.first_message > block.last_message or block.first_message != block.seq:
            problem(f'message range {block.first_message}-{block.last_message} does not start at seq {block.seq}')
        following = chain[position + 1] if position + 1 < len(chain) else None
        if following is not None and block.last_message >= following.first_message:
            problem(
                f'messages {block.first_message}-{block.last_message} overlap the next block {following.id} '
                f'({following.first_message}-{following.last_message})'
            )
        expected = () if following is None else (following.id,)
        if tuple(block.next_ids) != expected:
            found = ', '.join(n or 'a node without an id' for n in block.next_ids) or 'nothing'
            problem(f'NEXT leads to {found}; expected {following.id if following else "nothing (last block)"}')
    for part in session_blocks:
        if part.kind != 'block' and part.next_ids:
            problems.append(
                VerifyProblem('broken_next_chain', part.id, part.session_id, 'a stubbed part has NEXT edges')
            )
    return problems


def _check_pages(
    session_id: str, pages: Sequence[PageLink], session_blocks: Sequence[BlockLink], blocks: dict[str, BlockLink]
) -> list[VerifyProblem]:
    problems: list[VerifyProblem] = []
    pages_of: dict[str, list[str]] = defaultdict(list)
    for page in pages:

        def problem(detail: str, page: PageLink = page) -> None:
            problems.append(VerifyProblem('page_missing_block', page.id, page.session_id, detail))

        if not page.members:
            problem(f'page {page.number} contains no block')
            continue
        positions = [position for _, position in page.members]
        if sorted(positions) != list(range(len(positions))):
            problem(f'page {page.number} holds positions {positions}, not 0-{len(positions) - 1}: a block went')
        resolved: list[BlockLink] = []
        for block_id, _ in page.members:
            block = blocks.get(block_id)
            if block is None or block.kind != 'block' or block.session_id != session_id:
                problem(f'page {page.number} CONTAINS {block_id or "a node without an id"}, not a block of its session')
                continue
            pages_of[block_id].append(page.id)
            resolved.append(block)
        if len(resolved) == len(page.members):
            first = min(b.first_message for b in resolved)
            last = max(b.last_message for b in resolved)
            if (first, last) != (page.first_turn, page.last_turn):
                problem(
                    f'page {page.number} covers turns {page.first_turn}-{page.last_turn} '
                    f'but its blocks cover {first}-{last}'
                )
    if pages:
        for block in session_blocks:
            if block.kind != 'block':
                continue
            found = pages_of.get(block.id, [])
            if not found:
                problems.append(VerifyProblem('block_without_page', block.id, session_id, 'in no page'))
            elif len(found) > 1:
                problems.append(
                    VerifyProblem('block_in_many_pages', block.id, session_id, f'in pages {", ".join(found)}')
                )
    return problems
