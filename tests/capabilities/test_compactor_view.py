"""`SessionCompactor.view`'s cache of the laid-out prefix: a growing history costs only its new messages, and a
history changed in its prefix is laid out and counted anew."""

from __future__ import annotations

import copy

from mementograph import open_store
from mementograph._tokens import TokenCounter
from mementograph.capabilities import CompactionPolicy, SessionCompactor
from mementograph.knowledge_graph.memory import MementoEngine
from tests.builders import session_history, user


def compactor() -> SessionCompactor:
    return SessionCompactor(
        store=open_store('memory://'), session_id='s', namespace='default', counter=TokenCounter(),
        engine=MementoEngine(), policy=CompactionPolicy(high_water_tokens=100_000, low_water_tokens=50_000),
    )  # fmt: skip


def test_tokens_follow_a_history_that_grows_and_one_rewritten_in_its_prefix() -> None:
    session = compactor()
    count = session.counter.count_messages
    history = session_history(20)
    assert session.tokens(history) == count(history)
    grown = [*history, user('one more question', 99)]
    slots = session.view(grown)
    assert session.tokens(grown) == count(grown) and session.view(grown) is slots  # the same layout, reused

    rewritten = list(grown)
    rewritten[3] = user('a much longer message than the one it replaces ' * 40, 3)
    assert session.tokens(rewritten) == count(rewritten) > count(grown)
    assert len(session.view(rewritten)) == len(rewritten)

    shorter = rewritten[:10]  # a history cut back (a compaction by another capability)
    assert session.tokens(shorter) == count(shorter)

    copied = [copy.deepcopy(message) for message in shorter]  # equal messages, other objects: the same count
    assert session.tokens(copied) == count(copied) == count(shorter)
