"""Graph stores: the `GraphStore` protocol, the embedded SQLite default, `memory://` and Neo4j."""

from ._base import recover_chain
from ._errors import (
    BlockIntegrityError,
    BlockNotFoundError,
    MementoNotFoundError,
    NotFoundError,
    QueryError,
    ReadOnlyViolationError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    UnknownStoreSchemeError,
    UnsupportedQueryError,
)
from ._open import NEO4J_SCHEMES, STORE_ENV, SUPPORTED_SCHEMES, default_store_uri, open_store, resolve_store_uri
from ._protocol import GraphStore, RecoveredBlock, TextHit
from ._sqlite import SqliteStore

__all__ = (
    'NEO4J_SCHEMES',
    'STORE_ENV',
    'SUPPORTED_SCHEMES',
    'BlockIntegrityError',
    'BlockNotFoundError',
    'GraphStore',
    'MementoNotFoundError',
    'NotFoundError',
    'QueryError',
    'ReadOnlyViolationError',
    'RecoveredBlock',
    'SqliteStore',
    'StoreBusyError',
    'StoreError',
    'StoreUnavailableError',
    'TextHit',
    'UnknownStoreSchemeError',
    'UnsupportedQueryError',
    'default_store_uri',
    'open_store',
    'recover_chain',
    'resolve_store_uri',
)
