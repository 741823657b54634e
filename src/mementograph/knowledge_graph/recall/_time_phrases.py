"""`_time_phrases` -- the time range a recall query names in words (`time_range_in`): a month, a part of one, a
season, a year, or a span relative to now, in English and the other languages `_languages` knows.

Apart from the query analysis (`_query`), which finds what a query is about, because this grammar is large and
mostly guards against words that look like times and are not (`may` the verb, `Summer` a person, `this march` a
protest); keeping it alone keeps those rules readable and testable through one function.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

from ..._languages import MONTHS, RELATIVE_DAYS, RELATIVE_SPANS, UNITS_AGO, phrase_pattern, unit_of
from ._time_range import TimeRange, aware, month_start, plus_days

__all__ = ('time_range_in',)

_MONTHS: Final = (
    'january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november',
    'december',
)  # fmt: skip
_UNITS: Final = {'day': 1, 'week': 7, 'month': 30, 'year': 365}
_NUMBERS: Final = {'a': 1, 'an': 1, 'one': 1, 'two': 2, 'three': 3, 'four': 4, 'five': 5, 'six': 6, 'few': 3}


def _next_month(moment: datetime) -> datetime | None:
    return month_start(moment.year + (moment.month == 12), moment.month % 12 + 1)


def time_range_in(query: str, now: datetime) -> TimeRange | None:
    """The time range a query names relative to `now`, if any: `in March` (the latest March up to now), `last May`
    (the latest May before this month; `this past May` likewise), `this May` (May of this year), `March 2021`,
    `March of '21`, `in May last year`, a part of a month (`in early March`, `late this May`, `mid-March`:
    `_MONTH_DAYS`), a season (`last summer`, `this winter`, `in the summer`, `summer 2021`, `the summer of last
    year`, `in late spring`: a northern-hemisphere meteorological one, `_season_range`), `last month`, `last week`,
    `yesterday`, `today`, `N days/weeks/months ago`, `in the past N days/weeks/months`, `in 2022`; and their like in
    the other languages `_languages` knows (`im März`, `вчера`, `il y a 3 mois`, `先月`).

    `since` before a month or a season (`since March`, `since the summer`, `since early last May`) names its start
    on: a range with no end.

    A month's name that is something else there names no month: a person (`confide in May`, `since August left`:
    `_month_named`), the march one joins (`will you join this march?`: `_last_or_this_month`).

    Ranges are generous (a day's slack on each side): a range is a hint for ranking, and people round.
    """
    text = query.lower()
    now = aware(now)
    day = timedelta(days=1)
    found = _month_named(query, now) or _season_range(query, now)
    if found is not None:
        return found
    match = re.search(r'\b(?:in|during)\s+((?:19|20)\d{2})\b', text)
    if match:
        year = int(match.group(1))
        return TimeRange(datetime(year, 1, 1, tzinfo=UTC) - day, datetime(year + 1, 1, 1, tzinfo=UTC) + day)
    if re.search(r'\byesterday\b', text):
        return TimeRange(plus_days(now, -2), now)
    if re.search(r'\btoday\b', text):
        return TimeRange(plus_days(now, -1), plus_days(now, 1))
    match = re.search(r'\blast\s+(week|month|year)\b', text)
    if match:
        return _last_range(match.group(1), now)
    match = re.search(r'\b(\d+|an?|one|two|three|four|five|six|few)\s+(day|week|month|year)s?\s+ago\b', text)
    if match:
        count = int(match.group(1)) if match.group(1).isdigit() else _NUMBERS[match.group(1)]
        return _ago_range(count, match.group(2), now)
    match = re.search(r'\b(?:past|last|previous)\s+(\d+|two|three|four|five|six|few)\s+(day|week|month|year)s\b', text)
    if match:
        count = int(match.group(1)) if match.group(1).isdigit() else _NUMBERS[match.group(1)]
        return TimeRange(plus_days(now, -count * _UNITS[match.group(2)] - 1), plus_days(now, 1))
    return _range_in_other_languages(text, now)


def _since_before(query: str, position: int) -> bool:
    """Whether `since` comes right before `position` (`since last summer`, `since the summer of 2021`)."""
    return re.search(r'\bsince\s+(?:the\s+)?$', query[:position], re.IGNORECASE) is not None


def _from_on(found: TimeRange | None, since: bool) -> TimeRange | None:
    """`found`, or with `since` from its start on (no end); `None` when that excludes nothing (before the calendar)."""
    if found is None or not since:
        return found
    return None if found.since is None else TimeRange(found.since, None)


def _named_year(text: str, now: datetime) -> int:
    """A year as a query names it: `2021`; `'21` (the latest year ending so, up to `now`); `last year`; `this year`."""
    word = text.split()[0].lower()
    if word in ('last', 'this'):
        return now.year - (word == 'last')
    number = int(text.lstrip("'\u2019"))
    return number if len(text) == 4 else now.year - (now.year - number) % 100


_MONTH_NAMES: Final = '|'.join(_MONTHS)
_MONTH_PART: Final = r'(?:(early|late|mid)[\s-]+)?'
_YEAR: Final = r'(\s+of)?\s+(\d{4}|[\'\u2019]\d{2}|(?:last|this)\s+year)\b'
"""A year after a month: `2021`, `of 2021`, `'21`, `of last year`, `this year`."""
_MONTH_DAYS: Final = {'early': (1, 11), 'mid': (11, 21), 'late': (21, None)}
"""The days a part of a month spans, `[first, next)` (`None`: to its end): `early` the first ten, `mid` the 11th
to the 20th, `late` the 21st on; with a day's slack on each side, as every range."""
_IN_THE_MONTH: Final = re.compile(
    rf'\b(in|during|of|since)\s+{_MONTH_PART}({_MONTH_NAMES})\b(?:{_YEAR})?', re.IGNORECASE
)
"""`in March`, `during late May 2021`, `in mid-March`, `since early June`, `in March of '21`, `in May last year`."""
_MONTH_OF_YEAR: Final = re.compile(rf'\b{_MONTH_PART}({_MONTH_NAMES}){_YEAR}', re.IGNORECASE)
"""`March 2021`, `March of '21`, `early May last year`, whatever comes before."""
_PART_OF_A_MONTH: Final = re.compile(rf'\b(?:(mid)[\s-]+|(early|late)-)({_MONTH_NAMES})\b', re.IGNORECASE)
"""`mid-March`, `mid May`, `early-June`: a part of the latest such month up to now, with no preposition."""


def _month_named(query: str, now: datetime) -> TimeRange | None:
    """The month a query names (`time_range_in`), a day's slack on each side, or `None`.

    "may" and "march" are also verbs: lower-case before a year without `of`, they count as the month only after a
    preposition or a determiner (`in may 2021`, not "what may 2021 bring"); after "last" or "this", as
    `_last_or_this_month` says.

    April, May, June and August are also given names: capitalised (as names are) with no part of a month and no
    year in digits, the name is a person (`_a_person`) after a word that takes one (`confide in May`, `with June
    last year`, `told August`, `asked May`; not `to` after a month: `from March to May last year`) or before a verb
    a person does (`ever since August left`, `since May said`). Elsewhere it is the month, `in May` and `since May`
    as ever: a question about time names a month far more often than a person, and a range is only a hint.
    """
    for match in _IN_THE_MONTH.finditer(query):
        preposition, part, name, _, year = match.groups()
        if part is None and _a_person(query, match.start(3), match.end(3), year):
            continue
        found = _month_range(_MONTHS.index(name.lower()) + 1, _named_year(year, now) if year else None, now, part)
        return _from_on(found, preposition.lower() == 'since')
    found = _last_or_this_month(query, now)
    if found is not None:
        return found
    for match in _MONTH_OF_YEAR.finditer(query):
        part, name, of, year = match.groups()
        if name in ('may', 'march') and of is None and part is None and not _temporal_before(query, match.start()):
            continue
        if part is None and _a_person(query, match.start(2), match.end(2), year):
            continue
        found = _month_range(_MONTHS.index(name.lower()) + 1, _named_year(year, now), now, part)
        return _from_on(found, _since_before(query, match.start()))
    bare = _PART_OF_A_MONTH.search(query)
    if bare:
        found = _month_range(_MONTHS.index(bare.group(3).lower()) + 1, None, now, bare.group(1) or bare.group(2))
        return _from_on(found, _since_before(query, bare.start()))
    return None


_GIVEN_NAMES: Final = frozenset(('april', 'may', 'june', 'august'))
"""Months that are also common given names."""
_BEFORE_A_PERSON: Final = re.compile(
    r'\b(?:(?:confide[sd]?|confiding|believe[sd]?|believing|trust(?:s|ed|ing)?)\s+in|with|to|told|tell|tells|'
    r'telling|ask|asks|asked|asking|met|meet|meets|call|calls|called|text|texts|texted|visit|visits|visited|'
    r'thank|thanks|thanked|invite|invites|invited|help|helps|helped|married)\s+$',
    re.IGNORECASE,
)
"""Words a person follows (`confide in May`, `with June`, `told August`), not a month."""
_A_MONTH_TO: Final = re.compile(rf'\b(?:{_MONTH_NAMES})\s+to\s+$', re.IGNORECASE)
"""A month and `to` right before (`from March to May`): the `to` of a range, not of a person."""
_PERSON_VERBS: Final = frozenset(
    (
        'said', 'says', 'told', 'tells', 'asked', 'asks', 'left', 'leaves', 'wants', 'wanted', 'thinks', 'thought',
        'mentioned', 'mentions', 'suggested', 'suggests', 'recommended', 'recommends', 'wrote', 'writes', 'texted',
        'texts', 'called', 'calls', 'gave', 'gives', 'sent', 'sends', 'likes', 'liked', 'loves', 'loved', 'knows',
        'knew', 'came', 'comes', 'went', 'goes', 'got', 'gets', 'moved', 'moves', 'married', 'met',
    )
)  # fmt: skip
"""Verbs a person does (`August said`, `since May left`) and a month does not; not `started` or `ended`
(`since June started` is the month)."""


def _a_person(query: str, start: int, end: int, year: str | None) -> bool:
    """Whether the month name at `query[start:end]` is a person's name instead (`_month_named`): a capitalised given
    name (`_GIVEN_NAMES`), with no year in digits after it, after a word a person follows (`_BEFORE_A_PERSON`, but
    not `to` right after a month) or before a verb a person does (`_PERSON_VERBS`)."""
    name = query[start:end]
    if name.lower() not in _GIVEN_NAMES or not name.istitle() or (year is not None and not year[0].isalpha()):
        return False  # `May 2021`, `in May of '21`: the month
    before = query[:start]
    if _BEFORE_A_PERSON.search(before) and not _A_MONTH_TO.search(before):
        return True
    following = re.match(r"\s*([^\W\d_][\w']*)", query[end:])
    return following is not None and following.group(1).lower() in _PERSON_VERBS


def _month_range(month: int, year: int | None, now: datetime, part: str | None = None) -> TimeRange | None:
    """The month (of `year`, else the latest one up to `now`), or with `part` its early, middle or late days
    (`_MONTH_DAYS`), a day's slack on each side; `None` when the calendar has no such month (`in March 0000`, or
    before a `now` in January of year 1)."""
    start = month_start(year if year is not None else (now.year if month <= now.month else now.year - 1), month)
    if start is None:
        return None
    end = _next_month(start)
    if part is not None:
        first, after = _MONTH_DAYS[part.lower()]
        end = end if after is None else start.replace(day=after)
        start = start.replace(day=first)
    return TimeRange(plus_days(start, -1), None if end is None else plus_days(end, 1))


_LAST_OR_THIS_MONTH: Final = re.compile(
    rf'\b{_MONTH_PART}(last|this\s+past|the\s+past|this)\s+{_MONTH_PART}({_MONTH_NAMES})\b(?:\s+((?:19|20)\d{{2}})\b)?',
    re.IGNORECASE,
)
_AFTER_THE_MONTH: Final = frozenset(
    (
        'about', 'after', 'and', 'because', 'before', 'but', 'during', 'from', 'on', 'since', 'than', 'that', 'to',
        'until', 'was', 'were', 'when', 'where', 'while', 'with',
    )
)  # fmt: skip
"""Words that follow the month May ("last may, when ...", "last may was") but not the verb ("this may be", "the last
may have", "this may in fact", "this may or may not"), which a verb, an adverb or a phrase like those follows."""


_DETERMINER: Final = re.compile(r"\b(?:the|a|an|that|our|my|your|his|her|their|its|[^\W\d_]+'s)\s+$", re.IGNORECASE)
"""A determiner right before: `the last march` is the final one, not the month."""
_ASKS_WHEN: Final = re.compile(r'\bwhen\b|\bwhat\s+(?:day|date|time|month|year)\b|\bhow\s+long\b', re.IGNORECASE)
"""Words that make a query a question about time: there a word in doubt (`this march`) is the month."""


def _last_or_this_month(query: str, now: datetime) -> TimeRange | None:
    """`last May` (the latest May before this month: said in May, a year ago; `this past May` likewise) or `this
    May` (May of this year); `early`, `mid` or `late` before either word (`early last March`, `this late May`)
    names that part of the month (`_MONTH_DAYS`).

    "may" is also a verb: lower-case, it counts as the month only at the end of a clause, before a year, or before
    a word that cannot follow the verb (`_AFTER_THE_MONTH`), so "this may be the cause" names no time.

    "march" is also a noun and a verb, and lower-case with no year or part of the month it is in doubt: `last
    march` is the month unless a determiner makes it the final march (`the last march`, `our last march`, as `the
    last summer`); `this march` is as often the protest ("will you join this march?"), so it is the month only in
    a question about time (`_ASKS_WHEN`: "when did we move this march") and where "may" would be. Capitalised
    (`this March`), it is the month.
    """
    for match in _LAST_OR_THIS_MONTH.finditer(query):
        before, which, after, name, year = match.groups()
        following = re.match(r"\s*([^\W\d_][\w']*)", query[match.end() :])
        unlike_the_verb = following is None or following.group(1).lower() in _AFTER_THE_MONTH
        if name.lower() == 'may' and name != 'May' and year is None and after is None and not unlike_the_verb:
            continue
        if name == 'march' and year is None and before is None and after is None:
            if which.lower() == 'last' and _DETERMINER.search(query[: match.start()]):
                continue
            if which.lower() == 'this' and not (unlike_the_verb and _ASKS_WHEN.search(query)):
                continue
        month = _MONTHS.index(name.lower()) + 1
        this = which.lower() == 'this'  # not `this past`
        number = int(year) if year else now.year if this or month < now.month else now.year - 1
        return _from_on(_month_range(month, number, now, before or after), _since_before(query, match.start()))
    return None


_SEASONS: Final = {'spring': 3, 'summer': 6, 'autumn': 9, 'fall': 9, 'winter': 12}
"""The month each season begins: northern-hemisphere meteorological seasons, three months each (spring March to
May, summer June to August, autumn September to November, winter December to February, across the new year)."""
_SEASON_NAMES: Final = '|'.join(_SEASONS)
_SEASON_PART: Final = r'(?:(early|late)[\s-]+)?'
_SEASON_OF_YEAR: Final = re.compile(
    rf'\b{_SEASON_PART}({_SEASON_NAMES})(\s+of)?\s+((?:19|20)\d{{2}}|[\'\u2019]\d{{2}}|(?:last|this)\s+year)\b'
    r'(?:\s*[/-]\s*(\d{2}|\d{4})\b)?',  # the next year, after a winter
    re.IGNORECASE,
)
"""`summer 2021`, `the summer of '21`, `early spring 2020`, `winter 2021/22`, `the summer of last year`; whatever
comes before (`last summer 2021` is the summer of 2021)."""
_LAST_OR_THIS_SEASON: Final = re.compile(
    rf'(?<!\bthe\s)\b(?:(early|late)\s+)?(last|this\s+past|the\s+past|this)\s+{_SEASON_PART}({_SEASON_NAMES})\b'
    r"(?!'?s?\s+\d{4})",
    re.IGNORECASE,
)
"""`last summer`, `this winter`, `this past fall`, `early last spring`, `last late summer`; not `the last summer`
(the final one), nor one a year follows (`_SEASON_OF_YEAR` reads that)."""
_IN_THE_SEASON: Final = re.compile(
    rf'\b(in|during|over|through|throughout|since)\s+(the\s+)?{_SEASON_PART}({_SEASON_NAMES})\b', re.IGNORECASE
)
"""`in summer`, `during the winter`, `in early spring`, `over the summer`, `since the summer`."""
_AFTER_THE_SEASON: Final = _AFTER_THE_MONTH | frozenset(
    (
        'or', 'so', 'then', 'at', 'in', 'by', 'for', 'near', 'around', 'i', 'we', 'you', 'he', 'she', 'they', 'my',
        'our', 'your', 'his', 'her', 'their',
    )
)  # fmt: skip
"""Words after which `in the summer` is the season (`in the summer with the kids`, `in summer we moved`), where
a noun would make the season a kind of thing (`in summer camp`, `in the fall colors`) or `of` another thing's
(`in the summer of my life`)."""


def _season_range(query: str, now: datetime) -> TimeRange | None:
    """The season a query names (`_SEASONS`), a day's slack on each side, or `None`:

    - with a year, anywhere (`summer 2021`, `the summer of '21`, a two-digit year being the latest such up to
      `now`; `the summer of last year`, `summer this year`): that year's; winter the one its January and February
      fall in (`winter 2021` began in December 2020, as `this winter`, said in November 2021, is that one), unless
      the next year follows (`winter 2021/22`);
    - `last summer` (`this past summer`): the latest before the season `now` is in; `this summer`: this year's
      (`_last_or_this_season`);
    - `in (the) summer`, `during the winter`: the latest that has begun by `now`, the one in progress included (as
      `in March` is), when a word that cannot follow the season as time does not follow it (`_AFTER_THE_SEASON`:
      not `in summer camp`), and not a capitalised one without `the` (`confide in Summer` is a person);
    - `early` or `late` before any of these (`in late summer`, `early last spring`): its first or last two months;
    - `since` before any of these (`since summer`, `since the summer`, `since last winter`): its start on, with no
      end.

    "fall" is also a verb: before a bare year it is the season only after a preposition or a determiner (`in fall
    2021`, not "did sales fall 2021"); after "this", as `_last_or_this_season` says.
    """
    for match in _SEASON_OF_YEAR.finditer(query):
        part, name, of, year, following = match.groups()
        if name.lower() == 'fall' and of is None and part is None and not _temporal_before(query, match.start()):
            continue
        number = _named_year(year, now)
        first = _SEASONS[name.lower()] - 1
        if first == 11 and not (following and int(following) % 100 == (number + 1) % 100):
            number -= 1  # winter 2021: December 2020 to February 2021
        return _from_on(_season_months(number * 12 + first, part), _since_before(query, match.start()))
    found = _last_or_this_season(query, now)
    if found is not None:
        return found
    for match in _IN_THE_SEASON.finditer(query):
        preposition, the, part, name = match.groups()
        if the is None and part is None and not name.islower():
            continue  # `in Summer`: a person, as likely as the season
        following = re.match(r"\s*([^\W\d_][\w']*)", query[match.end() :])
        if following is not None and following.group(1).lower() not in _AFTER_THE_SEASON:
            continue
        first = _SEASONS[name.lower()] - 1
        season = _season_now(now)
        return _from_on(_season_months(season - (season - first) % 12, part), preposition.lower() == 'since')
    return None


def _temporal_before(query: str, position: int) -> bool:
    """Whether a preposition or a determiner comes right before `position` (`in fall 2021`, `the fall 2021 term`)."""
    before = re.search(r'([^\W\d_]+)\s*$', query[:position])
    return before is not None and before.group(1).lower() in (
        'in', 'during', 'over', 'through', 'throughout', 'since', 'until', 'by', 'of', 'the', 'this', 'last', 'that',
    )  # fmt: skip


def _season_now(now: datetime) -> int:
    """When the season `now` is in began, in months since year 0 (January 2024 is in the winter of December 2023)."""
    return now.year * 12 + now.month - 1 - now.month % 3


def _season_months(start: int, part: str | None) -> TimeRange | None:
    """The three months from `start` (months since year 0), or with `part` its first (`early`) or last (`late`) two,
    a day's slack on each side; `None` when it begins before the calendar does."""
    if part is not None and part.lower() == 'late':
        start += 1
    begin = month_start(start // 12, start % 12 + 1)
    if begin is None:
        return None
    months = 3 if part is None else 2
    end = month_start((start + months) // 12, (start + months) % 12 + 1)
    return TimeRange(plus_days(begin, -1), None if end is None else plus_days(end, 1))


def _last_or_this_season(query: str, now: datetime) -> TimeRange | None:
    """`last summer` (the latest summer before this season: said in July, a year ago; in October, this year's; `this
    past summer` likewise) or `this summer` (this year's; `this winter` is the one in progress or, from March to
    November, the one that ended in February: only a season that has begun can hold a conversation).

    "fall" is also a verb ("did this fall apart"): lower-case after "this", it counts as the season only where "may"
    counts as the month (`_AFTER_THE_MONTH`).
    """
    for match in _LAST_OR_THIS_SEASON.finditer(query):
        before, which, after, name = match.groups()
        this = which.lower() == 'this'  # not `this past`
        if name == 'fall' and this and after is None:
            following = re.match(r"\s*([^\W\d_][\w']*)", query[match.end() :])
            if following is not None and following.group(1).lower() not in _AFTER_THE_MONTH:
                continue
        first = _SEASONS[name.lower()] - 1  # the month it begins, from 0
        if this:
            start = (now.year - (first == 11 and now.month != 12)) * 12 + first  # months since year 0
        else:
            season = _season_now(now)
            start = season - 1 - (season - 1 - first) % 12
        return _from_on(_season_months(start, before or after), _since_before(query, match.start()))
    return None


def _last_range(unit: str, now: datetime) -> TimeRange:
    """ "last week / month / year": up to two of them back, people being loose about which."""
    return TimeRange(plus_days(now, -(2 * _UNITS[unit] + 1)), now)


def _ago_range(count: int, unit: str, now: datetime) -> TimeRange | None:
    """`count` units before `now`, half a unit's slack on each side (a day at least); `None` before the calendar
    begins."""
    span = _UNITS[unit]
    center = plus_days(now, -count * span)
    if center is None:
        return None
    slack = max(1, span // 2)
    return TimeRange(plus_days(center, -slack), plus_days(center, slack))


def _range_in_other_languages(text: str, now: datetime) -> TimeRange | None:
    """`time_range_in` for the other languages `_languages` knows: a month after its preposition (`im März`,
    `w marcu`), yesterday, today, last week, month or year, and `N` days, weeks or months ago (digits only)."""
    for month_pattern, names in _MONTH_PATTERNS:
        match = month_pattern.search(text)
        if match:
            year = match.group(2)
            return _month_range(names.index(match.group(1)) + 1, int(year) if year else None, now)
    if _YESTERDAY.search(text):
        return TimeRange(plus_days(now, -2), now)
    if _TODAY.search(text):
        return TimeRange(plus_days(now, -1), plus_days(now, 1))
    for unit, pattern in _LAST_SPANS:
        if pattern.search(text):
            return _last_range(unit, now)
    for pattern in _AGO:
        match = pattern.search(text)
        if match:
            return _ago_range(*unit_of(match), now)
    return None


def _phrases(expressions: str) -> re.Pattern[str]:
    return re.compile(phrase_pattern(expressions), re.IGNORECASE)


_MONTH_PATTERNS: Final = tuple(
    (re.compile(rf'\b(?:{prepositions})\s+({"|".join(names)})\b(?:\s+(\d{{4}}))?'), names)
    for prepositions, names in MONTHS.values()
)
_YESTERDAY: Final = _phrases(RELATIVE_DAYS[-1])
_TODAY: Final = _phrases(RELATIVE_DAYS[0])
_LAST_SPANS: Final = tuple((unit, _phrases(RELATIVE_SPANS[unit, -1])) for unit in ('week', 'month', 'year'))
_AGO: Final = tuple(re.compile(rf'\b{pattern}', re.IGNORECASE) for pattern in UNITS_AGO)
