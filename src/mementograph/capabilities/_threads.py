"""Store I/O off the event loop: a Neo4j round trip, an fsync or a lock wait must not stall other tasks."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from anyio import to_thread

__all__ = ('in_thread',)

T = TypeVar('T')


async def in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking store call in a worker thread and wait for it.

    The stores are thread-safe (SQLite behind a lock, Neo4j through its driver's pool). Cancellation waits for the
    call to finish rather than abandoning it, so a cancelled run never leaves a write of unknown outcome behind.
    """
    return await to_thread.run_sync(partial(fn, *args, **kwargs))
