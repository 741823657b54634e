"""`_events` -- capability events: what compaction did, skipped (and why) and recovered, and when the compressor's
model was given up on for a while."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic_ai.messages import CapabilityEvent

__all__ = (
    'MementoBreakerEvent',
    'MementoEvent',
    'MementoEvictedEvent',
    'MementoRecoveredEvent',
    'MementoSkippedEvent',
    'MementoWarning',
)


class MementoWarning(UserWarning):
    """Compaction could not happen (store or compressor failing); the run continued with its full context."""


@dataclass(kw_only=True)
class MementoEvent(CapabilityEvent, namespace='mementograph', abstract=True):
    """Base of mementograph's events."""

    session_id: str = ''
    """The session the event belongs to."""


@dataclass(kw_only=True)
class MementoEvictedEvent(MementoEvent, name='evicted'):
    """Blocks were archived and replaced by mementos (and/or old parts stubbed, mementos merged)."""

    trigger: str = 'auto'
    """`auto` (high-water mark passed) or `manual` (`compact_context`)."""
    block_ids: tuple[str, ...] = ()
    memento_ids: tuple[str, ...] = ()
    micro_part_ids: tuple[str, ...] = ()
    merged_memento_ids: tuple[str, ...] = ()
    tokens_before: int = 0
    tokens_after: int = 0
    verified: int = 0
    unverified: int = 0
    usage_tokens: int = 0
    """LLM tokens spent compressing and judging."""


@dataclass(kw_only=True)
class MementoSkippedEvent(MementoEvent, name='skipped'):
    """Compaction was due but did not happen; the run continues with its full context."""

    reason: str = ''
    tokens: int = 0
    error: str | None = None
    """The exception, when a store or compressor failed."""


@dataclass(kw_only=True)
class MementoRecoveredEvent(MementoEvent, name='recovered'):
    """The model recovered an archived block through `recover_block`."""

    block_id: str = ''
    exact: bool = True
    """The block's sha256 matched (recovery never returns bytes that fail the check)."""


@dataclass(kw_only=True)
class MementoBreakerEvent(MementoEvent, name='breaker'):
    """The compressor's (or judge's) model failed several mementos in a row, so the extractive compressor and the
    rubric judge, which need no model, write every memento for a cool-down (`opened`); or the model made a memento
    again and writes them again (not `opened`). Its mementos record the compressor that wrote them."""

    opened: bool = True
    model: str = ''
    """The compressor's name (with the judge's, when that is a model)."""
    error: str | None = None
    """The failure that opened it."""
    failures: int = 0
    """Mementos in a row the model had failed."""
    cooldown: float = 0.0
    """Seconds until the model is tried again (one memento, a probe)."""
    probe: bool = False
    """It opened again because that probe failed (each failed probe doubles the cool-down, up to 8 times)."""
