"""Real stores whose calls are observed: `DelegatingStore` passes every call through to a real backend and tells
`on_call` of each; `CountingStore` counts them by method, to show how many reads a path makes."""

from __future__ import annotations

from collections import Counter
from typing import Any

from mementograph.knowledge_graph.store import GraphStore


class DelegatingStore:
    """Delegates everything to `inner` (a real store), calling `on_call` with each public method's name first."""

    def __init__(self, inner: GraphStore) -> None:
        self.inner = inner

    @property
    def uri(self) -> str:
        return self.inner.uri

    def on_call(self, name: str) -> None:
        """Called before each call of a public method of the store."""

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name.startswith('_') or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.on_call(name)
            return attr(*args, **kwargs)

        return call


class CountingStore(DelegatingStore):
    """Counts each method's calls in `calls`."""

    def __init__(self, inner: GraphStore) -> None:
        super().__init__(inner)
        self.calls: Counter[str] = Counter()

    def on_call(self, name: str) -> None:
        self.calls[name] += 1
