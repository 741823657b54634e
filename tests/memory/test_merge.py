"""A memento of mementos (`_merge`): the children's items pooled, each once, cut to the room the compactor gives."""

from __future__ import annotations

import re

from mementograph._tokens import TokenCounter
from mementograph.knowledge_graph.memory import BlockInput, ExtractiveCompressor
from mementograph.knowledge_graph.memory._merge import merge_mementos
from mementograph.knowledge_graph.memory._regions import INLINE_SEPARATORS

COUNTER = TokenCounter()


def child(step: int) -> str:
    return '\n'.join(
        [
            f'RESULT: The tests of module {step} ran. Last outcome: 1 failed, 30 passed in 0.{step}s',
            *(['REQUEST: Run every module test and fix what fails.'] if step == 0 else []),
            'COMMANDS:',
            f'$ pytest tests/test_module_{step}.py -q -> exit 1',
            f'  FAILED tests/test_module_{step}.py::test_edge - AssertionError: expected {step}',
            f'  collected 31 items from conftest_{step}',
            f'FILES: src/app/module_{step}.py, src/app/shared.py',
            f'SYMBOLS: handler_{step}; shared_config',
            'DECISIONS:',
            f'The edge case of module {step} fails because shared_config is read too early.',
        ]
    )


def merge(
    texts: list[str], limit: int = 10_000, prose_limit: int = 10_000, pinned: frozenset[str] = frozenset()
) -> str:
    return merge_mementos(texts, limit=limit, prose_limit=prose_limit, count=COUNTER.count_text, pinned=pinned)


def items_of(memento: str) -> list[str]:
    """Every line, and every inline item, of a memento without its labels."""
    out: list[str] = []
    for line in memento.splitlines():
        label = re.match(r'^([A-Z]+):(?: (.*))?$', line)
        if label is None:
            out.append(line)
        elif label.group(2):
            separator = INLINE_SEPARATORS.get(label.group(1))
            out += label.group(2).split(separator) if separator else [label.group(2)]
    return out


def test_each_item_is_kept_once_and_output_lines_stay_under_their_command() -> None:
    children = [child(step) for step in range(3)]
    merged = merge(children)
    assert merged.count('src/app/shared.py') == 1 and merged.count('shared_config') >= 1
    assert merged.count('SYMBOLS:') == 1 and merged.splitlines()[0] == children[-1].splitlines()[0]  # latest leads
    assert 'REQUEST:\nRun every module test and fix what fails.' in merged  # the task as first given
    lines = merged.splitlines()
    for step in range(3):
        command = lines.index(f'$ pytest tests/test_module_{step}.py -q -> exit 1')
        assert (
            lines[command + 1] == f'  FAILED tests/test_module_{step}.py::test_edge - AssertionError: expected {step}'
        )
    # the earlier results' facts are listed, whatever room their sentences get
    assert all(f'0.{step}s' in merged for step in range(3))


def test_nothing_is_added_that_no_child_said() -> None:
    children = [child(step) for step in range(4)]
    said = {item for text in children for item in items_of(text)}
    merged = merge(children, limit=120, prose_limit=20)
    whole = '\n'.join(children)
    assert merged and all(item in said or item in whole for item in items_of(merged)), merged


def test_when_the_room_binds_the_oldest_facts_stay_and_the_size_holds() -> None:
    children = [child(step) for step in range(6)]
    whole = merge(children)
    merged = merge(children, limit=150, prose_limit=0)
    assert COUNTER.count_text(merged) <= 150 < COUNTER.count_text(whole)
    assert merged.startswith('RESULT: The tests of module 5 ran.')  # the result is kept whatever the room
    assert '$ pytest tests/test_module_0.py -q -> exit 1' in merged
    assert '$ pytest tests/test_module_5.py -q -> exit 1' not in merged
    assert 'DECISIONS:' not in merged  # no prose allowance


def test_a_pinned_fact_is_kept_first() -> None:
    children = [child(step) for step in range(6)]
    pinned = frozenset({'tests/test_module_5.py::test_edge'})
    merged = merge(children, limit=150, prose_limit=0, pinned=pinned)
    assert '  FAILED tests/test_module_5.py::test_edge - AssertionError: expected 5' in merged
    assert '$ pytest tests/test_module_5.py -q -> exit 1' in merged  # with the command it is an output of


def test_conversation_mementos_are_compressed_as_text_instead() -> None:
    children = ['Ann: We booked the cabin at Lake Tahoe for 12 June.', 'Bob: I will bring the 2 kayaks and the tent.']
    assert merge(children) == ''
    text = '\n\n'.join(children)
    block = BlockInput((), text, COUNTER.count_text(text), merges=tuple(children), max_tokens=30)
    memento = ExtractiveCompressor(counter=COUNTER).extract(block)
    assert memento and COUNTER.count_text(memento) < block.tokens
    assert '12 June' in memento or 'Lake Tahoe' in memento


def test_the_extractive_compressor_merges_within_max_tokens() -> None:
    children = tuple(child(step) for step in range(6))
    text = '\n\n'.join(children)
    block = BlockInput((), text, COUNTER.count_text(text), merges=children, max_tokens=200)
    memento = ExtractiveCompressor(counter=COUNTER).extract(block)
    assert COUNTER.count_text(memento) <= 200
    assert memento.count('$ pytest') >= 3  # the old merge, compressing the text as a block, kept no command
