"""A memento of mementos (`_merge`): the children's items pooled, each once, cut to the room the compactor gives."""

from __future__ import annotations

import re

from mementograph._tokens import TokenCounter
from mementograph.knowledge_graph.memory import (
    BlockInput,
    ExtractiveCompressor,
    RubricJudge,
    is_conversation_memento,
)
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


def chat_child(day: int) -> str:
    """A conversation's memento: one line per turn, each led by its speaker, dates anchored."""
    return '\n'.join(
        [
            f'Ann: We booked the cabin at Lake Tahoe for {day} June (2023). It sleeps {day % 5 + 4} people.',
            f'Bob: I will bring the kayaks and the tent; my brother Carl joins on day {day}.',
            'Ann: Great, see you there!',
        ]
    )


def speaker_words(texts: list[str]) -> dict[str, set[str]]:
    words: dict[str, set[str]] = {}
    for text in texts:
        for line in text.splitlines():
            speaker, _, body = line.partition(': ')
            words.setdefault(speaker, set()).update(re.findall(r'\w+', body))
    return words


def test_conversation_mementos_are_pooled_sentence_by_sentence() -> None:
    children = [chat_child(day) for day in (3, 10, 17)]
    merged = merge(children)
    held = speaker_words(children)
    for line in merged.splitlines():  # each line a child's speaker's, saying only what that speaker said
        speaker, _, body = line.partition(': ')
        assert speaker in held and set(re.findall(r'\w+', body)) <= held[speaker], line
    assert all(f'for {day} June (2023)' in merged for day in (3, 10, 17))
    assert merged.count('Great, see you there!') <= 1  # said three times, worth keeping once at most


def test_a_conversation_merge_fills_its_room_with_facts_first() -> None:
    children = [chat_child(day) for day in range(1, 13)]
    text = '\n\n'.join(children)
    merged = merge(children, limit=150)
    assert 0 < COUNTER.count_text(merged) <= 150
    assert 'see you there' not in merged  # chit-chat gives way to facts
    kept = [day for day in range(1, 13) if f'for {day} June (2023)' in merged]
    assert len(kept) >= 4
    # compressed as one block of text instead, as merges of conversations were until now, far less stays
    block = BlockInput((), text, COUNTER.count_text(text))
    as_text = ExtractiveCompressor(counter=COUNTER).extract(block)
    assert sum(f'for {day} June (2023)' in as_text for day in range(1, 13)) < len(kept)


def test_a_merge_with_an_indented_output_line_is_not_a_conversations() -> None:
    children = [chat_child(1), 'RESULT: tests ran\nCOMMANDS:\n$ pytest -q -> exit 1\n  FAILED tests/test_a.py::test_b']
    assert merge(children) == ''


def test_the_judge_takes_a_speakers_line_as_the_lead_of_a_conversation_merge() -> None:
    children = tuple(chat_child(day) for day in (3, 10))
    text = '\n\n'.join(children)
    block = BlockInput((), text, COUNTER.count_text(text), merges=children, max_tokens=200)
    memento = ExtractiveCompressor(counter=COUNTER).extract(block)
    assert memento.startswith(('Ann: ', 'Bob: '))
    verdict = RubricJudge(counter=COUNTER).check(block, memento)
    assert verdict.dimensions['result_first'] == 1.0 and verdict.passed, verdict.feedback
    assert RubricJudge(counter=COUNTER).check(block, 'Carl: ' + memento).dimensions['result_first'] == 0.0


def test_the_extractive_compressor_merges_within_max_tokens() -> None:
    children = tuple(child(step) for step in range(6))
    text = '\n\n'.join(children)
    block = BlockInput((), text, COUNTER.count_text(text), merges=children, max_tokens=200)
    memento = ExtractiveCompressor(counter=COUNTER).extract(block)
    assert COUNTER.count_text(memento) <= 200
    assert memento.count('$ pytest') >= 3  # the old merge, compressing the text as a block, kept no command


def test_a_conversation_memento_is_told_from_an_agents() -> None:
    assert is_conversation_memento(chat_child(2))
    assert is_conversation_memento('user: I moved to Oslo in 2021.\nassistant: Noted: Oslo, since 2021.')
    assert not is_conversation_memento(child(1))  # sections
    assert not is_conversation_memento('RESULT: Ann: We booked the cabin.\nVALUES: 12, 2023')  # a label leads
    assert not is_conversation_memento('Ann: We booked it.\n  an indented output line')
    assert not is_conversation_memento('')
