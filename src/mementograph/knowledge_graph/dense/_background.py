"""`_background` -- `DenseIndex.sync` off the caller's thread: the capability's eager embedding, the MCP server's
bounded wait."""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Final

from ..store import GraphStore
from ._index import DenseIndex

__all__ = ('BackgroundSync',)

_Scope = tuple[str, str | None]


_LIVE: Final[weakref.WeakSet[BackgroundSync]] = weakref.WeakSet()
"""Every instance that started a sync and is still referenced (a running thread references its own): stopped at
exit by one hook, so a process making many of them (an agent per request) does not keep them all alive."""


@dataclass(eq=False)
class BackgroundSync:
    """Syncs of one index in daemon threads, one at a time per scope: a request while that scope's sync runs makes
    it run once more when done (it may have listed the blocks before the newest arrived). At exit the index is
    stopped and the threads joined, so a process neither waits for a long embedding nor dies inside one (an
    onnxruntime call still running at exit aborts the process). A stopped sync loses nothing: vectors are derived
    data, and the next sync embeds what is missing."""

    index: DenseIndex
    on_error: Callable[[BaseException], None] | None = None
    """Told of each failed sync (the future holds the error too, for whoever waits on it)."""
    join_timeout: float = 30.0
    """Seconds the exit waits for the running chunk of embeddings."""
    _futures: dict[_Scope, Future[int]] = field(default_factory=dict[_Scope, 'Future[int]'])
    _again: set[_Scope] = field(default_factory=set[_Scope])
    _threads: list[threading.Thread] = field(default_factory=list[threading.Thread])
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def request(self, store: GraphStore, *, namespace: str, session_id: str | None) -> Future[int]:
        """Sync the scope in the background; the future gives how many blocks were embedded (or the error)."""
        scope = (namespace, session_id)
        with self._lock:
            running = self._futures.get(scope)
            if running is not None and not running.done():
                self._again.add(scope)
                return running
            future: Future[int] = Future()
            self._futures[scope] = future
            thread = threading.Thread(
                target=self._run, args=(store, scope, future), name='mementograph-embed', daemon=True
            )
            _LIVE.add(self)
            self._threads = [*(t for t in self._threads if t.is_alive()), thread]
        thread.start()
        return future

    def synced(self, store: GraphStore, *, namespace: str, session_id: str | None, wait: float | None) -> bool:
        """Request the scope's sync and wait for it at most `wait` seconds: `True` when the index covers the scope,
        `False` when the sync is still running (the index holds what it made so far). Raises the sync's error."""
        try:
            self.request(store, namespace=namespace, session_id=session_id).result(wait)
        except TimeoutError:
            return False
        return True

    def _run(self, store: GraphStore, scope: _Scope, future: Future[int]) -> None:
        embedded = 0
        while True:
            try:
                embedded += self.index.sync(store, namespace=scope[0], session_id=scope[1])
            except BaseException as exc:  # handed to whoever waits on the future
                with self._lock:
                    self._again.discard(scope)
                    future.set_exception(exc)
                if self.on_error is not None:
                    self.on_error(exc)
                return
            with self._lock:
                if scope not in self._again or self.index.stopped:
                    future.set_result(embedded)
                    return
                self._again.discard(scope)

    def wait(self, timeout: float | None = None) -> None:
        """Until every sync requested so far (and its reruns) has ended."""
        with self._lock:
            running = list(self._futures.values())
        for future in running:
            future.exception(timeout)

    def stop(self) -> None:
        """Stop the index's running syncs at their next chunk and wait for them (`join_timeout` each)."""
        self.index.stop()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(self.join_timeout)

    @staticmethod
    def stop_all() -> None:
        """Stop every instance's syncs, as the exit does: a command calls it before it closes the store they read."""
        for background in list(_LIVE):
            background.stop()


atexit.register(BackgroundSync.stop_all)
