"""`_extract` -- the deterministic entity extractor: what a block or memento `MENTIONS`, and how often.

Kinds, and where they come from:

- **Technical** (`file`, `symbol`, `test`, `command`, `error`, `url`, `version`, `number`): the memento engine's
  critical facts (`critical_facts`), so an entity and a fact the judge checks are one definition. A command is
  keyed by its head (`git diff`, `python -m pytest`, `pytest`): the full line is in the memento and the archive,
  and the head is what a person asks about. A test line gives the tests it names and their file
  (`FAILED tests/test_a.py::test_b - ...` -> `test_b`, `tests/test_a.py`), a run summary nothing. The definitions
  a tool output shows or a command writes (`def total`, `class Cart` in a file read or a heredoc) are symbols, so
  recall by a function's name finds where the agent read or wrote it, and the files of a search's `path:line:` hits
  (`grep -rn`) are files of its block; elsewhere an output is read for its facts and words only.
- **Numbers with units and money** (`3.5 ms`, `25%`, `$5,000`), **dates** (`8 May, 2023`, `2023-05-08`,
  `May 2023`, `2022`), **quoted terms** (`"Charlotte's Web"`).
- **Names** (`person`, `place`, `organisation`, or `name` when the kind is unclear): runs of capitalised words. A
  capitalised word that only opens a sentence is an ordinary word unless the text also capitalises it elsewhere,
  so `Wow` and `Thanks` are not names while `Caroline` is. The kind is a cheap guess (a speaker prefix or a title
  means a person, `University`/`Inc` an organisation, `Lake`/`Street` or a country a place); keys do not depend on
  it.
- **Concepts**: the remaining content words, stemmed (`camping` and `camped` are one concept), at most
  `max_concepts` per text: the words people wrote (prose: the agent's narration, the user's request) first, then
  the words of tool calls and outputs, each the most frequent first. They let recall meet a question that shares
  no name with the answer ("What did Caroline research?" -> "Researching adoption agencies").

Counts are occurrences in the text (aliases count with their entity). The output is sorted and deterministic:
the same text always gives the same mentions, so a retried eviction writes the same edges.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from ..._text import IDEOGRAPHS, Blanks, ideograph_runs_apart, uppercase
from .._schema import EntityRecord, Mention
from ..memory import (
    OBSERVATION_PREFIX,
    SECTION_LABELS,
    critical_facts,
    definitions_in,
    parse_regions,
)
from ._normalize import aliases, entity_key, stopwords_for

__all__ = (
    'DEFAULT_MAX_CONCEPTS',
    'ENTITY_KINDS',
    'ExtractedEntity',
    'extract_entities',
    'mentions_for',
)

ENTITY_KINDS: Final = (
    'file',
    'symbol',
    'test',
    'command',
    'error',
    'url',
    'number',
    'version',
    'date',
    'person',
    'place',
    'organisation',
    'name',
    'term',
    'concept',
)
DEFAULT_MAX_CONCEPTS: Final = 48
"""Concepts kept per text: a long tool output would otherwise mention every word of a source file."""
_PIECE_CHARS: Final = 32_768
"""A longer text is read in pieces of about this size: each fact is counted and blanked across the text it is
found in, so one pass over a multi-megabyte tool output would cost facts x length (minutes at a few MB)."""


@dataclass(frozen=True)
class ExtractedEntity:
    """One entity found in a text: its key, a display name (first form seen), its kind and how often it occurs."""

    key: str
    name: str
    kind: str
    count: int

    def record(self) -> EntityRecord:
        """The `(:Entity)` node."""
        return EntityRecord(key=self.key, name=self.name, kind=self.kind)


_FACT_KINDS: Final = {
    'path': 'file',
    'url': 'url',
    'version': 'version',
    'error': 'error',
    'test': 'test',
    'identifier': 'symbol',
    'command': 'command',
    'number': 'number',
}
_HEADER_LINE = re.compile(r'^\[[a-z][^\]\n]{0,80}\]$', re.MULTILINE)
_LABELS = re.compile(r'^(?:' + '|'.join(SECTION_LABELS) + r'):', re.MULTILINE)
_MONTHS: Final = {
    'january': 1, 'jan': 1, 'february': 2, 'feb': 2, 'march': 3, 'mar': 3, 'april': 4, 'apr': 4, 'may': 5,
    'june': 6, 'jun': 6, 'july': 7, 'jul': 7, 'august': 8, 'aug': 8, 'september': 9, 'sep': 9, 'sept': 9,
    'october': 10, 'oct': 10, 'november': 11, 'nov': 11, 'december': 12, 'dec': 12,
}  # fmt: skip
_WEEKDAYS: Final = frozenset(
    [
        'monday',
        'tuesday',
        'wednesday',
        'thursday',
        'friday',
        'saturday',
        'sunday',
        'mon',
        'tue',
        'tues',
        'wed',
        'thu',
        'thur',
        'thurs',
        'fri',
        'sat',
        'sun',
    ]
)
_MONTH = r'(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sept?(?:ember)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)'
_DAY = r'(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?'
_YEAR = r'(?:19|20)\d{2}'
_DATE_PATTERNS: Final = (
    ('dmy', re.compile(rf'\b({_DAY})(?:\s+of)?\s+({_MONTH})\.?,?\s+({_YEAR})\b', re.IGNORECASE)),
    ('mdy', re.compile(rf'\b({_MONTH})\.?\s+({_DAY}),?\s+({_YEAR})\b', re.IGNORECASE)),
    ('iso', re.compile(rf'\b({_YEAR})[-/](0?[1-9]|1[0-2])[-/]([12]\d|3[01]|0?[1-9])\b')),
    ('dm', re.compile(rf'\b({_DAY})(?:\s+of)?\s+({_MONTH})\b')),
    ('md', re.compile(rf'\b({_MONTH})\.?\s+({_DAY})\b(?!:)')),
    ('my', re.compile(rf'\b({_MONTH}),?\s+({_YEAR})\b')),
    # a bare year, not a line number that looks like one (`  1950\tcode`, `1950:  code`, `a.py:1950:`, `1950→code`)
    (
        'y',
        re.compile(
            rf'(?<![\w.$/:-])({_YEAR})(?![\w.%/-]|\s?(?:ms|s|px|MB|GB|KB)|\t|:(?<=^\d{{4}}:)|\u2192| ?\| )',
            re.MULTILINE,
        ),
    ),
)
_MONEY = re.compile(r'(?<![\w$])([$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|m|bn|million|billion|thousand))?)(?![\w])', re.I)
_UNIT_NUMBER = re.compile(
    r'(?<![\w.$/-])(\d[\d,]*(?:\.\d+)?\s?(?:%|percent|miles?|km|kg|lbs?|pounds|mph|hours?|hrs?|minutes?|mins?|'
    r'seconds?|secs?|days?|weeks?|months?|years?|ms|GB|MB|KB|TB|dollars|bucks|pages|books|people))(?![\w])',
    re.IGNORECASE,
)
_QUOTED = re.compile(r'"([^"\n]{2,60})"|\u201c([^\u201d\n]{2,60})\u201d|(?<![\w])\'([^\'\n]{2,60})\'(?![\w])')


_NAME_TOKEN = rf"[{uppercase()}][\w'\u2019&.+-]*[\w+]"
_NAME = re.compile(
    rf"(?<![\w'\u2019])((?:(?:Mr|Mrs|Ms|Dr|Prof|St)\.\s+)?{_NAME_TOKEN}"
    rf'(?:\s+(?:(?:of|the|de|del|da|van|von|la|le|and|&)\s+)?{_NAME_TOKEN})*)'
)
_OPENERS: Final = frozenset(
    [
        'last',
        'next',
        'this',
        'that',
        'these',
        'my',
        'our',
        'your',
        'his',
        'her',
        'their',
        'happy',
        'dear',
        'good',
        'great',
        'glad',
        'sounds',
        'congrats',
        'congratulations',
        'just',
        'anyway',
        'also',
        'so',
        'well',
        'speaking',
        'btw',
        'thanks',
        'thank',
        'sorry',
    ]
)
_LETTER: Final = rf'[^\W\d_{IDEOGRAPHS}]'
_SMALL_LETTER: Final = rf'[^\W\d_{uppercase()}{IDEOGRAPHS}]'
_WORD = re.compile(
    rf"(?<![\w'\u2019])(?:{_LETTER}['\u2019](?={_LETTER}))?"  # an elided article: l', d'
    rf"({_LETTER}{_SMALL_LETTER}+(?:['\u2019]{_SMALL_LETTER}+)?)(?![\w])"
)
"""A plain word of any alphabet (group 1): a letter, then small letters (`café`, `зима`, `Flughafen`), after an
elided article or pronoun (`l'école`, `d'accord`: `école`, `accord`). Han and Hiragana text is not made of such
words (full-text search reads it a character at a time)."""
_SENTENCE_START = re.compile(r'(?:^|[.!?:]["\')\]]?\s+|^\s*[-*>]\s+|\n\s*)$')
_SPEAKER = re.compile(rf'^\s*([{uppercase()}][\w.-]*(?: [{uppercase()}][\w.-]*)?):\s', re.MULTILINE)
_TITLES: Final = frozenset({'mr', 'mrs', 'ms', 'dr', 'prof', 'sir', 'madam', 'aunt', 'uncle', 'grandma', 'grandpa'})
_ORG_WORDS: Final = frozenset(
    [
        'inc',
        'corp',
        'corporation',
        'company',
        'co',
        'ltd',
        'llc',
        'university',
        'college',
        'school',
        'institute',
        'foundation',
        'group',
        'club',
        'bank',
        'association',
        'society',
        'agency',
        'center',
        'centre',
        'museum',
        'library',
        'hospital',
        'church',
        'team',
        'band',
        'airlines',
        'studio',
        'studios',
        'labs',
        'lab',
        'ministry',
        'department',
        'council',
        'committee',
    ]
)
_PLACE_WORDS: Final = frozenset(
    [
        'city',
        'town',
        'village',
        'street',
        'st',
        'avenue',
        'ave',
        'road',
        'rd',
        'park',
        'lake',
        'river',
        'mountain',
        'mountains',
        'beach',
        'island',
        'islands',
        'county',
        'state',
        'valley',
        'bay',
        'forest',
        'canyon',
        'falls',
        'desert',
        'coast',
        'harbor',
        'harbour',
        'bridge',
        'square',
        'district',
        'province',
    ]
)
_PLACES: Final = frozenset(
    [
        'afghanistan',
        'albania',
        'algeria',
        'argentina',
        'armenia',
        'australia',
        'austria',
        'bangladesh',
        'belgium',
        'bolivia',
        'brazil',
        'bulgaria',
        'cambodia',
        'canada',
        'chile',
        'china',
        'colombia',
        'croatia',
        'cuba',
        'cyprus',
        'czechia',
        'denmark',
        'ecuador',
        'egypt',
        'england',
        'estonia',
        'ethiopia',
        'finland',
        'france',
        'germany',
        'ghana',
        'greece',
        'hungary',
        'iceland',
        'india',
        'indonesia',
        'iran',
        'iraq',
        'ireland',
        'israel',
        'italy',
        'jamaica',
        'japan',
        'jordan',
        'kenya',
        'korea',
        'latvia',
        'lebanon',
        'lithuania',
        'luxembourg',
        'malaysia',
        'mexico',
        'morocco',
        'nepal',
        'netherlands',
        'nigeria',
        'norway',
        'pakistan',
        'peru',
        'philippines',
        'poland',
        'portugal',
        'romania',
        'russia',
        'scotland',
        'serbia',
        'singapore',
        'slovakia',
        'slovenia',
        'spain',
        'sweden',
        'switzerland',
        'syria',
        'taiwan',
        'thailand',
        'turkey',
        'uganda',
        'ukraine',
        'uruguay',
        'venezuela',
        'vietnam',
        'wales',
        'zimbabwe',
        'africa',
        'asia',
        'europe',
        'america',
        'antarctica',
        'oceania',
        'london',
        'paris',
        'berlin',
        'madrid',
        'rome',
        'tokyo',
        'beijing',
        'shanghai',
        'seoul',
        'sydney',
        'melbourne',
        'toronto',
        'vancouver',
        'montreal',
        'chicago',
        'boston',
        'seattle',
        'austin',
        'denver',
        'miami',
        'atlanta',
        'dallas',
        'houston',
        'california',
        'texas',
        'florida',
        'hawaii',
        'alaska',
        'york',
        'brooklyn',
        'manhattan',
        'amsterdam',
        'barcelona',
        'lisbon',
        'dublin',
        'vienna',
        'prague',
        'budapest',
        'warsaw',
        'stockholm',
        'oslo',
        'copenhagen',
        'helsinki',
        'athens',
        'istanbul',
        'dubai',
        'mumbai',
        'delhi',
        'bangkok',
        'singapore',
    ]
)
_NOT_NAMES: Final = frozenset(
    {label.lower() for label in SECTION_LABELS}
    | {'i', "i'm", "i've", "i'd", "i'll", 'ok', 'okay', 'yes', 'no', 'hey', 'hi', 'hello', 'thanks', 'thank', 'wow'}
)


def _strip_markup(text: str) -> str:
    """Drop `[user]`-style headers, memento section labels and an observation's `<returncode>`/`<output>` tags:
    structure, not content (the tags made `returncod` and `output` concepts of nearly every agent block)."""
    return _OBSERVATION_TAGS.sub(' ', _LABELS.sub(' ', _HEADER_LINE.sub(' ', text)))


_OBSERVATION_TAGS = re.compile(r'</?(?:returncode|output|warning)>')


def _command_head(line: str) -> str | None:
    """`git diff --stat` -> `git diff`; `PYTHONPATH=. python -m pytest -x` -> `python -m pytest`; `ls` -> `ls`."""
    words = [w for w in line.strip().lstrip('$').split() if w]
    while words and (re.fullmatch(r'[A-Za-z_]\w*=\S*', words[0]) or words[0] in ('sudo', 'time', 'env', 'nohup')):
        words.pop(0)
    if not words:
        return None
    program = words[0].rsplit('/', 1)[-1]
    if not re.fullmatch(r'[\w.+-]+', program):
        return None
    rest = words[1:]
    if program.startswith('python') and len(rest) >= 2 and rest[0] == '-m':
        return f'{program} -m {rest[1]}'
    if rest and re.fullmatch(r'[a-z][a-z-]+', rest[0]) and program in _SUBCOMMAND_PROGRAMS:
        return f'{program} {rest[0]}'
    return program


_MEMENTO_COMMAND = re.compile(r'^[ \t]*\$ (.+?)(?: -> [^\n]*)?$', re.MULTILINE)
_COMMAND_SPLIT = re.compile(r'&&|\|\||;|\|')
_GREP_HIT = re.compile(r'^((?:[\w.-]+/)*[\w.-]+\.[A-Za-z]\w{0,7}):\d{1,7}[:-]', re.MULTILINE)
_MAX_SEARCHED_FILES: Final = 32
"""Files taken from one output's search hits, the first ones (a grep over a whole tree can list thousands)."""


def _files_searched(output: str) -> list[str]:
    """The files of the `path:line:` hits (`grep -rn`, ripgrep) in a tool output, each once, the first ones."""
    return list(dict.fromkeys(match.group(1) for match in _GREP_HIT.finditer(output)))[:_MAX_SEARCHED_FILES]


_TEST_NAME = re.compile(r'test_\w+|Test[A-Z0-9_]\w*')
_TEST_TOKEN = re.compile(r'[\w./:\[\]-]+')


def _tests_named(line: str) -> list[tuple[str, str]]:
    """`(kind, name)` of the tests a test line names, and of their files: `FAILED tests/test_a.py::TestA::test_b[1]`
    gives the file, `TestA` and `test_b`; `FAIL: test_b (pkg.TestA)` gives `test_b` and `TestA`; a run summary
    (`2 failed, 43 passed`) gives nothing."""
    named: list[tuple[str, str]] = []
    for token in _TEST_TOKEN.findall(line):
        parts = token.rstrip(':.,').split('::')
        if len(parts) > 1 and parts[0].endswith('.py'):
            named.append(('file', parts[0]))
        for part in parts[1:] if len(parts) > 1 else parts:
            name = part.split('[', 1)[0].rsplit('.', 1)[-1].rstrip(':.,')
            if _TEST_NAME.fullmatch(name):
                named.append(('test', name))
    return named


_EXCEPTION_CLASS = re.compile(r'((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning))\b')
_SUBCOMMAND_PROGRAMS: Final = frozenset(
    [
        'git',
        'pip',
        'pip3',
        'npm',
        'yarn',
        'pnpm',
        'cargo',
        'go',
        'docker',
        'kubectl',
        'poetry',
        'uv',
        'conda',
        'apt',
        'apt-get',
        'brew',
        'make',
        'gh',
        'systemctl',
    ]
)


class _Found:
    """Entities in order of first occurrence, counted, with their aliases."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.names: dict[str, str] = {}
        self.kinds: dict[str, str] = {}

    def add(self, kind: str, name: str, count: int = 1) -> None:
        name = name.strip()
        if not name:
            return
        key = entity_key(kind, name)
        if key.endswith(':') or len(key) > 200:
            return
        for k in (key, *aliases(kind, name)):
            self.counts[k] += count
            if k not in self.names:
                self.names[k] = name if k == key else k.split(':', 1)[1]
                self.kinds[k] = kind

    def entities(self) -> list[ExtractedEntity]:
        return [ExtractedEntity(key, self.names[key], self.kinds[key], count) for key, count in self.counts.items()]


def _iso(kind: str, groups: Sequence[str]) -> str:
    def day(text: str) -> int:
        return int(re.sub(r'\D', '', text))

    def month(text: str) -> int:
        return _MONTHS[text.lower().rstrip('.')]

    if kind == 'dmy':
        return f'{int(groups[2]):04d}-{month(groups[1]):02d}-{day(groups[0]):02d}'
    if kind == 'mdy':
        return f'{int(groups[2]):04d}-{month(groups[0]):02d}-{day(groups[1]):02d}'
    if kind == 'iso':
        return f'{int(groups[0]):04d}-{int(groups[1]):02d}-{int(groups[2]):02d}'
    if kind == 'dm':
        return f'--{month(groups[1]):02d}-{day(groups[0]):02d}'
    if kind == 'md':
        return f'--{month(groups[0]):02d}-{day(groups[1]):02d}'
    if kind == 'my':
        return f'{int(groups[1]):04d}-{month(groups[0]):02d}'
    return f'{int(groups[0]):04d}'


def _dates_into(text: str, found: _Found) -> str:
    blanks = Blanks(text)
    for kind, pattern in _DATE_PATTERNS:
        for match in pattern.finditer(blanks.text):
            found.add('date', _iso(kind, match.groups()))
            blanks.blank(match.start(), match.end())
    return blanks.text


def _guess_name_kind(name: str, before: str, speakers: set[str]) -> str:
    if any(char == '_' or char.isdigit() for char in name):  # an identifier (`CONFIG_0`), not a person or a place
        return 'name'
    words = name.lower().replace('\u2019', "'").split()
    if name in speakers or (words and words[0].rstrip('.') in _TITLES):
        return 'person'
    if words and (words[-1] in _ORG_WORDS or words[0] in _ORG_WORDS):
        return 'organisation'
    if words and (words[-1] in _PLACE_WORDS or ' '.join(words) in _PLACES or words[-1] in _PLACES):
        return 'place'
    if re.search(r'\b(?:in|at|from|to|near|visit(?:ed|ing)?|moved to)\s+$', before[-20:], re.IGNORECASE):
        return 'place'
    return 'name'


def _names_into(text: str, found: _Found, stopwords: frozenset[str]) -> str:
    speakers = {m.group(1) for m in _SPEAKER.finditer(text)}
    matches = list(_NAME.finditer(text))
    mid_sentence_caps: set[str] = set()
    blanks = Blanks(text)
    starts: list[bool] = []
    for match in matches:
        at_start = bool(_SENTENCE_START.search(text[max(0, match.start() - 4) : match.start()])) or match.start() == 0
        starts.append(at_start)
        if not at_start:
            mid_sentence_caps.update(match.group(1).split())
    for match, at_start in zip(matches, starts, strict=True):
        tokens = match.group(1).split()
        offset = match.start()
        # a sentence-opening word is a name only if the text capitalises it elsewhere too (or it is a speaker)
        while (
            tokens
            and at_start
            and (
                tokens[0].lower() in stopwords
                or tokens[0].lower() in _NOT_NAMES
                or (
                    tokens[0] not in mid_sentence_caps
                    and tokens[0] not in speakers
                    and (
                        len(tokens) == 1
                        or tokens[0].lower() in _OPENERS
                        or tokens[0].lower().endswith('ly')
                        or tokens[1].lower().rstrip('.') in _WEEKDAYS
                        or tokens[1].lower().rstrip('.') in _MONTHS
                    )
                )
            )
        ):
            offset = text.index(tokens[0], offset) + len(tokens[0])
            tokens = tokens[1:]
            at_start = False  # the word after a dropped opener is mid-sentence
        while tokens and tokens[-1].lower() in ('of', 'the', 'and', '&', 'de', 'la'):
            tokens = tokens[:-1]
        if not tokens:
            continue
        name = ' '.join(tokens)
        lowered = [t.lower().rstrip('.').replace('\u2019', "'") for t in tokens]
        if len(tokens) == 1 and (
            lowered[0] in _NOT_NAMES
            or lowered[0] in stopwords
            or lowered[0] in _WEEKDAYS
            or lowered[0] in _MONTHS
            or len(lowered[0]) < 2
        ):
            continue
        start = text.index(tokens[0], offset)
        end = start + len(name) if text.startswith(name, start) else match.end()
        found.add(_guess_name_kind(name, blanks.window(start - 20, start), speakers), name)
        blanks.blank(start, end)
    return blanks.text


def extract_entities(text: str, *, max_concepts: int = DEFAULT_MAX_CONCEPTS) -> list[ExtractedEntity]:
    """Every entity `text` mentions, with counts; sorted by key (deterministic).

    Args:
        text: A rendered block (`render_block`), a memento, or any prose.
        max_concepts: Plain-word concepts kept: prose words first, each group the most frequent first (ties: first
            seen).
    """
    text = ideograph_runs_apart(text)  # a path or name written against Chinese or Japanese text ends where it does
    stopwords = stopwords_for(text)
    found = _Found()
    concepts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for piece in _pieces(text):
        _extract_into(piece, found, concepts, first, stopwords)
    # One pass over the whole text's regions, not its pieces, so a long output gives its first definitions and
    # files only. The words people wrote (the agent's narration, the user's request) rank before those of tool
    # output and code: a source file's `self`, `def` and `import` outnumbered them, 39% of their words off the cap.
    prose_keys: set[str] = set()
    for region in parse_regions(text):
        if region.kind == 'prose':
            prose_keys.update(key for key, _ in _concept_words(region.text, stopwords))
            continue
        for definition in definitions_in(region):  # what a file read showed or a call wrote
            if definition.name is not None:
                found.add('symbol', definition.name)
        if region.kind == 'output':
            for path in _files_searched(region.text):  # `src/a.py:12:...` hits: the files a search found
                found.add('file', path)
    order = {key: index for index, key in enumerate(first)}
    ranked = sorted(concepts.items(), key=lambda item: (item[0] not in prose_keys, -item[1], order[item[0]]))
    for key, count in ranked[:max_concepts]:
        found.add('concept', first[key], count)
    return sorted(found.entities(), key=lambda entity: entity.key)


def _pieces(text: str) -> Iterator[str]:
    """`text` in line-aligned pieces of about `_PIECE_CHARS` (a line longer than that is cut inside), each after the
    header of the part it continues: the middle of a long tool output is output, not prose (read as prose, a
    source dump's every `snake_case` name was a symbol: 79,707 of them for an 8 MB file)."""
    header = '[observation]\n' if text.lstrip().startswith(OBSERVATION_PREFIX) else ''
    start = 0
    while len(text) - start > _PIECE_CHARS:
        end = text.find('\n', start + _PIECE_CHARS, start + 2 * _PIECE_CHARS)
        end = start + _PIECE_CHARS if end < 0 else end + 1
        piece = text[start:end]
        yield header + piece
        headers = _HEADER_LINE.findall(piece)
        if headers:
            header = headers[-1] + '\n'
        start = end
    yield header + text[start:]


def _extract_into(
    text: str, found: _Found, concepts: Counter[str], first: dict[str, str], stopwords: frozenset[str]
) -> None:
    """One piece's entities into `found`, and its plain words into `concepts` (chosen over all pieces)."""
    work = _strip_markup(text)
    for fact in critical_facts(text):
        kind = _FACT_KINDS.get(fact.kind)
        if kind is None:
            continue
        if kind == 'command':
            for piece in _COMMAND_SPLIT.split(fact.text):
                head = _command_head(piece)
                if head is not None:
                    found.add('command', head)
            work = work.replace(fact.text, ' ' * len(fact.text))
            continue
        if kind == 'test':  # `FAILED tests/test_a.py::test_b - ...`: the test and its file, not the line
            for name_kind, name in _tests_named(fact.text):
                found.add(name_kind, name)
            work = work.replace(fact.text, ' ' * len(fact.text))
            continue
        if kind == 'error':
            exception = _EXCEPTION_CLASS.search(fact.text)
            if exception is not None:
                found.add('error', exception.group(1))
                work = work.replace(fact.text, ' ' * len(fact.text))
                continue
        if kind == 'number':
            if re.fullmatch(r'\d{4}-\d{2}-\d{2}.*', fact.text):
                found.add('date', fact.text[:10])
                continue
            if not re.search(r'[^\d.,\s-]', fact.text):
                continue  # a bare number: too ambiguous to be an entity (line numbers, counts)
        occurrences = max(1, work.count(fact.text))
        found.add(kind, fact.text, occurrences)
        work = work.replace(fact.text, ' ' * len(fact.text))
    blanks = Blanks(work)
    for match in _MEMENTO_COMMAND.finditer(work):  # a memento's `$ command -> exit N` lines
        for piece in _COMMAND_SPLIT.split(match.group(1)):
            head = _command_head(piece)
            if head is not None:
                found.add('command', head)
        blanks.blank(match.start(), match.end())
    for pattern in (_MONEY, _UNIT_NUMBER):
        for match in pattern.finditer(blanks.text):
            found.add('number', match.group(1))
            blanks.blank(match.start(), match.end())
    work = _dates_into(blanks.text, found)
    for match in _QUOTED.finditer(work):
        term = next(group for group in match.groups() if group is not None)
        if 1 <= len(term.split()) <= 8 and re.search(r'[^\W\d_]', term):
            found.add('term', term)
    work = _names_into(work, found, stopwords)
    for key, word in _concept_words(work, stopwords):
        concepts[key] += 1
        first.setdefault(key, word)


def _concept_words(text: str, stopwords: frozenset[str]) -> Iterator[tuple[str, str]]:
    """`(key, word)` of each plain content word of `text` (stop words and words under 3 letters left out)."""
    for match in _WORD.finditer(text):
        lowered = match.group(1).lower().replace('\u2019', "'")
        word = lowered.split("'")[0]
        if len(lowered) < 3 or lowered in stopwords or word in stopwords:
            continue
        yield entity_key('concept', word), word


def mentions_for(source_id: str, text: str, *, max_concepts: int = DEFAULT_MAX_CONCEPTS) -> tuple[Mention, ...]:
    """The `MENTIONS {count}` edges from a block or memento to the entities its text names.

    This is the hook the capability's compactor calls for every block and memento it writes.
    """
    return tuple(
        Mention(source_id=source_id, entity=entity.record(), count=entity.count)
        for entity in extract_entities(text, max_concepts=max_concepts)
    )


def merge_entities(*groups: Iterable[ExtractedEntity]) -> list[ExtractedEntity]:
    """Union of entity lists by key: the larger count wins, the first name and kind seen are kept."""
    merged: dict[str, ExtractedEntity] = {}
    for group in groups:
        for entity in group:
            seen = merged.get(entity.key)
            if seen is None:
                merged[entity.key] = entity
            elif entity.count > seen.count:
                merged[entity.key] = ExtractedEntity(seen.key, seen.name, seen.kind, entity.count)
    return sorted(merged.values(), key=lambda entity: entity.key)
