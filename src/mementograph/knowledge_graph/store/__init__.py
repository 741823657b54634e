"""Graph stores: the `GraphStore` protocol, the embedded SQLite default, `memory://` and Neo4j."""

from ._base import recover_chain
from ._errors import (
    BlockIntegrityError,
    BlockNotFoundError,
    MementoNotFoundError,
    NotFoundError,
    QueryError,
    ReadOnlyViolationError,
    ScopeViolationError,
    StoreBusyError,
    StoreError,
    StoreTimeoutError,
    StoreUnavailableError,
    UnknownStoreSchemeError,
    UnsupportedQueryError,
)
from ._open import (
    NEO4J_SCHEMES,
    STORE_ENV,
    SUPPORTED_SCHEMES,
    check_store_uri,
    default_store_uri,
    open_store,
    resolve_store_uri,
    sqlite_path,
)
from ._protocol import BlockLink, GraphLinks, GraphStore, MementoLink, PageLink, RecoveredBlock, TextHit
from ._sqlite import SqliteStore
from ._verify import PROBLEM_KINDS, VerifyProblem, VerifyReport, verify_store

__all__ = (
    'NEO4J_SCHEMES',
    'PROBLEM_KINDS',
    'STORE_ENV',
    'SUPPORTED_SCHEMES',
    'BlockIntegrityError',
    'BlockLink',
    'BlockNotFoundError',
    'GraphLinks',
    'GraphStore',
    'MementoLink',
    'MementoNotFoundError',
    'NotFoundError',
    'PageLink',
    'QueryError',
    'ReadOnlyViolationError',
    'RecoveredBlock',
    'ScopeViolationError',
    'SqliteStore',
    'StoreBusyError',
    'StoreError',
    'StoreTimeoutError',
    'StoreUnavailableError',
    'TextHit',
    'UnknownStoreSchemeError',
    'UnsupportedQueryError',
    'VerifyProblem',
    'VerifyReport',
    'check_store_uri',
    'default_store_uri',
    'open_store',
    'recover_chain',
    'resolve_store_uri',
    'sqlite_path',
    'verify_store',
)
