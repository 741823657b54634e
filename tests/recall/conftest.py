"""A store per backend, filled through the real ingest path with a small dialogue, for the recall tests."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mementograph.eval import Dialogue, DialogueIngestor, IngestedDialogue, Segment, Turn
from mementograph.knowledge_graph.store import GraphStore, open_store
from tests.conftest import open_neo4j

DAY1 = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
DAY2 = datetime(2023, 6, 20, 9, 0, tzinfo=UTC)

_SESSION_1 = [
    ('user', 'Caroline: I went to a LGBTQ support group yesterday and it was so powerful.'),
    ('assistant', 'Melanie: Wow, that is cool, Caroline! What happened there?'),
    ('user', 'Caroline: The transgender stories were so inspiring. I felt accepted.'),
    ('assistant', 'Melanie: I am glad. I painted a lake sunrise last year, painting relaxes me.'),
    ('user', 'Caroline: I am researching adoption agencies, I want to build a family.'),
    ('assistant', 'Melanie: That is wonderful. Which agencies did you look at?'),
    ('user', 'Caroline: Mostly ones that support LGBTQ parents, like Rainbow Families in Boston.'),
    ('assistant', 'Melanie: Great choice. My kids love dinosaurs, we went to the museum.'),
]
_SESSION_2 = [
    ('user', 'Caroline: The build failed with TypeError in django/db/models/base.py again.'),
    ('assistant', 'Melanie: Run `python -m pytest tests/test_models.py -x` and check numpy==1.21.'),
    ('user', 'Caroline: Done, it passes now: 43 passed in 1.75s. The fix was in QuerySet.filter.'),
    ('assistant', 'Melanie: Nice. Next time we go camping in the mountains, bring the laptop.'),
    ('user', 'Caroline: Sure. I camped near Lake Tahoe once, it was beautiful.'),
    ('assistant', 'Melanie: We camp at the beach every summer with the kids.'),
]


def small_dialogue(session_id: str = 'conv-1') -> Dialogue:
    """Two dated sittings of a chat that touches people, places, dates, code, commands and errors."""

    def segment(name: str, start: datetime, turns: list[tuple[str, str]]) -> Segment:
        return Segment(
            name,
            tuple(
                Turn(f'{name}:{i}', role, text, start + timedelta(minutes=i))  # type: ignore[arg-type]
                for i, (role, text) in enumerate(turns)
            ),
        )

    return Dialogue(session_id, (segment('S1', DAY1, _SESSION_1), segment('S2', DAY2, _SESSION_2)))


@pytest.fixture(scope='session')
def ingested() -> IngestedDialogue:
    """The small dialogue, through the engine once (replayed into each backend)."""
    import asyncio

    store = open_store('memory://')
    try:
        return asyncio.run(DialogueIngestor(min_tokens=40).ingest(store, small_dialogue()))
    finally:
        store.close()


@pytest.fixture(params=['memory', 'sqlite', 'neo4j'])
def filled(
    request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str, ingested: IngestedDialogue
) -> Iterator[tuple[GraphStore, str]]:
    """(store, namespace) holding the small dialogue, on each backend."""
    kind = request.param
    namespace = 'default'
    if kind == 'neo4j':
        server = request.getfixturevalue('neo4j_server')
        store = open_neo4j(server)
        namespace = unique_namespace
    else:
        store = open_store('memory://' if kind == 'memory' else f'sqlite://{tmp_path / "memory.db"}')
    try:
        if namespace == 'default':
            DialogueIngestor.replay(store, ingested)
        else:
            import asyncio

            asyncio.run(DialogueIngestor(min_tokens=40, namespace=namespace).ingest(store, small_dialogue()))
        yield store, namespace
    finally:
        store.close()
