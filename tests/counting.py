"""`CountingStore` -- a real backend whose calls are counted by method, to show how many reads a path makes."""

from __future__ import annotations

from collections import Counter
from typing import Any

from mementograph.knowledge_graph.store import GraphStore


class CountingStore:
    """Delegates everything to `inner` (a real store) and counts each method's calls in `calls`."""

    def __init__(self, inner: GraphStore) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    @property
    def uri(self) -> str:
        return self.inner.uri

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name.startswith('_') or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attr(*args, **kwargs)

        return call
