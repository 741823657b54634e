"""`_query` -- what a recall query asks for: entity keys to match (exact, normalised, fuzzy) and words for BM25 (the
time range it names is `_time_phrases`'s).

A query is short and typed by a person or a model, often in lower case ("what did caroline research"), so its
entities cannot be found by capitalisation alone. Every content word is therefore also tried as the key of a
name, a concept (stemmed), a symbol and a file; the store answers only for keys that exist. Keys derived from one
word or one entity form a *group*, and a block scores the best key of each group once, so `Caroline` matched as
a name and as a concept is not counted twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from ..._text import IDEOGRAPH_RUN, ideograph_runs_apart
from ..entities import entity_key, extract_entities, key_class, stem, stopwords_for

__all__ = ('MatchKind', 'QueryKey', 'QueryPlan', 'plan_query')

MatchKind = Literal['exact', 'normalised', 'fuzzy']

_WORD = re.compile(r"[^\W_][\w'\u2019.+/-]*[\w+]|[^\W_]")
"""A query word in any script, from its first letter or digit (`über`, `Élodie`, `Новосибирск`, `数据库`)."""
_QUESTION_WORDS: Final = frozenset(
    [
        'what',
        'which',
        'who',
        'whom',
        'whose',
        'when',
        'where',
        'why',
        'how',
        'did',
        'does',
        'do',
        'done',
        'many',
        'much',
        'kind',
        'kinds',
        'type',
        'types',
        'ever',
    ]
)
FUZZY_MIN_CHARS: Final = 5
"""Words shorter than this are never matched fuzzily (a short word is one edit away from too many others)."""


@dataclass(frozen=True)
class QueryKey:
    """One entity key to look up, the query text it came from, and how it was derived."""

    key: str
    text: str
    group: int
    """Keys of one group stand for one thing in the query; a block counts only its best-matching key per group."""
    how: MatchKind


@dataclass(frozen=True)
class QueryPlan:
    """A parsed query."""

    keys: tuple[QueryKey, ...]
    """Keys for exact and normalised lookup."""
    fuzzy: tuple[QueryKey, ...]
    """Key prefixes for fuzzy lookup (`how='fuzzy'`; `key` is the prefix, `text` the word it must resemble)."""
    terms: tuple[str, ...]
    """Words for full-text search (stop words and question words removed)."""


def plan_query(query: str) -> QueryPlan:
    """Entity keys and search words of a free-text query (deterministic)."""
    keys: list[QueryKey] = []
    fuzzy: list[QueryKey] = []
    seen: set[str] = set()
    group = 0

    def add(key: str, text: str, how: MatchKind, into: list[QueryKey] | None = None) -> None:
        target = keys if into is None else into
        marker = f'{how}|{key}' if into is not None else key
        if marker in seen:
            return
        seen.add(marker)
        target.append(QueryKey(key=key, text=text, group=group, how=how))

    entities = extract_entities(query, max_concepts=64)
    covered: set[str] = set()
    for entity in entities:
        if key_class(entity.kind) == 'concept':
            continue  # words are handled below, with their other readings
        add(entity.key, entity.name, 'exact')
        covered.update(word.lower() for word in _WORD.findall(entity.name))
        group += 1
    terms: list[str] = []
    stopwords = stopwords_for(query)
    for raw in _WORD.findall(ideograph_runs_apart(query)):
        word = raw.lower().replace('\u2019', "'").rstrip('.')
        bare = re.sub(r"'s$", '', word)
        if not bare or bare in stopwords or bare in _QUESTION_WORDS:
            continue
        if bare not in terms:
            terms.append(bare)
        if bare in covered or len(bare) < 2 or IDEOGRAPH_RUN.fullmatch(bare):
            continue  # Chinese and Japanese text is searched by its characters (`fts_terms`), no entity holds it
        covered.add(bare)
        readings = [entity_key('concept', bare), entity_key('name', bare), entity_key('symbol', bare)]
        if '.' in bare or '/' in bare:
            readings.append(entity_key('file', bare))
        if bare.endswith(('error', 'exception', 'warning')):
            readings.append(entity_key('error', bare))
        for index, key in enumerate(dict.fromkeys(readings)):
            add(key, raw, 'exact' if index == 0 and bare.isalpha() and stem(bare) == bare else 'normalised')
        if bare.isalpha() and len(bare) >= FUZZY_MIN_CHARS:
            root = stem(bare)
            size = 5 if len(bare) >= 6 else 4  # the prefix a fuzzy candidate must share (keeps the lookup small)
            add(f'concept:{root[:size]}', root, 'fuzzy', fuzzy)
            add(f'name:{bare[:size]}', bare, 'fuzzy', fuzzy)
            add(f'sym:{bare[:size]}', bare, 'fuzzy', fuzzy)
        group += 1
    return QueryPlan(keys=tuple(keys), fuzzy=tuple(fuzzy), terms=tuple(terms))
