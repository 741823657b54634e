"""`_usage` -- count the LLM tokens spent on one memento, even when compressors and judges are shared.

LLM compressors and judges report what each call cost with `record_usage`; `MementoEngine.make_memento` opens a
`usage_meter` around its compress/judge loop and reads the total. The meter lives in a `ContextVar`, so blocks
compressed concurrently (each in its own task) never mix their counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ('UsageMeter', 'record_usage', 'usage_meter')


@dataclass
class UsageMeter:
    """Tokens (input + output) spent by LLM calls made while the meter was open."""

    tokens: int = 0
    """Total tokens recorded."""
    requests: int = 0
    """Number of LLM runs recorded."""


_METER: ContextVar[UsageMeter | None] = ContextVar('mementograph_usage_meter', default=None)


def record_usage(tokens: int) -> None:
    """Add one LLM run's tokens to the meter of the current context, if one is open."""
    meter = _METER.get()
    if meter is not None:
        meter.tokens += max(0, tokens)
        meter.requests += 1


@contextmanager
def usage_meter() -> Iterator[UsageMeter]:
    """Open a fresh meter for the current context (nested meters do not add to the outer one)."""
    meter = UsageMeter()
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)
