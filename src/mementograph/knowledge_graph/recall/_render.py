"""`_render` -- recall results as text sized for a context window (the `recall` tool's answer)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from ..._text import echo
from ._recall import RecallHit

__all__ = ('EMPTY_QUERY', 'render_recall')

EMPTY_QUERY: Final = 'Give a query: the names, files, errors or values you are looking for.'
"""The answer to a blank query (every recall front end gives it)."""

MAX_MEMENTO_CHARS: Final = 700
"""Characters of each memento shown; the full block is one `recover_block` away."""
_QUERY_ECHO_CHARS: Final = 200
"""Characters of the query an empty answer quotes."""


def _why(hit: RecallHit) -> str:
    """Matched entities, else the first two ways the block was reached; and its similarity when vectors found it
    (a hybrid hit says both why the words and why the meaning point at it)."""
    meaning = next((reason for reason in hit.reasons if reason.startswith('dense rank')), '')
    words = ', '.join(hit.matched[:4]) or ', '.join([reason for reason in hit.reasons if reason != meaning][:2])
    return ', '.join(part for part in (words, meaning) if part) or 'text match'


def tool_call_label(hit: RecallHit) -> str:
    """How the agent gets a hit back: the `recover_block` call that recovers it."""
    return f'recover_block("{hit.memento_id or hit.block_id}")'


def render_recall(
    hits: Sequence[RecallHit],
    query: str,
    *,
    max_chars: int = 6_000,
    label: Callable[[RecallHit], str] = tool_call_label,
    since: str | None = None,
    until: str | None = None,
) -> str:
    """One entry per hit, best first: block id, score, why it matched, and its memento (cut to fit).

    Entries that would pass `max_chars` are left out and counted in a last line, so the answer never floods the
    context however large `k` is. `label` opens each entry: by default the tool call that recovers the hit, which
    a person at a terminal would rather see as an id and its session. `since` and `until`, the time range the
    recall was given, are named when nothing was found, since they may be what left it empty.
    """
    if not hits:
        quoted = echo(query, _QUERY_ECHO_CHARS)  # echoed whole, a pasted log would fill the context it was to spare
        window = ' '.join(f'{word} {value}' for word, value in (('since', since), ('until', until)) if value)
        if window:
            return f'Nothing archived {window} matches {quoted}; without the time range more may.'
        return f'Nothing archived matches {quoted}.'
    lines: list[str] = []
    used = 0
    shown = 0
    for rank, hit in enumerate(hits, start=1):
        why = _why(hit)
        memento = hit.memento.strip() or '(no memento)'
        if len(memento) > MAX_MEMENTO_CHARS:
            memento = memento[: MAX_MEMENTO_CHARS - 3].rstrip() + '...'
        when = f' {hit.started_at[:16]}' if hit.started_at else ''
        entry = f'{rank}. {label(hit)} score {hit.score:.3g}{when} -- matched: {why}\n   ' + memento.replace(
            '\n', '\n   '
        )
        if used + len(entry) > max_chars and shown:
            break
        lines.append(entry)
        used += len(entry) + 1
        shown += 1
    if shown < len(hits):
        lines.append(f'[{len(hits) - shown} more hits left out to fit; narrow the query or lower k]')
    return '\n'.join(lines)
