"""`_echoes` -- the memory tools' own calls and answers in a conversation, and the view of it search reads.

`recall`, `recover_block` and `retrieve_page` (and the MCP server's tools) answer with what is archived already:
their returns quote earlier blocks and mementos. Archived with the conversation, byte for byte as the agent saw
them, those quotes were found again by the words, entities and meaning of what they quoted, beside or ahead of the
block where it was said (in an audit of a chat assistant, 13 of 85 archived blocks held such answers). So what
makes a block findable -- its full-text index text, its entities (hence its page's topics), its embedding and its
memento -- is made from `searchable_messages`, which leaves the memory tools' calls and answers out; the archived
bytes, their sha256 and what `recover_block` returns are unchanged.

The calls' arguments go too: a query says what the agent looked for, not what happened, and the user's request
that prompted it stays searchable. A block of nothing but such calls (the segmenter often gives a tool call and its
answer a block of their own) is archived and recoverable as any other, found by no words, and its memento is made
from `echo_note`: which tools were called and the ids of what they named, not the text they quoted.

A call is a memory tool's when its answer carries `MEMORY_TOOL_METADATA`, which the capability's toolset sets on
every answer, so a toolset the application renamed or prefixed is still known; or when its tool name is one of
`MEMORY_TOOLS` (or the MCP server's `stats`) under a prefix naming mementograph (`mementograph_recall` from an MCP
toolset's `tool_prefix`, `mcp__mementograph__recall` in a Claude Code transcript). The call and its answer share a
tool-call id: either one identifies both.

A bare name of `MEMORY_TOOLS` is weaker evidence: an application may have a tool of its own called `recall` (a
product-recall lookup) or `retrieve_page`, whose answers are conversation like any other. Names are still needed
where the mark cannot exist: blocks archived before the toolset marked its answers, and the MCP server's answers,
which reach a client (pydantic-ai's MCP toolset without a prefix, say) without any metadata of ours. So under a
bare name an unmarked answer counts as a memory tool's only when it names an archived item (a `blk_`, `prt_`,
`mem_` or `pg_` id, `item_ids`), as every answer that quotes the archive does: `recall`'s hits, the block headings
of `recover_block` and `retrieve_page`, the pages of `list_pages`. One that names none quotes nothing of the
archive, so it stays searchable whoever answered it (the cost, for an old or MCP memory tool: the words of a
search that found nothing, or of a `query_memory` that returned bare text). A bare-named call that was never
answered (`outcome` other than success, or a `RetryPromptPart`: its arguments were refused before any tool ran, so
no mark could be set) or whose answer is not among the messages is still taken by its name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    RetryPromptPart,
)

from ._messages import part_text
from .knowledge_graph import item_ids

__all__ = (
    'MEMORY_TOOLS',
    'MEMORY_TOOL_METADATA',
    'echo_note',
    'is_memory_tool',
    'memory_call_ids',
    'searchable_messages',
)

MEMORY_TOOL_METADATA: Final = 'mementograph.memory_tool.v1'
"""Key of the (model-invisible) metadata on a memory tool's return; its value is the tool's own name."""

MEMORY_TOOLS: Final = frozenset(
    {'recall', 'recover_block', 'retrieve_page', 'compact_context', 'list_pages', 'query_memory'}
)
"""The memory tools' names: the capability's toolset's and the MCP server's (its `stats` only under a prefix, the
name being too common to claim)."""

_NOTE_IDS: Final = 5
"""Ids a note names per tool (a recall's answer names up to 20)."""

_PREFIXED: Final = re.compile(
    rf'mementograph.*?(?:__|[_.:/-])(?:{"|".join(sorted(MEMORY_TOOLS | {"stats"}))})$', re.IGNORECASE
)


def is_memory_tool(name: str | None) -> bool:
    """Whether a tool of this name is one of mementograph's memory tools (see the module docstring)."""
    return bool(name) and (name in MEMORY_TOOLS or _PREFIXED.search(name or '') is not None)


def _marked(part: BaseToolReturnPart) -> bool:
    return isinstance(part.metadata, dict) and MEMORY_TOOL_METADATA in part.metadata


def _answered_by_memory(part: BaseToolReturnPart) -> bool | None:
    """Whether this answer is a memory tool's; `None` when only its call's name can tell (a bare name's retry)."""
    if _marked(part) or _PREFIXED.search(part.tool_name) is not None:
        return True
    if part.tool_name not in MEMORY_TOOLS:
        return False
    if part.outcome != 'success':
        return None  # refused or failed before any tool ran: no mark, and nothing of the archive quoted
    return bool(item_ids(part_text(part)))  # unmarked: a memory tool's only if it quotes the archive


def memory_call_ids(messages: Sequence[ModelMessage]) -> set[str]:
    """The tool-call ids of the memory tools' calls, answers and retries among `messages`."""
    ids: set[str] = set()
    named: set[str] = set()  # calls and retries under a memory tool's name
    answered: set[str] = set()  # calls whose answer is not a memory tool's
    for message in messages:
        for part in message.parts:
            if isinstance(part, BaseToolCallPart | RetryPromptPart):
                if is_memory_tool(part.tool_name):
                    named.add(part.tool_call_id)
            elif isinstance(part, BaseToolReturnPart):
                memory = _answered_by_memory(part)
                if memory:
                    ids.add(part.tool_call_id)
                elif memory is None:
                    named.add(part.tool_call_id)
                else:
                    answered.add(part.tool_call_id)
    return ids | (named - answered)


def _is_echo(part: object, ids: set[str]) -> bool:
    if isinstance(part, RetryPromptPart):  # one without a tool is the output's retry, whatever its id
        return part.tool_name is not None and part.tool_call_id in ids
    return isinstance(part, BaseToolCallPart | BaseToolReturnPart) and part.tool_call_id in ids


def searchable_messages(messages: Sequence[ModelMessage]) -> Sequence[ModelMessage]:
    """`messages` without the memory tools' calls, answers and retries (a message left with no part is left out):
    what the full-text index, the entities, the embedding and the memento of a block are made from.

    `messages` itself when it holds none, so a block without them renders exactly as it always did.
    """
    ids = memory_call_ids(messages)
    if not ids:
        return messages
    kept: list[ModelMessage] = []
    for message in messages:
        if not any(_is_echo(part, ids) for part in message.parts):
            kept.append(message)
        elif isinstance(message, ModelRequest):
            if request_parts := [part for part in message.parts if not _is_echo(part, ids)]:
                kept.append(replace(message, parts=request_parts))
        elif response_parts := [part for part in message.parts if not _is_echo(part, ids)]:
            kept.append(replace(message, parts=response_parts))
    return kept


def echo_note(messages: Sequence[ModelMessage]) -> str:
    """A sentence saying which memory tools `messages` called and the archived items their answers named (the
    first `_NOTE_IDS` ids of each), or `''` when they called none: what stands for those calls in a memento, where
    their answers' text would be found again as if it were said here."""
    ids = memory_call_ids(messages)
    named: dict[str, list[str]] = {}
    for message in messages:
        for part in message.parts:
            if isinstance(part, BaseToolCallPart | BaseToolReturnPart) and part.tool_call_id in ids:
                found = named.setdefault(part.tool_name, [])
                if isinstance(part, BaseToolReturnPart):
                    found += [item for item in item_ids(part_text(part)) if item not in found]
    if not named:
        return ''
    tools = [f'{tool} ({", ".join(found[:_NOTE_IDS])})' if found else tool for tool, found in named.items()]
    return f'The memory tools were called: {"; ".join(tools)}.'
