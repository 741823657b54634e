"""`block_info` with `mementos`/`entities`: the batched reads `recall` uses answer what the one-by-one reads do."""

from __future__ import annotations

from mementograph.knowledge_graph.recall import RecallStore
from mementograph.knowledge_graph.store import GraphStore


def test_block_info_carries_the_mementos_and_entities_of_its_blocks(filled: tuple[GraphStore, str]) -> None:
    store, namespace = filled
    recall_store: RecallStore = store  # type: ignore[assignment]
    block_ids = [block.id for block in store.list_blocks(namespace=namespace)]
    assert len(block_ids) > 2
    plain = recall_store.block_info(block_ids, namespace=namespace)
    assert all(info.memento is None and info.entities == () for info in plain)
    infos = recall_store.block_info([*reversed(block_ids), block_ids[0], 'blk_missing'], namespace=namespace,
                                    mementos=True, entities=True)  # fmt: skip
    assert [info.id for info in infos] == list(reversed(block_ids))  # input order, duplicates once, missing out
    for info in infos:
        memento = store.memento_of(info.id, namespace=namespace)
        assert memento is not None and info.memento == memento
        assert info.memento.summarizes == (info.id,)
        assert list(info.entities) == store.entities_of(info.id, namespace=namespace)
        assert info.entities  # every block of the dialogue names someone or something
    assert [(i.id, i.previous_id, i.next_id) for i in infos] == [
        (i.id, i.previous_id, i.next_id) for i in reversed(plain)
    ]


def test_block_info_keeps_the_entity_classes_asked_for(filled: tuple[GraphStore, str]) -> None:
    """`entity_classes` (the co-mention hop asks for named entities only) keeps exactly the entities of those key
    classes, in `entities_of`'s order; no class, no entity."""
    store, namespace = filled
    recall_store: RecallStore = store  # type: ignore[assignment]
    block_ids = [block.id for block in store.list_blocks(namespace=namespace)]
    every = {info.id: info.entities for info in recall_store.block_info(block_ids, namespace=namespace, entities=True)}
    classes_seen = {entity.key.partition(':')[0] for entities in every.values() for entity, _ in entities}
    assert {'concept', 'name'} <= classes_seen  # both kept and dropped classes are there to tell apart
    for wanted in ({'name', 'date'}, {'concept'}, set()):
        infos = recall_store.block_info(block_ids, namespace=namespace, entities=True, entity_classes=wanted)
        assert [info.id for info in infos] == block_ids
        for info in infos:
            assert list(info.entities) == [
                (entity, count) for entity, count in every[info.id] if entity.key.partition(':')[0] in wanted
            ]
    assert any(info.entities for info in recall_store.block_info(block_ids, namespace=namespace, entities=True,
                                                                 entity_classes={'name'}))  # fmt: skip


def test_mention_keys_are_the_keys_block_info_reads(filled: tuple[GraphStore, str]) -> None:
    """`mention_keys` (the co-mention hop's read) answers `block_info(..., entities=True)`'s keys and counts, in
    its order, for the blocks in scope that mention an entity of the classes asked for."""
    store, namespace = filled
    recall_store: RecallStore = store  # type: ignore[assignment]
    blocks = store.list_blocks(namespace=namespace)
    block_ids = [block.id for block in blocks]
    every = {info.id: info.entities for info in recall_store.block_info(block_ids, namespace=namespace, entities=True)}
    asked = [*reversed(block_ids), block_ids[0], 'blk_missing']
    for wanted in (None, {'name', 'date'}, {'concept'}, set()):
        expected = {
            block_id: keys
            for block_id in reversed(block_ids)
            if (
                keys := tuple((e.key, n) for e, n in every[block_id] if wanted is None or e.key.split(':')[0] in wanted)
            )
        }
        found = recall_store.mention_keys(asked, namespace=namespace, entity_classes=wanted)
        assert found == expected
        assert list(found) == list(expected)  # the order asked in
    assert recall_store.mention_keys(block_ids, namespace=namespace)  # the dialogue mentions something
    session = blocks[0].session_id
    in_session = recall_store.mention_keys(block_ids, namespace=namespace, session_id=session)
    assert set(in_session) == {b.id for b in blocks if b.session_id == session and every[b.id]}
    assert recall_store.mention_keys(block_ids, namespace=namespace, session_id='no-such-session') == {}
    assert recall_store.mention_keys(block_ids, namespace=f'{namespace}-elsewhere') == {}
