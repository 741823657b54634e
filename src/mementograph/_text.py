"""Text helpers shared by the fact and entity extractors, the compressor, full-text search and recall."""

from __future__ import annotations

import functools
import re
from typing import Final

__all__ = (
    'IDEOGRAPHS',
    'IDEOGRAPH_RUN',
    'Blanks',
    'character_pairs',
    'cut_words',
    'echo',
    'ideograph_runs_apart',
    'uppercase',
    'without_particle',
)

IDEOGRAPHS: Final = '\u3040-\u309f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f'
"""Han ideographs and Hiragana, as the body of a regular-expression class. Chinese and Japanese put no spaces
between words, and Lucene's standard analyzer reads each of these characters as a word of its own (Katakana and
Hangul runs it keeps whole, as FTS5 does)."""
IDEOGRAPH_RUN: Final = re.compile(f'[{IDEOGRAPHS}]+')


@functools.cache
def uppercase() -> str:
    """Every capital letter (Unicode `isupper` over the Basic Multilingual Plane) as the body of a regular-expression
    class of ranges: `re` has no `\\p{Lu}`, and a name may begin with `É`, `Ł` or a Cyrillic capital, not only
    `A`-`Z`. Built when first asked for (~6 ms), by the extractors that compile it into their patterns, not by
    every process that imports this module."""
    ranges: list[tuple[int, int]] = []
    for code in range(0x10000):
        if chr(code).isupper():
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return ''.join(re.escape(chr(a)) if a == b else f'{re.escape(chr(a))}-{re.escape(chr(b))}' for a, b in ranges)


def character_pairs(run: str) -> list[str]:
    """The overlapping pairs of characters of a run of Han or Hiragana (`数据库` -> `数据`, `据库`), or the run when it is
    one character: how full-text search and a dialogue memento's weights read text that has no spaces."""
    return [run] if len(run) < 2 else [run[i : i + 2] for i in range(len(run) - 1)]


_HANGUL_WORD: Final = re.compile('[\uac00-\ud7a3]{3,}')
_PARTICLE_WORDS: Final = """에서는 에게서 으로는 에서 에게 한테 께서 으로 부터 까지 처럼 보다 마다 이나 이랑 하고 와 과 은 는 이 가 을 를
의 에 로 도 만 랑"""
_PARTICLES: Final = tuple(sorted(_PARTICLE_WORDS.split(), key=len, reverse=True))
"""Korean particles, which are written onto the noun they follow (`서울에서`, "in Seoul"), longest first."""


def without_particle(word: str) -> str:
    """A Korean word without the particle written onto it (`서울에서` -> `서울`, `회의가` -> `회의`) when two syllables
    or more remain, so that one noun is one entity and one search term whatever particle it carries; any other word
    as it is. A noun that ends like a particle (`고양이`, "cat") loses that syllable the same way wherever it is read,
    so it still meets itself."""
    if not _HANGUL_WORD.fullmatch(word):
        return word
    for particle in _PARTICLES:
        if word.endswith(particle) and len(word) - len(particle) >= 2:
            return word[: -len(particle)]
    return word


def ideograph_runs_apart(text: str) -> str:
    """`text` with a space before and after each run of Han ideographs or Hiragana, so that a name, path or word
    written against them (`用cat命令查看config.yaml`) has the boundaries that `\\b` and `\\w` patterns need."""
    if text.isascii():
        return text
    return IDEOGRAPH_RUN.sub(r' \g<0> ', text)


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


ECHO_CHARS: Final = 80
"""How much of an argument an error message repeats: an id is 28 characters; a pasted log is not repeated whole."""


def echo(value: object, limit: int = ECHO_CHARS) -> str:
    """`repr(value)` as an error message quotes it, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else f'{text[: limit - 4]}...{text[-1]}'
