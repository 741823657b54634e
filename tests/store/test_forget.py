"""`delete_session` and `mementograph forget` on every backend: everything of the session goes (proved by SQL or
Cypher behind the store's API), everything of other sessions stays, and the archive still verifies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mementograph.knowledge_graph.store import GraphStore, SqliteStore, open_store, verify_store
from tests.store.conftest import Backend
from tests.store.test_verify import Archived, archive, cli, is_neo4j, raw


@pytest.fixture
def archived(backend: Backend) -> Iterator[dict[str, Archived]]:
    store, ns = backend.store, backend.namespace
    sessions = {sid: archive(store, ns, sid) for sid in ('a', 'b')}
    assert store.search_text('marker', namespace=ns)  # the full-text index holds both sessions before the delete
    for session in sessions.values():  # dense recall's vectors: derived from the text, so they go with it
        assert store.write_vectors('test:m', [(b, b'\1' * 16) for b in session.block_ids], namespace=ns) > 0
    yield sessions
    if is_neo4j(backend):  # the server is shared: leave nothing behind
        for sid in ('a', 'b'):
            backend.store.delete_session(sid, namespace=ns)


def residue(backend: Backend, session: Archived) -> dict[str, int]:
    """What the database still holds of a session, counted behind the store's back."""
    ns = backend.namespace
    ids = [*session.block_ids, session.part_id, *session.memento_ids, session.top_memento_id]
    if is_neo4j(backend):
        counts = {
            'nodes': raw(
                backend,
                cypher='MATCH (n) WHERE n.namespace = $ns AND (n.session_id = $sid OR (n:Session AND n.id = $sid)) '
                'RETURN count(n)',
                ns=ns,
                sid=session.session_id,
            )[0][0],
            'by_id': raw(backend, cypher='MATCH (n) WHERE n.id IN $ids RETURN count(n)', ids=ids)[0][0],
            'unmentioned_entities': raw(
                backend,
                cypher='MATCH (e:Entity {namespace: $ns}) WHERE NOT EXISTS { (e)<-[:MENTIONS]-() } RETURN count(e)',
                ns=ns,
            )[0][0],
        }
        return {key: int(value) for key, value in counts.items()}
    marks = ','.join(f':id{i}' for i in range(len(ids)))
    by_id = {f'id{i}': value for i, value in enumerate(ids)}
    scope = {'ns': ns, 'sid': session.session_id}
    queries = {
        'sessions': ('SELECT count(*) FROM sessions WHERE namespace = :ns AND id = :sid', scope),
        'blocks': ('SELECT count(*) FROM blocks WHERE namespace = :ns AND session_id = :sid', scope),
        'mementos': ('SELECT count(*) FROM mementos WHERE namespace = :ns AND session_id = :sid', scope),
        'pages': ('SELECT count(*) FROM pages WHERE namespace = :ns AND session_id = :sid', scope),
        'events': ('SELECT count(*) FROM events WHERE namespace = :ns AND session_id = :sid', scope),
        'text_fts': ('SELECT count(*) FROM text_fts WHERE namespace = :ns AND session_id = :sid', scope),
        'vectors': ('SELECT count(*) FROM vectors WHERE namespace = :ns AND session_id = :sid', scope),
        'mentions': (f'SELECT count(*) FROM mentions WHERE source_id IN ({marks})', by_id),
        'page_blocks': (f'SELECT count(*) FROM page_blocks WHERE block_id IN ({marks})', by_id),
        'unmentioned_entities': (
            'SELECT count(*) FROM entities WHERE namespace = :ns AND id NOT IN (SELECT entity_id FROM mentions)',
            scope,
        ),
    }
    # the memento -> target links, wherever this schema version keeps them
    tables = {row[0] for row in raw(backend, sql="SELECT name FROM sqlite_master WHERE type = 'table'")}
    if 'summarizes' in tables:
        queries['summarizes'] = (
            f'SELECT count(*) FROM summarizes WHERE memento_id IN ({marks}) OR target_id IN ({marks})',
            by_id,
        )
    return {name: int(raw(backend, sql=sql, **params)[0][0]) for name, (sql, params) in queries.items()}


def fingerprint(store: GraphStore, ns: str, session: Archived) -> tuple[object, ...]:
    sid = session.session_id
    return (
        store.stats(namespace=ns, session_id=sid),
        store.list_blocks(namespace=ns, session_id=sid, kind=None),
        store.list_mementos(namespace=ns, session_id=sid),
        store.list_pages(namespace=ns, session_id=sid),
        store.read_events(sid, namespace=ns),
        [store.entities_of(block_id, namespace=ns) for block_id in session.block_ids],
    )


def test_delete_session_leaves_nothing_of_it(backend: Backend, archived: dict[str, Archived]) -> None:
    store, ns = backend.store, backend.namespace
    a, b = archived['a'], archived['b']
    kept = fingerprint(store, ns, b)
    assert any(residue(backend, a).values())  # the probe sees the session before the delete

    assert store.delete_session('a', namespace=ns) > 0

    assert residue(backend, a) == dict.fromkeys(residue(backend, a), 0)
    assert fingerprint(store, ns, b) == kept
    assert all(store.recover_block(block_id, namespace=ns).record.session_id == 'b' for block_id in b.block_ids)
    assert store.search_text('amarker', namespace=ns) == [] and store.search_text('bmarker', namespace=ns)
    report = verify_store(store, namespace=ns)
    assert report.ok and report.sessions_checked == 1
    assert store.delete_session('a', namespace=ns) == 0  # a second delete finds nothing


def test_forget_command_deletes_after_yes(
    backend: Backend,
    archived: dict[str, Archived],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store, ns = backend.store, backend.namespace
    before = store.stats(namespace=ns, session_id='a')
    kept = fingerprint(store, ns, archived['b'])

    assert cli(backend, ['forget', '--session', 'a', '--yes', '--json'], monkeypatch) == 0

    data = json.loads(capsys.readouterr().out)
    assert data['session_id'] == 'a' and data['namespace'] == ns
    assert data['deleted'] == {
        'sessions': 1,
        'blocks': before.blocks,
        'parts': 1,
        'mementos': before.mementos,
        'pages': 2,
        'events': before.events,
    }
    assert data['records_removed'] > sum(data['deleted'].values())  # edges and entities count too
    assert not any(data['remaining'].values())
    assert residue(backend, archived['a']) == dict.fromkeys(residue(backend, archived['a']), 0)
    assert fingerprint(store, ns, archived['b']) == kept
    assert cli(backend, ['verify'], monkeypatch) == 0
    assert cli(backend, ['forget', '--session', 'a', '--yes'], monkeypatch) == 3
    assert "no session 'a'" in capsys.readouterr().err


def test_forget_without_yes_off_a_terminal_deletes_nothing(
    backend: Backend,
    archived: dict[str, Archived],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store, ns = backend.store, backend.namespace
    kept = fingerprint(store, ns, archived['a'])
    monkeypatch.setattr('sys.stdin.isatty', lambda: False)

    assert cli(backend, ['forget', '--session', 'a'], monkeypatch) == 2

    assert 'pass --yes to confirm' in capsys.readouterr().err
    assert fingerprint(store, ns, archived['a']) == kept


def test_forget_asks_on_a_terminal(
    backend: Backend,
    archived: dict[str, Archived],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store, ns = backend.store, backend.namespace
    kept = fingerprint(store, ns, archived['a'])
    prompts: list[str] = []
    answers = iter(['n', 'y'])
    monkeypatch.setattr('sys.stdin.isatty', lambda: True)

    def answer(prompt: str) -> str:
        prompts.append(prompt)
        return next(answers)

    monkeypatch.setattr('builtins.input', answer)

    assert cli(backend, ['forget', '--session', 'a'], monkeypatch) == 1  # declined
    assert 'nothing was deleted' in capsys.readouterr().err
    assert fingerprint(store, ns, archived['a']) == kept
    assert cli(backend, ['forget', '--session', 'a'], monkeypatch) == 0  # confirmed
    assert "Delete session 'a'" in prompts[0] and 'blocks' in prompts[0]
    assert "forgot session 'a'" in capsys.readouterr().out
    assert store.stats(namespace=ns, session_id='a').blocks == 0


def test_forget_leaves_no_trace_in_the_sqlite_file(tmp_path: Path, unique_namespace: str) -> None:
    """Deleted rows are zeroed and the full-text index merged: the session's words are gone from the file itself."""
    path = tmp_path / 'memory.db'
    store = open_store(f'sqlite://{path}')
    assert isinstance(store, SqliteStore)
    try:
        archive(store, unique_namespace, 'a')
        archive(store, unique_namespace, 'b')
        assert store.search_text('amarker', namespace=unique_namespace)

        store.delete_session('a', namespace=unique_namespace)

        files = [p for p in tmp_path.iterdir() if p.name.startswith('memory.db')]
        assert all(b'amarker' not in p.read_bytes() for p in files)
        assert any(b'bmarker' in p.read_bytes() for p in files)  # the probe does see text that was not deleted
    finally:
        store.close()
