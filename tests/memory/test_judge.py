"""The rubric judge fails mementos that drop facts or invent text, and names exactly what is wrong."""

from __future__ import annotations

import pytest

from mementograph._tokens import TokenCounter
from mementograph.knowledge_graph.memory import DIMENSIONS, ExtractiveCompressor, RubricJudge

from ._build import debugging_block

COUNTER = TokenCounter()


@pytest.fixture(scope='module')
def memento() -> str:
    return ExtractiveCompressor(counter=COUNTER).extract(debugging_block(COUNTER))


def test_extractive_memento_scores_full_marks(memento: str) -> None:
    verdict = RubricJudge(counter=COUNTER).check(debugging_block(COUNTER), memento)
    assert verdict.score == 10.0 and verdict.passed
    assert verdict.missing == () and verdict.invented == ()
    assert set(DIMENSIONS) <= set(verdict.dimensions)
    assert verdict.judge == 'rubric'


def test_missing_exit_code_fails_and_feedback_names_the_command(memento: str) -> None:
    broken = memento.replace('$ pytest tests/test_calc.py -q -> exit 1', '$ pytest tests/test_calc.py -q')
    assert broken != memento
    verdict = RubricJudge(counter=COUNTER).check(debugging_block(COUNTER), broken)
    assert not verdict.passed and verdict.score is not None and verdict.score < 8
    assert 'exit_code: `pytest tests/test_calc.py -q` -> exit 1' in verdict.missing
    assert '- exit_code: `pytest tests/test_calc.py -q` -> exit 1' in verdict.feedback


def test_exit_code_on_another_commands_line_does_not_count(memento: str) -> None:
    # the block has exit 1 somewhere, but not on the pytest line any more
    broken = memento.replace('$ pytest tests/test_calc.py -q -> exit 1', '$ pytest tests/test_calc.py -q -> exit 0')
    verdict = RubricJudge(counter=COUNTER).check(debugging_block(COUNTER), broken)
    assert not verdict.passed
    assert any('pytest tests/test_calc.py -q` -> exit 1' in item for item in verdict.missing)


def test_invented_path_is_flagged_and_fails(memento: str) -> None:
    verdict = RubricJudge(counter=COUNTER).check(debugging_block(COUNTER), memento + '\nFILES: src/calc_helpers.py')
    assert 'path: src/calc_helpers.py' in verdict.invented
    assert verdict.dimensions['no_hallucination'] == 0.0
    assert not verdict.passed and verdict.score is not None and verdict.score < 8
    assert 'INVENTED' in verdict.feedback and 'src/calc_helpers.py' in verdict.feedback


def test_invented_value_and_exit_code_are_flagged(memento: str) -> None:
    block = debugging_block(COUNTER)
    verdict = RubricJudge(counter=COUNTER).check(block, memento + '\nVALUES: took 3.75 ms')
    assert any('3.75' in item for item in verdict.invented)
    verdict = RubricJudge(counter=COUNTER).check(block, memento + '\n$ make -> exit 2')
    assert 'exit_code: exit 2' in verdict.invented and not verdict.passed


def test_paraphrased_command_and_formula_fail(memento: str) -> None:
    block = debugging_block(COUNTER)
    paraphrased = memento.replace("sed -i '13s/return a - b/return a + b/' src/calc.py", 'sed fixed line 13')
    verdict = RubricJudge(counter=COUNTER).check(block, paraphrased)
    assert not verdict.passed
    assert any(item.startswith('command: sed -i') for item in verdict.missing)
    verdict = RubricJudge(counter=COUNTER).check(block, memento.replace('`a - b`', '`a-b`').replace('a - b', 'a-b'))
    assert 'formula: a - b' in verdict.missing and not verdict.passed


def test_missing_test_outcome_fails(memento: str) -> None:
    verdict = RubricJudge(counter=COUNTER).check(
        debugging_block(COUNTER), memento.replace('  1 failed, 40 passed in 0.12s\n', '')
    )
    assert 'test: 1 failed, 40 passed in 0.12s' in verdict.missing
    assert not verdict.passed


def test_plain_words_may_be_paraphrased(memento: str) -> None:
    reworded = memento.replace('The calculator adds wrong.', 'Addition was broken.')
    verdict = RubricJudge(counter=COUNTER).check(debugging_block(COUNTER), reworded)
    assert verdict.passed and verdict.invented == ()


def test_result_first_dimension(memento: str) -> None:
    lines = memento.splitlines()
    reordered = '\n'.join([*lines[1:], lines[0]])
    verdict = RubricJudge(counter=COUNTER).check(debugging_block(COUNTER), reordered)
    assert verdict.dimensions['result_first'] == 0.0
    assert 'RESULT:' in verdict.feedback


def test_memento_not_shorter_than_block_never_passes(memento: str) -> None:
    block = debugging_block(COUNTER)
    padded = memento + '\nDECISIONS:\n' + 'The bug is in `add()`.\n' * 300
    verdict = RubricJudge(counter=COUNTER).check(block, padded)
    assert verdict.score == 10.0 and not verdict.passed
    assert 'SIZE:' in verdict.feedback


def test_empty_memento_scores_zero() -> None:
    verdict = RubricJudge(counter=COUNTER).check(debugging_block(COUNTER), '  \n')
    assert verdict.score == 0.0 and not verdict.passed


def test_soft_facts_cost_proportionally(memento: str) -> None:
    # a short output line is a soft fact: losing it lowers "values" but does not by itself fail the memento
    reduced = memento.replace('  12:def add(a, b):\n', '')
    assert reduced != memento
    verdict = RubricJudge(counter=COUNTER).check(debugging_block(COUNTER), reduced)
    assert verdict.missing == ('output: 12:def add(a, b):',)
    assert verdict.dimensions['values'] < 2.0 and verdict.dimensions['deductions'] == 0.0
    assert verdict.passed
