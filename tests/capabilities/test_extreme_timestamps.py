"""A conversation whose messages carry `datetime.min` / `max` timestamps is evicted like any other (its compression
raised `OverflowError` on every try, so it never was), and the archive keeps those timestamps byte for byte."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mementograph import MementoCompaction
from mementograph._messages import deserialize_messages, serialize_messages
from mementograph.knowledge_graph.store import GraphStore, verify_store
from tests.capabilities.conftest import FILE_BACKENDS, opened_backend
from tests.scripted import stub_texts

EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)


@pytest.fixture(params=FILE_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[tuple[GraphStore, str]]:
    """(store, namespace): a SQLite file, or the shared Neo4j server under a namespace of the test's own."""
    with opened_backend(request, tmp_path, unique_namespace) as opened:
        yield opened.store, opened.namespace


def _chat(stamp: datetime, turns: int) -> list[ModelMessage]:
    """A chat said at `stamp`, full of relative dates to anchor against it."""
    history: list[ModelMessage] = []
    for turn in range(turns):
        history.append(
            ModelRequest(
                parts=[
                    UserPromptPart(
                        f'Caroline: Yesterday I went to the lake with Anna for the {turn}th time, and last year we '
                        f'went to Boston; tomorrow we plan trip number {turn} and three days ago we bought boots.',
                        timestamp=stamp,
                    )
                ],
                timestamp=stamp,
            )
        )
        history.append(
            ModelResponse(
                parts=[TextPart(f'Melanie: Next week I paint sunrise number {turn}; last month I sold two of them.')],
                timestamp=stamp,
            )
        )
    return history


def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart('Noted.')])


@pytest.mark.parametrize(
    ('stamp', 'zone'), [(EARLIEST, 'America/Los_Angeles'), (LATEST, 'Asia/Tokyo')], ids=['min-west', 'max-east']
)
async def test_a_chat_at_either_end_of_the_calendar_is_evicted_and_archived_exactly(
    backend: tuple[GraphStore, str], stamp: datetime, zone: str
) -> None:
    store, namespace = backend
    history = _chat(stamp, turns=24)
    capability = MementoCompaction(store, max_tokens=1_500, namespace=namespace, session_id='s', timezone=zone)
    result = await Agent(FunctionModel(_answer), capabilities=[capability]).run(
        'What did I do yesterday?', message_history=history
    )

    assert stub_texts(result.all_messages())  # evicted: its mementos were made
    blocks = store.list_blocks(namespace=namespace, session_id='s')
    assert blocks and all(block.started_at == stamp.isoformat() for block in blocks)
    log = [
        message
        for event in store.read_events('s', namespace=namespace)
        if event.kind == 'message'
        for message in deserialize_messages(event.payload)
    ]
    assert serialize_messages(log[: len(history)]) == serialize_messages(history)  # the timestamps byte for byte
    for block in blocks:
        recovered = store.recover_block(block.id, namespace=namespace, session_id='s')
        assert serialize_messages(recovered.messages) == serialize_messages(
            log[block.first_message : block.last_message + 1]  # the run's own turn too, archived at its end
        )
    assert verify_store(store, namespace=namespace, session_id='s').ok
