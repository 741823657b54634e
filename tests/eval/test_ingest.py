"""Dialogue through the real engine and store: turns map to blocks exactly, ids are deterministic."""

from __future__ import annotations

import asyncio

from mementograph.eval import DialogueIngestor, ingest_all
from mementograph.eval._ingest import _run_in_process_loop
from mementograph.knowledge_graph.store import open_store
from tests.recall.conftest import small_dialogue


def test_every_turn_is_in_one_block_in_order_and_blocks_stay_in_their_sitting() -> None:
    dialogue = small_dialogue()
    store = open_store('memory://')
    ingested = asyncio.run(DialogueIngestor(min_tokens=40).ingest(store, dialogue))
    turn_ids = [turn.turn_id for segment in dialogue.segments for turn in segment.turns]
    assert [t for block in ingested.blocks for t in block.turn_ids] == turn_ids
    for block in ingested.blocks:
        assert {t.split(':')[0] for t in block.turn_ids} == {block.segment_id}
    stats = store.stats(session_id='conv-1')
    assert stats.blocks == len(ingested.blocks) and stats.mementos == sum(
        b.memento_id is not None for b in ingested.blocks
    )
    assert stats.entities > 10 and stats.pages >= 1
    assert len(store.read_events('conv-1')) == len(turn_ids) + len(dialogue.segments)  # the full record
    record = store.recover_block(ingested.blocks[0].block_id)
    assert record.messages[0].parts[0].content == dialogue.segments[0].turns[0].text  # type: ignore[union-attr]


def test_ids_are_deterministic_and_workers_change_nothing() -> None:
    dialogues = [small_dialogue('a'), small_dialogue('b'), small_dialogue('c')]
    serial = ingest_all(dialogues, workers=1, min_tokens=40)
    parallel = ingest_all(dialogues, workers=2, min_tokens=40)
    assert [d.blocks for d in serial] == [d.blocks for d in parallel]
    assert [d.evictions for d in serial] == [d.evictions for d in parallel]
    store = open_store('memory://')
    for dialogue in serial:
        DialogueIngestor.replay(store, dialogue)
        DialogueIngestor.replay(store, dialogue)  # idempotent
    assert store.stats(namespace='default').blocks == sum(len(d.blocks) for d in serial)


def test_every_ingest_of_a_process_runs_on_its_one_event_loop() -> None:
    # a model's HTTP client keeps connections bound to the loop that opened them: a loop per dialogue broke them
    async def running_loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    first = _run_in_process_loop(running_loop())
    assert _run_in_process_loop(running_loop()) is first and not first.is_closed()
