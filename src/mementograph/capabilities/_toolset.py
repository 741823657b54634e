"""`MementoToolset` -- the memory tools, registered from the first request so the tool list never changes mid-run."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from pydantic_ai import RunContext, ToolReturn
from pydantic_ai.exceptions import UserError
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import FunctionToolset, ToolsetTool

from .._echoes import MEMORY_TOOL_METADATA
from .._text import echo
from .._threads import in_thread
from ..knowledge_graph import item_id
from ..knowledge_graph.memory import render_block
from ..knowledge_graph.recall import (
    EMPTY_QUERY,
    TimeFilterError,
    block_heading,
    out_of_range,
    recall,
    render_recall,
    retrieve_page,
)
from ..knowledge_graph.store import (
    BlockIntegrityError,
    ChainIntegrityError,
    NotFoundError,
    RecoveredBlock,
    StoreError,
    recover_chain,
)
from ._events import MementoRecoveredEvent, MementoWarning
from ._layout import named_ids

if TYPE_CHECKING:
    from .memento import MementoCompaction

__all__ = ('TOOL_OUTPUT_CHARS', 'MementoToolset')

logger = logging.getLogger('mementograph')

TOOL_OUTPUT_CHARS: Final = 12_000
"""Characters one tool answer may carry (~3k tokens); longer answers are paginated."""
_MIN_OUTPUT_CHARS: Final = 1_000


def output_chars(high_water_tokens: int) -> int:
    """Characters one tool answer may carry under a high-water mark: `TOOL_OUTPUT_CHARS`, or about a quarter of
    the mark (~4 characters a token) when that is less, so a page recovered at a small mark fits beside the rest."""
    return max(_MIN_OUTPUT_CHARS, min(TOOL_OUTPUT_CHARS, high_water_tokens))


def paginate(text: str, page: int, *, what: str, more: str, chars: int = TOOL_OUTPUT_CHARS) -> str:
    """Page `page` (1-based) of `text`, `chars` characters a page, with a footer saying how to get the next."""
    pages = max(1, -(-len(text) // chars))
    if not 1 <= page <= pages:
        return f'{out_of_range(pages, page, "page")} of {what}.'
    chunk = text[(page - 1) * chars : page * chars]
    if pages == 1:
        return chunk
    footer = f'\n[{what}: page {page} of {pages}'
    footer += f'; next: {more.format(page=page + 1)}]' if page < pages else ']'
    return chunk + footer


async def answer_or_unavailable(tool: str, work: Callable[[], Awaitable[str]]) -> str:
    """`work()`'s answer, or, when it fails (a store that is closed, unreachable or corrupt, above all), an answer
    saying so and a `MementoWarning`: a memory tool must not end the agent's run, which goes on with its context."""
    try:
        return await work()
    except Exception as exc:
        what = 'the memory store is unavailable' if isinstance(exc, StoreError) else 'it raised'
        warnings.warn(f'mementograph: {tool} failed, {what}: {type(exc).__name__}: {exc}', MementoWarning, stacklevel=2)
        return (
            f'{tool} failed: {what} ({type(exc).__name__}: {exc}). Nothing archived is lost; carry on with what is '
            'in context, or try again later.'
        )


class MementoToolset(FunctionToolset[AgentDepsT]):
    """`recover_block`, `compact_context`, `recall` and `retrieve_page` over the capability's store and session."""

    def __init__(self, capability: MementoCompaction[AgentDepsT]) -> None:
        super().__init__(id='mementograph')
        self._capability = capability
        self.add_function(self.recover_block, name='recover_block')
        self.add_function(self.compact_context, name='compact_context')
        self.add_function(self.recall, name='recall')
        self.add_function(self.retrieve_page, name='retrieve_page')

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> Any:
        """The tool's answer, marked (`MEMORY_TOOL_METADATA`, which the model never sees) as a memory tool's: it
        quotes the archive, and the blocks that hold it are archived without it in their searchable view
        (`searchable_messages`), whatever name the application gave the tool."""
        answer = await super().call_tool(name, tool_args, ctx, tool)
        return ToolReturn(return_value=answer, metadata={MEMORY_TOOL_METADATA: name})

    def _run_capability(self, ctx: RunContext[Any]) -> MementoCompaction[AgentDepsT]:
        """The per-run copy of the capability that owns this toolset (it holds the run's session state)."""
        found: list[MementoCompaction[AgentDepsT]] = []

        def select(capability: object) -> None:
            if getattr(capability, '_toolset', None) is self:
                found.append(capability)  # type: ignore[arg-type]

        if ctx.root_capability is not None:
            ctx.root_capability.apply(select)
        return found[-1] if found else self._capability

    async def recover_block(self, ctx: RunContext[AgentDepsT], block_id: str, page: int = 1) -> str:
        """Recover an archived block (or everything under a memento) byte for byte as archived, from the memory store.

        Args:
            block_id: The id a memento names, e.g. `blk_...`, `prt_...` or `mem_...`.
            page: Page of a long block to return (1-based).
        """
        return await answer_or_unavailable('recover_block', lambda: self._recover_block(ctx, block_id, page))

    async def _recover_block(self, ctx: RunContext[AgentDepsT], block_id: str, page: int) -> str:
        capability = self._run_capability(ctx)
        session = capability.resolve_session_id(ctx)
        block_id = item_id(block_id)
        damaged: tuple[str, ...] = ()

        async def chain(session_id: str | None) -> list[RecoveredBlock]:
            return await capability.store_calls()(
                recover_chain, capability.graph_store, block_id, namespace=capability.namespace, session_id=session_id
            )

        try:
            try:
                blocks = await chain(capability.recall_session(ctx))
            except NotFoundError:
                # a memento the live context holds names its block, though the run's session is another one (a
                # history continued under a new conversation id, or one kept without ids): the agent was given it
                if block_id not in named_ids(ctx.messages):
                    raise
                blocks = await chain(None)
        except NotFoundError:
            if block_id.startswith('pg_'):
                return f'{echo(block_id)} is a page of the memory index: read it with retrieve_page("{block_id}").'
            where = 'in this session' if capability.recall_scope == 'session' else 'in this memory'
            return f'No archived block {echo(block_id)} {where}. Use the id a memento or recall names.'
        except ChainIntegrityError as exc:  # the blocks that passed are still the agent's
            blocks, damaged = list(exc.recovered), exc.damaged
        except BlockIntegrityError as exc:
            return f'Block {echo(block_id)} failed its integrity check and was not returned: {exc}'
        capability._state.recovered += 1
        try:
            await ctx.emit(MementoRecoveredEvent(session_id=session, block_id=block_id, exact=True))
        except UserError:  # the toolset was added on its own (beside a harness tier), not by the capability
            logger.debug('mementograph: recovered %s; no capability to emit the event from', block_id)
        parts = [f'{block_heading(b.record, verified=True)}\n{render_block(b.messages)}' for b in blocks]
        if damaged:  # first, so that the first page says it
            parts.insert(
                0,
                f'[{len(damaged)} block{"s" * (len(damaged) != 1)} under {block_id} failed the integrity check and '
                f'{"are" if len(damaged) != 1 else "is"} not shown: {", ".join(damaged)}]',
            )
        return paginate(
            '\n\n'.join(parts),
            page,
            what=block_id,
            more=f'recover_block("{block_id}", page={{page}})',
            chars=output_chars(capability.high_water(ctx)),
        )

    async def compact_context(self, ctx: RunContext[AgentDepsT]) -> str:
        """Archive every completed block of the conversation now and replace it with its memento."""
        capability = self._run_capability(ctx)
        outcome = await capability.compact_now(ctx, trigger='manual')
        if outcome is None:
            return 'Compaction failed; the context was left as it was.'
        report = outcome[1]
        if not report.changed:
            return f'Nothing was compacted: {report.skipped}.'
        return (
            f'Compacted {report.tokens_before} -> {report.tokens_after} tokens: {len(report.block_ids)} blocks '
            f'archived as mementos ({report.verified} verified), {len(report.micro_part_ids)} tool results stubbed, '
            f'{len(report.merged_memento_ids)} memento merges. Recover any block with recover_block(id).'
        )

    async def recall(
        self,
        ctx: RunContext[AgentDepsT],
        query: str,
        k: int = 5,
        since: str | None = None,
        until: str | None = None,
    ) -> str:
        """Find archived blocks by the entities and words they mention (files, symbols, errors, values, names,
        dates), with why each was found; recover any of them with `recover_block`.

        Args:
            query: What to look for.
            k: How many blocks to return (at most 20).
            since: Only blocks that started at or after this date or time (ISO 8601, e.g. `2023-05-01`).
            until: Only blocks that started before this date or time (ISO 8601).
        """
        return await answer_or_unavailable('recall', lambda: self._recall(ctx, query, k, since, until))

    async def _recall(
        self, ctx: RunContext[AgentDepsT], query: str, k: int, since: str | None, until: str | None
    ) -> str:
        if not query.strip():
            return EMPTY_QUERY
        capability = self._run_capability(ctx)
        store, session_id = capability.graph_store, capability.recall_session(ctx)
        since, until = (since or '').strip() or None, (until or '').strip() or None
        # not bounded: the first recall of a long session may embed hundreds of blocks, legitimately slow
        dense, complete = await in_thread(capability.synced_dense_index, store, session_id)
        try:
            hits = await capability.store_calls()(
                recall,
                store,
                query,
                max(1, min(k, 20)),
                method='fused' if dense is None else 'hybrid',
                namespace=capability.namespace,
                session_id=session_id,
                since=since,
                until=until,
                now=datetime.now(UTC),  # "yesterday", "two hours ago" in a query mean from now
                dense=dense,
            )
        except TimeFilterError as exc:  # the model's argument, not a failing memory: say what to send instead
            return str(exc)
        note = ''
        if dense is not None and not complete:
            note = (
                '[meaning: the newest archived blocks are still being embedded; they are found by entities and words]\n'
            )
        chars = output_chars(capability.high_water(ctx)) - len(note)
        return note + render_recall(hits, query, max_chars=chars, since=since, until=until)

    async def retrieve_page(self, ctx: RunContext[AgentDepsT], page_id: str, part: int = 1) -> str:
        """Return the archived blocks of one page of the memory index, within a token cap.

        Args:
            page_id: A page id from the index (e.g. `pg_...`) or its number.
            part: Part of the page's output when it is long (1-based).
        """
        capability = self._run_capability(ctx)
        page = item_id(page_id)
        # a number is a page of this session; an id may be another session's, when recall searches them all
        scope = capability.resolve_session_id(ctx) if not page.startswith('pg_') else capability.recall_session(ctx)

        async def work() -> str:
            return await capability.store_calls()(
                retrieve_page,
                capability.graph_store,
                page,
                session_id=scope,
                namespace=capability.namespace,
                part=part,
                max_tokens=output_chars(capability.high_water(ctx)) // 4,  # ~4 characters a token: as recover_block's
                counter=None if capability._state.compactor is None else capability._state.compactor.counter,
            )

        return await answer_or_unavailable('retrieve_page', work)
