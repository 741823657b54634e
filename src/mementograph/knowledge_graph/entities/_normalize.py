"""`_normalize` -- one key per entity, whatever form it was written in.

Recall matches a query's entities against the graph's by key, so every form of one thing must map to one key:
case (`Caroline`, `caroline`), path forms (`./src/a.py`, `src\\a.py`, `src//a.py`), possessives (`Melanie's`),
leading articles (`The Nightingale`), thousands separators (`$5,000`), version prefixes (`v1.2.3`), inflections of
plain words (`camped`, `camping` -> `camp`). A key is `class:normalised`, where the class groups kinds that share a
normalisation (person, place and organisation are all `name:`, because the kind of a proper noun is a guess and a
wrong guess must not split one name into two keys).

Aliases are extra keys an entity is *also* mentioned under, so that the short form a person types finds the long
form the text holds: a path's file name (`models.py` for `django/db/models.py`), a dotted symbol's parts
(`ndarray` for `np.ndarray`, `queryset` for `QuerySet.filter`), each word of a multi-word name (`hannah` for `Kristin Hannah`).
"""

from __future__ import annotations

import functools
import re
from typing import Final

from ..._languages import languages_of, stopwords_of
from ..._text import without_particle

__all__ = (
    'KEY_CLASSES',
    'STOPWORDS',
    'aliases',
    'entity_key',
    'key_class',
    'normalize_name',
    'normalize_path',
    'stem',
    'stopwords_for',
)

KEY_CLASSES: Final = {
    'file': 'file',
    'symbol': 'sym',
    'test': 'sym',
    'command': 'cmd',
    'error': 'err',
    'url': 'url',
    'number': 'num',
    'version': 'ver',
    'date': 'date',
    'person': 'name',
    'place': 'name',
    'organisation': 'name',
    'name': 'name',
    'term': 'term',
    'concept': 'concept',
}
"""Entity kind -> key class."""

STOPWORDS: Final = frozenset(
    [
        'a',
        'about',
        'above',
        'after',
        'again',
        'against',
        'ago',
        'all',
        'almost',
        'also',
        'although',
        'always',
        'am',
        'among',
        'an',
        'and',
        'another',
        'any',
        'anybody',
        'anyone',
        'anything',
        'anyway',
        'anyways',
        'are',
        'aren',
        'around',
        'as',
        'at',
        'away',
        'back',
        'be',
        'became',
        'because',
        'become',
        'been',
        'before',
        'being',
        'below',
        'between',
        'both',
        'but',
        'by',
        'can',
        'cannot',
        'could',
        'couldn',
        'did',
        'didn',
        'do',
        'does',
        'doesn',
        'doing',
        'don',
        'done',
        'down',
        'during',
        'each',
        'either',
        'else',
        'enough',
        'even',
        'ever',
        'every',
        'everyone',
        'everything',
        'few',
        'for',
        'from',
        'further',
        'get',
        'gets',
        'getting',
        'go',
        'goes',
        'going',
        'gone',
        'gonna',
        'got',
        'gotta',
        'had',
        'hadn',
        'has',
        'hasn',
        'have',
        'haven',
        'having',
        'he',
        'her',
        'here',
        'hers',
        'herself',
        'hey',
        'hi',
        'him',
        'himself',
        'his',
        'how',
        'however',
        'i',
        "i'd",
        "i'll",
        "i'm",
        "i've",
        'if',
        'in',
        'into',
        'is',
        'isn',
        'it',
        "it's",
        'its',
        'itself',
        'just',
        'let',
        'lets',
        'like',
        'll',
        'made',
        'make',
        'makes',
        'many',
        'may',
        'me',
        'might',
        'mine',
        'more',
        'most',
        'much',
        'must',
        'my',
        'myself',
        'near',
        'need',
        'needs',
        'neither',
        'never',
        'no',
        'nor',
        'not',
        'nothing',
        'now',
        'of',
        'off',
        'oh',
        'ok',
        'okay',
        'on',
        'once',
        'one',
        'only',
        'onto',
        'or',
        'other',
        'others',
        'our',
        'ours',
        'ourselves',
        'out',
        'over',
        'own',
        'per',
        'please',
        'quite',
        'rather',
        're',
        'really',
        's',
        'said',
        'same',
        'say',
        'says',
        'see',
        'seem',
        'seems',
        'shall',
        'she',
        'should',
        'shouldn',
        'since',
        'so',
        'some',
        'somebody',
        'someone',
        'something',
        'sometimes',
        'still',
        'such',
        'sure',
        't',
        'take',
        'than',
        'that',
        "that's",
        'the',
        'their',
        'theirs',
        'them',
        'themselves',
        'then',
        'there',
        "there's",
        'these',
        'they',
        "they're",
        'this',
        'those',
        'though',
        'through',
        'thus',
        'to',
        'too',
        'toward',
        'towards',
        'under',
        'until',
        'up',
        'upon',
        'us',
        'use',
        'used',
        'using',
        've',
        'very',
        'via',
        'want',
        'wants',
        'was',
        'wasn',
        'way',
        'we',
        "we're",
        'well',
        'were',
        'weren',
        'what',
        "what's",
        'whatever',
        'when',
        'where',
        'whether',
        'which',
        'while',
        'who',
        'whom',
        'whose',
        'why',
        'will',
        'with',
        'within',
        'without',
        'won',
        'would',
        'wouldn',
        'yeah',
        'yes',
        'yet',
        'you',
        "you'd",
        "you'll",
        "you're",
        "you've",
        'your',
        'yours',
        'yourself',
        'yourselves',
        'wow',
    ]
)
"""Words that never name anything on their own (function words, fillers); they are not entities."""


def stopwords_for(text: str) -> frozenset[str]:
    """`STOPWORDS`, and those of the other languages `text` is written in (`languages_of`: German, French, Spanish,
    Italian, Portuguese, Dutch, Swedish, Russian, Polish): `und`, `der` and `ist` are no entities of a German text,
    while `die`, `war` and `art` stay words of an English one."""
    languages = languages_of(text)
    return _with_english(languages) if languages else STOPWORDS


@functools.cache
def _with_english(languages: tuple[str, ...]) -> frozenset[str]:
    return STOPWORDS | stopwords_of(languages)


_VOWEL = re.compile(r'[aeiouy]')
_DOUBLE_END = re.compile(r'([bdfgkmnprt])\1$')


def stem(word: str) -> str:
    """A light, deterministic English stemmer for plain words (`camped`, `camping`, `camps` -> `camp`); a Korean word
    loses its particle (`without_particle`).

    Deliberately conservative (a Porter step-1 subset plus a final `e`): it only has to make the inflections of one
    word meet, never to find roots, and a wrong merge costs precision that recall cannot win back.
    """
    w = word.lower()
    if not w.isascii():
        w = without_particle(w)  # Korean: `서울에서` ("in Seoul") is `서울`
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith('ies') and len(w) > 4:
        w = w[:-3] + 'y'
    elif w.endswith('sses') or w.endswith(('ches', 'shes', 'xes', 'zes')):
        w = w[:-2]
    elif w.endswith('s') and not w.endswith(('ss', 'us', 'is')) and len(w) > 3:
        w = w[:-1]
    for suffix in ('ingly', 'edly', 'ing', 'ed'):
        if w.endswith(suffix) and _VOWEL.search(w[: -len(suffix)]) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            if _DOUBLE_END.search(w):
                w = w[:-1]
            break
    else:
        if w.endswith('ly') and len(w) > 5:
            w = w[:-2]
    if w.endswith('e') and len(w) >= 4:
        w = w[:-1]
    elif w.endswith('y') and len(w) >= 4 and w[-2] not in 'aeiou':
        w = w[:-1] + 'i'
    return w


_GENERIC_NAME_WORDS: Final = frozenset(
    [
        'mr',
        'mrs',
        'ms',
        'dr',
        'prof',
        'st',
        'inc',
        'corp',
        'co',
        'ltd',
        'llc',
        'university',
        'college',
        'school',
        'institute',
        'group',
        'club',
        'center',
        'centre',
        'city',
        'town',
        'street',
        'avenue',
        'road',
        'park',
        'lake',
        'river',
        'mountain',
        'mountains',
        'beach',
        'island',
        'county',
        'state',
        'valley',
        'bay',
    ]
)
_POSSESSIVE = re.compile(r"['\u2019]s$|['\u2019]$")
_ARTICLE = re.compile(r'^(?:the|a|an)\s+', re.IGNORECASE)
_SPACES = re.compile(r'\s+')


def normalize_name(name: str) -> str:
    """Case-folded, possessive and leading article removed, spaces collapsed: `The Nightingale's` -> `nightingale`."""
    text = _SPACES.sub(' ', name.strip().strip('"\'\u201c\u201d\u2018\u2019.,;:!?()[]'))
    text = _POSSESSIVE.sub('', text)
    text = _ARTICLE.sub('', text)
    return text.lower()


def normalize_path(path: str) -> str:
    """One form per path: forward slashes, no `./`, no doubled or trailing slash, case-folded."""
    text = path.strip().strip('"\'`').replace('\\', '/')
    text = re.sub(r'/{2,}', '/', text)
    while text.startswith('./'):
        text = text[2:]
    if len(text) > 1:
        text = text.rstrip('/')
    return text.lower()


_UNIT_ALIASES: Final = {
    'sec': 's',
    'secs': 's',
    'second': 's',
    'seconds': 's',
    'min': 'min',
    'mins': 'min',
    'minute': 'min',
    'minutes': 'min',
    'hr': 'h',
    'hrs': 'h',
    'hour': 'h',
    'hours': 'h',
    'day': 'days',
    'byte': 'bytes',
    'usd': '$',
    'dollars': '$',
    'dollar': '$',
}


def _normalize_number(text: str) -> str:
    compact = text.strip().lower().replace(',', '')
    match = re.fullmatch(r'(\$|€|£)?\s*(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)\s*([^\d\s].*)?', compact)
    if not match:
        return compact
    currency, value, unit = match.group(1) or '', match.group(2), (match.group(3) or '').strip()
    unit = _UNIT_ALIASES.get(unit, unit)
    if '.' in value and 'e' not in value:
        value = value.rstrip('0').rstrip('.') or '0'
    return f'{currency}{value}{" " + unit if unit else ""}'


def key_class(kind: str) -> str:
    """The key class of an entity kind (`person` -> `name`); unknown kinds are their own class."""
    return KEY_CLASSES.get(kind, kind)


@functools.lru_cache(maxsize=65_536)  # extraction keys every word of a block; most words recur
def entity_key(kind: str, name: str) -> str:
    """The key an entity of `kind` written as `name` is stored under (see the module docstring)."""
    cls = key_class(kind)
    if cls == 'file':
        value = normalize_path(name)
    elif cls == 'sym':
        value = name.strip().strip('`').removesuffix('()').lower()
    elif cls == 'err':
        value = name.strip().rsplit('.', 1)[-1].lower()
    elif cls == 'url':
        value = name.strip().split('#', 1)[0].rstrip('/').lower()
    elif cls == 'num':
        value = _normalize_number(name)
    elif cls == 'ver':
        value = name.strip().lower()
        value = value[1:] if re.match(r'v\d', value) else value
        value = re.sub(r'\s+', '', value)
    elif cls == 'cmd':
        value = _SPACES.sub(' ', name.strip()).lower()
    elif cls == 'concept':
        value = stem(name)
    elif cls == 'date':
        value = name.strip().lower()
    else:
        value = normalize_name(name)
    return f'{cls}:{value}'


def aliases(kind: str, name: str) -> list[str]:
    """Extra keys an entity is also mentioned under (short forms people type); never includes its own key."""
    own = entity_key(kind, name)
    cls = key_class(kind)
    found: list[str] = []
    if cls == 'file':
        path = normalize_path(name)
        base = path.rsplit('/', 1)[-1]
        if base and base != path:
            found.append(f'file:{base}')
    elif cls == 'sym':
        symbol = own.removeprefix('sym:')
        parts = symbol.split('.')
        if len(parts) > 1:
            found.extend(f'sym:{part}' for part in reversed(parts) if len(part) >= 3)
    elif cls == 'name':
        raw = normalize_name(name).split(' ')
        words = [_POSSESSIVE.sub('', w).strip('.') for w in raw]
        words = [w for w in words if len(w) >= 2 and w not in STOPWORDS and w not in _GENERIC_NAME_WORDS]
        if len(raw) > 1:
            found.extend(f'name:{w}' for w in words)
    return [key for key in dict.fromkeys(found) if key != own]
