"""`SessionLogWriter` -- appends arriving messages to the session log on one background thread, in order.

Serializing a message exactly and committing it costs a few hundred microseconds on SQLite and milliseconds over
bolt (plus redaction, with a hook); none of it has to delay the model request. One worker thread keeps the log in
arrival order, a failed append stays pending and is retried with the next one (appends are idempotent by message
index), and `flush()` makes everything submitted durable before a compaction is written or the run ends. With a hook,
the writer shares the compactor's `MessageRedactor`, so a message archived later is not redacted a second time.
An append that finds another run's message at one of its positions (`LogConflictError`: two runs writing one
session at the same time) is not retried: the writer drops what it holds and reports the conflict, and the
compactor logs its history again after the log's end.

The thread is a daemon: a writer that `close` left waiting on a store that does not answer is given up to its
`store_timeout` once more when the process exits, and what it still holds is then reported, not waited for without
end. Those messages are not lost for good: they are in the run's result, and a run that continues the session
(`message_history`) appends whatever the log is missing.

With a `redact` hook, each message is redacted on its own: the messages before one the hook fails on are written,
that one and every later one wait in order (nothing is written unredacted, and the log never skips a position), and
the append raises the hook's `RedactionError`. They are tried again with the next append, and at the run's end.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future

from pydantic_ai.messages import ModelMessage

from .._daemon import DaemonExecutor
from .._redact import MessageRedactor, RedactionError
from ..knowledge_graph import SessionEvent
from ..knowledge_graph.store import GraphStore, LogConflictError, StoreTimeoutError

__all__ = ('SessionLogWriter',)

logger = logging.getLogger('mementograph')


class SessionLogWriter:
    """Background, ordered, retrying appends of one session's messages."""

    def __init__(
        self, store: GraphStore, session_id: str, namespace: str, *, redact: MessageRedactor | None = None
    ) -> None:
        self._store = store
        self._redact = redact
        self._session_id = session_id
        self._namespace = namespace
        self._pending: deque[tuple[int, ModelMessage]] = deque()
        self._lock = threading.Lock()
        self._executor: DaemonExecutor | None = None
        self._last: Future[None] | None = None
        self._reported: Future[None] | None = None
        self._discarded = False
        self._conflict: LogConflictError | None = None
        self._maybe_written = False

    def submit(self, items: Sequence[tuple[int, ModelMessage]]) -> None:
        """Queue `(message_index, message)` pairs for appending."""
        if not items:
            return
        with self._lock:
            self._pending.extend(items)
        if self._executor is None:
            self._executor = DaemonExecutor(max_workers=1, name='mementograph-log')
        self._last = self._executor.submit(self._drain)

    def _drain(self) -> None:
        with self._lock:
            if self._conflict is not None:  # positions of a layout the run gives up: it submits everything again
                self._pending.clear()
                raise self._conflict
            batch = [] if self._discarded else list(self._pending)
        if not batch:
            return
        messages, failed = self._redacted([message for _, message in batch])
        events = [
            SessionEvent.for_message(message, session_id=self._session_id, namespace=self._namespace, index=index)
            for (index, _), message in zip(batch, messages, strict=False)
        ]
        if events:
            try:
                self._store.append_events(events)
            except LogConflictError as conflict:
                with self._lock:
                    self._conflict = conflict
                    self._pending.clear()
                raise
            except Exception as exc:
                if getattr(exc, 'maybe_written', True):  # an error of no known outcome too
                    with self._lock:
                        self._maybe_written = True
                raise
            with self._lock:
                for _ in events:
                    self._pending.popleft()
                self._maybe_written = False  # what an earlier append may have written, this one wrote again
        if failed is not None:
            raise failed

    def _redacted(self, messages: list[ModelMessage]) -> tuple[list[ModelMessage], RedactionError | None]:
        """The messages redacted, up to the first one the hook fails on (it and the later ones stay queued: nothing
        is written unredacted, and the log keeps its order), with the hook's error."""
        if self._redact is None:
            return messages, None
        redacted: list[ModelMessage] = []
        for message in messages:
            try:
                redacted.extend(self._redact([message]))  # remembered: archiving the message later reuses it
            except RedactionError as exc:
                return redacted, exc
        return redacted, None

    def failure(self) -> BaseException | None:
        """The error of the latest finished append, reported once (its messages stay queued for a retry); a
        conflict is not one (`conflict`)."""
        last = self._last
        if last is None or not last.done() or last is self._reported:
            return None
        self._reported = last
        error = last.exception()
        return None if isinstance(error, LogConflictError) else error

    def conflict(self) -> LogConflictError | None:
        """The conflict an append met since the last call, if any: the log holds another run's message at one of
        the positions given. Until it is taken, nothing is appended; taking it drops what is still queued (laid
        out before it was known), and the caller logs its history again after the log's end."""
        with self._lock:
            conflict, self._conflict = self._conflict, None
            if conflict is not None:
                self._pending.clear()
        return conflict

    def flush(self, timeout: float | None = None) -> None:
        """Block until every queued message is in the store; raises the store's error if it still fails,
        `LogConflictError` while a conflict is not taken (`conflict`), and `StoreTimeoutError` when the store has
        not answered within `timeout` seconds (the messages stay queued)."""
        if self._executor is None:
            return
        future = self._executor.submit(self._drain)
        self._last = self._reported = future
        try:
            future.result(timeout)
        except TimeoutError:
            if future.done():  # the store's own timeout, raised by the append
                raise
            with self._lock:
                waiting = len(self._pending)
            raise StoreTimeoutError(
                f'the session log did not reach the store within {timeout:g} s (store_timeout): {waiting} messages '
                'not yet written; they are written if the store answers while this process runs'
            ) from None

    def waiting(self) -> int:
        """How many messages are queued and not yet in the store."""
        with self._lock:
            return len(self._pending)

    def waiting_exactly(self) -> bool:
        """Whether `waiting()` is exact: no append of the queued messages failed in a way that may have written them
        (the connection dropped while committing, the store was closed meanwhile). One still running has not been
        acknowledged, and counts as not written yet."""
        return not self._maybe_written

    def close(self, timeout: float | None = None) -> None:
        """Flush, then stop the worker thread; a worker still waiting on the store after `timeout` is left to
        finish on its own (its messages are written if the store answers while the process runs, and the process
        waits for it at most `timeout` more when it exits)."""
        executor = self._executor
        try:
            self.flush(timeout)
        finally:
            if executor is not None:
                self._executor = None
                last = self._last
                stuck = last is not None and not last.done()
                executor.shutdown(wait=not stuck)
                if stuck and last is not None:
                    _left_waiting[:] = [left for left in _left_waiting if left[0].waiting()]
                    _left_waiting.append((self, last, timeout))

    def discard(self) -> Future[None] | None:
        """Write nothing more (the session is about to be deleted) and stop the worker; returns the append still
        running, if any: a delete must wait for it, or the append could write the session back afterwards."""
        with self._lock:
            self._discarded = True
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)
        return None if self._last is None or self._last.done() else self._last

    def describe(self) -> str:
        """Whose log this is, for messages."""
        return f'session {self._session_id!r} (namespace {self._namespace!r})'


_left_waiting: list[tuple[SessionLogWriter, Future[None], float | None]] = []
"""Writers that `close` left waiting on the store, with their last append and `store_timeout`."""


@atexit.register
def _wait_at_exit() -> None:
    """Give each writer left waiting its `store_timeout` once more (all at once), then report what is unwritten.

    Registered when this module is imported, hence after `logging`, so it runs before logging shuts down (atexit
    runs last in, first out) and the report reaches the handlers (stderr when none are configured).
    """
    if not _left_waiting:
        return
    started = time.monotonic()
    for writer, last, timeout in _left_waiting:
        remaining = None if timeout is None else max(0.0, started + timeout - time.monotonic())
        with contextlib.suppress(BaseException):  # still waiting, or failed: what it holds is reported below
            last.result(remaining)
        unwritten = writer.waiting()
        if unwritten:
            logger.warning(
                'mementograph: %d messages of %s were not written to the session log: the store did not answer '
                "before the process exited. They are in the run's result; a run that continues the session "
                '(message_history) writes them.',
                unwritten,
                writer.describe(),
            )
    _left_waiting.clear()
