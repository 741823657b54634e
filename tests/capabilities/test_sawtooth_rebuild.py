"""`sawtooth_from_log` rebuilds the context size of every request exactly, through evictions, merges and micro stubs."""

from __future__ import annotations

import json
from pathlib import Path

from mementograph import open_store
from mementograph._plot import sawtooth_from_log
from mementograph._tokens import TokenCounter
from mementograph.capabilities import MementoCompaction

from ..scripted import ScriptedModel, scripted_agent


def test_rebuild_matches_what_the_model_received_through_merges_and_micro_stubs(tmp_path: Path) -> None:
    store = open_store(f'sqlite:///{tmp_path / "memory.db"}')
    try:
        # a tiny budget and memento share force every kind of compaction step: evictions, merges of mementos,
        # and micro stubs of large tool results
        capability: MementoCompaction[None] = MementoCompaction(
            store,
            max_tokens=6_000,
            low_water=0.9,
            session_id='s-rebuild',
            memento_share=0.05,
            micro_min_tokens=300,
        )
        model = ScriptedModel(steps=22)
        scripted_agent(model, [capability]).run_sync('Fix every module.')
        counter = TokenCounter()
        measured = [counter.count_messages(seen) for seen in model.seen]

        # compactions state the context after them; an archive at the run's end changes no context
        events = [e for e in store.read_events('s-rebuild') if e.kind != 'archive']
        kinds = [json.loads(e.payload) if e.kind != 'message' else None for e in events]
        assert any(k is not None and 'merged' in k for k in kinds)
        assert any(e.kind == 'micro' for e in store.read_events('s-rebuild'))
        assert all(k is None or isinstance(k.get('tokens_after'), int) for k in kinds)

        curve = sawtooth_from_log(store, 's-rebuild', counter=counter)
        assert list(curve.context_tokens) == measured
        assert max(measured) < max(curve.baseline_tokens)
    finally:
        store.close()
