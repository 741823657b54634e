"""Full-text search leaves out words common across the whole store (a latency bound), but never at the cost of a
scope's own matches: a namespace or session must find its blocks even when another one made their words common
and holds every match of the rarer words."""

from __future__ import annotations

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from mementograph.knowledge_graph import BlockRecord, Eviction
from mementograph.knowledge_graph.recall import _values
from tests.store.conftest import Backend


def _block(text: str, namespace: str, session_id: str, seq: int) -> BlockRecord:
    messages = [ModelRequest(parts=[UserPromptPart(text)]), ModelResponse(parts=[TextPart(f'noted: {text}')])]
    return BlockRecord.from_messages(
        messages, session_id=session_id, seq=seq, tokens=12, text=text, namespace=namespace
    )


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pruning's thresholds at a test's scale (stores of 10,000+ documents otherwise)."""
    monkeypatch.setattr(_values, 'TEXT_MIN_DOCS', 30)
    monkeypatch.setattr(_values, 'TEXT_MAX_DF', 10)


def test_a_scope_finds_its_matches_when_others_hold_every_rare_word(backend: Backend, small_limits: None) -> None:
    store, busy = backend.store, f'{backend.namespace}-busy'
    crowd = [
        _block(f'module handler {i}' + (' zebraalpha' if i % 20 == 0 else ''), busy, 'crowd', i) for i in range(60)
    ]
    store.write_eviction(Eviction(session_id='crowd', namespace=busy, blocks=tuple(crowd)))
    quiet = _block('quokkabeta module notes', busy, 'quiet', 0)
    store.write_eviction(Eviction(session_id='quiet', namespace=busy, blocks=(quiet,)))
    own = _block('quokkabeta module notes', backend.namespace, 'mine', 0)
    store.write_eviction(Eviction(session_id='mine', namespace=backend.namespace, blocks=(own,)))

    # the rare word's matches are all in the crowd: the common word must still find the scope's own block
    in_namespace = store.search_text('zebraalpha module', k=5, namespace=backend.namespace)
    assert [hit.block_ids for hit in in_namespace] == [(own.id,)]
    in_session = store.search_text('zebraalpha module', k=5, namespace=busy, session_id='quiet')
    assert [hit.block_ids for hit in in_session] == [(quiet.id,)]
    # where the rare word matches, it still decides the ranking
    whole = store.search_text('zebraalpha module', k=3, namespace=busy)
    assert {hit.block_ids[0] for hit in whole} == {crowd[0].id, crowd[20].id, crowd[40].id}


@pytest.mark.parametrize('enough', [2, 3])
def test_a_scope_ranked_on_every_word_only_when_its_rarer_words_find_too_few(
    backend: Backend, small_limits: None, monkeypatch: pytest.MonkeyPatch, enough: int
) -> None:
    """The second ranking, on every word, walks all documents of the common ones (at 100k blocks most of a session's
    recall): `TEXT_ENOUGH_HITS` matches of the rarer words in scope make it unnecessary."""
    monkeypatch.setattr(_values, 'TEXT_ENOUGH_HITS', enough)
    store, busy = backend.store, f'{backend.namespace}-busy'
    crowd = [  # `zebraalpha` in 6 documents, stronger matches than the target's: rare (under 10), `module` common
        _block(f'module handler {i}' + (' zebraalpha' * 3 if i % 7 == 0 else ''), busy, 'crowd', i) for i in range(40)
    ]
    store.write_eviction(Eviction(session_id='crowd', namespace=busy, blocks=tuple(crowd)))
    texts = ['zebraalpha module one', 'zebraalpha module two', 'module plain three', 'module plain four']
    target = [_block(text, busy, 'target', i) for i, text in enumerate(texts)]
    store.write_eviction(Eviction(session_id='target', namespace=busy, blocks=tuple(target)))

    hits = {
        hit.block_ids[0] for hit in store.search_text('zebraalpha module', k=5, namespace=busy, session_id='target')
    }
    rare = {target[0].id, target[1].id}
    assert hits == (rare if enough <= 2 else {block.id for block in target})
