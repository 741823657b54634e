"""mementograph -- agent memory that forgets nothing.

Completed blocks of a conversation are replaced in the live context by verified mementos, while every evicted
block stays recoverable byte for byte from a knowledge graph (embedded SQLite by default, or Neo4j).
"""

from ._tokens import DEFAULT_ENCODING, TokenCounter, TokenizerUnavailableError
from .knowledge_graph import DEFAULT_NAMESPACE, BlockRecord, Eviction, MementoRecord, SessionEvent
from .knowledge_graph.store import (
    BlockIntegrityError,
    BlockNotFoundError,
    GraphStore,
    RecoveredBlock,
    StoreError,
    StoreUnavailableError,
    UnknownStoreSchemeError,
    open_store,
)

__version__ = '0.1.0'

__all__ = (
    'DEFAULT_ENCODING',
    'DEFAULT_NAMESPACE',
    'BlockIntegrityError',
    'BlockNotFoundError',
    'BlockRecord',
    'Eviction',
    'GraphStore',
    'MementoRecord',
    'RecoveredBlock',
    'SessionEvent',
    'StoreError',
    'StoreUnavailableError',
    'TokenCounter',
    'TokenizerUnavailableError',
    'UnknownStoreSchemeError',
    '__version__',
    'open_store',
)
