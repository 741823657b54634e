"""`_facts` -- critical facts: the verbatim items a memento must carry, and how their retention is measured.

A memento replaces its block in the live context; the agent then works from the memento alone (until it calls
`recover_block`). A **critical fact** is an item the agent would otherwise have to re-derive or re-run, and that a
paraphrase would corrupt. One definition serves the rubric judge (`RubricJudge`), the extractive compressor and
the `fact_retention` metric (fraction of a block's critical facts present verbatim in its memento).

What is a critical fact
-----------------------
Facts are read from the rendered block (`render_block`), whose headers say who wrote each part.

In **prose** (system, user, assistant and thinking text):

- `url` -- `http(s)://...` links.
- `path` -- file paths: a name with a known file extension (`setup.cfg`, `src/a.py`), a path starting `/`, `./`,
  `../` or `~/`, or two or more `/` between names of two or more characters (so `a/b/c` and `km/s` are not paths);
  in an inline code span also a directory such as `astropy/table`.
- `version` -- `1.2.3`-style versions and pinned requirements (`numpy==1.21`, `python>=3.9`).
- `number` -- numbers with a unit (`3.5 ms`, `12%`, `2 GB`), decimals, scientific notation, integers of two
  or more digits (line numbers, counts, issue numbers), dates and times (`2017-07-06 20:50:00`).
- `formula` -- an inline code span (`` `...` ``) or `$...$` math holding an operator between operands
  (`` `len(data.dtype) > 1` ``, `$a^2 + b^2 = c^2$`).
- `identifier` -- other inline code spans up to 100 characters, and code-shaped words outside them: dotted names
  (`np.ndarray`), `snake_case`, `CamelCase`/`camelCase`, `__dunder__`.
- `error` -- exception and error class names (`TypeError`, `django.db.utils.OperationalError`).
- `test` -- test names (`test_ndarray_mixin`).
- `exit_code` -- `exit code 1`, `exit status 2`, `returncode=0`.
- `command` -- the command lines of a fenced shell block (`bash`, `sh`, `shell`, `console`), as for tool calls.
- Quoted code in any other fenced block contributes only its error and test lines (a traceback pasted in an
  issue keeps its final `ValueError: ...` line).

In **tool calls**: each `command` line the shell reads as a command (`shell_lines`: not a comment, not a heredoc
body, not the inside of a multi-line quoted argument such as a `python -c "..."` script), the first five of them,
and the file paths named on all of those lines (the files a command touches). A non-shell tool call is one
command, `name({json args})`.

In **tool output** (returns, retry prompts and `<returncode>` observations):

- `exit_code` -- `<returncode>N</returncode>` (and the textual forms above).
- `error` -- the final line of a traceback and other exception lines (`TypeError: ...`, pytest `E   ...Error:`),
  `error:` / `fatal:` lines and shell failures (`command not found`, `No such file or directory`, `timed out`);
  counted in a long output only when it holds a traceback or the line is among its last five. At most 8 error
  lines and 10 failing tests per output (a run with 157 errors is carried by its summary line).
- `test` -- failing tests (`FAILED path::test`, `FAIL: test_x (mod.Class)`) and run summaries
  (`2 failed, 43 passed in 1.75s`, `Ran 82 tests in 0.669s`, `OK`, `FAILED (failures=1)`).
- `path` -- the files of a `diff --git` header.
- `output` -- every line of a *short* output (at most 3 non-empty lines and 300 characters): the value a
  command printed, e.g. a grep hit or what a reproduction script printed.

Each fact is one line of text taken verbatim from the block (long lines cut to a 160-character prefix), and the
facts of a block are deduplicated by text, first occurrence first.

What is deliberately not a critical fact, and why
-------------------------------------------------
- **Bulk output**: the lines of a long output (file listings, source dumps, grep floods, a 10k-line log, every
  `PASSED` line of a test run). The agent looked at them; it did not learn them. They stay byte-exact in the
  archive behind `recover_block`, and the command that produced them is a fact, so the agent can also re-run it.
  Carrying them would make the memento as large as the block, defeating eviction. (The extractive compressor
  still names the definitions a long output shows, `13: def total; 46: async def checkout`, when its size target
  leaves room: `_outline`. They are not facts the judge asks for.)
- **Warnings** (`DeprecationWarning: ...` lines): test logs repeat hundreds of them; they rarely decide anything.
- **Passing per-test lines**: the run summary (`43 passed`) carries the outcome.
- **Bodies of heredocs and multi-line quoted scripts** (a script written with `cat <<'EOF'`, `python -c "..."`):
  the command line names what was done and to which file, the file itself holds the body, and the archive holds
  the command byte for byte.
- **Quoted source code** in fenced blocks of prose and **HTML comments** (issue templates): data, not findings.
- **Plain English words and single-digit integers**: paraphrase is allowed for prose; "1 of 2" is not a value.
- **Exit codes are values**: `<returncode>1</returncode>`, `exit 1`, `exit code 1` and `rc=1` are the same fact;
  any of these forms in the memento keeps it (`fact_present`). Every other kind is matched verbatim, at word
  boundaries.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Literal

from ..._text import IDEOGRAPH_RUN, Blanks, ideograph_runs_apart
from ._regions import Region, parse_regions

__all__ = (
    'FACT_KINDS',
    'FACT_SECTIONS',
    'MUST_KEEP_KINDS',
    'Fact',
    'FactKind',
    'command_facts',
    'critical_facts',
    'exit_codes_in',
    'fact_present',
    'fact_retention',
    'missing_facts',
    'output_facts',
    'prose_facts',
    'shell_lines',
)

FactKind = Literal[
    'url', 'path', 'version', 'number', 'formula', 'identifier', 'error', 'test', 'exit_code', 'command', 'output'
]
FACT_KINDS: Final[tuple[FactKind, ...]] = (
    'url',
    'path',
    'version',
    'number',
    'formula',
    'identifier',
    'error',
    'test',
    'exit_code',
    'command',
    'output',
)
MUST_KEEP_KINDS: Final = frozenset({'formula', 'number', 'version', 'command', 'exit_code', 'error', 'test', 'path'})
"""Kinds a memento must keep: the judge deducts for any one missing, and a dialogue memento forces in the sentence
holding each."""
FACT_SECTIONS: Final[dict[str, tuple[str, int]]] = {
    'formula': ('FORMULAS', 1),
    'number': ('VALUES', 1),
    'version': ('VALUES', 1),
    'exit_code': ('VALUES', 1),
    'error': ('ERRORS', 1),
    'test': ('TESTS', 1),
    'command': ('COMMANDS', 1),
    'output': ('VALUES', 2),
    'path': ('FILES', 1),
    'url': ('URLS', 2),
    'identifier': ('SYMBOLS', 3),
}
"""The memento section a fact of each kind is listed in, and its priority there (0 first; see `_compress._Item`)."""

MAX_FACT_CHARS: Final = 160
SHORT_OUTPUT_LINES: Final = 3
SHORT_OUTPUT_CHARS: Final = 300
MAX_ERROR_LINES: Final = 8
MAX_TEST_LINES: Final = 10
MAX_COMMAND_LINES: Final = 5
TAIL_LINES: Final = 5


@dataclass(frozen=True)
class Fact:
    """One critical fact: verbatim text from the block and its kind (see the module docstring)."""

    text: str
    """One line, verbatim from the block (at most 160 characters)."""
    kind: str
    """One of `FACT_KINDS`."""


# --------------------------------------------------------------------------------------------------- patterns

_EXTENSIONS = (
    'py|pyx|pyi|pxd|ipynb|js|mjs|cjs|ts|tsx|jsx|json|jsonl|ya?ml|toml|cfg|ini|conf|txt|md|rst|c|h|cc|cpp|hpp|rs|go|'
    'java|kt|rb|php|sh|bash|zsh|html?|css|scss|sql|lock|xml|csv|tsv|log|db|sqlite|patch|diff|pem|env|po|mo|tex|'
    'bib|svg|png|jpe?g|gif|pdf|npy|npz|pkl|parquet|whl|gz|zip|tar'
)
_URL = re.compile(r'https?://[^\s<>"\'`)\]]+')
_PATH = re.compile(
    r'(?<![\w/.~-])('
    rf'(?:~|\.{{1,2}})?/?(?:[\w.@+-]+/)+[\w.@+-]+|'  # with slashes
    rf'[\w@+-]+(?:\.[\w-]+)*\.(?:{_EXTENSIONS})'  # bare file name with a known extension
    r')(?![\w/-])'
)
_KNOWN_EXT = re.compile(rf'\.(?:{_EXTENSIONS})$')
_VERSION = re.compile(
    r'(?<![\w.])(?:[A-Za-z][\w.-]*\s*(?:==|>=|<=|~=|!=)\s*\d+(?:\.\d+)*|'
    r'v?\d+\.\d+\.\d+(?:[.-]?(?:a|b|rc|dev|post)\d*)?)(?![\w.]\w|\w)'
)
_UNITS = (
    r'%|ms|µs|us|ns|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|days?|[KMGT]i?B|bytes?|px|pt|em|Hz|kHz|MHz|GHz|'
    r'°C|°F|K|mm|cm|m|km|mg|kg|g|x'
)
_NUMBER = re.compile(
    r'(?<![\w./-])(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(\s?(?:' + _UNITS + r'))?(?![\w.]\w|\w)',
)
_DATETIME = re.compile(
    r'(?<![\w.:-])(?:\d{4}-\d{2}-\d{2}(?:[ T]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?|'
    r'\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?)(?![\w.:-]\w|\w)'
)
_EXCEPTION_NAME = re.compile(r'\b(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b')
_TEST_NAME = re.compile(r'\btest_\w+')
_DOTTED = re.compile(r'(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?(?![\w.]\w|\w)')
_SNAKE = re.compile(r'(?<![\w.])_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*(?:\(\))?(?![\w])|(?<![\w.])__\w+__')
_CAMEL = re.compile(r'(?<![\w.])(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z]+[A-Z][A-Za-z0-9]*)(?:\(\))?(?![\w])')
_CODE_SPAN = re.compile(r'(?<!`)`([^`\n]{1,100})`(?!`)')
_MATH = re.compile(r'(?<![\w$])\$([^$\n]{1,100})\$(?![\w$])')
_OPERATOR = re.compile(r'[\w)\]]\s*(?:==|!=|<=|>=|\*\*|//|->|[=<>+*/%^])\s*[\w(\[-]|\w\s+-\s+\w')
_FENCE = re.compile(r'^[ \t]*(`{3,}|~{3,})[ \t]*([\w+-]*)[^\n]*$', re.MULTILINE)
_SHELL_LANGS: Final = frozenset({'bash', 'sh', 'shell', 'console', 'zsh', 'shell-session'})
_HTML_COMMENT = re.compile(r'<!--.*?-->', re.DOTALL)
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_EXIT_TAG = re.compile(r'<returncode>\s*(-?\d+)\s*</returncode>')
_EXIT_ANY = re.compile(
    r'<returncode>\s*(-?\d+)\s*</returncode>|'
    r'\b(?:exit(?:ed)?(?: with)?(?: code| status)?|return(?:ed)? code|returncode|exit_code|rc)\s*[:=]?\s*(-?\d+)\b',
    re.IGNORECASE,
)
_EXIT_PROSE = re.compile(
    r'\b(?:exit(?:ed)?(?: with)? (?:code|status)|return(?:ed)? code|returncode|exit_code)\s*[:=]?\s*-?\d+\b',
    re.IGNORECASE,
)
_ANSI = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]')
_OUTPUT_TAGS = re.compile(
    r'<returncode>\s*-?\d+\s*</returncode>|</?output(?:_head|_tail)?>|<elided_chars>.*?</elided_chars>|'
    r'<warning>.*?</warning>',
    re.DOTALL,
)
_EXCEPTION_LINE = re.compile(
    r'^(?:E\s+)?((?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception|Exit|Interrupt|Failed)(?::.*)?)$'
)
_ERROR_PREFIX = re.compile(r'^(?:error|fatal|ERROR|Error|FATAL)(?:\[\w+\])?:\s*\S')
_SHELL_FAILURE = re.compile(
    r'command not found|No such file or directory|Permission denied|unterminated|Segmentation fault|'
    r'syntax error|cannot access|not a git repository|timed out|Killed'
)
_PYTEST_FAILED = re.compile(r'^((?:FAILED|ERROR) [\w./\[\]-]+(?:::[^\s]+)?)')
_UNITTEST_FAILED = re.compile(r'^((?:FAIL|ERROR): \w+ \([\w.]+\))')
_SUMMARY_LINE = re.compile(
    r'\d+ (?:passed|failed|errors?|error|skipped|xfailed|xpassed|deselected|warnings?|exceptions?)\b|'
    r'no tests ran|tests finished'
)
_UNITTEST_SUMMARY = re.compile(r'^(Ran \d+ tests? in [\d.]+s|OK(?: \([^)]*\))?|FAILED \([^)]*\))$')
_DIFF_HEADER = re.compile(r'^diff --git a/(\S+) b/\S+')


# --------------------------------------------------------------------------------------------------- helpers


_SEPARATORS: Final = './\\:(-=,[<'
"""Where a long name may be cut when no space is near the limit: after any of these, a word ends."""


def _cut(text: str) -> str:
    """A fact is one line, at most `MAX_FACT_CHARS`: longer lines keep a verbatim prefix ending at a word, else
    after a separator (`.`, `/`, `(`, ...) of a long name, so the prefix still ends where a word of its own line
    does: a prefix cut inside a word never matched the line it came from at a word boundary (`fact_present`)."""
    text = text.strip()
    if len(text) <= MAX_FACT_CHARS:
        return text
    head = text[:MAX_FACT_CHARS]
    space = head.rfind(' ')
    if space >= MAX_FACT_CHARS // 2:
        return head[:space].rstrip()
    separator = max(head.rfind(char) for char in _SEPARATORS)
    if separator >= MAX_FACT_CHARS // 2:
        return head[: separator + 1]
    return head  # one word longer than the limit: `fact_present` takes a prefix of that length


class _Collector:
    """Collects facts in order, deduplicated by text; masks matched spans so one span yields one fact."""

    def __init__(self) -> None:
        self.facts: list[Fact] = []
        self._seen: set[str] = set()

    def add(self, text: str, kind: FactKind) -> None:
        text = _cut(text)
        if text and text not in self._seen:
            self._seen.add(text)
            self.facts.append(Fact(text, kind))


def _path_like(text: str) -> bool:
    if _URL.fullmatch(text):
        return False
    match = _PATH.fullmatch(text)
    if not match or not re.search(r'[A-Za-z]', text):
        return False
    if text.startswith(('/', './', '../', '~/')):
        return True
    names = [part for part in text.split('/') if part]
    named_file = bool(_KNOWN_EXT.search(text)) and (
        len(names[-1].split('.')[0]) >= 2 or any(len(part) >= 2 for part in names[:-1])
    )
    if text.count('/') >= 2:
        return named_file or all(len(part) >= 2 for part in names)
    return named_file


def _directory_like(span: str) -> bool:
    """A quoted directory such as `astropy/table`: slash-separated names of two or more characters each."""
    parts = [part for part in span.strip('/').split('/') if part not in ('', '.', '..', '~')]
    return (
        '/' in span
        and len(parts) >= 2
        and all(re.fullmatch(r'[\w.@+-]{2,}', part) for part in parts)
        and bool(re.search('[A-Za-z]', span))
    )


def _classify_span(span: str) -> FactKind:
    if _URL.fullmatch(span):
        return 'url'
    if _path_like(span) or _directory_like(span):
        return 'path'
    if _VERSION.fullmatch(span):
        return 'version'
    if _EXCEPTION_NAME.fullmatch(span):
        return 'error'
    if _TEST_NAME.fullmatch(span):
        return 'test'
    if _OPERATOR.search(span) and not span.startswith(('-', '--')):
        return 'formula'
    if re.fullmatch(r'-?\d+(?:\.\d+)?', span):
        return 'number'
    return 'identifier'


def _fences(text: str) -> Iterator[tuple[int, int, str, str]]:
    """Fenced blocks as `(start, end, language, body)`; an unclosed fence runs to the end of the text."""
    pos = 0
    while True:
        opening = _FENCE.search(text, pos)
        if opening is None:
            return
        marker = opening.group(1)
        closing = re.compile(rf'^[ \t]*{re.escape(marker[0])}{{{len(marker)},}}[ \t\r]*$', re.MULTILINE)
        close = closing.search(text, opening.end())
        body_start = opening.end() + 1
        if close is None:
            yield opening.start(), len(text), opening.group(2).lower(), text[body_start:]
            return
        yield opening.start(), close.end(), opening.group(2).lower(), text[body_start : close.start()]
        pos = close.end()


def _quote_state(line: str, state: str) -> str:
    """Track shell quoting across a line: `state` is '', "'" or '"' (the quote open at the line's start)."""
    escaped = False
    previous = ' '
    for char in line:
        if escaped:
            escaped = False
        elif char == '\\' and state != "'":
            escaped = True
        elif state:
            if char == state:
                state = ''
        elif char in '\'"':
            state = char
        elif char == '#' and previous.isspace():
            break  # a comment: quotes after it do not count
        previous = char
    return state


def shell_lines(command: str) -> list[str]:
    """The lines of a command that the shell reads as commands: not comments, not heredoc bodies, not the inside
    of a multi-line quoted argument (a `python -c "..."` script). Stripped, in order."""
    lines = command.splitlines()
    found: list[str] = []
    state = ''
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        at_shell_level = not state
        state = _quote_state(line, state)
        stripped = line.strip()
        if not at_shell_level or not stripped or stripped.startswith('#'):
            continue
        found.append(stripped)
        heredoc = _HEREDOC.search(line)
        if heredoc and not state:
            delimiter = heredoc.group(2)
            while index < len(lines) and lines[index].strip() != delimiter:
                index += 1
            index += 1
    return found


def _command_lines_into(command: str, collector: _Collector) -> None:
    lines = shell_lines(command)
    for line in lines[:MAX_COMMAND_LINES]:
        collector.add(line, 'command')
    for line in lines:
        _paths_in(line, collector)


def _paths_in(text: str, collector: _Collector) -> None:
    for match in _PATH.finditer(text):
        candidate = match.group(1).rstrip('.')
        if _path_like(candidate):
            collector.add(candidate, 'path')


# --------------------------------------------------------------------------------------------------- extractors


def _prose_into(text: str, collector: _Collector) -> None:
    text = _HTML_COMMENT.sub(lambda m: ' ' * len(m.group(0)), text)
    blanks = Blanks(text)
    for start, end, language, body in list(_fences(text)):
        if language in _SHELL_LANGS:
            _command_lines_into(body, collector)
        else:
            _salient_into(body, collector, whole=True)
        blanks.blank(start, end)
    for regex in (_CODE_SPAN, _MATH):
        for match in regex.finditer(blanks.text):
            span = match.group(1).strip()
            if span:
                kind: FactKind = 'formula' if regex is _MATH and _OPERATOR.search(span) else _classify_span(span)
                if regex is _MATH and kind != 'formula':
                    continue
                collector.add(span, kind)
                blanks.blank(match.start(), match.end())
    for match in _URL.finditer(blanks.text):
        collector.add(match.group(0).rstrip('.,;:'), 'url')
        blanks.blank(match.start(), match.end())
    for match in _EXIT_PROSE.finditer(blanks.text):
        collector.add(match.group(0), 'exit_code')
        blanks.blank(match.start(), match.end())
    for match in _PATH.finditer(blanks.text):
        candidate = match.group(1).rstrip('.')
        if _path_like(candidate):
            collector.add(candidate, 'path')
            blanks.blank(match.start(1), match.start(1) + len(candidate))
    for match in _VERSION.finditer(blanks.text):
        collector.add(match.group(0), 'version')
        blanks.blank(match.start(), match.end())
    for match in _DATETIME.finditer(blanks.text):
        collector.add(match.group(0), 'number')
        blanks.blank(match.start(), match.end())
    for match in _EXCEPTION_NAME.finditer(blanks.text):
        collector.add(match.group(0), 'error')
        blanks.blank(match.start(), match.end())
    for match in _TEST_NAME.finditer(blanks.text):
        collector.add(match.group(0), 'test')
        blanks.blank(match.start(), match.end())
    for regex in (_DOTTED, _SNAKE, _CAMEL):
        for match in regex.finditer(blanks.text):
            name = match.group(0)
            if regex is _DOTTED and min(len(part) for part in name.removesuffix('()').split('.')) < 2:
                continue  # e.g., i.e.
            collector.add(name, 'identifier')
            blanks.blank(match.start(), match.end())
    for match in _NUMBER.finditer(blanks.text):
        value, unit = match.group(1), match.group(2)
        if unit or '.' in value or 'e' in value.lower() or len(value.lstrip('-')) >= 2:
            collector.add(match.group(0), 'number')


def _segments(line: str) -> list[str]:
    """The ANSI-free pieces of a line (colour codes split a line; facts never span them)."""
    return [piece for piece in _ANSI.split(line) if piece.strip()]


def _salient_into(body: str, collector: _Collector, *, whole: bool) -> None:
    """Error and test lines of an output (or of quoted code when `whole`), and diff headers."""
    lines = [line for line in body.splitlines() if line.strip()]
    has_traceback = 'Traceback (most recent call last)' in body
    tail_start = len(lines) - TAIL_LINES
    errors = tests = 0
    for number, line in enumerate(lines):
        in_tail = number >= tail_start
        for segment in _segments(line):
            stripped = segment.strip()
            exception = _EXCEPTION_LINE.match(stripped)
            if exception and (has_traceback or in_tail or stripped.startswith('E ') or whole):
                if errors < MAX_ERROR_LINES:
                    collector.add(exception.group(1), 'error')
                    errors += 1
                continue
            failed = _PYTEST_FAILED.match(stripped) or _UNITTEST_FAILED.match(stripped)
            if failed:
                if tests < MAX_TEST_LINES:
                    collector.add(failed.group(1), 'test')
                    tests += 1
                continue
            unittest_summary = _UNITTEST_SUMMARY.match(stripped)
            if unittest_summary:
                collector.add(unittest_summary.group(1), 'test')
                continue
            if _SUMMARY_LINE.search(stripped) and (stripped.startswith(('=', 'collected')) or in_tail):
                collector.add(stripped.strip('= '), 'test')
                continue
            if (_ERROR_PREFIX.match(stripped) or _SHELL_FAILURE.search(stripped)) and (has_traceback or in_tail):
                if errors < MAX_ERROR_LINES:
                    collector.add(stripped, 'error')
                    errors += 1
                continue
            diff = _DIFF_HEADER.match(stripped)
            if diff:
                collector.add(diff.group(1), 'path')


def _output_into(text: str, collector: _Collector) -> None:
    for match in _EXIT_ANY.finditer(text[:200]):
        collector.add(match.group(0), 'exit_code')
        break
    body = _OUTPUT_TAGS.sub('\n', text)
    _salient_into(body, collector, whole=False)
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    if 0 < len(lines) <= SHORT_OUTPUT_LINES and sum(len(line) for line in lines) <= SHORT_OUTPUT_CHARS:
        for line in lines:
            for segment in _segments(line):
                collector.add(segment, 'output')


def _command_into(command: str, collector: _Collector) -> None:
    _command_lines_into(command, collector)


_Reader = Literal['call', 'output', 'prose']
_READERS: Final = {'call': _command_into, 'output': _output_into, 'prose': _prose_into}


def _reader_of(region: Region) -> _Reader:
    return 'call' if region.kind == 'call' else 'output' if region.kind == 'output' else 'prose'


def _region_into(region: Region, collector: _Collector) -> None:
    _read_into(_reader_of(region), region.text, collector)


class _Recorder(_Collector):
    """What a reader adds, in order, as it adds it (before cutting and deduplication, which the caller does)."""

    def __init__(self) -> None:
        super().__init__()
        self.added: list[tuple[str, FactKind]] = []

    def add(self, text: str, kind: FactKind) -> None:
        self.added.append((text, kind))


_CACHED_REGION_CHARS: Final = 4_000
"""Regions up to this size keep what they add in a cache (at most ~8 MB of text): the same message is read again
at every compaction of a growing history (segmentation, then each candidate block, then its memento), often as a
new object (pydantic-ai copies messages), so caching by identity misses them."""


@functools.lru_cache(maxsize=2048)
def _region_adds(kind: _Reader, text: str) -> tuple[tuple[str, FactKind], ...]:
    recorder = _Recorder()
    _READERS[kind](text, recorder)
    return tuple(recorder.added)


def _read_into(kind: _Reader, text: str, collector: _Collector) -> None:
    if len(text) > _CACHED_REGION_CHARS:
        _READERS[kind](text, collector)
        return
    for fact_text, fact_kind in _region_adds(kind, text):
        collector.add(fact_text, fact_kind)


def _facts(kind: _Reader, text: str) -> list[Fact]:
    collector = _Collector()
    _read_into(kind, text, collector)
    return collector.facts


def prose_facts(text: str) -> list[Fact]:
    """Critical facts of prose (what a person or the model wrote)."""
    return _facts('prose', text)


def command_facts(command: str) -> list[Fact]:
    """Critical facts of a command: its first command line and the files it names."""
    return _facts('call', command)


def output_facts(text: str) -> list[Fact]:
    """Critical facts of a tool output: exit code, error and test lines, diff files, short outputs."""
    return _facts('output', text)


def critical_facts(text: str) -> list[Fact]:
    """The critical facts of a text, in order of first occurrence, deduplicated by text.

    `text` is normally a block rendered by `render_block`; headed regions are read by their kind (prose, tool call,
    tool output). Text without headers is read as prose (or as output when it starts with `<returncode>`).
    See the module docstring for the definition and for what is deliberately left out.
    """
    if len(text) > _CACHED_TEXT_CHARS:
        return list(_read_facts(text))
    return list(_cached_facts(text))


_CACHED_TEXT_CHARS: Final = 200_000
"""Texts up to this size keep their facts in a small cache: a block's text is read by the compressor, the judge and
the entity extractor in turn. Larger ones are read each time, so the cache never holds megabytes of text alive."""


@functools.lru_cache(maxsize=64)
def _cached_facts(text: str) -> tuple[Fact, ...]:
    return _read_facts(text)


def _read_facts(text: str) -> tuple[Fact, ...]:
    collector = _Collector()
    # a path or value written against Chinese or Japanese text (`放在scripts/migrate.py里面`) ends where it does
    for region in parse_regions(ideograph_runs_apart(text)):
        _region_into(region, collector)
    return tuple(collector.facts)


# --------------------------------------------------------------------------------------------------- presence


def exit_codes_in(text: str) -> set[int]:
    """Every exit code a text states, in any accepted form (`<returncode>1</returncode>`, `exit 1`, `rc=1`, ...)."""
    codes: set[int] = set()
    for match in _EXIT_ANY.finditer(text):
        value = match.group(1) if match.group(1) is not None else match.group(2)
        codes.add(int(value))
    return codes


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == '_'  # what `re`'s `\w` matches


def _continues(edge: str, neighbour: str) -> bool:
    """Whether `neighbour` continues the word that ends (or starts) with `edge`: both are word characters, and both
    or neither are Han or Hiragana, which Chinese and Japanese write against other words with no space between."""
    return _is_word_char(neighbour) and bool(IDEOGRAPH_RUN.match(edge)) == bool(IDEOGRAPH_RUN.match(neighbour))


def _verbatim_in(fact_text: str, text: str) -> bool:
    """Whether `fact_text` occurs in `text` at word boundaries (a word character at either end of the fact must not
    continue a word of `text`); `str.find`, since a pattern with a look-behind is tried at every position."""
    first, last = fact_text[:1], fact_text[-1:]
    bounded_start = _is_word_char(first)
    # a fact of the full length may be a word cut at the limit (`_cut`): it ends where the cut did
    bounded_end = _is_word_char(last) and len(fact_text) < MAX_FACT_CHARS
    width = len(fact_text)
    start = text.find(fact_text)
    while start >= 0:
        end = start + width
        if not (bounded_start and start > 0 and _continues(first, text[start - 1])) and not (
            bounded_end and end < len(text) and _continues(last, text[end])
        ):
            return True
        start = text.find(fact_text, start + 1)
    return False


def fact_present(fact: Fact, text: str) -> bool:
    """Whether `text` (a memento) carries `fact`: verbatim at word boundaries; exit codes by value, in any form."""
    if fact.kind == 'exit_code':
        codes = exit_codes_in(fact.text)
        return bool(codes) and codes <= exit_codes_in(text)
    return _verbatim_in(fact.text, text)


def missing_facts(facts: Iterable[Fact], memento_text: str) -> list[Fact]:
    """The facts `memento_text` does not carry."""
    return [fact for fact in facts if not fact_present(fact, memento_text)]


def fact_retention(block_text: str, memento_text: str) -> float:
    """Fraction of the block's critical facts present in the memento (1.0 when the block has none)."""
    facts = critical_facts(block_text)
    if not facts:
        return 1.0
    kept = sum(1 for fact in facts if fact_present(fact, memento_text))
    return kept / len(facts)
