"""Messages the session log cannot take yet: a `redact` hook that fails on one message holds the log there (nothing
is written unredacted, nothing after it is written out of order, nothing it covers is evicted), warns once a run,
and the run's end says how many messages are missing and what becomes of them; nothing is lost for good."""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import RunContext
from pydantic_ai.messages import ModelRequest, UserPromptPart

from mementograph import MementoCompaction, MementoWarning, open_store
from mementograph._messages import deserialize_messages, message_text, serialize_messages
from mementograph.capabilities._logwriter import SessionLogWriter
from mementograph.knowledge_graph.store import GraphStore, StoreUnavailableError, verify_store
from tests.conftest import neo4j_uri_with_auth
from tests.reliability._session import Recorder
from tests.scripted import ScriptedModel, is_original, scripted_agent, stub_texts

MARK = 'handler_3_'
"""What the failing hook cannot take: the step-3 file read's result (not the call, which comes in the same append)."""


@pytest.fixture(params=['sqlite', pytest.param('neo4j', marks=pytest.mark.neo4j)])
def real(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[tuple[str, str]]:
    """(store URI, namespace): a SQLite file, or the shared Neo4j server under a namespace of the test's own."""
    if request.param == 'sqlite':
        yield f'sqlite://{tmp_path / "m.db"}', unique_namespace
        return
    uri = neo4j_uri_with_auth(request.getfixturevalue('neo4j_server'))
    yield uri, unique_namespace
    with open_store(uri) as store:
        for session in store.list_sessions(namespace=unique_namespace):
            store.delete_session(session.id, namespace=unique_namespace)


def logged(store: GraphStore, namespace: str) -> list[Any]:
    events = [e for e in store.read_events('s', namespace=namespace) if e.kind == 'message']
    assert [e.message_index for e in events] == list(range(len(events)))  # in order, no gap, no position twice
    return [deserialize_messages(e.payload)[0] for e in events]


def as_bytes(messages: list[Any]) -> list[bytes]:
    return [serialize_messages([message]) for message in messages]


def archived_text(store: GraphStore, namespace: str) -> str:
    """Everything the store holds of the session, as text: the log, every block and stubbed part, every memento."""
    texts = [e.payload.decode() for e in store.read_events('s', namespace=namespace)]
    for block in store.list_blocks(namespace=namespace, session_id='s', kind=None):
        texts.append(
            serialize_messages(store.recover_block(block.id, namespace=namespace, session_id='s').messages).decode()
        )
    texts += [m.text for m in store.list_mementos(namespace=namespace, session_id='s')]
    return '\n'.join(texts)


class FailsOn:
    """A hook that fails on any text naming `mark`, each time with another message (as a hook quoting what it
    failed on would); counts its calls."""

    def __init__(self, mark: str) -> None:
        self.mark = mark
        self.failures = itertools.count(1)
        self.lock = threading.Lock()

    def __call__(self, text: str) -> str:
        if self.mark in text:
            with self.lock:
                raise ValueError(f'failure {next(self.failures)}: cannot redact {text[:24]!r}')
        return text


def _warned(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if w.category is MementoWarning]


async def test_a_hook_failing_on_one_message_holds_the_log_there_and_loses_nothing(real: tuple[str, str]) -> None:
    uri, namespace = real
    store = open_store(uri)
    hook = FailsOn(MARK)
    capability = MementoCompaction(store, max_tokens=2_000, session_id='s', namespace=namespace, redact=hook)
    recorder = Recorder()  # every message as it arrived, outside the capability
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = await scripted_agent(ScriptedModel(steps=8), [capability]).run('Go.', capabilities=[recorder])
    history = result.all_messages()
    assert result.output.startswith('All 8 modules pass')

    # the log holds every message before the first the hook fails on, exactly; nothing of it or after it
    first = next(i for i, m in enumerate(history) if MARK in message_text(m))
    log = logged(store, namespace)
    arrived = list(recorder.originals)
    assert as_bytes(log) == arrived[: len(log)] and MARK not in message_text(log[-1])
    assert MARK.encode() in arrived[len(log)]
    assert MARK not in archived_text(store, namespace)  # never written unredacted, nor derived from
    # what it could not archive stays in the context: every message naming the mark is live and whole
    assert stub_texts(history)  # evictions before it happened
    assert all(is_original(m) for m in history[first:])
    # one warning names the hook's error, whichever message it failed on; the run's end says what is missing
    warned = _warned(caught)
    naming = [m for m in warned if 'cannot redact' in m]
    assert len(naming) == 1 and naming[0].startswith('mementograph: the redact hook failed: ValueError: failure ')
    assert 'nothing is written unredacted' in naming[0]
    missing = len(arrived) - len(log)
    ends = [m for m in warned if 'could not complete the session log' in m]
    assert ends == [
        f"mementograph: could not complete the session log of session 's': {missing} messages not in it yet (the "
        'redact hook fails on the first of them, as warned; nothing was written unredacted); they are in the '
        "run's result, and a run that continues the session (message_history) logs them"
    ]

    # the next run, with the hook mended, logs them all, in order, where they belong
    hook.mark = 'never in any message'
    await scripted_agent(ScriptedModel(steps=1), [capability]).run(
        'One more.', message_history=history, capabilities=[recorder]
    )
    assert as_bytes(logged(store, namespace)) == recorder.originals
    assert verify_store(store, namespace=namespace, session_id='s').ok
    store.close()


class FailsAWhile:
    """`FailsOn(everything)` for its first `calls` calls, then an identity hook: a redaction service that was down."""

    def __init__(self, calls: int) -> None:
        self.left = calls
        self.lock = threading.Lock()

    def __call__(self, text: str) -> str:
        with self.lock:
            if self.left > 0:
                self.left -= 1
                raise ConnectionError('redaction service unreachable')
        return text


async def test_a_hook_that_fails_for_a_while_delays_the_log_and_loses_nothing(real: tuple[str, str]) -> None:
    uri, namespace = real
    store = open_store(uri)
    capability = MementoCompaction(
        store, max_tokens=2_000, session_id='s', namespace=namespace, redact=FailsAWhile(calls=6)
    )
    recorder = Recorder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = await scripted_agent(ScriptedModel(steps=8), [capability]).run('Go.', capabilities=[recorder])

    assert as_bytes(logged(store, namespace)) == recorder.originals  # every message, in order, once
    warned = _warned(caught)
    assert sum('redaction service unreachable' in m for m in warned) == 1
    assert not [m for m in warned if 'could not complete the session log' in m]
    assert stub_texts(result.all_messages()) and verify_store(store, namespace=namespace, session_id='s').ok
    store.close()


async def test_the_runs_end_says_how_many_messages_the_log_is_missing(real: tuple[str, str]) -> None:
    """The store fails from the middle of the run on: its end counts what the log lacks, and the next run writes
    exactly that many."""
    uri, namespace = real
    store = open_store(uri)
    model = ScriptedModel(steps=6)
    capability = MementoCompaction(store, max_tokens=100_000, session_id='s', namespace=namespace)
    agent = scripted_agent(model, [capability])

    @agent.tool
    def lose_the_store(ctx: RunContext[None]) -> str:
        """The store goes away once the log holds what came before and its writer is idle (an append cut off by the
        close could have committed, or not: the count would then be an upper bound, the next test's case)."""
        compactor = capability._latest_run.compactor
        assert compactor is not None
        deadline = time.monotonic() + 30
        while (
            store.last_message_index('s', namespace=namespace) < len(ctx.messages) - 2  # all but this call
            or compactor.log_waiting()  # an append returns after its commit is seen
        ):
            assert time.monotonic() < deadline, 'the log did not catch up'
            time.sleep(0.05)
        store.close()
        return 'gone'

    from pydantic_ai.messages import ToolCallPart

    model.extra_calls = [ToolCallPart('lose_the_store', {}, tool_call_id='lose')]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = await agent.run('Go.')
    [end] = [m for m in _warned(caught) if 'could not complete the session log' in m]
    assert not [m for m in _warned(caught) if 'the session log holds every message' in m]  # it does not

    reopened = open_store(uri)
    before = len(logged(reopened, namespace))
    missing = len(result.all_messages()) - before
    assert missing >= 2  # the tool's result and the final answer at least
    assert end.startswith(
        f"mementograph: could not complete the session log of session 's': {missing} messages not in it yet ("
    )
    assert end.endswith(
        "they are in the run's result, and a run that continues the session (message_history) logs them"
    )
    more = await scripted_agent(
        ScriptedModel(steps=0), [MementoCompaction(reopened, max_tokens=100_000, session_id='s', namespace=namespace)]
    ).run('And now?', message_history=result.all_messages())
    log = logged(reopened, namespace)
    assert len(log) == before + missing + len(more.new_messages())
    assert serialize_messages(log[: len(result.all_messages())]) == serialize_messages(result.all_messages())
    reopened.close()


@pytest.mark.neo4j
def test_an_append_cut_off_by_the_stores_close_is_never_counted_as_missing_for_sure(
    neo4j_server: dict[str, str], unique_namespace: str
) -> None:
    """The store is closed the moment an append's commit is seen, while the append may still be returning: the
    driver then fails in ways of its own, after the server committed. The writer's count of what the log lacks is
    then an upper bound, said so (`waiting_exactly`); a count it gives as exact is exact. Without the store saying
    such a write may have landed, the count was the whole batch, and once a raw AttributeError of the driver."""
    uri = neo4j_uri_with_auth(neo4j_server)
    batch = [
        (index, ModelRequest(parts=[UserPromptPart(f'message {index}: ' + 'words ' * 200)])) for index in range(1, 8)
    ]
    cut_off = 0
    for trial in range(40):
        session = f's{trial}'
        store = open_store(uri)
        writer = SessionLogWriter(store, session, unique_namespace)
        writer.submit([(0, ModelRequest(parts=[UserPromptPart('first')]))])
        writer.flush()
        writer.submit(batch)
        deadline = time.monotonic() + 30
        while store.last_message_index(session, namespace=unique_namespace) < 7:
            assert time.monotonic() < deadline, 'the append did not land'
        store.close()
        with contextlib.suppress(StoreUnavailableError):
            writer.close(timeout=30)
        with open_store(uri) as reader:
            missing = 7 - reader.last_message_index(session, namespace=unique_namespace)
        assert missing == 0  # the commit was seen
        if writer.waiting():
            cut_off += 1
            assert not writer.waiting_exactly(), f'trial {trial}: {writer.waiting()} counted as missing for sure'
        else:
            assert writer.waiting_exactly()
    print(f'{cut_off} of 40 appends cut off after their commit')  # how often the race was met, for -s
