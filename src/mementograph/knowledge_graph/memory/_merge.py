"""`_merge` -- a memento of mementos: its children's sections pooled, each item once, cut to the room it has.

When a session's mementos outgrow their share of the context, the compactor merges the oldest run of them into one.
The children are terse already. Compressed again as if their joined text were a block (the agent-trace path, which
aims at 15% of it), a merge kept no command at all (a memento's `$ pytest -> exit 1` line is not a tool call) and
every merge compounded the loss: after 13 merges of one trajectory the single memento left in context held a
fraction of its children's facts. Here the children's items are pooled section by section, each kept once (a
file nine children name is named once, a command's output lines stay under it), and chosen by importance -- the
result and the request, then must-keep facts, then command outputs and URLs, then symbols, then prose -- oldest
first within one importance, until the size the caller allows. The oldest go first because the newest facts are
also in the newer mementos and messages the merge leaves beside it.

Every item is a line or an inline item of a child, verbatim: a merge adds nothing a child did not say.
A conversation's mementos have no sections (`Name: ...` lines): their sentences are pooled instead
(`_dialogue.merge_dialogue_mementos`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from ._dialogue import merge_dialogue_mementos
from ._facts import FACT_SECTIONS, critical_facts, fact_present
from ._regions import INLINE_SEPARATORS, SECTION_LABELS, render_sections

__all__ = ('merge_mementos',)

_LABEL: Final = re.compile(rf'^({"|".join(SECTION_LABELS)}):(?: (.*))?$')
_IMPORTANCE: Final = {
    'RESULT': 0,
    'REQUEST': 0,
    'FORMULAS': 1,
    'VALUES': 1,
    'COMMANDS': 1,
    'FILES': 1,
    'ERRORS': 1,
    'TESTS': 1,
    'URLS': 2,
    'SYMBOLS': 3,
    'DECISIONS': 4,
    'OPEN': 4,
}
"""0 always kept; 1 must-keep facts (a command's error and test lines too); 2 its other output lines and URLs;
3 symbols; 4 prose (within its own allowance). The same order as the extractive compressor's priorities for a
block."""
_OUTPUT_IMPORTANCE: Final = 2
_PROSE_IMPORTANCE: Final = 4


@dataclass
class _Item:
    importance: int
    section: str
    text: str
    order: int
    tokens: int
    parent: int | None = None
    """`order` of the command an output line belongs to (kept only with it)."""


def _sections(memento: str) -> list[tuple[str, str, list[str]]] | None:
    """`(section, item, output lines)` of a memento in its order; `None` when a line stands outside any section
    (a conversation's memento: `Name: ...` lines, which this merge does not take apart)."""
    items: list[tuple[str, str, list[str]]] = []
    section: str | None = None
    for line in memento.split('\n'):
        label = _LABEL.match(line)
        if label:
            section, rest = label.group(1), label.group(2)
            if rest:
                separator = INLINE_SEPARATORS.get(section)
                pieces = rest.split(separator) if separator else [rest]
                items.extend((section, piece, []) for piece in pieces if piece.strip())
            continue
        if not line.strip():
            continue
        if section is None:
            return None
        if line.startswith('  ') and items and items[-1][0] == section == 'COMMANDS':
            items[-1][2].append(line)
            continue
        items.append((section, line, []))
    return items


def merge_mementos(
    mementos: Sequence[str],
    *,
    limit: int,
    prose_limit: int,
    count: Callable[[str], int],
    pinned: set[str] | frozenset[str] = frozenset(),
) -> str:
    """One memento holding what `mementos` (oldest first) hold, each item once, within `limit` tokens.

    Args:
        mementos: The children's texts, oldest first.
        limit: Tokens the merged memento may take.
        prose_limit: Tokens its prose (decisions, open items, the earlier children's results) may take.
        count: Counts tokens.
        pinned: Fact texts a judge named as missing: the items holding them are kept first.

    Returns:
        The merged text; for children not all made of sections, a conversation's merge
        (`merge_dialogue_mementos`), which is `''` when a child is neither (the caller then compresses the joined
        text instead).
    """
    parsed = [_sections(memento) for memento in mementos]
    if not parsed:
        return ''
    if any(items is None for items in parsed):
        return merge_dialogue_mementos(mementos, limit=limit, count=count, pinned=pinned)
    children = [items for items in parsed if items is not None]
    results = [text for items in children for section, text, _ in items if section == 'RESULT']
    requests = [text for items in children for section, text, _ in items if section == 'REQUEST']
    pool: list[_Item] = []
    index: dict[tuple[str | int, str], int] = {}  # (section, or the command an output line is under; text)

    def add(importance: int, section: str, text: str, parent: int | None = None) -> int:
        key: tuple[str | int, str] = (section if parent is None else parent, text)
        if key in index:
            return index[key]
        if any(fact in text for fact in pinned):
            importance = 0
        item = _Item(importance, section, text, len(pool), count(text) + 1, parent)
        pool.append(item)
        index[key] = item.order
        if parent is not None and importance < pool[parent].importance:
            pool[parent].importance = importance  # a pinned output line keeps its command
        return item.order

    if results:
        add(0, 'RESULT', results[-1])  # the latest state leads
    if requests:
        add(0, 'REQUEST', requests[0])  # the task as first given
    for items in children:
        for section, text, outputs in items:
            if section in ('RESULT', 'REQUEST'):
                if text in (results[-1], requests[0] if requests else None):
                    continue
                section = 'DECISIONS'  # an earlier child's result: what was true then
            command = add(_IMPORTANCE[section], section, text)
            for line in outputs:
                outcome = any(fact.kind in ('error', 'test') for fact in critical_facts(line))
                add(_IMPORTANCE['TESTS'] if outcome else _OUTPUT_IMPORTANCE, section, line, command)
            if _IMPORTANCE[section] >= _PROSE_IMPORTANCE:
                # prose may be left out for room: the facts it states get items of their own, as in a block
                covered = '\n'.join(item.text for item in pool if item.importance < _PROSE_IMPORTANCE)
                for fact in critical_facts(text):
                    if not fact_present(fact, covered):
                        fact_section, importance = FACT_SECTIONS[fact.kind]
                        add(importance, fact_section, f'$ {fact.text}' if fact.kind == 'command' else fact.text)
    selected = _select(pool, limit, prose_limit)
    text = _render(pool, selected)
    # counting each item apart can be a few tokens off: drop the least important, newest first, until it fits
    ranked = sorted(selected, key=lambda order: (pool[order].importance, order))
    while count(text) > limit and len(ranked) > 1:
        dropped = ranked.pop()
        selected -= {dropped, *(item.order for item in pool if item.parent == dropped)}
        ranked = [order for order in ranked if order in selected]
        text = _render(pool, selected)
    return text


def _select(pool: Sequence[_Item], limit: int, prose_limit: int) -> set[int]:
    selected: set[int] = set()
    used = prose = 0
    for item in sorted(pool, key=lambda item: (item.importance, item.order)):
        if item.parent is not None and item.parent not in selected:
            continue
        if item.importance >= _PROSE_IMPORTANCE and prose + item.tokens > prose_limit:
            continue
        if item.importance == 0 or used + item.tokens <= limit:
            selected.add(item.order)
            used += item.tokens
            if item.importance >= _PROSE_IMPORTANCE:
                prose += item.tokens
    return selected


def _render(pool: Sequence[_Item], selected: set[int]) -> str:
    """In the children's order, each command's output lines under it (a later child's lines under its first
    mention)."""
    outputs: dict[int, list[str]] = {}
    for item in pool:
        if item.parent is not None and item.order in selected:
            outputs.setdefault(item.parent, []).append(item.text)
    sections: dict[str, list[str]] = {label: [] for label in SECTION_LABELS}
    for item in pool:
        if item.parent is None and item.order in selected:
            sections[item.section] += (item.text, *outputs.get(item.order, ()))
    return render_sections(sections)
