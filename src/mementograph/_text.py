"""Text helpers shared by the fact and entity extractors and the compressor."""

from __future__ import annotations

__all__ = ('Blanks', 'cut_words')


class Blanks:
    """A text whose spans are blanked out one by one as extractors claim them, so later passes skip them.

    The text is rebuilt once per pass (`text`), not once per span: blanking by string slicing was quadratic on
    large tool output.
    """

    def __init__(self, text: str) -> None:
        self._chars = list(text)

    def blank(self, start: int, end: int) -> None:
        self._chars[start:end] = ' ' * (end - start)

    def window(self, start: int, end: int) -> str:
        """`text[start:end]` as it reads now (a negative `start` counts from 0, not from the end)."""
        return ''.join(self._chars[max(0, start) : end])

    @property
    def text(self) -> str:
        return ''.join(self._chars)


def cut_words(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, at the last space when one falls in the second half."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = head.rfind(' ')
    return head[:space] if space > limit // 2 else head
