"""pydantic-ai capabilities: `MementoCompaction` (on by default in `create_agent`) and its events."""

from ._compactor import CompactionPolicy, CompactionReport, SessionCompactor
from ._events import (
    MementoBreakerEvent,
    MementoEvent,
    MementoEvictedEvent,
    MementoRecoveredEvent,
    MementoSkippedEvent,
)
from .memento import MementoCompaction, MementoWarning, RecallScope, Retention

__all__ = (
    'CompactionPolicy',
    'CompactionReport',
    'MementoBreakerEvent',
    'MementoCompaction',
    'MementoEvent',
    'MementoEvictedEvent',
    'MementoRecoveredEvent',
    'MementoSkippedEvent',
    'MementoWarning',
    'RecallScope',
    'Retention',
    'SessionCompactor',
)
