"""The paged index: pages close when full, the index changes only then, old pages fold, pages read back in parts."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mementograph._tokens import TokenCounter
from mementograph.eval import Dialogue, DialogueIngestor, IngestedDialogue, Segment, Turn
from mementograph.knowledge_graph import (
    DEFAULT_NAMESPACE,
    BlockRecord,
    EntityRecord,
    Eviction,
    MementoRecord,
    Mention,
    PageRecord,
    memento_id_for,
    page_id_for,
)
from mementograph.knowledge_graph.recall import (
    AmbiguousPageError,
    PagePolicy,
    find_page,
    page_index_text,
    pages_for_eviction,
    retrieve_page,
)
from mementograph.knowledge_graph.store import GraphStore, open_store
from tests.builders import session_history
from tests.conftest import open_neo4j

POLICY = PagePolicy(blocks_per_page=2, group_size=2, meta_after=3, topics=3)


def evict_one_by_one(
    store: GraphStore, ingested: IngestedDialogue, policy: PagePolicy, *, remember: bool = False
) -> list[str]:
    """Write the dialogue's blocks one eviction each (as a live session would), returning the index after each;
    with `remember`, the earlier blocks' mentions are passed as the compactor passes them."""
    indexes: list[str] = []
    earlier: dict[str, tuple[Mention, ...]] = {}
    for eviction in ingested.evictions:
        for block in eviction.blocks:
            mementos = tuple(m for m in eviction.mementos if block.id in m.summarizes)
            sources = {block.id, *(m.id for m in mementos)}
            mentions = tuple(m for m in eviction.mentions if m.source_id in sources)
            earlier[block.id] = tuple(m for m in mentions if m.source_id == block.id)  # as the compactor does
            pages = pages_for_eviction(
                store,
                session_id=eviction.session_id,
                blocks=[block],
                mementos=mementos,
                mentions=mentions,
                policy=policy,
                earlier_mentions=earlier if remember else None,
            )
            store.write_eviction(
                Eviction(
                    session_id=eviction.session_id, blocks=(block,), mementos=mementos, mentions=mentions, pages=pages
                )
            )
            indexes.append(page_index_text(store, session_id=eviction.session_id, policy=policy))
    return indexes


def test_pages_close_when_full_and_the_index_changes_only_then(ingested: IngestedDialogue) -> None:
    store = open_store('memory://')
    indexes = evict_one_by_one(store, ingested, POLICY)
    pages = store.list_pages(session_id='conv-1')
    blocks = sum(len(e.blocks) for e in ingested.evictions)
    assert [len(p.block_ids) for p in pages if p.summary] == [2] * (blocks // 2)
    assert [p.number for p in pages] == list(range(1, len(pages) + 1))
    assert all(p.topics for p in pages if p.summary)
    for number, (before, after) in enumerate(zip(['', *indexes], indexes, strict=False), start=1):
        closed_now = number % POLICY.blocks_per_page == 0
        assert (before != after) == closed_now, f'eviction {number}'
    # the open page (odd block count) is written but not listed
    assert blocks % 2 == 0 or not pages[-1].summary


def test_meta_index_folds_old_pages(ingested: IngestedDialogue) -> None:
    store = open_store('memory://')
    policy = PagePolicy(blocks_per_page=1, group_size=2, meta_after=3)
    final = evict_one_by_one(store, ingested, policy)[-1]
    closed = [p for p in store.list_pages(session_id='conv-1') if p.summary]
    assert len(closed) > policy.meta_after
    lines = final.splitlines()
    assert lines[0].startswith(f'MEMORY INDEX: {len(closed)} archived pages')
    assert any(line.startswith('pages 1-2 (turns ') for line in lines)
    listed = [line for line in lines if line.startswith('page ')]
    assert 2 <= len(listed) < len(closed)
    assert listed[-1].startswith(f'page {closed[-1].number} {closed[-1].id}')


def test_same_evictions_give_the_same_pages(ingested: IngestedDialogue) -> None:
    first, second = open_store('memory://'), open_store('memory://')
    assert evict_one_by_one(first, ingested, POLICY) == evict_one_by_one(second, ingested, POLICY)
    assert first.list_pages(session_id='conv-1') == second.list_pages(session_id='conv-1')


def test_pages_closed_over_remembered_mentions_equal_pages_read_from_the_store(ingested: IngestedDialogue) -> None:
    read, remembered = open_store('memory://'), open_store('memory://')
    assert evict_one_by_one(read, ingested, POLICY) == evict_one_by_one(remembered, ingested, POLICY, remember=True)
    pages = remembered.list_pages(session_id='conv-1')
    assert len([p for p in pages if p.summary]) >= 2 and all(p.topics for p in pages if p.summary)
    assert read.list_pages(session_id='conv-1') == pages


def test_retrieve_page_returns_verified_blocks_in_parts(ingested: IngestedDialogue) -> None:
    store = open_store('memory://')
    evict_one_by_one(store, ingested, POLICY)
    page = store.list_pages(session_id='conv-1')[0]
    whole = retrieve_page(store, page.id, session_id='conv-1')
    assert whole.startswith(f'[page 1 {page.id}: turns {page.first_turn}-{page.last_turn}, 2 blocks; part 1 of 1]')
    assert all(f'[block {block_id}' in whole for block_id in page.block_ids)
    counter = TokenCounter()
    first = retrieve_page(store, 1, session_id='conv-1', max_tokens=40, counter=counter)
    assert 'part 1 of ' in first and f'next: retrieve_page("{page.id}", part=2)' in first
    total = int(first.split('part 1 of ')[1].split(';')[0].split(']')[0])
    last = retrieve_page(store, '1', session_id='conv-1', part=total, max_tokens=40, counter=counter)
    assert f'part {total} of {total}]' in last
    for wrong in (0, -3, total + 1):  # said, not answered with another part
        beyond = retrieve_page(store, '1', session_id='conv-1', part=wrong, max_tokens=40, counter=counter)
        assert beyond == f'There are {total} parts, not {wrong} (page 1, {page.id}).'
    assert retrieve_page(store, 'pg_missing', session_id='conv-1').startswith("No page 'pg_missing'")


def test_a_page_number_several_sessions_hold_needs_a_session_or_the_page_id(ingested: IngestedDialogue) -> None:
    store = open_store('memory://')
    evict_one_by_one(store, ingested, POLICY)
    page = store.list_pages(session_id='conv-1')[0]
    other = replace(page, id=page_id_for(DEFAULT_NAMESPACE, 'conv-2', 1), session_id='conv-2')
    store.write_eviction(Eviction(session_id='conv-2', pages=(other,)))
    pages = store.list_pages(session_id=None)
    with pytest.raises(AmbiguousPageError, match='sessions conv-1, conv-2'):
        find_page(pages, 'page 1')
    assert find_page(pages, other.id) == other and find_page(pages, 'pg_missing') is None
    assert retrieve_page(store, 1, session_id=None).startswith("Page number '1' exists in sessions conv-1, conv-2")
    assert retrieve_page(store, 1, session_id='conv-1').startswith(f'[page 1 {page.id}')
    assert retrieve_page(store, other.id, session_id=None).startswith(f'[page 1 {other.id}')


def test_ingest_writes_pages_with_the_default_policy(ingested: IngestedDialogue) -> None:
    pages = [page for eviction in ingested.evictions for page in eviction.pages]
    assert pages and all(page.session_id == 'conv-1' for page in pages)


_NAMED_CHAT = (
    (
        datetime(2022, 7, 2, 18, 0, tzinfo=UTC),
        (
            ('user', "John:  Hey Maria! I coached the kids' soccer team on Saturday, and they won the final 3-1."),
            ('assistant', 'Maria: Congrats, John! I started volunteering at the shelter on Fifth Street last week.'),
            ('user', 'John:  Sounds great. I was impressed with their dedication and how well they worked together.'),
            (
                'assistant',
                'Maria: Thanks! I appreciate your kind words. Gotta stay strong and keep making a difference, even in '
                'challenging times.',
            ),
        ),
    ),
    (  # a sitting of one closing turn: too small for a dialogue memento, it takes the agent-trace path
        datetime(2022, 7, 9, 18, 0, tzinfo=UTC),
        (
            (
                'assistant',
                'Maria: Thanks! I appreciate your kind words. Gotta stay strong and keep making a difference, even in '
                'challenging times.',
            ),
        ),
    ),
)


@pytest.mark.parametrize('backend', ['memory', 'sqlite', 'neo4j'])
def test_each_line_of_a_page_summary_says_who_said_it(
    request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str, backend: str
) -> None:
    """A two-person chat's page summaries named nobody: LoCoMo's `John:  ...` (two spaces) left its block's lines
    to the roles (`user: I was impressed ...`), and a closing turn's result line quoted a sentence past the name."""
    namespace = 'default'
    if backend == 'neo4j':
        store = open_neo4j(request.getfixturevalue('neo4j_server'))
        namespace = unique_namespace
    else:
        store = open_store('memory://' if backend == 'memory' else f'sqlite://{tmp_path / "memory.db"}')
    dialogue = Dialogue(
        'conv-named',
        tuple(
            Segment(
                f'S{number}',
                tuple(
                    Turn(f'S{number}:{i}', role, text, start + timedelta(minutes=i))  # type: ignore[arg-type]
                    for i, (role, text) in enumerate(turns)
                ),
            )
            for number, (start, turns) in enumerate(_NAMED_CHAT, start=1)
        ),
    )
    try:
        ingestor = DialogueIngestor(min_tokens=40, namespace=namespace, page_policy=PagePolicy(blocks_per_page=1))
        ingested = asyncio.run(ingestor.ingest(store, dialogue))
        assert ingested.blocks[-1].memento_text.startswith('RESULT: ')  # the agent-trace path was taken
        summaries = [page.summary for page in store.list_pages(namespace=namespace, session_id='conv-named')]
    finally:
        store.close()
    assert summaries == [
        "John: I coached the kids' soccer team on Saturday, and they won the final 3-1.",
        'Maria: Gotta stay strong and keep making a difference, even in challenging times.',
        'Maria: I appreciate your kind words.',
    ]


def test_a_pages_topics_leave_out_the_words_of_code_itself() -> None:
    """`None`, `self`, `False` or a one-letter name turn up in most pages of a coding session (a page once read
    `topics: r, False, Checking, ...`); what the page is about comes first."""
    store = open_store('memory://')
    policy = PagePolicy(blocks_per_page=2, topics=3)
    blocks = [
        BlockRecord.from_messages(session_history(1, prefix=f'b{i}'), session_id='s', seq=i, tokens=9) for i in range(2)
    ]

    def entity(kind: str, name: str) -> EntityRecord:
        return EntityRecord(key=f'{kind}:{name.lower()}', name=name, kind=kind)

    noise = [entity('name', 'None'), entity('sym', 'self'), entity('name', 'False'), entity('file', 'r')]
    topical = [entity('file', 'django/db/models/deletion.py'), entity('sym', 'Collector'), entity('err', 'TypeError')]
    mentions = [Mention(b.id, e, 40) for b in blocks for e in noise] + [Mention(blocks[0].id, e, 2) for e in topical]
    [page] = pages_for_eviction(store, session_id='s', blocks=blocks, mementos=(), mentions=mentions, policy=policy)
    assert set(page.topics) == {'django/db/models/deletion.py', 'Collector', 'TypeError'}


@pytest.mark.parametrize('backend', ['memory', 'sqlite', 'neo4j'])
def test_the_index_stays_when_another_run_pages_blocks_of_a_page_that_closed_meanwhile(
    request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str, backend: str
) -> None:
    """Two runs of one session evict at once: both compute their pages from the open page, one closes it first.
    The other's records -- the page closed over the same blocks with mementos of its own (an LLM compressor's), or
    still open over a prefix of them -- pass the page check, and used to rewrite the closed page's line of the index
    or take the page out of it again (to close later over other blocks): the index changed with no page closing."""
    if backend == 'neo4j':
        store = open_neo4j(request.getfixturevalue('neo4j_server'))
    else:
        store = open_store('memory://' if backend == 'memory' else f'sqlite://{tmp_path / "memory.db"}')
    ns, policy = unique_namespace, PagePolicy(blocks_per_page=3)
    blocks = [
        BlockRecord.from_messages(session_history(1, prefix=f'b{i}'), session_id='s', namespace=ns, seq=4 * i, tokens=9)
        for i in range(3)
    ]

    def memento(block: BlockRecord, result: str) -> MementoRecord:
        return MementoRecord(
            id=memento_id_for(ns, 's', [block.id]), session_id='s', namespace=ns,
            text=f'RESULT: {result}', tokens=5, summarizes=(block.id,),
        )  # fmt: skip

    def pages(evicted: list[BlockRecord], mementos: list[MementoRecord]) -> tuple[PageRecord, ...]:
        words = [(m.summarizes[0], m.text.split()[-1]) for m in mementos]  # the result's last word, a topic
        mentions = [Mention(block_id, EntityRecord(f'term:{word}', word, 'term')) for block_id, word in words]
        return pages_for_eviction(
            store, session_id='s', namespace=ns, blocks=evicted, mementos=mementos, mentions=mentions, policy=policy
        )

    def write(evicted: list[BlockRecord], mementos: list[MementoRecord], records: tuple[PageRecord, ...]) -> str:
        store.write_eviction(
            Eviction(session_id='s', namespace=ns, blocks=tuple(evicted), mementos=tuple(mementos), pages=records)
        )
        return page_index_text(store, session_id='s', namespace=ns, policy=policy)

    try:
        opened = [memento(blocks[0], 'read the config')]
        write(blocks[:1], opened, pages(blocks[:1], opened))
        ours = [memento(blocks[1], 'fixed the parser'), memento(blocks[2], 'tests pass')]
        theirs = [memento(blocks[1], 'parser mended'), memento(blocks[2], 'all green')]
        closing, rewriting, reopening = (
            pages(blocks[1:], ours),
            pages(blocks[1:], theirs),
            pages(blocks[1:2], theirs[:1]),
        )
        assert [bool(p.summary) for p in (*closing, *rewriting, *reopening)] == [True, True, False]
        index = write(blocks[1:], ours, closing)
        assert 'read the config | fixed the parser | tests pass' in index
        assert write(blocks[1:], theirs, rewriting) == index
        assert write(blocks[1:2], theirs[:1], reopening) == index
        # the session goes on from the page as it closed
        later = BlockRecord.from_messages(
            session_history(1, prefix='b3'), session_id='s', namespace=ns, seq=12, tokens=9
        )
        [opened_next] = pages([later], [])
        assert opened_next.number == 2 and opened_next.block_ids == (later.id,)
    finally:
        for session in store.list_sessions(namespace=ns):
            store.delete_session(session.id, namespace=ns)
        store.close()
