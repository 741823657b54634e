"""Threads that never hold the process open: every store call the library makes in the background runs in one.

A Neo4j server that stops answering, or a SQLite write lock another process never releases, can keep a store call
waiting for ever. The capability stops waiting after `store_timeout` and goes on, but a thread still inside such a
call would then keep the process from exiting: Python joins every non-daemon thread at exit, those of
`ThreadPoolExecutor` and anyio's worker threads included. These threads are daemons, so a call still hung at exit
is abandoned there, which loses nothing the store holds: an unfinished transaction is rolled back, and nothing is
evicted from a context before its write has returned. What a hung call had not yet written is the caller's to
report (the session log warns at exit, `capabilities/_logwriter.py`).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from functools import partial
from typing import Any, TypeVar

import anyio

__all__ = ('DaemonExecutor', 'run_in_daemon_thread', 'start_in_daemon_thread')

T = TypeVar('T')

_Work = tuple['Future[Any]', Callable[[], Any]]


class DaemonExecutor(Executor):
    """`ThreadPoolExecutor`'s contract (threads started as work arrives, idle ones reused, up to `max_workers`)
    with daemon threads, which the interpreter does not wait for at exit."""

    def __init__(self, max_workers: int, name: str) -> None:
        if max_workers < 1:
            raise ValueError('max_workers must be at least 1')
        self._max_workers = max_workers
        self._name = name
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._shut_down = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._shut_down:
                raise RuntimeError(f'{self._name}: cannot take work after shutdown')
            self._work.put((future, partial(fn, *args, **kwargs)))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._max_workers:
                thread = threading.Thread(target=self._run, name=f'{self._name}_{len(self._threads)}', daemon=True)
                self._threads.append(thread)
                thread.start()
        return future

    def _run(self) -> None:
        while (work := self._work.get()) is not None:
            future, call = work
            if future.set_running_or_notify_cancel():
                try:
                    result = call()
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del work, future, call  # a finished call's result must not stay referenced while the thread idles
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shut_down = True
            if cancel_futures:
                while True:
                    try:
                        work = self._work.get_nowait()
                    except queue.Empty:
                        break
                    if work is not None:
                        work[0].cancel()
            threads = list(self._threads)
            for _ in threads:
                self._work.put(None)
        if wait:
            for thread in threads:
                thread.join()


async def run_in_daemon_thread(call: Callable[[], T], *, abandon_on_cancel: bool, name: str) -> T:
    """`call()` in a new daemon thread, awaited on the running event loop.

    With `abandon_on_cancel`, a cancelled caller stops waiting at once and the call finishes (or hangs) on its own,
    as `anyio.to_thread.run_sync(..., abandon_on_cancel=True)`; without it, cancellation is held off until the call
    returns, so the caller never leaves a write of unknown outcome behind.
    """
    outcome = asyncio.wrap_future(start_in_daemon_thread(call, name=name))  # a closed loop is simply not told
    if abandon_on_cancel:
        return await outcome
    with anyio.CancelScope(shield=True):
        result = await outcome
    return result


def start_in_daemon_thread(call: Callable[[], T], *, name: str) -> Future[T]:
    """`call()` started in a new daemon thread; its outcome is the future's (wait with `result(timeout)`)."""
    outcome: Future[T] = Future()
    outcome.set_running_or_notify_cancel()  # running: a caller that stops waiting cannot cancel it under the thread

    def target() -> None:
        try:
            outcome.set_result(call())
        except BaseException as exc:
            outcome.set_exception(exc)

    threading.Thread(target=target, name=name, daemon=True).start()
    return outcome
