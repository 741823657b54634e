"""mementograph -- agent memory that forgets nothing.

Completed blocks of a conversation are replaced in the live context by verified mementos, while every evicted
block stays recoverable byte for byte from a knowledge graph (embedded SQLite by default, or Neo4j).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = '0.1.0'

# Public names load lazily: importing a submodule (e.g. the store) never pays for pydantic-ai agents.
_EXPORTS: dict[str, str] = {
    'create_agent': '.agent',
    'MementoCompaction': '.capabilities',
    'MementoEvictedEvent': '.capabilities',
    'MementoRecoveredEvent': '.capabilities',
    'MementoSkippedEvent': '.capabilities',
    'MementoWarning': '.capabilities',
    'redact_secrets': '._redact',
    'DEFAULT_ENCODING': '._tokens',
    'TokenCounter': '._tokens',
    'TokenizerUnavailableError': '._tokens',
    'DEFAULT_NAMESPACE': '.knowledge_graph',
    'BlockRecord': '.knowledge_graph',
    'Eviction': '.knowledge_graph',
    'MementoRecord': '.knowledge_graph',
    'SessionEvent': '.knowledge_graph',
    'BlockIntegrityError': '.knowledge_graph.store',
    'BlockNotFoundError': '.knowledge_graph.store',
    'GraphStore': '.knowledge_graph.store',
    'RecoveredBlock': '.knowledge_graph.store',
    'StoreError': '.knowledge_graph.store',
    'StoreTimeoutError': '.knowledge_graph.store',
    'StoreUnavailableError': '.knowledge_graph.store',
    'UnknownStoreSchemeError': '.knowledge_graph.store',
    'open_store': '.knowledge_graph.store',
    'VerifyReport': '.knowledge_graph.store',
    'verify_store': '.knowledge_graph.store',
}

if TYPE_CHECKING:
    from ._redact import redact_secrets
    from ._tokens import DEFAULT_ENCODING, TokenCounter, TokenizerUnavailableError
    from .agent import create_agent
    from .capabilities import (
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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
