"""`_reindex` -- the entities of archived blocks and mementos found again by the extractor as it is now.

The capability links each block and memento to the entities it names when it archives them. An extractor that
changed since (a release that reads more: definitions in file reads, test names; or the LLM extractor switched on)
finds other entities in the same text, and recall by entity reaches an old record only through what was found when
it was archived. Reindexing reads the blocks back (hash-checked), renders them as the compactor does now (without
the memory tools' calls and answers, `searchable_messages`: a block archived before they were left out loses the
entities it only quoted), extracts again,
and replaces their `MENTIONS` edges (`GraphStore.replace_mentions`): a batch of blocks with their mementos per
transaction, so a store of any size is reindexed in bounded memory and an interrupted run, run again, finishes the
job (the replacement is idempotent). Blocks, mementos, pages and the session log are not touched.
"""

from __future__ import annotations

import inspect
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from ..._echoes import searchable_messages
from .._schema import DEFAULT_NAMESPACE, MementoRecord, Mention
from ..memory import render_block
from ..store import BlockIntegrityError, GraphStore, NotFoundError, check_block
from ._extract import mentions_for
from ._llm import llm_extractor_from_env

__all__ = ('MentionExtractor', 'ReindexReport', 'default_mention_extractor', 'reindex_entities')

MentionExtractor = Callable[[str, str], Sequence[Mention] | Awaitable[Sequence[Mention]]]
"""`(source_id, text) -> mentions`: links a block or memento to the entities it names (`mentions_for`, or an async
one such as `LLMEntityExtractor.mentions_for`)."""

BATCH_BLOCKS = 256
"""Blocks (with the mementos that summarize only them) whose edges one transaction replaces."""


def default_mention_extractor() -> MentionExtractor:
    """The extractor the capability uses by default: the deterministic one, or the LLM one when
    `MEMENTOGRAPH_ENTITY_MODEL` names a model."""
    extractor = llm_extractor_from_env()
    return mentions_for if extractor is None else extractor.mentions_for


@dataclass(frozen=True)
class ReindexReport:
    """What a reindex did."""

    sessions: int
    """Sessions whose records were read."""
    blocks: int
    """Blocks whose edges were replaced."""
    mementos: int
    """Mementos whose edges were replaced."""
    mentions: int
    """`MENTIONS` edges written."""
    entities_before: int
    """Entities of the namespace before."""
    entities_after: int
    """Entities of the namespace after (those nothing mentions any more are gone)."""
    skipped: tuple[str, ...]
    """Blocks whose bytes fail their sha256: left with the edges they had (`mementograph verify` says more)."""
    seconds: float


async def reindex_entities(
    store: GraphStore,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    session_id: str | None = None,
    extractor: MentionExtractor | None = None,
    progress: Callable[[int], None] | None = None,
) -> ReindexReport:
    """Extract the entities of a namespace's (or one session's) blocks and mementos again, and replace their edges.

    Args:
        store: the archive.
        namespace: whose records.
        session_id: one session only; `None`: every session of the namespace.
        extractor: `(source_id, text) -> mentions`; default `default_mention_extractor()`.
        progress: told how many blocks each finished batch held.

    Raises:
        NotFoundError: `session_id` is not a session of the namespace.
    """
    started = time.perf_counter()
    extract = extractor or default_mention_extractor()
    sessions = [s.id for s in store.list_sessions(namespace=namespace) if session_id in (None, s.id)]
    if session_id is not None and not sessions:
        raise NotFoundError(f'no session {session_id!r} in namespace {namespace!r}')
    entities_before = store.stats(namespace=namespace).entities
    blocks = mementos = mentions = 0
    skipped: list[str] = []
    for session in sessions:
        pending = _mementos_by_block(store.list_mementos(namespace=namespace, session_id=session))
        after = ''
        while True:
            page = store.scan_blocks(namespace=namespace, session_id=session, after=after, limit=BATCH_BLOCKS)
            sources: list[str] = []
            found: list[Mention] = []
            for record in page:
                if record.kind != 'block':  # a micro-compacted part: archived whole, never linked to entities
                    continue
                try:
                    text = render_block(searchable_messages(check_block(record).messages))
                except BlockIntegrityError as exc:
                    warnings.warn(f'mementograph reindex: {exc}; its entities are left as they were', stacklevel=2)
                    skipped.append(record.id)
                    continue
                sources.append(record.id)
                found += await _extract(extract, record.id, text)
                blocks += 1
                for memento in pending.pop(record.id, ()):
                    sources.append(memento.id)
                    found += await _extract(extract, memento.id, memento.text)
                    mementos += 1
            if len(page) < BATCH_BLOCKS:  # the last batch: mementos of several blocks, of mementos, of skipped ones
                for memento in (m for group in pending.values() for m in group):
                    sources.append(memento.id)
                    found += await _extract(extract, memento.id, memento.text)
                    mementos += 1
            if sources:
                mentions += store.replace_mentions(sources, found, namespace=namespace)
            if progress is not None and page:
                progress(len(page))
            if len(page) < BATCH_BLOCKS:
                break
            after = page[-1].id
    return ReindexReport(
        sessions=len(sessions),
        blocks=blocks,
        mementos=mementos,
        mentions=mentions,
        entities_before=entities_before,
        entities_after=store.stats(namespace=namespace).entities,
        skipped=tuple(skipped),
        seconds=time.perf_counter() - started,
    )


def _mementos_by_block(mementos: Sequence[MementoRecord]) -> dict[str, list[MementoRecord]]:
    """Mementos of one block, by that block; the others (of several blocks, of mementos) under `''`."""
    grouped: dict[str, list[MementoRecord]] = {}
    for memento in mementos:
        single = memento.summarizes[0] if len(memento.summarizes) == 1 else ''
        grouped.setdefault(single if single.startswith('blk_') else '', []).append(memento)
    return grouped


async def _extract(extract: MentionExtractor, source_id: str, text: str) -> list[Mention]:
    found = extract(source_id, text)
    return list(await found if inspect.isawaitable(found) else found)
