"""Store I/O runs off the event loop: a slow store (a Neo4j round trip, a lock wait) must not stall other tasks
of the process, such as other agent runs or a streaming response."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mementograph import MementoCompaction, open_store
from mementograph.knowledge_graph import Eviction
from mementograph.knowledge_graph.store import GraphStore
from tests.capabilities.probe import ProbeModel, own_pointer, probe_agent, tool_returns
from tests.counting import DelegatingStore


class LoopCheckingStore(DelegatingStore):
    """A real store whose calls record the thread they ran on; `write_eviction` also needs the event loop to
    answer while it runs, as a store waiting on the network would need other tasks to go on."""

    def __init__(self, inner: GraphStore) -> None:
        super().__init__(inner)
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()  # made inside the test's coroutine: its thread runs the loop
        self.calls: list[tuple[str, bool]] = []  # (method, ran on the event loop's thread)
        self.loop_answered: list[bool] = []

    def on_call(self, name: str) -> None:
        self.calls.append((name, threading.get_ident() == self.loop_thread))

    def write_eviction(self, eviction: Eviction) -> None:
        on_loop = threading.get_ident() == self.loop_thread
        self.calls.append(('write_eviction', on_loop))
        if not on_loop:  # on the loop thread this would wait for itself
            answer = asyncio.run_coroutine_threadsafe(asyncio.sleep(0, result=True), self.loop)
            self.loop_answered.append(answer.result(timeout=10))
        self.inner.write_eviction(eviction)


def on_loop(store: LoopCheckingStore, method: str) -> list[bool]:
    return [flag for name, flag in store.calls if name == method]


async def test_store_calls_of_compaction_and_tools_run_off_the_event_loop(tmp_path: Path) -> None:
    store = LoopCheckingStore(open_store(f'sqlite://{tmp_path / "memory.db"}'))
    query: Callable[[list[Any]], dict[str, Any]] = lambda _: {'query': 'OFFLOOP module 1'}  # noqa: E731
    model = ProbeModel(
        'OFFLOOP',
        probes=[('recover_block', own_pointer), ('recall', query), ('retrieve_page', {'page_id': '1'})],
    )
    capability = MementoCompaction(store, max_tokens=2_500, session_id='offloop', retention='run')
    ticks = 0

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    beating = asyncio.create_task(heartbeat())
    try:
        result = await probe_agent(model, [capability]).run('Read every module.')
    finally:
        beating.cancel()

    assert result.output == 'OFFLOOP: all 8 modules read.'
    recovered, recalled, paged = (tool_returns(model, tool)[0] for tool in ('recover_block', 'recall', 'retrieve_page'))
    assert 'sha256 verified' in recovered and 'offloop' in recalled.lower() and 'offloop' in paged.lower()
    # every eviction was written in a worker thread while the loop kept answering
    assert on_loop(store, 'write_eviction') and not any(on_loop(store, 'write_eviction'))
    assert store.loop_answered == [True] * len(on_loop(store, 'write_eviction'))
    for method in ('recover_block', 'search_text', 'delete_session'):  # the tools' reads, the run's cleanup
        assert on_loop(store, method) and not any(on_loop(store, method)), method
    assert ticks > 0
