"""`reindex_entities` and `mementograph reindex`: records archived by an older extractor get today's entities, on
every backend, without touching anything else of the archive."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from mementograph import MementoCompaction
from mementograph.cli import _reindex_cmd
from mementograph.cli._common import CliError
from mementograph.knowledge_graph import Mention
from mementograph.knowledge_graph.entities import LLMEntityExtractor, mentions_for, reindex_entities
from mementograph.knowledge_graph.memory import render_block
from mementograph.knowledge_graph.recall import rank_blocks
from mementograph.knowledge_graph.store import GraphStore, NotFoundError, SqliteStore, open_store, verify_store
from tests.conftest import open_neo4j
from tests.recall.test_llm_entities import scripted
from tests.scripted import ScriptedModel, scripted_agent


def files_only(source_id: str, text: str) -> Sequence[Mention]:
    """An older release's extractor, as far as this test cares: it linked files and nothing else."""
    return [mention for mention in mentions_for(source_id, text) if mention.entity.kind == 'file']


def archive(store: GraphStore, namespace: str, session_id: str) -> None:
    capability = MementoCompaction(
        store, max_tokens=1_500, session_id=session_id, namespace=namespace, mentions=files_only
    )
    asyncio.run(scripted_agent(ScriptedModel(steps=8), [capability]).run('Fix the modules.'))


@pytest.fixture(params=['memory', 'sqlite', 'neo4j'])
def archived(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[tuple[GraphStore, str]]:
    """(store, namespace) holding two sessions a files-only extractor linked, on each backend."""
    if request.param == 'neo4j':
        store: GraphStore = open_neo4j(request.getfixturevalue('neo4j_server'))
    else:
        store = open_store('memory://' if request.param == 'memory' else f'sqlite://{tmp_path / "memory.db"}')
    try:
        for session in ('s1', 's2'):
            archive(store, unique_namespace, session)
        yield store, unique_namespace
    finally:
        store.close()


def edges(store: GraphStore, namespace: str, source_id: str) -> set[tuple[str, int]]:
    return {(entity.key, count) for entity, count in store.entities_of(source_id, namespace=namespace)}


def expected(store: GraphStore, namespace: str, session_id: str) -> dict[str, set[tuple[str, int]]]:
    """What today's extractor finds in each block (rendered from its recovered messages) and memento."""
    wanted: dict[str, set[tuple[str, int]]] = {}
    for block in store.list_blocks(namespace=namespace, session_id=session_id):
        messages = store.recover_block(block.id, namespace=namespace).messages
        wanted[block.id] = {(m.entity.key, m.count) for m in mentions_for(block.id, render_block(messages))}
    for memento in store.list_mementos(namespace=namespace, session_id=session_id):
        wanted[memento.id] = {(m.entity.key, m.count) for m in mentions_for(memento.id, memento.text)}
    return wanted


def snapshot(store: GraphStore, namespace: str) -> tuple[object, ...]:
    """Everything a reindex must leave as it was."""
    return (
        [(b.id, b.sha256) for b in store.list_blocks(namespace=namespace, session_id=None, kind=None)],
        [(m.id, m.text, m.summarizes) for m in store.list_mementos(namespace=namespace, session_id=None)],
        store.list_pages(namespace=namespace, session_id=None),
        [len(store.read_events(s, namespace=namespace)) for s in ('s1', 's2')],
    )


def test_reindex_gives_old_records_todays_entities_and_nothing_else_changes(archived: tuple[GraphStore, str]) -> None:
    store, ns = archived
    before = snapshot(store, ns)
    wanted = expected(store, ns, 's1') | expected(store, ns, 's2')
    assert any(edges(store, ns, source) != found for source, found in wanted.items())  # the old edges differ
    assert {key for found in wanted.values() for key, _ in found if key.startswith('sym:handler_3_')}
    assert not rank_blocks(store, 'handler_3_7', method='graph', namespace=ns)  # no symbol entity yet

    for _ in range(2):  # a second run finds the same and writes the same
        report = asyncio.run(reindex_entities(store, namespace=ns))
        assert (report.sessions, report.skipped) == (2, ())
        assert report.blocks == len([k for k in wanted if k.startswith('blk_')])
        assert report.mementos == len(wanted) - report.blocks
        assert report.mentions == sum(len(found) for found in wanted.values())
        assert {source: edges(store, ns, source) for source in wanted} == wanted
        assert snapshot(store, ns) == before

    ranked = rank_blocks(store, 'handler_3_7', method='graph', namespace=ns)
    assert ranked and 'module_3' in render_block(store.recover_block(ranked[0].block_id, namespace=ns).messages)
    assert verify_store(store, namespace=ns).ok


def test_one_session_only(archived: tuple[GraphStore, str]) -> None:
    store, ns = archived
    s2 = {source: edges(store, ns, source) for source in expected(store, ns, 's2')}
    report = asyncio.run(reindex_entities(store, namespace=ns, session_id='s1'))
    assert report.sessions == 1
    assert {source: edges(store, ns, source) for source in expected(store, ns, 's1')} == expected(store, ns, 's1')
    assert {source: edges(store, ns, source) for source in s2} == s2  # the other session as it was
    with pytest.raises(NotFoundError, match="no session 'nope'"):
        asyncio.run(reindex_entities(store, namespace=ns, session_id='nope'))


def test_an_async_llm_extractor_links_what_the_model_names(tmp_path: Path) -> None:
    store = open_store(f'sqlite://{tmp_path / "memory.db"}')
    try:
        archive(store, 'default', 's1')
        extractor = LLMEntityExtractor(scripted([('Step 0', 'organisation'), ('Atlantis', 'place')]))
        asyncio.run(reindex_entities(store, extractor=extractor.mentions_for))
        keys = {entity.key for b in store.list_blocks(session_id='s1') for entity, _ in store.entities_of(b.id)}
        assert 'name:step 0' in keys and 'name:atlantis' not in keys  # the model's, where the text has it
        assert 'concept:module' in keys or any(key.startswith('sym:') for key in keys)  # the deterministic ones too
    finally:
        store.close()


def test_a_block_that_fails_its_hash_keeps_its_edges_and_is_named(tmp_path: Path) -> None:
    store = open_store(f'sqlite://{tmp_path / "memory.db"}')
    try:
        archive(store, 'default', 's1')
        blocks = store.list_blocks(session_id='s1')
        bad, good = blocks[0].id, blocks[1].id
        old_bad, old_good = edges(store, 'default', bad), edges(store, 'default', good)
        assert isinstance(store, SqliteStore)
        store._conn.execute(  # plays a corrupted disk
            "UPDATE blocks SET messages_json = CAST(replace(CAST(messages_json AS TEXT), 'a', 'b') AS BLOB) WHERE id = ?",
            (bad,),
        )
        with pytest.warns(UserWarning, match=f'{bad} .*fails its integrity check.*left as they were'):
            report = asyncio.run(reindex_entities(store))
        assert report.skipped == (bad,)
        assert edges(store, 'default', bad) == old_bad
        assert edges(store, 'default', good) != old_good
    finally:
        store.close()


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    _reindex_cmd.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def test_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = f'sqlite://{tmp_path / "memory.db"}'
    store = open_store(uri)
    archive(store, 'default', 's1')
    entities_before = store.stats().entities
    store.close()

    assert run(['reindex', '--store', uri, '--json']) == 0
    data = json.loads(capsys.readouterr().out)
    assert data['sessions'] == 1 and data['skipped'] == [] and data['blocks'] > 0 and data['mementos'] > 0
    assert data['entities_before'] == entities_before < data['entities_after']
    assert run(['reindex', '--store', uri, '--session', 's1']) == 0
    out = capsys.readouterr().out
    assert out.startswith(f'reindexed {data["blocks"]} blocks and {data["mementos"]} mementos of 1 session in ')
    assert f'{data["mentions"]} MENTIONS edges, entities {data["entities_after"]} -> {data["entities_after"]}' in out
    with pytest.raises(CliError, match="no session 'nope'") as error:
        run(['reindex', '--store', uri, '--session', 'nope'])
    assert error.value.code == 3
