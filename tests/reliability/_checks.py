"""What every fault test checks after the dust settles, against the real store.

`session_problems` is this suite's own checker: the session log is whole, every archived block and stubbed part
recovers (sha256-checked) to exactly the logged messages, nothing is archived twice, and -- what a store-only check
cannot know -- every original message the agent produced (`originals`, recorded outside the capability) is in the
live context or recoverable byte for byte. `verify_problems` is the library's own `verify_store`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence

from pydantic_ai.messages import ModelMessage

from mementograph._messages import serialize_messages
from mementograph._tokens import TokenCounter
from mementograph.capabilities._layout import layout
from mementograph.knowledge_graph.store import GraphStore, StoreError, verify_store


def one(message: ModelMessage) -> bytes:
    """A message's exact bytes, as the session log holds it."""
    return serialize_messages([message])


def log_payloads(store: GraphStore, session_id: str, *, namespace: str) -> tuple[list[bytes], list[str]]:
    """The session log's messages in order, and any problem with the log itself."""
    problems: list[str] = []
    indices: list[int] = []
    payloads: list[bytes] = []
    for event in store.read_events(session_id, namespace=namespace):
        if event.kind == 'message':
            indices.append(-1 if event.message_index is None else event.message_index)
            payloads.append(event.payload)
    if indices != list(range(len(indices))):
        duplicated = [i for i, n in Counter(indices).items() if n > 1]
        problems.append(f'log message positions are not 0..{len(indices) - 1} once each (duplicated: {duplicated})')
    return payloads, problems


def session_problems(
    store: GraphStore,
    session_id: str,
    *,
    namespace: str,
    originals: Sequence[bytes],
    live: Sequence[ModelMessage] | None,
    restamped: Mapping[int, bytes] | None = None,
) -> list[str]:
    """Everything wrong with one session after a fault; `[]` when it is whole.

    Args:
        store: the real store (not the faulty wrapper).
        session_id: the session.
        namespace: its namespace.
        originals: every message the agent produced, in order, as exact bytes (position i is log position i).
        live: the context the session ended with (`result.all_messages()` of its last run); `None` right after a
            crash, when no context survived: then only the store is checked against `originals`.
        restamped: positions whose request pydantic-ai re-stamped when a run resumed from it after a crash
            (`Recorder.restamped`): a new `timestamp`, and the `instructions` in force now (the page index may have
            changed since); the log holds the earlier bytes, the session the new ones.
    """
    problems: list[str] = []
    log, log_problems = log_payloads(store, session_id, namespace=namespace)
    problems += log_problems
    if len(log) != len(originals):
        problems.append(f'the log holds {len(log)} messages, the agent produced {len(originals)}')
    restamped = dict(restamped or {})
    for index, (logged, original) in enumerate(zip(log, originals, strict=False)):
        if index in restamped:
            if logged != restamped[index] or not same_but_stamps(logged, original):
                problems.append(f'log position {index} differs from the resumed request beyond its stamps')
        elif logged != original:
            problems.append(f'log position {index} differs from the message the agent produced there')

    # every block and stubbed part recovers, hash-checked, to exactly the logged messages it covers
    recoverable: dict[int, set[bytes]] = {}
    blocks = store.list_blocks(namespace=namespace, session_id=session_id, kind=None)
    ids = Counter(block.id for block in blocks)
    problems += [f'block {block_id} listed {n} times' for block_id, n in ids.items() if n > 1]
    covered: dict[int, str] = {}
    parts: dict[int, str] = {}
    for block in blocks:
        try:
            recovered = store.recover_block(block.id, namespace=namespace, session_id=session_id)
        except StoreError as exc:
            problems.append(f'block {block.id} does not recover: {type(exc).__name__}: {exc}')
            continue
        positions = range(block.first_message, block.last_message + 1)
        if len(recovered.messages) != len(positions):
            problems.append(f'block {block.id} recovers {len(recovered.messages)} messages for {len(positions)}')
        for position, message in zip(positions, recovered.messages, strict=False):
            data = one(message)
            recoverable.setdefault(position, set()).add(data)
            resumed = position in restamped and position < len(originals) and data == originals[position]
            if position < len(log) and log[position] != data and not resumed:
                problems.append(f'block {block.id} differs from log position {position}')
            claims = parts if block.kind == 'part' else covered
            if position in claims:
                problems.append(f'log position {position} is archived twice: {claims[position]} and {block.id}')
            claims[position] = block.id

    # one memento per block, every block on exactly one page, no page listing a block twice
    level_one = Counter(
        target for memento in store.list_mementos(namespace=namespace, session_id=session_id)
        for target in memento.summarizes if not target.startswith('mem_')
    )  # fmt: skip
    block_ids = {block.id for block in blocks if block.kind == 'block'}
    for block_id in sorted(block_ids):
        if level_one[block_id] != 1:
            problems.append(f'block {block_id} is summarized by {level_one[block_id]} mementos, expected 1')
    on_pages: Counter[str] = Counter()
    paged: list[str] = []
    for page in store.list_pages(namespace=namespace, session_id=session_id):
        listed = Counter(page.block_ids)
        problems += [f'page {page.number} lists block {b} {n} times' for b, n in listed.items() if n > 1]
        on_pages.update(set(page.block_ids))
        paged += page.block_ids
    for block_id in sorted(block_ids):
        if on_pages[block_id] != 1:
            problems.append(f'block {block_id} is on {on_pages[block_id]} pages, expected 1')
    in_order = [block.id for block in sorted(blocks, key=lambda b: b.seq) if block.kind == 'block']
    if paged != in_order:
        problems.append('the pages do not list the blocks once each in session order')

    if live is None:
        return problems

    # the live context: stubs point at archived records, no message is there twice (original and stubbed)
    slots, _ = layout(live)
    live_originals: dict[int, bytes] = {}
    stubbed: set[int] = set()
    previous_target: str | None = None
    for slot in slots:
        if slot.stub is None:
            if slot.log_index in live_originals or slot.log_index in stubbed:
                problems.append(f'log position {slot.log_index} is in the live context twice')
            live_originals[slot.log_index] = one(live[slot.index])
            previous_target = None
            continue
        if slot.stub.target_id not in ids and not _memento_exists(store, slot.stub.target_id, namespace, session_id):
            problems.append(f'a stub points at {slot.stub.target_id}, which the store does not hold')
        span = set(range(slot.stub.first_message, slot.stub.last_message + 1))
        if span & stubbed and slot.stub.target_id != previous_target:  # a two-message stub covers one span
            problems.append(f'positions {sorted(span & stubbed)} are stubbed twice in the live context')
        stubbed |= span
        previous_target = slot.stub.target_id
    if stubbed & set(live_originals):
        problems.append(f'positions {sorted(stubbed & set(live_originals))} are both stubbed and live')

    # every original message: live and exact, or recoverable and exact
    for index, original in enumerate(originals):
        if live_originals.get(index) == original:
            continue
        if original in recoverable.get(index, set()):
            continue
        where = 'live but altered' if index in live_originals else 'neither live nor recoverable'
        problems.append(f'original message {index} is {where}')
    return problems


def same_but_stamps(left: bytes, right: bytes) -> bool:
    """Two one-message serializations that differ at most in what pydantic-ai stamps on a request it sends again:
    its `timestamp` and its `instructions`. The parts, what the conversation said, must be identical."""
    a, b = json.loads(left), json.loads(right)
    for message in (*a, *b):
        message.pop('timestamp', None)
        message.pop('instructions', None)
    return bool(a == b)


def _memento_exists(store: GraphStore, memento_id: str, namespace: str, session_id: str) -> bool:
    try:
        store.get_memento(memento_id, namespace=namespace, session_id=session_id)
    except StoreError:
        return False
    return True


def verify_problems(store: GraphStore, *, namespace: str, session_id: str | None = None) -> list[str]:
    """The library's own check (`verify_store`: hashes, SUMMARIZES, NEXT chain, pages); `[]` when it passes."""
    report = verify_store(store, namespace=namespace, session_id=session_id)
    return [] if report.ok else [f'verify_store: {p.kind} {p.subject_id}: {p.detail}' for p in report.problems]


def positions(messages: Sequence[ModelMessage]) -> list[int]:
    """The log positions a context holds, as originals or behind stubs, in order (a whole context: 0..n-1)."""
    slots, _ = layout(messages)
    out: list[int] = []
    for slot in slots:
        if slot.stub is None:
            out.append(slot.log_index)
        elif not out or out[-1] < slot.stub.last_message:
            out.extend(range(slot.stub.first_message, slot.stub.last_message + 1))
    return out


def outage_problems(
    seen: Sequence[Sequence[ModelMessage]], originals_at: Mapping[int, int], *, down: range, max_tokens: int
) -> list[str]:
    """What is wrong with a run whose store was out during the requests `down` (1-based): each of them must have
    sent the whole context (nothing evicted that could not be archived), which grew past the mark, and the last
    request must be back under it (compaction caught up). `originals_at[r]`: originals recorded by request `r`."""
    counter = TokenCounter()
    problems = [
        f'request {request} lost messages'
        for request in down
        if positions(seen[request - 1]) != list(range(originals_at[request]))
    ]
    if counter.count_messages(seen[down[-1] - 1]) <= max_tokens:
        problems.append('the outage never held compaction')
    if counter.count_messages(seen[-1]) > max_tokens:
        problems.append('compaction did not catch up')
    return problems
