"""The paged index in the instructions: what the model sees, when it changes, and what it costs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai import UsageLimits
from pydantic_ai.messages import ModelMessage

from mementograph import open_store
from mementograph._messages import serialize_messages
from mementograph._tokens import TokenCounter
from mementograph.capabilities import MementoCompaction
from mementograph.knowledge_graph.recall import fit_index, page_index_text

from ..scripted import ScriptedModel, scripted_agent
from .conftest import FILE_BACKENDS, Backend, opened_backend


def _run(tmp_path: Path, **settings: object) -> tuple[ScriptedModel, MementoCompaction[None]]:
    store = open_store(f'sqlite:///{tmp_path / "memory.db"}')
    capability: MementoCompaction[None] = MementoCompaction(store, session_id='s', **settings)  # type: ignore[arg-type]
    model = ScriptedModel(steps=22)
    scripted_agent(model, [capability]).run_sync('Fix every module.')
    return model, capability


def test_the_model_sees_the_index_of_closed_pages_from_the_request_after_they_close(tmp_path: Path) -> None:
    model, capability = _run(tmp_path, max_tokens=8_000)
    store = capability.graph_store
    pages = [page for page in store.list_pages(session_id='s') if page.summary]
    assert len(pages) >= 2, 'the scripted run should close pages'
    shown = [info.instructions or '' for info in model.infos]
    assert shown[0] == ''  # nothing archived yet
    # the last request carries the whole index of the session as the store has it (it fits 5% of 8,000 tokens)
    assert shown[-1] == page_index_text(store, session_id='s')
    assert all(page.id in shown[-1] for page in pages)
    # it changes only on a request whose history a compaction rewrote (its cached prefix is gone anyway), after an
    # earlier compaction closed a page
    changes = [n for n in range(1, len(shown)) if shown[n] != shown[n - 1]]
    compacted_before = set()
    seen_sizes = [len(seen) for seen in model.seen]
    for n in range(1, len(seen_sizes)):
        if seen_sizes[n] < seen_sizes[n - 1]:  # the history shrank: a compaction ran before request n
            compacted_before.add(n)
    assert changes and all(n in compacted_before for n in changes), (changes, sorted(compacted_before))
    assert len(set(shown)) == len(changes) + 1


def test_index_and_history_together_stay_near_the_budget(tmp_path: Path) -> None:
    budget = 3_000
    model, _ = _run(tmp_path, max_tokens=budget)
    counter = TokenCounter()
    shown = [info.instructions or '' for info in model.infos]
    assert any(shown)
    # the index keeps to 5% of the mark (cut to the newest pages), and the history compacts to what is left
    assert all(counter.count_text(text) <= budget * 0.05 for text in shown)
    totals = [
        counter.count_messages(seen) + counter.count_text(text) for seen, text in zip(model.seen, shown, strict=True)
    ]
    assert max(totals[5:]) <= budget * 1.25


def test_a_continued_session_starts_with_its_index(tmp_path: Path) -> None:
    _, first = _run(tmp_path, max_tokens=8_000)
    index = page_index_text(first.graph_store, session_id='s')
    assert index
    store = open_store(f'sqlite:///{tmp_path / "memory.db"}')
    capability: MementoCompaction[None] = MementoCompaction(store, session_id='s', max_tokens=8_000)
    model = ScriptedModel(steps=1)
    scripted_agent(model, [capability]).run_sync('And now the docs.')
    assert model.infos[0].instructions == index


@pytest.fixture(params=FILE_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path, unique_namespace: str) -> Iterator[Backend]:
    with opened_backend(request, tmp_path, unique_namespace) as opened:
        yield opened


def test_a_run_continuing_the_session_sees_the_index_the_last_run_sent_until_a_page_closes(backend: Backend) -> None:
    """The index is a prefix of every request: a continued conversation (`message_history`, a new capability and
    run) gets the very text the last run sent while no page closed in between, though another session of the
    namespace archived meanwhile; across both runs a text changes only with the number of closed pages."""
    store, ns = backend.store, backend.namespace
    unlimited = UsageLimits(request_limit=None)

    def run(
        session: str, prompt: str, history: list[ModelMessage] | None = None
    ) -> tuple[ScriptedModel, list[ModelMessage]]:
        capability: MementoCompaction[None] = MementoCompaction(
            store, session_id=session, namespace=ns, max_tokens=4_000
        )
        model = ScriptedModel(steps=10)
        result = scripted_agent(model, [capability]).run_sync(prompt, message_history=history, usage_limits=unlimited)
        return model, result.all_messages()

    first, history = run('s', 'Fix every module.')
    closed = [page for page in store.list_pages(namespace=ns, session_id='s') if page.summary]
    sent = first.infos[-1].instructions or ''
    assert closed and sent.startswith(f'MEMORY INDEX: {len(closed)} archived page'), 'no page closed at the run end'
    run('other', 'Fix every module.')  # another session of the namespace evicts and closes pages
    assert [page for page in store.list_pages(namespace=ns, session_id='other') if page.summary]
    second, _ = run('s', 'And now the docs.', history)
    assert second.infos[0].instructions == sent
    by_count: dict[int, set[str]] = {}
    for info in [*first.infos, *second.infos]:
        if info.instructions:
            count = re.match(r'MEMORY INDEX: (\d+) ', info.instructions)
            assert count is not None
            by_count.setdefault(int(count.group(1)), set()).add(info.instructions)
    assert max(by_count) > len(closed), 'the second run should close a page'
    assert all(len(texts) == 1 for texts in by_count.values()), {n: len(t) for n, t in by_count.items()}


def test_index_off(tmp_path: Path) -> None:
    model, capability = _run(tmp_path, max_tokens=8_000, page_index=False)
    assert page_index_text(capability.graph_store, session_id='s')  # pages closed all the same
    assert all(not info.instructions for info in model.infos)


def test_fit_index_keeps_the_header_and_the_newest_pages() -> None:
    counter = TokenCounter()
    header = "MEMORY INDEX: 30 archived pages. retrieve_page(page) returns a page's blocks."
    lines = [
        f'page {n} pg_{n:04d} (turns {n * 10}-{n * 10 + 9}, 8 blocks): ran pytest on module_{n} | topics: module_{n}, app'
        for n in range(1, 31)
    ]
    text = '\n'.join([header, *lines])
    fitted = fit_index(text, 200, counter)
    assert counter.count_text(fitted) <= 200
    out = fitted.split('\n')
    assert out[0] == header
    assert out[-1] == lines[-1]  # the newest page whole
    assert 'left out' in out[1] and 'retrieve_page' in out[1]
    left_out = int(out[1].strip('(').split()[0])
    assert left_out + len(out) - 2 == len(lines)  # every page is either shown or counted as left out
    # too little room for one page whole: the newest pages are listed without their summaries
    newest_short = 'page 30 pg_0030 (turns 300-309): topics: module_30, app'
    tight = counter.count_text(header) + 24 + counter.count_text(newest_short) + 1
    short = fit_index(text, tight, counter).split('\n')
    assert counter.count_text('\n'.join(short)) <= tight
    assert short[-1] == newest_short
    assert fit_index(text, 10_000, counter) == text
    # no room for the header and the note: no index at all, never one over its share
    bare = fit_index(text, counter.count_text(header) + 24, counter).split('\n')  # the header and the note only
    assert bare[0] == header and len(bare) == 2 and '30 older index lines left out' in bare[1]
    assert fit_index(text, counter.count_text(header) + 23, counter) == ''
    assert fit_index(text, 0, counter) == ''


def test_a_mark_too_small_for_the_index_still_compacts(tmp_path: Path) -> None:
    """At a mark of 300 tokens the index's share (15) holds not even its header: the run goes on without one and
    compacts, where the index once took more than the mark's share and left the history a negative mark."""
    model, capability = _run(tmp_path, max_tokens=300)
    assert all(not info.instructions for info in model.infos)
    assert [page for page in capability.graph_store.list_pages(session_id='s') if page.summary]  # pages closed
    counter = TokenCounter()
    assert (
        min(counter.count_messages(seen) for seen in model.seen[5:])
        < max(counter.count_messages(seen) for seen in model.seen[:5]) * 2
    )


def test_the_index_changes_only_on_requests_whose_history_a_compaction_rewrote(backend: Backend) -> None:
    """The instructions come before the messages, so a new index on a request whose earlier messages went out
    unchanged would cost the provider's cached prefix one more request: it waits for a request that compacts, and a
    run continuing the conversation starts with the index its last request was sent with."""
    store, ns = backend.store, backend.namespace
    unlimited = UsageLimits(request_limit=None)
    models: list[ScriptedModel] = []
    pending_at_run_end = 0
    history: list[ModelMessage] | None = None
    for prompt in ('Fix every module.', 'And now the docs.', 'And the changelog.'):
        capability: MementoCompaction[None] = MementoCompaction(store, session_id='s', namespace=ns, max_tokens=4_000)
        model = ScriptedModel(steps=9)
        result = scripted_agent(model, [capability]).run_sync(prompt, message_history=history, usage_limits=unlimited)
        history = result.all_messages()
        models.append(model)
        sent = model.infos[-1].instructions or ''
        pending_at_run_end += sent != page_index_text(store, session_id='s', namespace=ns, max_tokens=200)
    sent_messages = [[serialize_messages([m]) for m in seen] for model in models for seen in model.seen]
    instructions = [info.instructions for model in models for info in model.infos]
    # every message the previous request was sent, its last one too (a tool result stubbed is a rewrite)
    rewritten = {
        n for n in range(1, len(sent_messages)) if sent_messages[n][: len(sent_messages[n - 1])] != sent_messages[n - 1]
    }
    changed = {n for n in range(1, len(instructions)) if instructions[n] != instructions[n - 1]}
    assert len(changed) >= 3, 'pages should close in every run'
    assert changed <= rewritten, sorted(changed - rewritten)
    assert pending_at_run_end, 'a run should end with a page closed after its last compaction'
