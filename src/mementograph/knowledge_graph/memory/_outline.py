"""`_outline` -- the definitions a tool output shows or a call writes: what a memento keeps of a file read or written.

Bulk output is not a critical fact (`_facts`): the agent looked at a source dump, it did not learn it, and the
dump stays byte-exact behind `recover_block`. But a memento that keeps only `$ nl -ba src/app.py | sed -n
'120,260p' -> exit 0` tells the agent nothing of what it saw there, so it reads the file again. The outline is the
middle ground: each definition the output shows (`def`, `class`, `function`, `fn`, `struct`, ...) as its keywords
and name, verbatim, with the line number the command printed (`nl`, `cat -n`, `grep -n`), so the memento says
what is defined where (`13: def total; 46: async def checkout`) in a few tokens. Signatures are left out: full
definition lines cost 0.9 points of critical facts in the replayed agents' last contexts, the heads 0.6. Code a
call writes (a heredoc's file, a `python - <<EOF` script, the `content` of a pydantic-ai `write_file` tool) is
outlined the same way, under its call.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Final

from ..._text import cut_words
from ._regions import Region, parse_regions

__all__ = (
    'MAX_DEFINITIONS',
    'Definition',
    'definitions_in',
    'definitions_shown',
    'definitions_written',
    'outline',
    'without_outlines',
    'written_outline',
)

MAX_DEFINITIONS: Final = 8
"""Definitions kept of one output: the first ones, in the order the output shows them."""
_MIN_OUTPUT_LINES: Final = 4
"""A shorter output is kept whole as a critical fact already."""
_MAX_HEAD_CHARS: Final = 60
"""A definition without a name (`impl<T> Display for Tree<T> {`) is cut to this many characters."""

# `nl -ba` and `cat -n` print `   120\tcode`, agents' file viewers `   120→code` or `120 | code`; `grep -n` prints
# `120:code` (and `120-code` for context lines), `grep -rn` `path:120:code`.
_NUMBERED: Final = re.compile(r'^\s*(\d{1,7})(?:\t| ?\u2192| ?\| ?)(.*)$')
_GREP: Final = re.compile(r'^((?:[^\s:]+:)?\d{1,7})[:-](.*)$')
_MODIFIERS: Final = (
    r'(?:(?:export|default|pub(?:\([\w:]+\))?|public|private|protected|internal|static|abstract|final|sealed|'
    r'async|unsafe|extern|override|virtual|open|data)\s+)*'
)
_KEYWORDS: Final = r'(?:def|class|function\*?|fn|struct|enum|trait|interface|func|record|object|module|mod)'
# the head of a definition: modifiers, keyword, then a name (a Go method's receiver comes before its name),
# followed by code, not prose: "function returns the value" or "record the time" in a log is no definition
_NAMED_HEAD: Final = rf'{_MODIFIERS}{_KEYWORDS}\s+(?:\([^()]*\)\s*)?([A-Za-z_]\w*)'
_NAMED: Final = re.compile(rf'{_NAMED_HEAD}(?=\s*(?:[(:{{<\[=;]|extends\b|implements\b|$))')
_UNNAMED: Final = re.compile(rf'{_MODIFIERS}impl\b.*\{{\s*$')
_JSON_CALL: Final = re.compile(r'[\w.:-]{1,80}\((\{.*\})\)', re.DOTALL)
"""A non-shell tool call as rendered (`write_file({"path": ..., "content": ...})`)."""
_HEAD: Final = re.compile(rf'(?:(?:[^\s:;]+:)?\d{{1,7}}: )?(?:{_NAMED_HEAD}|{_MODIFIERS}impl\b[^;]*)')
"""One entry of an outline line as the compressor writes it (`13: def total`)."""


@dataclass(frozen=True)
class Definition:
    """One definition an output shows."""

    where: str
    """The line number the command printed (`path:number` for `grep -rn`), or `''`."""
    head: str
    """Its modifiers, keyword and name, verbatim (`async def checkout`); a nameless one's line, cut."""
    name: str | None
    """The defined name (`checkout`); `None` for an `impl` block."""

    def __str__(self) -> str:
        return f'{self.where}: {self.head}' if self.where else self.head


def outline(output: str, *, limit: int = MAX_DEFINITIONS) -> list[Definition]:
    """The definitions a tool output shows, each once, at most `limit`, first ones first.

    Outputs of fewer than `_MIN_OUTPUT_LINES` non-empty lines give none: they are kept whole as critical facts.
    """
    lines = [line for line in output.splitlines() if line.strip()]
    if len(lines) < _MIN_OUTPUT_LINES:
        return []
    found: list[Definition] = []
    seen: set[str] = set()
    for line in lines:
        where, code = _split_number(line)
        code = code.strip()
        named = _NAMED.match(code)
        if named:
            head, name = code[: named.end()], named.group(1)
        elif _UNNAMED.match(code):
            head, name = cut_words(code.rstrip(' {'), _MAX_HEAD_CHARS), None
        else:
            continue
        if head in seen:
            continue
        seen.add(head)
        found.append(Definition(where, head, name))
        if len(found) >= limit:
            break
    return found


def definitions_in(region: Region, *, limit: int = 4 * MAX_DEFINITIONS) -> list[Definition]:
    """The definitions one region of a rendered block holds, `limit` at most: those a tool output shows (what the
    agent read: a file, a grep of code), those a tool call writes (a heredoc's file, a `python - <<EOF` script, a
    `write_file(path, content)` tool's content); none in prose."""
    if region.kind == 'output':
        return outline(region.text, limit=limit)
    if region.kind == 'call':
        return written_outline(region.text, limit=limit)
    return []


def definitions_shown(text: str, *, limit: int = 4 * MAX_DEFINITIONS) -> list[Definition]:
    """The definitions the tool outputs of a rendered block (`render_block`) show, `limit` an output at most."""
    return [d for region in parse_regions(text) if region.kind == 'output' for d in definitions_in(region, limit=limit)]


def definitions_written(text: str, *, limit: int = 4 * MAX_DEFINITIONS) -> list[Definition]:
    """The definitions the tool calls of a rendered block write, `limit` a call at most."""
    return [d for region in parse_regions(text) if region.kind == 'call' for d in definitions_in(region, limit=limit)]


def written_outline(call: str, *, limit: int = MAX_DEFINITIONS) -> list[Definition]:
    """The definitions a tool call writes: in a shell command's own lines, or in the multi-line string arguments
    of a `name({json})` call (a `write_file` tool's `content` is one escaped JSON string, not lines)."""
    found: list[Definition] = []
    for code in _code_of(call):
        found.extend(outline(code, limit=limit - len(found)))
        if len(found) >= limit:
            break
    return found


def _code_of(call: str) -> list[str]:
    match = _JSON_CALL.fullmatch(call)
    if match is None:
        return [call]
    try:
        arguments = json.loads(match.group(1))
    except ValueError:
        return [call]
    return [value for value in _strings(arguments) if '\n' in value]


def _strings(value: object) -> list[str]:
    """Every string in a JSON value, in order (a stack, not recursion: arguments can nest deep)."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return found


def without_outlines(memento: str) -> str:
    """`memento` without the outline lines the extractive compressor wrote (`  13: def total; 46: async def
    checkout`): what a memento of mementos is made from. Its facts are the mementos' facts, and an outline's line
    numbers would become bare values there (`VALUES: 13, 46`), out of the context that made them mean something."""
    return '\n'.join(line for line in memento.split('\n') if not _is_outline(line))


def _is_outline(line: str) -> bool:
    return line.startswith('  ') and all(_HEAD.fullmatch(piece) for piece in line[2:].split('; '))


def _split_number(line: str) -> tuple[str, str]:
    """`(line number or path:number, code)`; `('', line)` when the line carries no number."""
    for pattern in (_NUMBERED, _GREP):
        match = pattern.match(line)
        if match:
            return match.group(1), match.group(2)
    return '', line
