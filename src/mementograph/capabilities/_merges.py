"""`_merges` -- logged requests that pydantic-ai merged into one, taken apart again.

pydantic-ai cleans the `message_history` a run is given: consecutive requests become one request (their parts
joined, tool results first; the run and conversation ids dropped, the later timestamp kept). A history holds
consecutive requests whenever a run ended with a request -- a structured-output run ends with the output tool's
`'Final result processed.'` return -- and the next run's prompt followed it. The session log holds those requests
as they arrived, one position each, so the history a later run gets no longer matches the log message for message;
taken apart again, it does, and the run goes on from the log's end instead of logging the whole conversation again.
A memento stub is never part of such a merge: its end beside a request is a response (`_layout.stub_shape`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelRequestPart

__all__ = ('split_merged',)

_PartKey = tuple[str, str | None, datetime | None]


def _key(part: ModelRequestPart) -> _PartKey:
    """What survives a trip through the log unchanged, redacted or not: a part's kind, tool call and timestamp."""
    return part.part_kind, getattr(part, 'tool_call_id', None), getattr(part, 'timestamp', None)


def split_merged(merged: ModelMessage, logged: Sequence[ModelMessage]) -> list[ModelRequest] | None:
    """The requests `logged` as they were before pydantic-ai merged them into `merged`: each one's own fields (its
    timestamp, run and conversation ids, metadata), read from the log, with `merged`'s live parts in its own order;
    `None` when `merged` does not hold exactly their parts.

    The caller checks each result against the log's sha256: a key two parts share (the same kind and timestamp)
    could be matched the wrong way round, and then a request does not come out as logged.
    """
    if not isinstance(merged, ModelRequest) or not logged or not all(isinstance(m, ModelRequest) for m in logged):
        return None
    if sum(len(message.parts) for message in logged) != len(merged.parts):
        return None
    unused = list(merged.parts)
    out: list[ModelRequest] = []
    for message in logged:
        assert isinstance(message, ModelRequest)
        parts: list[ModelRequestPart] = []
        for part in message.parts:
            key = _key(part)
            at = next((i for i, live in enumerate(unused) if _key(live) == key), None)
            if at is None:
                return None
            parts.append(unused.pop(at))
        # the live instructions, not the log's (redacted there): a merge keeps one text, that of every request
        # that had some (pydantic-ai merges requests only when their instructions agree)
        instructions = merged.instructions if message.instructions else None
        out.append(replace(message, parts=parts, instructions=instructions))
    return out
