"""`_usage` -- count the LLM tokens spent on one memento, even when compressors and judges are shared.

LLM compressors and judges report what each call cost with `record_usage`; `MementoEngine.make_memento` opens a
`usage_meter` around its compress/judge loop and reads the total. The meter lives in a `ContextVar`, so blocks
compressed concurrently (each in its own task) never mix their counts. A meter opened around other meters counts
what they count too: `mementograph replay` opens one around a whole run, whose compactions open their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

__all__ = ('UsageMeter', 'record_usage', 'usage_meter')


@dataclass
class UsageMeter:
    """Tokens (input + output) spent by LLM calls made while the meter was open."""

    tokens: int = 0
    """Total tokens recorded."""
    requests: int = 0
    """Number of LLM runs recorded."""
    outer: UsageMeter | None = field(default=None, repr=False)
    """The meter that was open when this one opened; it counts the same runs."""


_METER: ContextVar[UsageMeter | None] = ContextVar('mementograph_usage_meter', default=None)


def record_usage(tokens: int) -> None:
    """Add one LLM run's tokens to the meter of the current context, if one is open, and to the meters around it."""
    meter = _METER.get()
    while meter is not None:
        meter.tokens += max(0, tokens)
        meter.requests += 1
        meter = meter.outer


@contextmanager
def usage_meter() -> Iterator[UsageMeter]:
    """Open a fresh meter for the current context (what it counts, the meters around it count as well)."""
    meter = UsageMeter(outer=_METER.get())
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)
