"""`_time_range` -- a time interval recall can filter or prefer blocks by, and the timestamps it compares.

Apart from the phrase grammar (`_time_phrases`), which builds these ranges from a query's words, because the ranking
(`since` / `until` filters) and the evals need the value and the timestamp parsing without the grammar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import MAXYEAR, MINYEAR, UTC, datetime, timedelta

__all__ = ('TimeRange', 'aware', 'month_start', 'parse_time', 'plus_days')


@dataclass(frozen=True)
class TimeRange:
    """A half-open time interval `[since, until)`; either end may be open."""

    since: datetime | None = None
    until: datetime | None = None

    def contains(self, moment: datetime | None) -> bool:
        """Whether `moment` falls in the range (an unknown moment is never in a bounded range)."""
        if self.since is None and self.until is None:
            return True
        if moment is None:
            return False
        moment = aware(moment)
        if self.since is not None and moment < aware(self.since):
            return False
        return not (self.until is not None and moment >= aware(self.until))


def aware(moment: datetime) -> datetime:
    """`moment`, in UTC when it has no zone (stored timestamps without an offset are UTC)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def parse_time(value: str | datetime | None) -> datetime | None:
    """ISO-8601 text (as stored in `started_at`), LongMemEval's `2023/05/20 (Sat) 02:21`, or a datetime."""
    if value is None or isinstance(value, datetime):
        return None if value is None else aware(value)
    text = value.strip()
    text = re.sub(r'\s*\([A-Za-z]{3}\)\s*', ' ', text).replace('/', '-').strip()
    if text.endswith('Z'):
        text = text[:-1] + '+00:00'
    try:
        return aware(datetime.fromisoformat(text))
    except ValueError:
        return None


def plus_days(moment: datetime | None, days: int) -> datetime | None:
    """`moment` moved by `days`; `None` (that end of the range open) past either end of the calendar, which a
    message's `datetime.min` / `max` timestamp or a huge count reaches."""
    if moment is None:
        return None
    try:
        return moment + timedelta(days=days)
    except OverflowError:
        return None


def month_start(year: int, month: int) -> datetime | None:
    """The first moment of the month (UTC), or `None` outside the calendar (`datetime` has years 1 to 9999 only)."""
    return datetime(year, month, 1, tzinfo=UTC) if MINYEAR <= year <= MAXYEAR else None
