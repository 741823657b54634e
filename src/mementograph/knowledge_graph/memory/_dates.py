"""`_dates` -- relative time expressions resolved against the moment they were said.

A memento is read later, maybe months later, so "yesterday" in it means nothing: a memento must keep dates
absolute. `find_anchors` finds the relative expressions of a message ("yesterday", "last week", "next month",
"two days ago", "last Saturday", ...) and resolves each against the message's timestamp; `anchor_text` writes the
resolution right after the expression, in parentheses, the way LoCoMo's annotators wrote their answers:

- `yesterday (7 May 2023)`, `tonight (8 May 2023)`, `two days ago (6 May 2023)`
- `last week (the week before 9 June 2023)`, `this weekend (the weekend of 24 June 2023)`
- `next month (June 2023)`, `last year (2022)`, `three years ago (2020)`
- `last Saturday (the Saturday before 25 May 2023)`, `two weeks ago (two weeks before 11 August 2023)`

The day, week, month and year expressions, "N days, weeks or months ago" and "last / next Saturday" are also read in
German, French, Spanish, Italian, Portuguese, Dutch, Swedish, Russian and Polish, the days, weeks, months and years
in Chinese, Japanese and Korean too (`我们昨天 (7 May 2023)讨论了`, `gestern (7 May 2023)`, `la semaine dernière (the week
before ...)`, `3 дня назад (5 May 2023)`, `samedi dernier (the Saturday before ...)`); number words are English
only. Vague expressions ("the other day", "recently", "a few days ago", "on Friday") are left alone: an anchor must
be derivable, never guessed; so is one past either end of the calendar (a message may carry `datetime.min` or `max`
as its timestamp: "yesterday" said on 1 January of year 1 has no date to name). Everything here is a pure function
of the text and the timestamp, so the judge can derive exactly the same anchors to tell them from invented dates.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import MAXYEAR, MINYEAR, date, datetime, timedelta, tzinfo
from typing import Final, Literal, TypeAlias

from ..._languages import (
    RELATIVE_DAYS,
    RELATIVE_SPANS,
    UNITS_AGO,
    WEEKDAY_AFTER,
    WEEKDAY_BEFORE,
    WEEKDAY_NUMBERS,
    languages_of,
    phrase_pattern,
    unit_of,
)

__all__ = ('DateAnchor', 'TimeZone', 'anchor_text', 'find_anchors', 'format_day', 'in_zone', 'time_zone')

TimeZone: TypeAlias = tzinfo | Literal['local'] | None
"""Whose calendar a timestamp's day is read in: a `tzinfo`, `'local'` (the machine's, daylight saving included),
or `None` (the timestamp's own zone: UTC for pydantic-ai's). "Yesterday" said at 19:30 in Los Angeles is 03:30 UTC
the next day: read in UTC, it would be anchored a day late."""


def time_zone(setting: str | tzinfo | None) -> TimeZone:
    """A setting as a `TimeZone`: `'local'`, `'UTC'`/`None`, an IANA name (`'Europe/Paris'`) or a `tzinfo`.

    Raises:
        ValueError: a name no time zone database knows (saying what to give instead).
    """
    if setting is None or isinstance(setting, tzinfo):
        return setting
    if setting == 'local':
        return 'local'
    if setting.upper() == 'UTC':
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(setting)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(
            f"unknown time zone {setting!r}: give 'local', 'UTC' or an IANA name such as 'Europe/Paris' (on Windows, "
            'IANA names need the tzdata package: pip install tzdata)'
        ) from exc


def in_zone(moment: datetime, zone: TimeZone) -> datetime | None:
    """`moment` on `zone`'s clock (unchanged when `zone` is `None` or `moment` has no zone of its own); `None` when
    that clock's day is outside the calendar (`datetime.min` read west of its own zone)."""
    if zone is None or moment.tzinfo is None:
        return moment
    try:
        return moment.astimezone(None if zone == 'local' else zone)
    except (OverflowError, ValueError):  # ValueError: year 0 or 10000, from some platforms' local time
        return None


MONTHS: Final = (
    'January',
    'February',
    'March',
    'April',
    'May',
    'June',
    'July',
    'August',
    'September',
    'October',
    'November',
    'December',
)
WEEKDAYS: Final = ('Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday')
_NUMBER_WORDS: Final = {
    'a': 1,
    'an': 1,
    'one': 1,
    'two': 2,
    'three': 3,
    'four': 4,
    'five': 5,
    'six': 6,
    'seven': 7,
    'eight': 8,
    'nine': 9,
    'ten': 10,
    'eleven': 11,
    'twelve': 12,
}
_COUNT = rf'(?P<n>\d{{1,2}}|{"|".join(_NUMBER_WORDS)})'
# Full names, then the short forms people type ("last Fri", "last Tues").
_WEEKDAY = rf'(?P<weekday>{"|".join(WEEKDAYS)}|Mon|Tues|Tue|Wed|Thurs|Thur|Thu|Fri|Sat|Sun)'


@dataclass(frozen=True)
class DateAnchor:
    """One relative expression of a text and what it resolves to."""

    start: int
    """Where the expression starts in the text."""
    end: int
    """Where it ends (exclusive)."""
    expression: str
    """The expression, verbatim (`Last week`)."""
    anchor: str
    """Its absolute form (`the week before 9 June 2023`)."""

    @property
    def anchored(self) -> str:
        """The expression followed by its anchor, as `anchor_text` writes it: `Last week (the week before ...)`."""
        return f'{self.expression} ({self.anchor})'


def format_day(day: date) -> str:
    """`7 May 2023` (LoCoMo's form: no leading zero, month name, four-digit year)."""
    return f'{day.day} {MONTHS[day.month - 1]} {day.year}'


def _shift(day: date, days: int) -> str | None:
    """`format_day` of `days` after `day`; `None` past either end of the calendar."""
    try:
        return format_day(day + timedelta(days=days))
    except OverflowError:
        return None


def _month(day: date, offset: int) -> str | None:
    index = day.year * 12 + day.month - 1 + offset
    return f'{MONTHS[index % 12]} {index // 12}' if MINYEAR <= index // 12 <= MAXYEAR else None


def _year(day: date, offset: int) -> str | None:
    year = day.year + offset
    return str(year) if MINYEAR <= year <= MAXYEAR else None


def _count(match: re.Match[str]) -> int:
    value = match.group('n').lower()
    return int(value) if value.isdigit() else _NUMBER_WORDS[value]


def _weekday(match: re.Match[str]) -> str:
    prefix = match.group('weekday')[:3].lower()
    return next(name for name in WEEKDAYS if name.lower().startswith(prefix))


def _direction(match: re.Match[str]) -> str:
    word = match.group('which').lower()
    return 'before' if word in ('last', 'this past', 'past') else 'after' if word == 'next' else 'of'


_Resolver = Callable[[re.Match[str], date], str | None]

# Longest expressions first: "the day before yesterday" must win over "yesterday".
_RULES: Final[tuple[tuple[str, _Resolver], ...]] = (
    (r'the day before yesterday', lambda m, d: _shift(d, -2)),
    (r'the day after tomorrow', lambda m, d: _shift(d, 2)),
    (r'yesterday|last night', lambda m, d: _shift(d, -1)),
    (r'today|tonight|this (?:morning|afternoon|evening)', lambda m, d: format_day(d)),
    (r'tomorrow', lambda m, d: _shift(d, 1)),
    (r'(?P<which>last|this past|this|next) weekend', lambda m, d: f'the weekend {_direction(m)} {format_day(d)}'),
    (r'(?P<which>last|this past|this|next) week', lambda m, d: f'the week {_direction(m)} {format_day(d)}'),
    (r'last month', lambda m, d: _month(d, -1)),
    (r'this month', lambda m, d: _month(d, 0)),
    (r'next month', lambda m, d: _month(d, 1)),
    (r'last year', lambda m, d: _year(d, -1)),
    (r'this year', lambda m, d: str(d.year)),
    (r'next year', lambda m, d: _year(d, 1)),
    (
        rf'(?P<which>last|this past|next) {_WEEKDAY}',
        lambda m, d: f'the {_weekday(m)} {_direction(m)} {format_day(d)}',
    ),
    (rf'{_COUNT} days? ago', lambda m, d: _shift(d, -_count(m))),
    (rf'{_COUNT} weeks? ago', lambda m, d: f'{m.group("n")} week{"s" * (_count(m) > 1)} before {format_day(d)}'),
    (rf'{_COUNT} months? ago', lambda m, d: _month(d, -_count(m))),
    (rf'{_COUNT} years? ago', lambda m, d: _year(d, -_count(m))),
)


def _ago(match: re.Match[str], day: date) -> str | None:
    """`N` days, weeks or months before `day`, written as the English rules write them."""
    count, unit = unit_of(match)
    if unit == 'day':
        return _shift(day, -count)
    if unit == 'week':
        return f'{count} week{"s" * (count > 1)} before {format_day(day)}'
    return _month(day, -count)


def _span(unit: str, offset: int) -> _Resolver:
    if unit == 'week':
        direction = {-1: 'before', 0: 'of', 1: 'after'}[offset]
        return lambda m, d: f'the week {direction} {format_day(d)}'
    if unit == 'month':
        return lambda m, d: _month(d, offset)
    return lambda m, d: _year(d, offset)


def _word(pattern: str) -> str:
    """`pattern` as whole words (`phrase_pattern` bounds its own, a Chinese or Japanese one not at all)."""
    return rf'\b(?:{pattern})\b'


def _day(offset: int) -> _Resolver:
    return lambda m, d: _shift(d, offset)


def _named_weekday(direction: str) -> _Resolver:
    return lambda m, d: f'the {WEEKDAYS[WEEKDAY_NUMBERS[m.group("weekday").lower()]]} {direction} {format_day(d)}'


# The same expressions in the other languages `_languages` knows (`_languages.RELATIVE_DAYS`, ...); the anchors
# stay in English, as the judge reads them.
_OTHER_LANGUAGES: Final[tuple[tuple[str, _Resolver], ...]] = (
    *((phrase_pattern(RELATIVE_DAYS[offset]), _day(offset)) for offset in (-2, 2, -1, 0, 1)),
    *((phrase_pattern(phrases), _span(unit, offset)) for (unit, offset), phrases in RELATIVE_SPANS.items()),
    *((_word(pattern), _ago) for pattern in UNITS_AGO),
    *((_word(pattern), _named_weekday('before')) for pattern in WEEKDAY_BEFORE),
    *((_word(pattern), _named_weekday('after')) for pattern in WEEKDAY_AFTER),
)
_GATED: Final[dict[str, tuple[tuple[str, _Resolver], ...]]] = {
    'fr': ((_word('hier'), _day(-1)),),
    'es': ((_word('(?<!la )(?<!esta )(?<!cada )(?<!una )mañana'), _day(1)),),
}
"""Expressions read only in a text taken for their language (`languages_of`): French `hier` is German and Dutch for
"here", Spanish `mañana` is also "morning" (not after an article: "esta mañana", this morning) and an English word."""


def _scanner(rules: tuple[tuple[str, _Resolver], ...]) -> re.Pattern[str]:
    """One scan for every rule (each bounded already): each rule is a numbered group (its own named groups made
    anonymous, as names may not repeat), and the matched rule re-reads the expression alone to get its named groups."""
    return re.compile(
        '|'.join(
            rf'(?P<r{index}>{re.sub(r"[(][?]P<[a-z]+>", "(?:", pattern)})' for index, (pattern, _) in enumerate(rules)
        ),
        re.IGNORECASE,
    )


_EVERY_LANGUAGE: Final = (*((_word(pattern), resolve) for pattern, resolve in _RULES), *_OTHER_LANGUAGES)


@functools.cache
def _expression(language: str | None = None) -> re.Pattern[str]:
    """The scan of every language's rules (`None`), or of one language's gated ones: compiled on first use, as the
    ten languages' expressions take ~30 ms to compile and most processes never read a conversation."""
    return _scanner(_EVERY_LANGUAGE if language is None else _GATED[language])


_FOLLOWING_ANCHOR: Final = re.compile(r'\s*\(')
_POSSESSIVE: Final = re.compile(r"['\u2019]s\b")


def _rule_match(
    match: re.Match[str], rules: tuple[tuple[str, _Resolver], ...]
) -> tuple[re.Match[str], _Resolver] | None:
    """The rule whose group matched, with a match of that rule alone (so its named groups can be read)."""
    for index, (pattern, resolve) in enumerate(rules):
        if match.group(f'r{index}') is not None:
            alone = re.fullmatch(pattern, match.group(0), re.IGNORECASE)
            return (alone, resolve) if alone else None
    return None


def _matches(text: str) -> list[tuple[re.Match[str], tuple[tuple[str, _Resolver], ...]]]:
    """Every expression of `text` with the rules it was found by, in text order, overlaps left to the first."""
    found = [(match, _EVERY_LANGUAGE) for match in _expression().finditer(text)]
    for language in _GATED:
        gated = [(match, _GATED[language]) for match in _expression(language).finditer(text)]
        if gated and language in languages_of(text):  # the text's language is read only when a gated word is there
            found += gated
    found.sort(key=lambda item: item[0].start())
    kept: list[tuple[re.Match[str], tuple[tuple[str, _Resolver], ...]]] = []
    for match, rules in found:
        if not kept or match.start() >= kept[-1][0].end():
            kept.append((match, rules))
    return kept


def find_anchors(text: str, when: date | datetime) -> tuple[DateAnchor, ...]:
    """The relative time expressions of `text`, each resolved against `when` (the moment the text was written).

    An expression already followed by a parenthesis is skipped (it is anchored already, e.g. a memento of
    mementos). Vague counts ("a few days ago") never match.
    """
    day = when.date() if isinstance(when, datetime) else when
    anchors: list[DateAnchor] = []
    for match, rules in _matches(text):
        # "last year's show" is anchored after the possessive: "last year's (2022) show"
        possessive = _POSSESSIVE.match(text, match.end())
        end = possessive.end() if possessive else match.end()
        if _FOLLOWING_ANCHOR.match(text, end):
            continue
        found = _rule_match(match, rules)
        if found is None:
            continue
        alone, resolve = found
        anchor = resolve(alone, day)
        if anchor:
            anchors.append(DateAnchor(match.start(), end, text[match.start() : end], anchor))
    return tuple(anchors)


def anchor_text(text: str, when: date | datetime | None) -> str:
    """`text` with each relative expression followed by its anchor in parentheses (unchanged without `when`)."""
    if when is None:
        return text
    pieces: list[str] = []
    cursor = 0
    for anchor in find_anchors(text, when):
        pieces.append(text[cursor : anchor.end])
        pieces.append(f' ({anchor.anchor})')
        cursor = anchor.end
    pieces.append(text[cursor:])
    return ''.join(pieces)
