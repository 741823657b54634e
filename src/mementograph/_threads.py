"""Store I/O off the event loop, bounded: a hung server, driver or lock must not hang the agent's run.

A Neo4j round trip, an fsync or a lock wait must not stall other tasks, so every store call of the capability (and
of the MCP server's tools) runs in a worker thread. With a timeout, a call that has not returned by then is left to finish in its thread and
the caller gets a `StoreTimeoutError`: the capability then evicts nothing (the history goes to the model whole)
and says why. Nothing is lost: an eviction is applied only after its write returned, and a write that finishes
late wrote deterministic ids, which the next compaction writes again idempotently. Until the abandoned call
returns, every further call fails at once instead of queueing behind it, so a hung store costs one wait, not one
per request, holds one thread, and is warned about twice: when the wait runs out and when the store answers again.
The threads are daemons (`_daemon.py`): a call still hung when the process ends does not keep it from exiting.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, TypeVar

import anyio

from ._daemon import run_in_daemon_thread, start_in_daemon_thread
from .knowledge_graph.store import StoreTimeoutError

__all__ = ('StoreCalls', 'in_thread', 'run_blocking')

logger = logging.getLogger('mementograph')

T = TypeVar('T')

_THREAD = 'mementograph-store'


async def in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking store call in a worker thread and wait for it, however long it takes.

    The stores are thread-safe (SQLite behind a lock, Neo4j through its driver's pool). Cancellation waits for the
    call to finish rather than abandoning it, so a cancelled run never leaves a write of unknown outcome behind.
    """
    return await run_in_daemon_thread(partial(fn, *args, **kwargs), abandon_on_cancel=False, name=_THREAD)


def run_blocking(work: Callable[[], Coroutine[Any, Any, T]], /) -> T:
    """`await work()` from synchronous code, on a private event loop closed afterwards.

    Not `asyncio.run`: that would unset this thread's event loop, which `Agent.run_sync` and `run_stream_sync` keep
    between calls. When this thread is running a loop (sync code called from a coroutine), the private loop runs in
    a daemon thread this one waits for: the running loop is blocked meanwhile, but nothing `work` does needs it.
    """

    def run() -> T:
        with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
            return runner.run(work())

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run()
    return start_in_daemon_thread(run, name='mementograph-loop').result()


class StoreCalls:
    """Store calls in worker threads, each bounded by `timeout` seconds (`None`: unbounded, as `in_thread`).

    One instance per run: it remembers a call it gave up on until that call returns.
    """

    def __init__(self, timeout: float | None) -> None:
        if timeout is not None and not timeout > 0:
            raise ValueError(f'store_timeout must be a positive number of seconds or None, got {timeout!r}')
        self.timeout = timeout
        self._abandoned: tuple[str, float, threading.Event, list[BaseException]] | None = None

    def busy(self) -> str | None:
        """Why no store call can be made now (one that timed out is still running), or `None`."""
        if self._abandoned is None:
            return None
        name, since, returned, failed = self._abandoned
        if returned.is_set():
            self._abandoned = None
            took = time.monotonic() - since
            if failed:  # it came back with the error, not an answer: the store may be down still
                error = failed[0]
                logger.warning(
                    'mementograph: the %s call left to finish failed after %.0f s (%s: %s); the next call tries the '
                    'store again',
                    name,
                    took,
                    type(error).__name__,
                    error,
                )
            else:
                logger.warning('mementograph: the store answered %s again after %.0f s', name, took)
            return None
        return (
            f'the store has not answered {name} for {time.monotonic() - since:.0f} s '
            f'(given up after {self.timeout:g} s; store_timeout)'
        )

    async def __call__(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` in a worker thread; `StoreTimeoutError` when it takes longer than the bound, or
        at once while an earlier call that took longer is still running.

        A cancelled caller waits for the call up to the bound (so a cancelled run leaves no write of unknown
        outcome behind when the store answers in time), then gives up on it.
        """
        if self.timeout is None:
            return await in_thread(fn, *args, **kwargs)
        reason = self.busy()
        if reason is not None:
            raise StoreTimeoutError(reason, waited=False)
        returned = threading.Event()
        failed: list[BaseException] = []

        def call() -> T:
            try:
                return fn(*args, **kwargs)
            except BaseException as exc:
                failed.append(exc)
                raise
            finally:
                returned.set()

        started = time.monotonic()
        with anyio.move_on_after(self.timeout, shield=True):
            return await run_in_daemon_thread(call, abandon_on_cancel=True, name=_THREAD)
        name = getattr(fn, '__name__', type(fn).__name__)
        self._abandoned = (name, started, returned, failed)
        raise StoreTimeoutError(
            f'the store did not answer {name} within {self.timeout:g} s (store_timeout); the call was left to '
            'finish on its own'
        )
