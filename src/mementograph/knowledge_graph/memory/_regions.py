"""`_regions` -- the headed plain text of a block read back, and the labels of a memento's sections.

Text only, no pydantic-ai: entity extraction, critical facts and recall read rendered blocks and mementos through
this module, so a process that only reads the store (the CLI's `recall`, `pages`, `stats`) never loads the agent
framework. `_render` writes the text this module parses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

__all__ = (
    'INLINE_SEPARATORS',
    'OBSERVATION_PREFIX',
    'SECTION_LABELS',
    'Region',
    'RegionKind',
    'parse_regions',
    'render_sections',
)

SECTION_LABELS: Final = (
    'RESULT',
    'REQUEST',
    'FORMULAS',
    'VALUES',
    'COMMANDS',
    'FILES',
    'SYMBOLS',
    'URLS',
    'ERRORS',
    'TESTS',
    'DECISIONS',
    'OPEN',
)
"""The fixed vocabulary a compressor adds to a memento (the judge never counts these words as invented)."""
INLINE_SEPARATORS: Final = {'FORMULAS': '; ', 'VALUES': ', ', 'FILES': ', ', 'SYMBOLS': '; ', 'URLS': ', '}
"""Sections whose items share one line (`FILES: a.py, b.py`), and what separates them; the others take a line each."""

RegionKind = Literal['prose', 'call', 'output']
"""`prose`: what a person or the model wrote; `call`: a tool call (a command); `output`: what a tool returned."""

OBSERVATION_PREFIX: Final = '<returncode>'

_HEADER = re.compile(r'^\[(system|user|assistant|thinking|observation|other|(?:call|return|retry) [^\]\n]{1,80})\]$')


@dataclass(frozen=True)
class Region:
    """One rendered part of a block: who said it and what."""

    kind: RegionKind
    """How facts are read from it (see `critical_facts`)."""
    label: str
    """The header without brackets, e.g. `assistant` or `call bash`."""
    text: str
    """The part's text, exactly as rendered."""


def _region_kind(label: str) -> RegionKind:
    if label.startswith('call '):
        return 'call'
    if label == 'observation' or label.startswith(('return ', 'retry ')):
        return 'output'
    return 'prose'


def parse_regions(text: str) -> list[Region]:
    """Split rendered text back into regions; text without headers is one region (prose, or output if it starts
    with `<returncode>`)."""
    regions: list[Region] = []
    label: str | None = None
    lines: list[str] = []

    def close() -> None:
        body = '\n'.join(lines)
        if label is None:
            if body.strip():
                kind: RegionKind = 'output' if body.lstrip().startswith(OBSERVATION_PREFIX) else 'prose'
                regions.append(Region(kind, '', body))
        else:
            regions.append(Region(_region_kind(label), label, body))

    for line in text.split('\n'):
        match = _HEADER.match(line)
        if match:
            close()
            label = match.group(1)
            lines = []
        else:
            lines.append(line)
    close()
    return regions


def render_sections(sections: Mapping[str, Sequence[str]]) -> str:
    """A memento's text from its items per section: sections in `SECTION_LABELS` order, empty ones left out; the
    result's items on its own line, inline sections' items joined on theirs (unless one spans lines), others one
    item per line under their label."""
    lines: list[str] = []
    for label in SECTION_LABELS:
        texts = sections.get(label, ())
        if not texts:
            continue
        separator = INLINE_SEPARATORS.get(label)
        if label == 'RESULT':
            lines.append(f'RESULT: {" ".join(texts)}')
        elif separator is not None and all('\n' not in text for text in texts):
            lines.append(f'{label}: {separator.join(texts)}')
        else:
            lines.append(f'{label}:')
            lines.extend(texts)
    return '\n'.join(lines)
