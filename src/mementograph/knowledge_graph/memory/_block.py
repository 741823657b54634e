"""`BlockInput` -- one block as the compressors and judges see it: its messages, rendered text and size."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_ai.messages import ModelMessage

from ..._tokens import TokenCounter
from ._dates import TimeZone
from ._render import Action, block_actions, render_block, text_actions

__all__ = ('BlockInput', 'actions_for')


@dataclass(frozen=True)
class BlockInput:
    """A block to compress.

    `text` is what compressors and judges read (and what `critical_facts` is computed on); `messages` give the
    exact structure (tool-call ids) when they are available.
    """

    messages: tuple[ModelMessage, ...]
    """The block's messages, exactly as in the history (may be empty for a text-only block)."""
    text: str
    """The rendered block (`render_block(messages)`)."""
    tokens: int
    """Tokens of the block's messages, as the live context counts them."""
    context: str = ''
    """Optional background for LLM compressors and judges (e.g. the task statement); never a source of facts."""
    zone: TimeZone = None
    """Whose calendar the messages' relative dates mean ("yesterday", "last week"): a dialogue memento anchors them
    to days read on this clock, and the judge derives the same anchors. `None`: the timestamps' own (UTC)."""
    merges: tuple[str, ...] = ()
    """The texts of the mementos this block merges, oldest first, when it is a run of memento stubs (a memento of
    mementos); `text` is then those texts joined. Empty for a block of messages."""
    max_tokens: int | None = None
    """The most tokens the memento may take; `None`: the compressor's own ratios decide. For a merge (`merges`), the
    room the compactor leaves it in the mementos' share of the context; for a block whose tool results are stubs in
    the live context already, less than those stubs take (a memento of the whole outputs would not be smaller)."""

    @classmethod
    def from_messages(
        cls, messages: Sequence[ModelMessage], counter: TokenCounter, *, context: str = '', zone: TimeZone = None
    ) -> BlockInput:
        """Render and count `messages` (the usual way to build a block)."""
        return cls(tuple(messages), render_block(messages), counter.count_messages(messages), context, zone)


def actions_for(block: BlockInput) -> list[Action]:
    """The block's commands with their outputs: by tool-call id from the messages, else from the text."""
    return block_actions(block.messages) if block.messages else text_actions(block.text)
