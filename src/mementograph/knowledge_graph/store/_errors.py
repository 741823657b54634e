"""`_errors` -- typed store errors: each says what failed and what to check."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._protocol import RecoveredBlock

__all__ = (
    'BlockIntegrityError',
    'BlockNotFoundError',
    'ChainIntegrityError',
    'LogConflictError',
    'MementoNotFoundError',
    'NotFoundError',
    'PageConflictError',
    'QueryError',
    'ReadOnlyViolationError',
    'ScopeViolationError',
    'StoreBusyError',
    'StoreCorruptError',
    'StoreError',
    'StoreTimeoutError',
    'StoreUnavailableError',
    'UnknownStoreSchemeError',
    'UnsupportedQueryError',
)


class StoreError(RuntimeError):
    """Base of every error a graph store raises."""


class UnknownStoreSchemeError(StoreError, ValueError):
    """The store URI's scheme is not one of the supported ones."""


class StoreUnavailableError(StoreError):
    """The store cannot be opened or reached (missing, unreadable or corrupt file; server down; bad credentials)."""

    def __init__(self, message: str, *, maybe_written: bool = False) -> None:
        super().__init__(message)
        self.maybe_written = maybe_written
        """True when a write failed after it reached the server, which may have committed it (the connection dropped
        while committing, the store was closed meanwhile): the writes' deterministic ids make a retry safe, and
        whoever counts what is missing can only give an upper bound."""


class StoreBusyError(StoreUnavailableError):
    """Another writer held the store's lock for longer than the bounded wait."""


class StoreCorruptError(StoreUnavailableError):
    """The store's file is damaged: the database engine reports it malformed (a zeroed or overwritten page), not a
    database at all, or a record the store wrote no longer decodes. `verify` reports it as a failed check."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path
        """The damaged file."""


class StoreTimeoutError(StoreUnavailableError):
    """A store call did not return within the caller's bound (a hung server or driver, a lock never released).

    The call may still finish later: a write of unknown outcome, which the deterministic ids make safe to repeat.
    """

    def __init__(self, message: str, *, waited: bool = True) -> None:
        super().__init__(message, maybe_written=waited)
        self.waited = waited
        """False when the call was refused at once because an earlier one is still waiting (said already)."""


class LogConflictError(StoreError):
    """A session's log holds another message at a position an append gave: another run writes the session at the
    same time. Nothing of that append was written; the writer logs its run again after the log's end."""

    def __init__(self, message: str, *, message_index: int) -> None:
        super().__init__(message)
        self.message_index = message_index
        """The first position the log holds another message at."""


class PageConflictError(StoreError):
    """An eviction's page record does not continue the page the store holds: another run evicted from the session
    since the pages were computed. Nothing of the eviction was written; compute its pages again and retry."""


class NotFoundError(StoreError, LookupError):
    """No such record in the namespace and session the read was scoped to."""


class BlockNotFoundError(NotFoundError):
    """No evicted block with this id (in this namespace/session)."""


class MementoNotFoundError(NotFoundError):
    """No memento with this id (in this namespace/session)."""


class BlockIntegrityError(StoreError):
    """An archived block's bytes no longer match its sha256: it is never returned."""


class ChainIntegrityError(BlockIntegrityError):
    """Some blocks under a memento failed their check: they are never returned, and the others are not lost with
    them (`recovered`), as a page shows its other blocks."""

    def __init__(self, message: str, *, recovered: tuple[RecoveredBlock, ...], damaged: tuple[str, ...]) -> None:
        super().__init__(message)
        self.recovered = recovered
        """The blocks that passed their check, in session order."""
        self.damaged = damaged
        """Ids of the blocks that failed it, in the order the chain names them."""


class QueryError(StoreError, ValueError):
    """A Cypher query was malformed, too large, too slow, or failed on the server."""


class ReadOnlyViolationError(QueryError):
    """A query tried to write, call an admin/write procedure or load external data."""


class UnsupportedQueryError(QueryError):
    """The query is valid Cypher but needs a feature this backend does not run (use the Neo4j backend)."""


class ScopeViolationError(QueryError):
    """A query could read outside its namespace (or its pinned session): refused before it is sent anywhere."""

    def __init__(self, message: str, *, understood: bool = True) -> None:
        super().__init__(message)
        self.understood = understood
        """False when the checker could not read the query at all (the server may have a better syntax error)."""
