"""`open_store` -- pick a backend from a URI: explicit argument > `MEMENTOGRAPH_STORE` > the embedded default."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final
from urllib.parse import parse_qs, urlsplit

from platformdirs import user_data_dir

from ._errors import UnknownStoreSchemeError
from ._protocol import GraphStore
from ._sqlite import DEFAULT_BUSY_TIMEOUT, SqliteStore

__all__ = (
    'NEO4J_SCHEMES',
    'STORE_ENV',
    'SUPPORTED_SCHEMES',
    'check_store_uri',
    'default_store_uri',
    'open_store',
    'resolve_store_uri',
    'sqlite_path',
)

STORE_ENV: Final = 'MEMENTOGRAPH_STORE'
NEO4J_SCHEMES: Final = ('neo4j', 'neo4j+s', 'neo4j+ssc', 'bolt', 'bolt+s', 'bolt+ssc')
SUPPORTED_SCHEMES: Final = ('sqlite', 'memory', *NEO4J_SCHEMES)
SQLITE_URI_OPTIONS: Final = frozenset({'busy_timeout'})
NEO4J_URI_OPTIONS: Final = frozenset({'database', 'retry_time', 'query_limit', 'query_timeout'})
_SCHEMES_TEXT: Final = ', '.join(f'{scheme}://' for scheme in SUPPORTED_SCHEMES)
_EXAMPLES: Final = 'sqlite:///home/me/memory.db, memory://, neo4j://localhost:7687'


def default_store_uri() -> str:
    """The embedded default: a SQLite file in the user's data directory."""
    return f'sqlite://{Path(user_data_dir("mementograph")) / "memory.db"}'


def resolve_store_uri(uri: str | None = None) -> str:
    """The URI `open_store(uri)` would open. An empty `MEMENTOGRAPH_STORE` counts as unset; an empty or non-string
    argument is refused (it would otherwise open the default store in silence)."""
    if uri is None:
        return os.environ.get(STORE_ENV) or default_store_uri()
    if not isinstance(uri, str):
        raise TypeError(f'a store URI is a str such as {_EXAMPLES}, not {type(uri).__name__}')
    if not uri.strip():
        raise UnknownStoreSchemeError(
            f'empty store URI: use one of {_SCHEMES_TEXT} (e.g. {_EXAMPLES}), or none at all for ${STORE_ENV} or '
            'the embedded default'
        )
    return uri


def _float_option(options: dict[str, list[str]], name: str, default: float) -> float:
    values = options.get(name)
    if not values:
        return default
    try:
        return float(values[-1])
    except ValueError:
        raise ValueError(f'store URI option {name}={values[-1]!r} is not a number') from None


_URI_PASSWORD: Final = re.compile(r'(://[^/@:?#]*:)[^/@?#]*@')


def _shown(uri: str) -> str:
    """`uri` as an error message may quote it: a password in it (`neo4j://user:secret@host`) as `***`."""
    return repr(_URI_PASSWORD.sub(r'\1***@', uri))


def _split(uri: str) -> tuple[str, str]:
    """`(scheme, rest)` of a store URI, the scheme checked against the supported ones."""
    shown = _shown(uri)
    scheme, sep, rest = uri.partition('://')
    scheme = scheme.lower()
    if not sep or scheme not in SUPPORTED_SCHEMES:
        raise UnknownStoreSchemeError(f'unknown store URI {shown}: use one of {_SCHEMES_TEXT} (e.g. {_EXAMPLES})')
    if scheme == 'sqlite' and not rest.partition('?')[0]:
        raise UnknownStoreSchemeError(f'store URI {shown} names no file: use sqlite:///path/to/memory.db')
    if scheme == 'memory' and rest.partition('?')[0]:  # a name would suggest a store shared by that name
        raise UnknownStoreSchemeError(
            f'store URI {shown}: memory:// takes no name or path (each one opened is a store of its own, gone with '
            'it); use sqlite:///path/to/memory.db for a store to share or keep'
        )
    known = NEO4J_URI_OPTIONS if scheme in NEO4J_SCHEMES else SQLITE_URI_OPTIONS
    unknown = sorted(set(parse_qs(rest.partition('?')[2])) - known)
    if unknown:  # a misspelt option would otherwise be ignored in silence
        raise ValueError(f'unknown store URI option {", ".join(unknown)} in {shown}: use {", ".join(sorted(known))}')
    return scheme, rest


def check_store_uri(uri: str) -> None:
    """Raise what `open_store(uri)` would raise for a malformed URI (scheme, file, option names), without opening
    anything: a capability refuses a misspelt store when it is made instead of warning at every request."""
    _split(uri)


def sqlite_path(uri: str | None = None) -> Path | None:
    """The file a `sqlite://` URI (or, for `None`, the configured store) names; `None` for any other scheme."""
    uri = resolve_store_uri(uri)
    scheme, rest = _split(uri)
    if scheme != 'sqlite':
        return None
    path_part = rest.partition('?')[0]
    if path_part.startswith('/'):  # `sqlite:////abs/x.db` (SQLAlchemy's absolute form) is /abs/x.db as well
        path_part = '/' + urlsplit(f'file://{path_part}').path.lstrip('/')
    return Path(path_part).expanduser()


def open_store(uri: str | None = None) -> GraphStore:
    """Open a graph store.

    Args:
        uri: `memory://` (in-process, nothing on disk), `sqlite:///abs/path.db` or `sqlite://relative/path.db`
            (`?busy_timeout=SECONDS`), or `neo4j://host:7687` / `bolt://…` / `neo4j+s://…` (credentials from the
            URI or `NEO4J_USERNAME`/`NEO4J_PASSWORD`; `?database=NAME`). `None`: `MEMENTOGRAPH_STORE`, else the
            embedded default under the user data directory.

    Raises:
        UnknownStoreSchemeError: the scheme is none of the supported ones (the message lists them).
        StoreUnavailableError: the store cannot be opened or reached.
    """
    uri = resolve_store_uri(uri)
    scheme, rest = _split(uri)
    if scheme in NEO4J_SCHEMES:
        from ._neo4j import Neo4jStore

        return Neo4jStore.from_uri(uri)
    options = parse_qs(rest.partition('?')[2])
    busy_timeout = _float_option(options, 'busy_timeout', DEFAULT_BUSY_TIMEOUT)
    if scheme == 'memory':
        return SqliteStore(None, uri='memory://', busy_timeout=busy_timeout)
    path = sqlite_path(uri)
    assert path is not None
    return SqliteStore(path, uri=f'sqlite://{path}', busy_timeout=busy_timeout)
