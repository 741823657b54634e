"""`CompressorBreaker` -- a circuit breaker for the model behind an LLM compressor or judge.

A compressor's provider that is down fails every block alike, and each failure costs a compaction (up to
`compress_timeout` of waiting, the context left over its mark) before the block's own fallback takes over after
`COMPRESS_ATTEMPTS`. So once the model has failed `BREAKER_FAILURES` mementos in a row for a reason not about their
block (no answer in time, the provider unreachable, overloaded or refusing the credentials), the breaker opens:
every memento is written by the extractive compressor and the rubric judge, which need no model, for a cool-down;
then one memento tries the model again (a probe). A memento the model makes closes the breaker; a failed probe opens
it for twice the cool-down (up to `_MAX_BACKOFF` times it), so a long outage costs one wait now and then, and a
transient one does not degrade a session for good.

One breaker serves every run of a `MementoCompaction` (and every session it compacts): the model is theirs alike.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelAuthenticationError,
    ModelHTTPError,
    ModelNotFoundError,
    ModelRequestRejectedError,
    UnexpectedModelBehavior,
)

__all__ = ('BREAKER_FAILURES', 'BreakerChange', 'CompressorBreaker', 'is_outage')

BREAKER_FAILURES: Final = 3
"""Mementos in a row the model must fail, each for a reason not about its block, before the breaker opens."""
_MAX_BACKOFF: Final = 8
"""A failed probe doubles the cool-down, up to this many times `CompressorBreaker.cooldown`."""
_TRANSIENT_STATUSES: Final = frozenset({401, 403, 404, 408, 429})
"""HTTP 4xx statuses about the provider or the account, not the request's content."""

Use = Literal['model', 'probe', 'fallback']


@dataclass(frozen=True)
class BreakerChange:
    """The breaker opened (again, after a failed probe) or closed."""

    opened: bool
    """`True`: the fallback writes every memento for `cooldown` seconds; `False`: the model writes them again."""
    error: str = ''
    """The failure that opened it (`Type: message`)."""
    failures: int = 0
    """Mementos in a row the model had failed when it opened."""
    cooldown: float = 0.0
    """Seconds until the model is tried again."""
    probe: bool = False
    """It opened again because the probe after a cool-down failed."""


@dataclass
class CompressorBreaker:
    """Counts the model's failed mementos in a row and says which engine makes the next one (`acquire`).

    Thread-safe: runs of one capability may compact in several threads (`run_sync`) at once.
    """

    cooldown: float = 300.0
    """Seconds the fallback writes every memento once the breaker opened, before the model is tried again."""
    clock: Callable[[], float] = time.monotonic
    _failures: int = field(default=0, init=False)
    _open_until: float | None = field(default=None, init=False)
    """When the next probe may go; `None` while closed."""
    _backoff: int = field(default=1, init=False)
    _probing: bool = field(default=False, init=False)
    """A probe is out: the other mementos take the fallback until it returns."""
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    @property
    def is_open(self) -> bool:
        """Whether mementos are given to the fallback (cooling down, or probing)."""
        return self._open_until is not None

    def acquire(self) -> Use:
        """Which engine makes the next memento: the model (closed), the fallback (open), or the model once after the
        cool-down (`'probe'`; report its outcome with `probe=True`)."""
        with self._lock:
            if self._open_until is None:
                return 'model'
            if self._probing or self.clock() < self._open_until:
                return 'fallback'
            self._probing = True
            return 'probe'

    def succeeded(self, *, probe: bool = False) -> BreakerChange | None:
        """The model made a memento: the breaker closes (a change, if it was open)."""
        with self._lock:
            self._failures = 0
            if probe:
                self._probing = False
            if self._open_until is None:
                return None
            self._open_until, self._backoff, self._probing = None, 1, False
            return BreakerChange(opened=False)

    def failed(self, error: BaseException, *, probe: bool = False) -> BreakerChange | None:
        """The model failed a memento for a reason not about its block (`is_outage`): a change when that opens the
        breaker, or opens it again after a failed probe for a longer cool-down."""
        with self._lock:
            self._failures += 1
            described = f'{type(error).__name__}: {error}'
            if probe:
                self._probing = False
            probed = probe and self._open_until is not None  # else a memento begun earlier closed it meanwhile
            if probed:
                self._backoff = min(self._backoff * 2, _MAX_BACKOFF)
            elif self._open_until is not None or self._failures < BREAKER_FAILURES:
                return None  # open already (a memento begun before it opened), or not failing long enough yet
            cooldown = self.cooldown * self._backoff
            self._open_until = self.clock() + cooldown
            return BreakerChange(opened=True, error=described, failures=self._failures, cooldown=cooldown, probe=probed)

    def answered(self, *, probe: bool = False) -> None:
        """The model answered, but its memento failed for a reason about the block: the model is not down. A
        probe's slot goes to the next memento."""
        with self._lock:
            if self._open_until is None:
                self._failures = 0
            if probe:
                self._probing = False

    def release(self) -> None:
        """A probe was cancelled with its compaction: the next memento probes."""
        with self._lock:
            self._probing = False


def is_outage(error: BaseException) -> bool:
    """Whether a failed memento says nothing about its block: no answer within `compress_timeout` (a
    `TimeoutError`), the provider unreachable, overloaded, failing, rate-limited, out of quota, refusing the
    credentials or not knowing the model (pydantic-ai's `ModelAPIError`s), a connection error. A refusal of the
    request itself (a context window exceeded, a content filter, output that never validated), a memento not
    shorter than its block, or an error of unknown kind is about the block: its own fallback covers it."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ModelAuthenticationError | ModelNotFoundError):
            return True
        if isinstance(current, ModelRequestRejectedError | UnexpectedModelBehavior):
            return False
        if isinstance(current, ModelHTTPError):
            return not 400 <= current.status_code < 500 or current.status_code in _TRANSIENT_STATUSES
        if isinstance(current, ModelAPIError | TimeoutError | OSError):
            return True
        current = current.__cause__ or current.__context__
    return False
