"""A store of one's own, written as docs/custom-stores.md says: no shipped backend's subclass, it delegates to a real
store (`DelegatingStore`), and `OneByOneReads` (the doc's code, verbatim) gives it the batched reads it was written
without. `open_custom_store` is what the contract suite's `custom` backend runs (`MEMENTOGRAPH_CONTRACT_STORE`)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from mementograph.knowledge_graph import DEFAULT_NAMESPACE, BlockRecord, MementoRecord
from mementograph.knowledge_graph.store import GraphStore, NotFoundError, open_store
from tests.counting import DelegatingStore

BATCHED_READS = ('get_blocks', 'get_mementos')
"""The members a store written before they joined the protocol lacks."""


class StoreWithoutBatchedReads(DelegatingStore):
    """A store written before `get_blocks` and `get_mementos` joined `GraphStore`: it has every other member."""

    lacks: tuple[str, ...] = BATCHED_READS

    def __getattr__(self, name: str) -> Any:
        if name in self.lacks:
            raise AttributeError(name)
        return super().__getattr__(name)


class OneByOneReads:
    """`get_blocks` and `get_mementos` made of `get_block` and `get_memento`: one read per id."""

    def get_blocks(
        self, block_ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[BlockRecord]:
        found = []
        for block_id in dict.fromkeys(block_ids):  # the order asked, each id once
            with suppress(NotFoundError):  # an id not in scope is left out, not an error
                found.append(self.get_block(block_id, namespace=namespace, session_id=session_id))
        return found

    def get_mementos(
        self, memento_ids: Sequence[str], *, namespace: str = DEFAULT_NAMESPACE, session_id: str | None = None
    ) -> list[MementoRecord]:
        found = []
        for memento_id in dict.fromkeys(memento_ids):
            with suppress(NotFoundError):
                found.append(self.get_memento(memento_id, namespace=namespace, session_id=session_id))
        return found


class UpgradedStore(OneByOneReads, StoreWithoutBatchedReads):
    """The old store with the doc's batched reads mixed in first."""


def open_custom_store(directory: Path) -> GraphStore:
    """The contract suite's default `custom` backend: the upgraded store over a real SQLite file in `directory`."""
    return UpgradedStore(open_store(f'sqlite://{directory / "custom.db"}'))
