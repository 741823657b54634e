"""Isolation: the memory tools of one namespace and session never reach another's archive, on one real SQLite file
and on the shared Neo4j server. An id from elsewhere is simply not found."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mementograph import MementoCompaction, open_store
from mementograph.knowledge_graph.store import GraphStore
from tests.capabilities.probe import ProbeModel, own_pointer, probe_agent, tool_returns
from tests.conftest import open_neo4j


@dataclass
class Shared:
    store: GraphStore
    prefix: str


@pytest.fixture(params=['sqlite', pytest.param('neo4j', marks=pytest.mark.neo4j)])
def shared(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[Shared]:
    if request.param == 'sqlite':
        store = open_store(f'sqlite://{tmp_path / "shared.db"}')
    else:
        store = open_neo4j(request.getfixturevalue('neo4j_server'))
    try:
        yield Shared(store, unique_namespace)
    finally:
        for namespace in (f'{unique_namespace}-a', f'{unique_namespace}-b'):
            for session in store.list_sessions(namespace=namespace):
                store.delete_session(session.id, namespace=namespace)
        store.close()


async def _archive_alpha(shared: Shared) -> tuple[str, list[str], list[str], list[str]]:
    """Session `alpha` of namespace `-a` archives blocks that all say ZEBRAALPHA; its own tools find them."""
    namespace = f'{shared.prefix}-a'
    model = ProbeModel('ZEBRAALPHA', probes=[('recall', {'query': 'ZEBRAALPHA'}), ('recover_block', own_pointer)])
    capability = MementoCompaction(shared.store, namespace=namespace, session_id='alpha', max_tokens=2_500)
    await probe_agent(model, [capability]).run('Read every module.')

    # positive controls: the queries below do find this archive from inside its own scope
    [found] = tool_returns(model, 'recall')
    assert found.startswith('1. recover_block(')
    [recovered] = tool_returns(model, 'recover_block')
    assert 'sha256 verified' in recovered and 'ZEBRAALPHA' in recovered

    blocks = [b.id for b in shared.store.list_blocks(namespace=namespace, session_id='alpha')]
    mementos = [m.id for m in shared.store.list_mementos(namespace=namespace, session_id='alpha')]
    pages = [p.id for p in shared.store.list_pages(namespace=namespace, session_id='alpha')]
    assert blocks and mementos and pages
    return namespace, blocks, mementos, pages


@pytest.mark.parametrize('where', ['other-namespace', 'same-namespace-other-session'])
async def test_ids_of_another_scope_are_not_found(shared: Shared, where: str) -> None:
    alpha_namespace, blocks, mementos, pages = await _archive_alpha(shared)
    namespace = f'{shared.prefix}-b' if where == 'other-namespace' else alpha_namespace
    model = ProbeModel(
        'QUOKKABETA',
        probes=[
            ('recover_block', {'block_id': blocks[0]}),
            ('recover_block', {'block_id': mementos[0]}),
            ('retrieve_page', {'page_id': pages[0]}),
            ('retrieve_page', {'page_id': '1'}),
            ('recall', {'query': 'ZEBRAALPHA module', 'k': 20}),
            ('recover_block', own_pointer),
        ],
    )
    capability = MementoCompaction(shared.store, namespace=namespace, session_id='beta', max_tokens=2_500)
    result = await probe_agent(model, [capability]).run('Read every module.')

    foreign_block, foreign_memento, own = tool_returns(model, 'recover_block')
    assert foreign_block == f'No archived block {blocks[0]!r} in this session. Use the id a memento or recall names.'
    assert (
        foreign_memento == f'No archived block {mementos[0]!r} in this session. Use the id a memento or recall names.'
    )
    assert 'sha256 verified' in own and 'QUOKKABETA' in own  # the tool itself works

    by_id, by_number = tool_returns(model, 'retrieve_page')
    assert by_id.startswith(f"No page '{pages[0]}' in this session")
    assert by_number.startswith('[page 1 ') and 'QUOKKABETA' in by_number  # its own page 1, not alpha's
    [recalled] = tool_returns(model, 'recall')
    assert 'zebraalpha' not in by_number.lower() and 'zebraalpha' not in recalled.lower()
    # whatever they list is beta's own (beta's archive may quote alpha's ids: its own probe calls are in it)
    own_ids = {b.id for b in shared.store.list_blocks(namespace=namespace, session_id='beta')}
    own_ids |= {m.id for m in shared.store.list_mementos(namespace=namespace, session_id='beta')}
    listed = re.findall(r'\[block (blk_[0-9a-f]+):', by_number) + re.findall(
        r'^\d+\. recover_block\("(\w+)"\)', recalled, re.M
    )
    assert listed and set(listed) <= own_ids
    assert result.output == 'QUOKKABETA: all 8 modules read.'
    # and alpha's archive is untouched by beta's run
    assert [b.id for b in shared.store.list_blocks(namespace=alpha_namespace, session_id='alpha')] == blocks
