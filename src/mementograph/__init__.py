"""mementograph -- agent memory that forgets nothing.

Completed blocks of a conversation are replaced in the live context by verified mementos, while every evicted
block stays recoverable byte for byte from a knowledge graph (embedded SQLite by default, or Neo4j).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import LazyExports

__version__ = '0.1.0'

if TYPE_CHECKING:
    from ._redact import redact_secrets
    from ._tokens import DEFAULT_ENCODING, TokenCounter, TokenizerUnavailableError
    from .agent import create_agent
    from .capabilities import (
        MementoBreakerEvent,
        MementoCompaction,
        MementoEvictedEvent,
        MementoRecoveredEvent,
        MementoSkippedEvent,
        MementoWarning,
    )
    from .knowledge_graph import DEFAULT_NAMESPACE, BlockRecord, Eviction, MementoRecord, SessionEvent
    from .knowledge_graph.store import (
        BlockIntegrityError,
        BlockNotFoundError,
        GraphStore,
        RecoveredBlock,
        StoreError,
        StoreTimeoutError,
        StoreUnavailableError,
        UnknownStoreSchemeError,
        VerifyReport,
        open_store,
        verify_store,
    )

__all__ = (
    'DEFAULT_ENCODING',
    'DEFAULT_NAMESPACE',
    'BlockIntegrityError',
    'BlockNotFoundError',
    'BlockRecord',
    'Eviction',
    'GraphStore',
    'MementoBreakerEvent',
    'MementoCompaction',
    'MementoEvictedEvent',
    'MementoRecord',
    'MementoRecoveredEvent',
    'MementoSkippedEvent',
    'MementoWarning',
    'RecoveredBlock',
    'SessionEvent',
    'StoreError',
    'StoreTimeoutError',
    'StoreUnavailableError',
    'TokenCounter',
    'TokenizerUnavailableError',
    'UnknownStoreSchemeError',
    'VerifyReport',
    '__version__',
    'create_agent',
    'open_store',
    'redact_secrets',
    'verify_store',
)


# Public names load lazily: importing a submodule (e.g. the store) never pays for pydantic-ai agents.
__getattr__ = LazyExports(
    __name__,
    globals(),
    {
        '.agent': ('create_agent',),
        '.capabilities': (
            'MementoBreakerEvent',
            'MementoCompaction',
            'MementoEvictedEvent',
            'MementoRecoveredEvent',
            'MementoSkippedEvent',
            'MementoWarning',
        ),
        '._redact': ('redact_secrets',),
        '._tokens': ('DEFAULT_ENCODING', 'TokenCounter', 'TokenizerUnavailableError'),
        '.knowledge_graph': ('DEFAULT_NAMESPACE', 'BlockRecord', 'Eviction', 'MementoRecord', 'SessionEvent'),
        '.knowledge_graph.store': (
            'BlockIntegrityError',
            'BlockNotFoundError',
            'GraphStore',
            'RecoveredBlock',
            'StoreError',
            'StoreTimeoutError',
            'StoreUnavailableError',
            'UnknownStoreSchemeError',
            'open_store',
            'VerifyReport',
            'verify_store',
        ),
    },
)
