"""A real agent run whose store fails one eviction write -- before it, inside its transaction, or after its
commit -- on both real backends.

Checked after each: the run finished with its answer; the failing request still sent the whole context; the
write left nothing (before, inside) or everything (after); a warning said why; compaction resumed and archived
the same blocks (a retried write is idempotent); every original message is live or recoverable byte for byte;
the store verifies; and a second run continuing the session (`message_history`) archives nothing twice.
"""

from __future__ import annotations

import warnings

import pytest

from mementograph import MementoWarning
from mementograph.capabilities._layout import stub_info
from mementograph.knowledge_graph import Eviction
from tests.reliability._checks import positions, session_problems, verify_problems
from tests.reliability._faults import STEPS, FaultyStore, Injection, Step
from tests.reliability._session import Recorder, StepModel, final_text, run_session
from tests.reliability.conftest import RealStore

SESSION = 'faults'


def _archives_blocks(eviction: Eviction) -> bool:
    return any(block.kind == 'block' for block in eviction.blocks)


@pytest.mark.parametrize('step', STEPS)
async def test_fault_in_an_eviction_write(step: Step, real_store: RealStore) -> None:
    store, ns = real_store.store, real_store.namespace
    recorder = Recorder()
    model = StepModel(steps=6)
    at_fault: list[tuple[int, int]] = []

    def note(injection: Injection) -> None:
        at_fault.append((len(model.seen), len(recorder.originals)))

    faulty = FaultyStore(store, step, when=_archives_blocks, on_fault=note)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        live, _ = await run_session(faulty, SESSION, ns, tasks=1, recorder=recorder, model=model)

    # the run finished cleanly, and said once why it could not compact
    assert live[-1].parts[0].content == final_text(1)  # type: ignore[union-attr]
    [injection] = faulty.injections
    said = [str(w.message) for w in caught if issubclass(w.category, MementoWarning)]
    assert len(said) == 1 and 'compaction failed' in said[0], said
    # the request the fault hit still sent every message so far
    [(request, originals_then)] = at_fault
    assert positions(model.seen[request]) == list(range(originals_then))
    # nothing of the failed write is in the store (before, inside) -- or all of it (after)
    blocks = injection.eviction.blocks
    if step == 'after':
        assert injection.present_after == len(blocks)
    else:
        assert injection.present_after == 0
    if step == 'inside':
        assert injection.written_inside > 0, 'the transaction failed before writing anything'
    # compaction resumed and archived the very blocks the failed write held (ids are content + position)
    assert faulty.writes and any(_archives_blocks(e) for e in faulty.writes)
    stored = {b.id for b in store.list_blocks(namespace=ns, session_id=SESSION)}
    assert {b.id for b in blocks} <= stored
    assert any(stub_info(m) is not None for m in live)
    assert session_problems(store, SESSION, namespace=ns, originals=recorder.originals, live=live) == []
    assert verify_problems(store, namespace=ns, session_id=SESSION) == []

    # the app continues the conversation with the context it got back
    archived = len(stored)
    live, _ = await run_session(store, SESSION, ns, tasks=2, steps=3, history=live, recorder=recorder)
    assert live[-1].parts[0].content == final_text(2)  # type: ignore[union-attr]
    assert len(store.list_blocks(namespace=ns, session_id=SESSION)) > archived
    assert session_problems(store, SESSION, namespace=ns, originals=recorder.originals, live=live) == []
    assert verify_problems(store, namespace=ns, session_id=SESSION) == []
