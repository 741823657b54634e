"""The contract every `GraphStore` backend passes: lossless, idempotent, scoped, atomic."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from mementograph._messages import message_text, serialize_messages
from mementograph.knowledge_graph import (
    BlockRecord,
    EntityRecord,
    Eviction,
    MementoRecord,
    Mention,
    PageRecord,
    SessionEvent,
    memento_id_for,
    page_id_for,
)
from mementograph.knowledge_graph.store import (
    BlockIntegrityError,
    BlockNotFoundError,
    ChainIntegrityError,
    GraphStore,
    LogConflictError,
    MementoNotFoundError,
    NotFoundError,
    PageConflictError,
    StoreUnavailableError,
    recover_chain,
)
from tests.builders import rich_history, session_history
from tests.counting import CountingStore
from tests.store.conftest import CONTRACT_BACKENDS, Backend, opened_backend


@pytest.fixture(params=CONTRACT_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[Backend]:
    """Every shipped backend, and a store of one's own (`custom`: see docs/custom-stores.md)."""
    with opened_backend(request, tmp_path, unique_namespace) as opened:
        yield opened


def make_eviction(
    messages: list[ModelMessage], *, session_id: str, namespace: str, seq: int = 0, memento_text: str = 'memento'
) -> tuple[Eviction, BlockRecord, MementoRecord]:
    block = BlockRecord.from_messages(
        messages,
        session_id=session_id,
        namespace=namespace,
        seq=seq,
        tokens=100 + seq,
        text='\n'.join(message_text(m) for m in messages),
    )
    memento = MementoRecord(
        id=memento_id_for(namespace, session_id, [block.id]),
        session_id=session_id,
        namespace=namespace,
        text=memento_text,
        tokens=7,
        summarizes=(block.id,),
        score=9.0,
        verified=True,
        iterations=1,
        compressor='extractive',
    )
    eviction = Eviction(session_id=session_id, namespace=namespace, blocks=(block,), mementos=(memento,))
    return eviction, block, memento


def test_recovers_rich_messages_byte_for_byte(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    original = rich_history()
    eviction, block, _ = make_eviction(original, session_id='s1', namespace=ns)
    store.write_eviction(eviction)

    recovered = store.recover_block(block.id, namespace=ns)

    assert list(recovered.messages) == original
    assert serialize_messages(recovered.messages) == block.messages_json
    assert recovered.record.sha256 == block.sha256
    call = recovered.messages[1].parts[1]
    assert isinstance(call, ToolCallPart)
    assert call.tool_call_id == 'call_1' and call.args == {
        'command': 'pytest tests/test_x.py -q',
        'env': {'A': [1, 2.5, None]},
    }
    assert recovered.messages[0].parts[1].content[1].data == b'\x89PNG\r\n\x1a\n\x00\xff'  # type: ignore[union-attr,index]


def test_lone_surrogates_are_archived_exactly(backend: Backend) -> None:
    """A tool reading a binary file with `surrogateescape` yields text with no UTF-8 form: the archive keeps it
    exactly (escaped JSON), the searchable text gets U+FFFD in its place."""
    store, ns = backend.store, backend.namespace
    original: list[ModelMessage] = [
        ModelResponse(parts=[ToolCallPart('bash', {'command': 'cat blob.bin', 'note': 'x\udcff'}, tool_call_id='c1')]),
        ModelRequest(parts=[ToolReturnPart('bash', 'magic \udcff\udcfe header zorblax', tool_call_id='c1')]),
    ]
    eviction, block, _ = make_eviction(original, session_id='s1', namespace=ns)
    store.write_eviction(eviction)

    recovered = store.recover_block(block.id, namespace=ns)

    assert list(recovered.messages) == original
    assert serialize_messages(recovered.messages) == block.messages_json
    assert '\ufffd\ufffd header zorblax' in block.text
    hits = store.search_text('zorblax', namespace=ns)
    assert hits and hits[0].block_ids == (block.id,)


def test_write_is_idempotent(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    eviction, _, _ = make_eviction(session_history(2), session_id='s1', namespace=ns)
    store.write_eviction(eviction)
    before = store.stats(namespace=ns)
    store.write_eviction(eviction)
    after = store.stats(namespace=ns)

    assert before == after
    assert (after.blocks, after.mementos, after.sessions) == (1, 1, 1)
    assert len(store.list_blocks(namespace=ns)) == 1


def test_unknown_ids_raise_typed_not_found(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    with pytest.raises(BlockNotFoundError, match='blk_nope') as plain:
        store.recover_block('blk_nope', namespace=ns)
    assert 'recover_chain' not in str(plain.value)
    with pytest.raises(BlockNotFoundError, match=r"'mem_nope'.*a memento id; recover_chain\(store, id\) recovers"):
        store.recover_block('mem_nope', namespace=ns)
    with pytest.raises(MementoNotFoundError):
        store.get_memento('mem_nope', namespace=ns)
    assert store.memento_of('blk_nope', namespace=ns) is None


def test_reads_are_scoped_by_namespace_and_session(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    other_ns = ns + '-other'
    ev_a, block_a, memento_a = make_eviction(session_history(1), session_id='a', namespace=ns)
    ev_b, block_b, _ = make_eviction(session_history(1, prefix='other'), session_id='b', namespace=ns)
    ev_c, block_c, _ = make_eviction(session_history(1), session_id='a', namespace=other_ns)
    for eviction in (ev_a, ev_b, ev_c):
        store.write_eviction(eviction)

    assert block_a.id != block_c.id  # same session name and bytes, different namespace: no collision
    with pytest.raises(BlockNotFoundError):
        store.recover_block(block_c.id, namespace=ns)
    with pytest.raises(BlockNotFoundError):
        store.recover_block(block_b.id, namespace=ns, session_id='a')
    with pytest.raises(MementoNotFoundError):
        store.get_memento(memento_a.id, namespace=other_ns)
    assert store.recover_block(block_b.id, namespace=ns).record.session_id == 'b'
    assert [b.id for b in store.list_blocks(namespace=ns, session_id='a')] == [block_a.id]
    assert {b.id for b in store.list_blocks(namespace=ns)} == {block_a.id, block_b.id}
    assert {s.id for s in store.list_sessions(namespace=ns)} == {'a', 'b'}
    assert store.stats(namespace=ns, session_id='b').blocks == 1
    assert store.count_blocks(namespace=ns, session_id='b') == 1 and store.count_blocks(namespace=ns) == 2
    assert store.count_blocks(namespace=ns, kind='part') == 0 and store.count_blocks(namespace=ns + '-none') == 0
    assert store.search_text('turn', namespace=other_ns, k=10)
    assert all(hit.block_ids[0] != block_c.id for hit in store.search_text('turn', namespace=ns, k=10))


def test_tampered_block_raises_integrity_error(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    eviction, block, _ = make_eviction(session_history(1), session_id='s1', namespace=ns)
    store.write_eviction(eviction)
    backend.tamper(block.id)

    with pytest.raises(BlockIntegrityError, match=block.id):
        store.recover_block(block.id, namespace=ns)


def write_two_block_chain(
    store: GraphStore, ns: str
) -> tuple[BlockRecord, BlockRecord, MementoRecord, MementoRecord, MementoRecord]:
    """Two blocks of session `s`, their mementos, and a memento of those two mementos (level 2)."""
    ev1, block1, memento1 = make_eviction(session_history(1), session_id='s', namespace=ns, seq=0, memento_text='m1')
    ev2, block2, memento2 = make_eviction(
        session_history(2)[4:], session_id='s', namespace=ns, seq=4, memento_text='m2'
    )
    store.write_eviction(ev1)
    store.write_eviction(ev2)
    top = MementoRecord(
        id=memento_id_for(ns, 's', [memento1.id, memento2.id]),
        session_id='s',
        namespace=ns,
        text='m1 and m2',
        tokens=4,
        summarizes=(memento1.id, memento2.id),
        level=2,
        compressor='extractive',
    )
    store.write_eviction(Eviction(session_id='s', namespace=ns, mementos=(top,)))
    return block1, block2, memento1, memento2, top


def test_memento_links_and_chains(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    block1, block2, memento1, memento2, top = write_two_block_chain(store, ns)

    assert store.memento_of(block1.id, namespace=ns) == memento1
    assert store.memento_of(memento2.id, namespace=ns) == top
    stored_top = store.get_memento(top.id, namespace=ns)
    assert stored_top.summarizes == (memento1.id, memento2.id) and stored_top.verified is False
    chain = recover_chain(store, top.id, namespace=ns)
    assert [b.record.id for b in chain] == [block1.id, block2.id]
    assert [b.seq for b in store.list_blocks(namespace=ns, session_id='s')] == [0, 4]
    assert [m.id for m in store.list_mementos(namespace=ns, session_id='s')][:2] == [memento1.id, memento2.id]
    stats = store.stats(namespace=ns)
    assert (stats.blocks, stats.mementos, stats.verified_mementos) == (2, 3, 2)
    assert stats.tokens_saved == block1.tokens + block2.tokens - memento1.tokens - memento2.tokens


def test_a_chain_with_a_tampered_block_names_it_and_keeps_the_others(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    block1, block2, _, _, top = write_two_block_chain(store, ns)
    backend.tamper(block1.id)

    with pytest.raises(ChainIntegrityError, match=f'1 of 2 blocks under memento {top.id}.*{block1.id}') as failed:
        recover_chain(store, top.id, namespace=ns)
    assert failed.value.damaged == (block1.id,)
    assert [b.record.id for b in failed.value.recovered] == [block2.id]
    assert failed.value.recovered[0].messages == store.recover_block(block2.id, namespace=ns).messages
    with pytest.raises(BlockIntegrityError) as plain:  # a block asked for by its own id: nothing to keep
        recover_chain(store, block1.id, namespace=ns)
    assert not isinstance(plain.value, ChainIntegrityError)


def test_batched_reads_find_records_by_id_in_scope_in_the_order_asked(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    block1, block2, memento1, memento2, top = write_two_block_chain(store, ns)
    ev_b, block_b, memento_b = make_eviction(session_history(1, prefix='other'), session_id='b', namespace=ns)
    ev_c, block_c, memento_c = make_eviction(session_history(1), session_id='s', namespace=ns + '-other')
    store.write_eviction(ev_b)
    store.write_eviction(ev_c)

    mementos = [top.id, 'mem_nope', memento2.id, memento_c.id, memento_b.id, memento1.id, top.id]
    expected = [store.get_memento(i, namespace=ns) for i in (top.id, memento2.id, memento_b.id, memento1.id)]
    assert store.get_mementos(mementos, namespace=ns) == expected
    in_session = store.get_mementos(mementos, namespace=ns, session_id='s')
    assert [m.id for m in in_session] == [top.id, memento2.id, memento1.id]
    blocks = [block2.id, 'blk_nope', block_c.id, block_b.id, block1.id, block2.id]
    found = store.get_blocks(blocks, namespace=ns)
    assert found == [store.get_block(i, namespace=ns) for i in (block2.id, block_b.id, block1.id)]
    assert [b.id for b in store.get_blocks(blocks, namespace=ns, session_id='b')] == [block_b.id]
    unknown = [f'{prefix}_{i:04d}' for prefix in ('blk', 'mem') for i in range(600)]  # more than one statement takes
    assert [b.id for b in store.get_blocks([*unknown, block1.id, *unknown], namespace=ns)] == [block1.id]
    assert [m.id for m in store.get_mementos([*unknown, memento1.id], namespace=ns)] == [memento1.id]
    assert store.get_blocks([], namespace=ns) == [] and store.get_mementos([], namespace=ns) == []


def write_three_level_chain(store: GraphStore, ns: str) -> tuple[list[BlockRecord], MementoRecord]:
    """Four blocks of session `s` with their mementos, a memento of each pair of those, and a memento of the two
    pairs, the later pair first (level 3)."""
    ones: list[MementoRecord] = []
    blocks: list[BlockRecord] = []
    for i in range(4):
        eviction, block, memento = make_eviction(
            session_history(1, prefix=f'part {i}'), session_id='s', namespace=ns, seq=i * 4
        )
        store.write_eviction(eviction)
        blocks.append(block)
        ones.append(memento)

    def merged(*children: MementoRecord) -> MementoRecord:
        memento = MementoRecord(
            id=memento_id_for(ns, 's', [c.id for c in children]), session_id='s', namespace=ns, text='merged',
            tokens=3, summarizes=tuple(c.id for c in children), level=children[0].level + 1, compressor='extractive',
        )  # fmt: skip
        store.write_eviction(Eviction(session_id='s', namespace=ns, mementos=(memento,)))
        return memento

    first, second = merged(ones[0], ones[1]), merged(ones[2], ones[3])
    return blocks, merged(second, first)


def test_a_chain_is_read_a_level_at_a_time_in_session_order(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    blocks, top = write_three_level_chain(store, ns)
    counted = CountingStore(store)

    chain = recover_chain(counted, top.id, namespace=ns)

    assert [b.record.id for b in chain] == [b.id for b in blocks]  # session order, not the walk's (2, 3, 0, 1)
    assert [b.messages for b in chain] == [store.recover_block(b.id, namespace=ns).messages for b in blocks]
    assert counted.calls == {'get_mementos': 3, 'get_blocks': 1}  # a read per level, then every block at once


def test_a_chain_missing_a_record_raises_where_the_walk_meets_it(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    _, block2, memento1, _, top = write_two_block_chain(store, ns)

    def memento_of(*targets: str) -> str:
        memento = MementoRecord(
            id=memento_id_for(ns, 's', list(targets)), session_id='s', namespace=ns, text='dangling', tokens=1,
            summarizes=targets, level=2, compressor='extractive',
        )  # fmt: skip
        store.write_eviction(Eviction(session_id='s', namespace=ns, mementos=(memento,)))
        return memento.id

    with pytest.raises(BlockNotFoundError, match='blk_gone'):
        recover_chain(store, memento_of(memento1.id, 'blk_gone', 'mem_gone'), namespace=ns)
    with pytest.raises(MementoNotFoundError, match='mem_gone'):
        recover_chain(store, memento_of(memento1.id, 'mem_gone', 'blk_gone'), namespace=ns)
    with pytest.raises(MementoNotFoundError, match=top.id):
        recover_chain(store, top.id, namespace=ns, session_id='other')
    backend.tamper(block2.id)  # a damaged block does not end the walk: a missing one after it still raises
    with pytest.raises(BlockNotFoundError, match='blk_gone'):
        recover_chain(store, memento_of(top.id, 'blk_gone'), namespace=ns)


def test_eviction_rejects_records_of_another_session(backend: Backend) -> None:
    _, block, _ = make_eviction(session_history(1), session_id='s1', namespace=backend.namespace)
    with pytest.raises(ValueError, match='session'):
        Eviction(session_id='s2', namespace=backend.namespace, blocks=(block,))


def test_event_log_appends_idempotently_in_order(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    messages = session_history(2)
    events = [SessionEvent.for_message(m, session_id='s', namespace=ns, index=i) for i, m in enumerate(messages)]
    assert store.last_message_index('s', namespace=ns) == -1
    store.append_events(events[:5])
    compaction = SessionEvent(
        session_id='s', namespace=ns, kind='auto', payload=b'{"evicted":1}', sha256='x', block_ids=('blk_1',)
    )
    store.append_events([compaction])
    store.append_events(events[3:])  # overlaps: 3 and 4 again
    store.append_events([compaction])  # a retried compaction is not logged twice

    log = store.read_events('s', namespace=ns)
    assert [e.seq for e in log] == list(range(len(messages) + 1))
    assert [e.kind for e in log] == ['message'] * 5 + ['auto'] + ['message'] * 3
    logged = [e for e in log if e.kind == 'message']
    assert [e.message_index for e in logged] == list(range(len(messages)))
    assert [e.payload for e in logged] == [e.payload for e in events]
    assert log[5].block_ids == ('blk_1',) and log[5].message_index is None
    assert store.last_message_index('s', namespace=ns) == len(messages) - 1
    assert [e.seq for e in store.read_events('s', namespace=ns, since_seq=6)] == [6, 7, 8]
    assert store.read_events('s', namespace=ns + 'x') == []
    # where a logged message sits: a continued conversation starts there (a compaction event is not a message)
    assert store.message_indices_of('s', events[3].sha256, namespace=ns) == [3]
    assert store.message_indices_of('s', 'x', namespace=ns) == []
    assert store.message_indices_of('s', events[3].sha256, namespace=ns + 'x') == []
    assert store.message_indices_of('other', events[3].sha256, namespace=ns) == []
    again = SessionEvent.for_message(messages[3], session_id='s', namespace=ns, index=len(messages))
    store.append_events([again])  # the same message logged again later (a branch repeats its opening)
    assert store.message_indices_of('s', events[3].sha256, namespace=ns) == [len(messages), 3]


def test_a_closed_store_refuses_writes_with_a_typed_error_that_says_nothing_was_written(backend: Backend) -> None:
    """A log writer that outlives its store (closed by another thread) gets a store error it can count on: the
    append was not sent, so what it holds is missing for sure. SQLite raised its own ProgrammingError here."""
    store, ns = backend.store, backend.namespace
    events = [
        SessionEvent.for_message(m, session_id='s', namespace=ns, index=i) for i, m in enumerate(session_history(1))
    ]
    eviction, _, _ = make_eviction(session_history(1), session_id='s', namespace=ns)
    store.close()
    for write in (lambda: store.append_events(events), lambda: store.write_eviction(eviction)):
        with pytest.raises(StoreUnavailableError) as refused:
            write()
        assert refused.value.maybe_written is False


def test_an_append_that_meets_another_message_at_its_position_writes_nothing(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    ours, theirs = session_history(1), session_history(2)[4:]
    assert message_text(ours[2]) != message_text(theirs[0])

    def log(messages: list[ModelMessage], start: int) -> list[SessionEvent]:
        return [
            SessionEvent.for_message(m, session_id='s', namespace=ns, index=start + i) for i, m in enumerate(messages)
        ]

    store.append_events(log(ours[:2], 0))
    store.append_events(log(theirs[:1], 2))  # another run took position 2
    compaction = SessionEvent(session_id='s', namespace=ns, kind='auto', payload=b'{}', sha256='y', block_ids=('b',))
    with pytest.raises(LogConflictError, match='position 2') as raised:
        store.append_events([*log(ours[1:4], 1), compaction])  # 1 again (a retry), 2 held by theirs, 3 free
    assert raised.value.message_index == 2
    log_now = store.read_events('s', namespace=ns)
    assert [(e.kind, e.message_index, e.sha256) for e in log_now] == [
        ('message', i, e.sha256) for i, e in enumerate([*log(ours[:2], 0), *log(theirs[:1], 2)])
    ]  # nothing of the failed call: not position 3, not the compaction event
    store.append_events(log(theirs[:2], 2))  # the same message at its own position again is a retry, not a conflict
    assert store.last_message_index('s', namespace=ns) == 3


def test_a_branch_is_appended_after_the_end_of_the_log(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    messages = session_history(2)

    def offsets(chunk: list[ModelMessage], session: str = 's') -> list[SessionEvent]:
        return [SessionEvent.for_message(m, session_id=session, namespace=ns, index=i) for i, m in enumerate(chunk)]

    assert store.append_branch(offsets(messages[:2], 'fresh')) == 0  # a session with no log yet starts it
    store.append_events(
        [SessionEvent.for_message(m, session_id='s', namespace=ns, index=i) for i, m in enumerate(messages[:3])]
    )
    assert store.append_branch(offsets(messages[3:6])) == 3
    assert store.append_branch(offsets(messages[6:])) == 6
    log = [e for e in store.read_events('s', namespace=ns) if e.kind == 'message']
    assert [e.message_index for e in log] == list(range(len(messages)))
    assert [e.payload for e in log] == [e.payload for e in offsets(messages)]
    with pytest.raises(ValueError, match='message events'):
        store.append_branch([SessionEvent(session_id='s', namespace=ns, kind='auto', payload=b'{}', sha256='z')])
    with pytest.raises(ValueError, match='one session'):
        store.append_branch([*offsets(messages[:1]), *offsets(messages[1:2], 'other')])
    assert store.last_message_index('s', namespace=ns) == len(messages) - 1  # the refused calls wrote nothing
    assert store.last_message_index('other', namespace=ns) == -1


def test_an_eviction_whose_pages_are_out_of_date_writes_nothing(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    first, block1, _ = make_eviction(session_history(1), session_id='s', namespace=ns, seq=0)
    second, block2, _ = make_eviction(session_history(2)[4:], session_id='s', namespace=ns, seq=4)

    def page(*blocks: BlockRecord) -> PageRecord:
        return PageRecord(
            id=page_id_for(ns, 's', 1), session_id='s', namespace=ns, number=1, summary='', topics=(),
            first_turn=min(b.first_message for b in blocks), last_turn=max(b.last_message for b in blocks),
            block_ids=tuple(b.id for b in blocks),
        )  # fmt: skip

    store.write_eviction(replace(first, pages=(page(block1),)))
    store.write_eviction(replace(first, pages=(page(block1),)))  # a retry of the same eviction: nothing changes
    with pytest.raises(PageConflictError, match='another run'):
        store.write_eviction(replace(second, pages=(page(block2),)))  # computed as if page 1 were still empty
    with pytest.raises(BlockNotFoundError):
        store.get_block(block2.id, namespace=ns)  # the whole eviction was rolled back
    assert store.list_pages(namespace=ns, session_id='s') == [page(block1)]
    store.write_eviction(replace(second, pages=(page(block1, block2),)))  # computed again from the store
    assert store.list_pages(namespace=ns, session_id='s') == [page(block1, block2)]
    assert store.get_block(block2.id, namespace=ns).id == block2.id


def test_a_closed_page_keeps_what_it_closed_with(backend: Backend) -> None:
    """A record of a closed page that another run computed before the page closed -- the page still open with a
    prefix of its blocks, or closed over the same blocks with a memento and topics of its own -- passes the page
    check, but neither reopens the page nor rewrites it: the index lists it as it closed."""
    store, ns = backend.store, backend.namespace
    first, block1, _ = make_eviction(session_history(1), session_id='s', namespace=ns, seq=0)
    second, block2, _ = make_eviction(session_history(2)[4:], session_id='s', namespace=ns, seq=4)

    def page(summary: str, topics: tuple[str, ...], *blocks: BlockRecord) -> PageRecord:
        return PageRecord(
            id=page_id_for(ns, 's', 1), session_id='s', namespace=ns, number=1, summary=summary, topics=topics,
            first_turn=min(b.first_message for b in blocks), last_turn=max(b.last_message for b in blocks),
            block_ids=tuple(b.id for b in blocks),
        )  # fmt: skip

    store.write_eviction(replace(first, pages=(page('', (), block1),)))
    closed = page('read the config | fixed the parser', ('config', 'parser'), block1, block2)
    store.write_eviction(replace(second, pages=(closed,)))
    assert store.list_pages(namespace=ns, session_id='s') == [closed]
    store.write_eviction(replace(first, pages=(page('', (), block1),)))  # still open, as the other run saw it
    store.write_eviction(replace(second, pages=(page('parser fixed', ('parser', 'tests'), block1, block2),)))
    assert store.list_pages(namespace=ns, session_id='s') == [closed]


def test_pages_and_mentions_round_trip(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    eviction, block, memento = make_eviction(session_history(1), session_id='s', namespace=ns)
    page = PageRecord(
        id=page_id_for(ns, 's', 1), session_id='s', namespace=ns, number=1, first_turn=0, last_turn=3,
        summary='reads src/mod_0.py', topics=('src/mod_0.py',), block_ids=(block.id,),
    )  # fmt: skip
    entity = EntityRecord(key='file:src/mod_0.py', name='src/mod_0.py', kind='file')
    store.write_eviction(
        Eviction(
            session_id='s', namespace=ns, blocks=eviction.blocks, mementos=eviction.mementos, pages=(page,),
            mentions=(Mention(block.id, entity, 3), Mention(memento.id, entity, 1)),
        )
    )  # fmt: skip

    assert store.list_pages(namespace=ns, session_id='s') == [page]
    assert store.stats(namespace=ns).entities == 1
    assert store.stats(namespace=ns).pages == 1


def test_entities_never_shared_across_namespaces_whose_ids_would_collide(backend: Backend) -> None:
    """Namespace `ns` with key `file:error:K` and namespace `ns:file` with key `error:K` are different entities."""
    store, ns = backend.store, backend.namespace
    written = {}
    for namespace, key in ((ns, 'file:error:K'), (f'{ns}:file', 'error:K')):
        eviction, block, _ = make_eviction(session_history(1), session_id='s', namespace=namespace)
        entity = EntityRecord(key=key, name=key, kind='error')
        store.write_eviction(
            Eviction(session_id='s', namespace=namespace, blocks=eviction.blocks, mementos=eviction.mementos,
                     mentions=(Mention(block.id, entity, 1),))
        )  # fmt: skip
        written[namespace] = (block.id, key)
    for namespace, (block_id, key) in written.items():
        assert [(entity.key, count) for entity, count in store.entities_of(block_id, namespace=namespace)] == [(key, 1)]
        assert store.stats(namespace=namespace).entities == 1


def test_full_text_finds_blocks_and_mementos(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    ev1, block1, _ = make_eviction(session_history(1, prefix='alpha'), session_id='s', namespace=ns, seq=0)
    ev2, block2, memento2 = make_eviction(
        session_history(1, prefix='beta'), session_id='s', namespace=ns, seq=4, memento_text='zebra migration plan'
    )
    store.write_eviction(ev1)
    store.write_eviction(ev2)

    alpha = store.search_text('alpha', namespace=ns, k=5)
    assert alpha and alpha[0].block_ids == (block1.id,)
    zebra = store.search_text('zebra', namespace=ns, k=5)
    assert [hit.id for hit in zebra] == [memento2.id] and zebra[0].block_ids == (block2.id,)
    assert store.search_text('"; DROP TABLE blocks; --', namespace=ns) == []  # literal terms, never syntax
    assert store.search_text('', namespace=ns) == []


def test_replaced_mentions_take_the_old_ones_place_with_counts_kept(backend: Backend) -> None:
    """What `reindex_entities` relies on: a record's edges are swapped in one transaction, pending ones too (no read
    between the writes and the swap), entities nothing mentions any more go, document frequencies follow, and
    other records keep theirs."""
    store, ns = backend.store, backend.namespace
    x, y, z, w = (
        EntityRecord(key=f'concept:{n}', name=n, kind='concept') for n in ('xylo', 'yarrow', 'zinnia', 'wren')
    )
    ev_a, block_a, memento_a = make_eviction(session_history(1), session_id='a', namespace=ns)
    ev_b, block_b, _ = make_eviction(session_history(1, prefix='keep'), session_id='b', namespace=ns)
    store.write_eviction(
        replace(ev_a, mentions=(Mention(block_a.id, x, 1), Mention(block_a.id, y, 4), Mention(memento_a.id, x, 1)))
    )
    store.write_eviction(replace(ev_b, mentions=(Mention(block_b.id, x, 1), Mention(block_b.id, z, 2))))

    def edges(source_id: str) -> list[tuple[str, int]]:
        return [(entity.key, count) for entity, count in store.entities_of(source_id, namespace=ns)]

    def frequencies(*entities: EntityRecord) -> dict[str, int]:
        lookup = store.entity_postings([e.key for e in entities], namespace=ns, limit=0)  # type: ignore[attr-defined]
        return {found.entity.key: found.blocks for found in lookup.entities}

    fresh = (Mention(block_a.id, x, 2), Mention(block_a.id, w, 1), Mention(memento_a.id, w, 1))
    for _ in range(2):  # a second identical call changes nothing
        assert store.replace_mentions([block_a.id, memento_a.id], fresh, namespace=ns) == 3
        assert edges(block_a.id) == [('concept:xylo', 2), ('concept:wren', 1)]
        assert edges(memento_a.id) == [('concept:wren', 1)]
        assert edges(block_b.id) == [('concept:zinnia', 2), ('concept:xylo', 1)]
        assert frequencies(x, y, z, w) == {'concept:xylo': 2, 'concept:zinnia': 1, 'concept:wren': 1}  # yarrow gone
        assert store.stats(namespace=ns).entities == 3

    assert store.replace_mentions([block_a.id], [], namespace=ns) == 0
    assert edges(block_a.id) == [] and edges(memento_a.id) == [('concept:wren', 1)]
    assert frequencies(x, w) == {'concept:xylo': 1, 'concept:wren': 0}  # a memento's edge counts no block

    # a source outside the namespace (or nowhere) fails the whole call; so does a mention of an unlisted source
    other, other_block, _ = make_eviction(session_history(1), session_id='a', namespace=f'{ns}-other')
    store.write_eviction(other)
    for sources in ([block_b.id, 'blk_nowhere'], [block_b.id, other_block.id]):
        with pytest.raises(NotFoundError):
            store.replace_mentions(sources, [Mention(block_b.id, w, 1)], namespace=ns)
    with pytest.raises(ValueError, match='not among the sources'):
        store.replace_mentions([block_b.id], [Mention(block_a.id, w, 1)], namespace=ns)
    assert edges(block_b.id) == [('concept:zinnia', 2), ('concept:xylo', 1)]


def test_full_text_splits_names_where_both_backends_do(backend: Backend) -> None:
    """A dotted or snake_case name is found by its parts and whole on every backend (Lucene's own analyzer kept
    `sql.DeleteQuery` and `apply_discount` whole, so Neo4j missed what SQLite found)."""
    store, ns = backend.store, backend.namespace
    eviction, _, memento = make_eviction(
        session_history(1, prefix='code'), session_id='s', namespace=ns,
        memento_text='query = sql.DeleteQuery(model); total = apply_discount(cart) in shop/models.py',
    )  # fmt: skip
    store.write_eviction(eviction)
    for query in ('DeleteQuery', 'sql.DeleteQuery', 'discount', 'apply_discount', 'models', 'shop/models.py'):
        assert [hit.id for hit in store.search_text(query, namespace=ns, k=5)] == [memento.id], query
    assert store.search_text('_ . /', namespace=ns) == []


def test_delete_session_removes_only_that_session(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    ev_a, block_a, _ = make_eviction(session_history(1), session_id='a', namespace=ns)
    ev_b, block_b, _ = make_eviction(session_history(1, prefix='keep'), session_id='b', namespace=ns)
    store.write_eviction(ev_a)
    store.write_eviction(ev_b)
    store.append_events([SessionEvent.for_message(session_history(1)[0], session_id='a', namespace=ns, index=0)])

    assert store.delete_session('a', namespace=ns) > 0

    with pytest.raises(BlockNotFoundError):
        store.recover_block(block_a.id, namespace=ns)
    assert store.read_events('a', namespace=ns) == []
    assert store.search_text('turn', namespace=ns, session_id='a') == []
    assert store.recover_block(block_b.id, namespace=ns).record.session_id == 'b'
    assert [s.id for s in store.list_sessions(namespace=ns)] == ['b']


# -- property: any message list survives the archive ------------------------------------------------------------

# every code point, lone surrogates too (text decoded with `surrogateescape`): they have no UTF-8 form, and the
# archive keeps them all the same
_text = st.text(st.characters(exclude_categories=()), max_size=40)
_key = st.text(st.characters(codec='utf-8'), max_size=40)
"""Dictionary keys: pydantic replaces a lone surrogate in one (such messages are refused, see below)."""
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_key, inner, max_size=3),
    max_leaves=8,
)
_times = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))
_request_parts = st.one_of(
    st.builds(UserPromptPart, _text, timestamp=_times),
    st.builds(SystemPromptPart, _text, timestamp=_times),
    st.builds(ToolReturnPart, _text, _json, tool_call_id=_text, timestamp=_times),
    st.builds(
        lambda data, text, t: UserPromptPart([text, BinaryContent(data, media_type='application/octet-stream')], timestamp=t),
        st.binary(max_size=64), _text, _times,
    ),
)  # fmt: skip
_response_parts = st.one_of(
    st.builds(TextPart, _text),
    st.builds(ThinkingPart, _text),
    st.builds(ToolCallPart, _text, st.dictionaries(_key, _json, max_size=3), tool_call_id=_text),
)
_messages = st.lists(
    st.one_of(
        st.builds(lambda parts, t: ModelRequest(parts=parts, timestamp=t), st.lists(_request_parts, min_size=1, max_size=3), _times),
        st.builds(lambda parts, t: ModelResponse(parts=parts, timestamp=t), st.lists(_response_parts, min_size=1, max_size=3), _times),
    ),
    min_size=1,
    max_size=5,
)  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=_messages, seq=st.integers(0, 10_000))
def test_any_history_round_trips_exactly(backend: Backend, messages: list[ModelMessage], seq: int) -> None:
    eviction, block, _ = make_eviction(messages, session_id='prop', namespace=backend.namespace, seq=seq)
    backend.store.write_eviction(eviction)

    recovered = backend.store.recover_block(block.id, namespace=backend.namespace)

    assert list(recovered.messages) == messages
    assert serialize_messages(recovered.messages) == block.messages_json


def test_block_vectors_are_kept_per_model_and_scope_and_go_with_their_session(backend: Backend) -> None:
    store, ns = backend.store, backend.namespace
    ev_a, block_a, _ = make_eviction(session_history(1), session_id='a', namespace=ns)
    ev_b, block_b, _ = make_eviction(session_history(1, prefix='other'), session_id='b', namespace=ns)
    for eviction in (ev_a, ev_b):
        store.write_eviction(eviction)
    one, two = bytes(range(16)), bytes(range(16, 32))
    assert (
        store.write_vectors('test:m', [(block_a.id, one), (block_b.id, two), ('blk_missing', one)], namespace=ns) == 2
    )
    assert store.write_vectors('test:m', [(block_a.id, one)], namespace=ns + '-other') == 0  # not its namespace
    assert sorted(store.read_vectors('test:m', namespace=ns)) == sorted(
        [(block_a.id, 'a', one), (block_b.id, 'b', two)]
    )
    assert store.read_vectors('test:m', namespace=ns, session_id='b') == [(block_b.id, 'b', two)]
    assert store.read_vectors('test:other-model', namespace=ns) == []
    # by id: what an index holding the rest lacks; the scope still holds, an unknown id is no row
    wanted = [block_b.id, 'blk_missing', block_b.id]
    assert store.read_vectors('test:m', namespace=ns, block_ids=wanted) == [(block_b.id, 'b', two)]
    assert store.read_vectors('test:m', namespace=ns, session_id='a', block_ids=[block_b.id]) == []
    assert store.read_vectors('test:m', namespace=ns, block_ids=[]) == []
    part = BlockRecord.from_messages(
        session_history(1, prefix='stub'), session_id='a', namespace=ns, seq=5, tokens=50, kind='part', text='stub'
    )
    store.write_eviction(Eviction(session_id='a', namespace=ns, blocks=(part,)))
    assert store.list_block_ids(namespace=ns, session_id='a') == [(block_a.id, 'a')]  # a stubbed part is no block
    assert sorted(store.list_block_ids(namespace=ns)) == sorted([(block_a.id, 'a'), (block_b.id, 'b')])
    assert store.list_block_ids(namespace=ns + '-other') == []
    assert store.block_counts(namespace=ns) == {'a': 1, 'b': 1} and store.block_counts(namespace=ns + '-other') == {}
    store.write_vectors('test:m', [(block_a.id, two)], namespace=ns)  # a block's vector is replaced, not added
    assert store.read_vectors('test:m', namespace=ns, session_id='a') == [(block_a.id, 'a', two)]
    store.delete_session('a', namespace=ns)
    assert store.read_vectors('test:m', namespace=ns) == [(block_b.id, 'b', two)]


def test_a_sessions_postings_are_its_blocks_most_mentions_first(backend: Backend) -> None:
    """Recall reads an entity's postings in one session: the session's own blocks, most mentions first, cut at
    `limit`, and current after every write (SQLite filters the by-entity index against the session's ids, kept
    while nothing is written)."""
    store, ns = backend.store, backend.namespace
    common = EntityRecord(key='concept:kettle', name='kettle', kind='concept')
    ids: dict[str, list[str]] = {'a': [], 'b': []}
    for session, base in (('a', 0), ('b', 10)):
        blocks = [
            BlockRecord.from_messages(session_history(2), session_id=session, namespace=ns, seq=i, tokens=5)
            for i in range(6)
        ]
        mentions = tuple(Mention(b.id, common, base + i + 1) for i, b in enumerate(blocks))
        store.write_eviction(Eviction(session_id=session, namespace=ns, blocks=tuple(blocks), mentions=mentions))
        ids[session] = [b.id for b in blocks]

    def postings(limit: int) -> list[tuple[str, int]]:
        lookup = store.entity_postings(['concept:kettle'], namespace=ns, session_id='a', limit=limit)  # type: ignore[attr-defined]
        assert [found.blocks for found in lookup.entities] == [len(ids['a']) + len(ids['b'])]  # counted everywhere
        return [(p.block_id, p.count) for p in lookup.entities[0].postings]

    assert postings(3) == [(ids['a'][5], 6), (ids['a'][4], 5), (ids['a'][3], 4)]  # none of b's stronger ones
    assert postings(50) == [(block_id, 6 - i) for i, block_id in enumerate(reversed(ids['a']))]
    late = BlockRecord.from_messages(session_history(3), session_id='a', namespace=ns, seq=6, tokens=5)
    store.write_eviction(
        Eviction(session_id='a', namespace=ns, blocks=(late,), mentions=(Mention(late.id, common, 9),))
    )
    ids['a'].append(late.id)
    assert postings(2) == [(late.id, 9), (ids['a'][5], 6)]  # the write shows at once
