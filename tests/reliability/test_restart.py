"""The Neo4j server stopped in the middle of an agent run and started again, on a private server of this test's own
(never the shared one).

While the server is down the run goes on: every request sends the whole context (nothing is evicted that could
not be archived), the context grows past the high-water mark, and warnings say why. Once the server is back the
session log catches up and compaction brings the context back down. Then: every original message is live or
recoverable byte for byte, the store verifies, and a second run continuing the session archives nothing twice.
"""

from __future__ import annotations

import logging
import warnings

import pytest

from mementograph import MementoWarning, open_store
from tests.reliability._checks import outage_problems, session_problems, verify_problems
from tests.reliability._server import PrivateNeo4j
from tests.reliability._session import Recorder, StepModel, final_text, run_session

pytestmark = pytest.mark.neo4j

MAX_TOKENS = 1_500
STOP_AT, START_AT = 5, 8
"""Requests (1-based) during which the server is stopped, and started again."""


async def test_server_stopped_mid_run_then_started_again(
    private_neo4j: PrivateNeo4j, unique_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    ns, session = unique_namespace, 'restart'
    store = open_store(f'{private_neo4j.uri}?retry_time=0')  # fail fast while the server is down
    recorder = Recorder()
    originals_at: dict[int, int] = {}

    def during(request: int) -> None:
        originals_at[request] = len(recorder.originals)
        if request == STOP_AT:
            private_neo4j.stop()
            assert not private_neo4j.running()
        elif request == START_AT:
            private_neo4j.start()

    model = StepModel(steps=6, on_request=during)
    try:
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO, logger='mementograph'):
            warnings.simplefilter('always')
            live, _ = await run_session(
                store, session, ns, tasks=1, max_tokens=MAX_TOKENS, recorder=recorder, model=model
            )
        assert live[-1].parts[0].content == final_text(1)  # type: ignore[union-attr]
        said = [str(w.message) for w in caught if issubclass(w.category, MementoWarning)]
        assert any('unavailable' in s or 'failed' in s for s in said), said

        # the requests whose hooks ran while the server was down sent everything; back up, compaction caught up
        down = range(STOP_AT + 1, START_AT + 1)
        assert outage_problems(model.seen, originals_at, down=down, max_tokens=MAX_TOKENS) == []
        # the failures were reported while they lasted, not once and then silenced: each new reason is warned
        # about, and a repeated one is logged again (at INFO)
        reported = [r for r in caplog.records if 'continuing with the full context' in r.getMessage()]
        assert len(reported) >= 2 and len(said) >= 1

        problems = session_problems(store, session, namespace=ns, originals=recorder.originals, live=live)
        assert problems == []
        assert verify_problems(store, namespace=ns, session_id=session) == []

        # the session continues (message_history) on the restarted server without archiving anything twice
        archived = len(store.list_blocks(namespace=ns, session_id=session))
        live, _ = await run_session(
            store, session, ns, tasks=2, steps=3, max_tokens=MAX_TOKENS, history=live, recorder=recorder,
            model=StepModel(steps=3),
        )  # fmt: skip
        assert live[-1].parts[0].content == final_text(2)  # type: ignore[union-attr]
        assert len(store.list_blocks(namespace=ns, session_id=session)) > archived
        assert session_problems(store, session, namespace=ns, originals=recorder.originals, live=live) == []
        assert verify_problems(store, namespace=ns, session_id=session) == []
    finally:
        store.close()
        if not private_neo4j.running():  # a failure while it was down: leave it up for teardown's clean stop
            private_neo4j.start()
