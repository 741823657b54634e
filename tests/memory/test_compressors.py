"""Compressors: the extractive memento's shape and guarantees; the LLM compressor's structured output."""

from __future__ import annotations

import re

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mementograph._tokens import TokenCounter
from mementograph.knowledge_graph.memory import (
    SECTION_LABELS,
    BlockInput,
    Compressor,
    ExtractiveCompressor,
    LLMCompressor,
    MementoDraft,
    RubricJudge,
    critical_facts,
    fact_present,
    render_draft,
    usage_meter,
)

from ._build import bash, block_of, debugging_block, observation, returns, say, user

COUNTER = TokenCounter()


def test_extractive_memento_is_result_first_verbatim_and_keeps_every_fact() -> None:
    block = debugging_block(COUNTER)
    memento = ExtractiveCompressor(counter=COUNTER).extract(block)
    lines = memento.splitlines()
    assert lines[0].startswith('RESULT: The fix works')
    assert '$ pytest tests/test_calc.py -q -> exit 1' in lines
    assert all(fact_present(fact, memento) for fact in critical_facts(block.text))
    assert COUNTER.count_text(memento) < 0.5 * block.tokens
    # every line is a section label, or verbatim text of the block (after the label / command prefix)
    for line in lines:
        body = re.sub(rf'^(?:{"|".join(SECTION_LABELS)}):\s*', '', line)
        body = re.sub(r'^\$ ', '', body.strip()).removesuffix(' -> exit 0').removesuffix(' -> exit 1')
        for piece in re.split(r'; | Last outcome: ', body):
            for item in piece.split(', ') if line.startswith(('FILES', 'VALUES')) else [piece]:
                assert item.strip() in block.text, item


def test_extractive_is_deterministic_and_a_compressor() -> None:
    compressor = ExtractiveCompressor(counter=COUNTER)
    assert isinstance(compressor, Compressor)
    block = debugging_block(COUNTER)
    assert compressor.extract(block) == compressor.extract(debugging_block(COUNTER))


def test_long_logs_are_cut_to_their_facts() -> None:
    log = '\n'.join(f'[{i:05d}] processed record {i} of 10000 status=ok' for i in range(2000))
    messages: list[ModelMessage] = [
        bash('python etl.py --input data/records.csv', 'c1', thought='THOUGHT: Run the ETL job.'),
        observation(3, f'{log}\nTraceback (most recent call last):\n  File "etl.py", line 88\nMemoryError', 'c1'),
        say('The job ran out of memory after 2000 records; next I will stream the CSV instead.'),
    ]
    block = block_of(messages, COUNTER)
    memento = ExtractiveCompressor(counter=COUNTER).extract(block)
    assert COUNTER.count_text(memento) < 0.05 * block.tokens
    assert '$ python etl.py --input data/records.csv -> exit 3' in memento
    assert 'MemoryError' in memento and '2000' in memento
    assert 'processed record' not in memento


def test_refinement_raises_the_cap_to_the_next_step() -> None:
    block = debugging_block(COUNTER)
    compressor = ExtractiveCompressor(target_ratio=0.01, max_ratio=0.03, refine_ratios=(0.2, 0.6), counter=COUNTER)
    first = compressor.extract(block)
    assert COUNTER.count_text(first) <= 0.03 * block.tokens + 1 or first.count('\n') == 0
    verdict = RubricJudge(counter=COUNTER).check(block, first)
    second = compressor.extract(block, feedback=verdict.feedback, previous=first)
    assert len(second) > len(first)
    assert RubricJudge(counter=COUNTER).check(block, second).score == 10.0


def test_invalid_ratios_are_rejected() -> None:
    with pytest.raises(ValueError, match='ratios'):
        ExtractiveCompressor(target_ratio=0.6, max_ratio=0.5)
    with pytest.raises(ValueError, match='ratios'):
        ExtractiveCompressor(refine_ratios=(1.2,))


def test_block_without_commands() -> None:
    answer = 'It listens on port 5432 by default. ' + 'The port is set in postgresql.conf and can be changed. ' * 12
    block = block_of([user('What is the default port of PostgreSQL?'), say(answer)])
    memento = ExtractiveCompressor(counter=COUNTER).extract(block)
    # a block of prose turns only is a conversation: the dialogue path keeps sentences with their speaker
    assert memento.splitlines()[0].startswith('assistant: It listens on port 5432 by default.')
    assert memento.count('The port is set in postgresql.conf and can be changed.') == 1
    assert RubricJudge(counter=COUNTER).check(block, memento).passed


def test_render_draft_is_deterministic_plain_text() -> None:
    draft = MementoDraft(
        result='  Tests   pass. ',
        formulas_and_values=['x = 2 * y'],
        commands=['pytest -q -> exit 0', '  '],
        files_and_symbols=['src/a.py'],
        open_items=['ship it'],
    )
    assert render_draft(draft) == (
        'RESULT: Tests pass.\nVALUES:\nx = 2 * y\nCOMMANDS:\npytest -q -> exit 0\nFILES:\nsrc/a.py\nOPEN:\nship it'
    )


async def test_llm_compressor_structured_output_and_usage() -> None:
    seen: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(str(messages[-1].parts[-1].content))  # type: ignore[union-attr]
        args = {'result': 'Reproduced; fixed.', 'commands': ['pytest tests/test_calc.py -q -> exit 1']}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

    compressor = LLMCompressor(FunctionModel(model), target_ratio=0.1)
    block = BlockInput.from_messages(debugging_block(COUNTER).messages, COUNTER, context='Fix the calculator.')
    with usage_meter() as meter:
        text = await compressor.compress(block)
    assert text == 'RESULT: Reproduced; fixed.\nCOMMANDS:\npytest tests/test_calc.py -q -> exit 1'
    assert meter.tokens == compressor.tokens_spent > 0 and meter.requests == 1
    assert '<context>\nFix the calculator.\n</context>' in seen[0]
    assert f'in at most {int(block.tokens * 0.1)} tokens' in seen[0]
    assert compressor.name.startswith('llm:function:')


def test_an_outer_usage_meter_counts_what_inner_meters_count() -> None:
    from mementograph.knowledge_graph.memory._usage import record_usage

    with usage_meter() as outer:
        record_usage(5)
        with usage_meter() as inner:
            record_usage(7)
        record_usage(-3)  # never negative
    assert (inner.tokens, inner.requests) == (7, 1)
    assert (outer.tokens, outer.requests) == (12, 3)


def _cart_listing() -> str:
    """`nl -ba` output of an 84-line module: four definitions among their bodies."""
    lines = ['import json', '', 'from .models import Item', '', '', 'class Cart:', '    """A shopping cart."""', '']
    lines += [
        '    def __init__(self, owner: str) -> None:',
        '        self.owner = owner',
        '        self.items = []',
        '',
    ]
    lines += ['    def total(self) -> float:'] + [
        f'        subtotal_{i} = self.items[{i}].price * {i + 2}' for i in range(30)
    ]
    lines += ['        return sum(item.price for item in self.items)', '']
    lines += ['    async def checkout(self, payment) -> dict:'] + [
        f'        step_{i} = payment.stage({i})' for i in range(30)
    ]
    lines += ['        return json.loads(payment.charge(self.total()))', '']
    lines += [
        '    def refund(' + ', '.join(f'reason_{i}: str = "r{i}"' for i in range(12)) + ') -> None:',
        '        pass',
    ]
    return '\n'.join(f'{number:6d}\t{line}' for number, line in enumerate(lines, start=1))


def _file_read_block(listing: str) -> BlockInput:
    messages: list[ModelMessage] = [
        bash("nl -ba src/shop/cart.py | sed -n '1,80p'", 'c1', thought='THOUGHT: Read the cart module first.'),
        observation(0, listing, 'c1'),
        say('The cart computes totals itself; checkout charges them.'),
    ]
    return block_of(messages, COUNTER)


def test_a_file_read_keeps_the_definitions_it_showed_where_it_showed_them() -> None:
    block = _file_read_block(_cart_listing())
    compressor = ExtractiveCompressor(counter=COUNTER)
    memento = compressor.extract(block)
    assert (
        "$ nl -ba src/shop/cart.py | sed -n '1,80p' -> exit 0\n"
        '  6: class Cart; 9: def __init__; 13: def total; 46: async def checkout; 79: def refund'
    ) in memento
    assert 'subtotal_' not in memento and 'reason_0' not in memento  # bodies and signatures stay in the archive
    assert COUNTER.count_text(memento) <= compressor.target_ratio * block.tokens
    assert RubricJudge(counter=COUNTER).check(block, memento).score == 10.0


def test_a_written_files_definitions_are_named_under_its_command() -> None:
    body = [f'        payload_{i} = json.dumps({{"step": {i}, "items": list(range({i}))}})' for i in range(25)]
    script = '\n'.join(['import json', '', 'class Reproducer:', '    def run(self):', *body, '        return 1'])
    messages: list[ModelMessage] = [
        bash(
            f"cat <<'EOF' > repro.py\n{script}\nEOF", 'c1', thought='THOUGHT: Write a script that reproduces the bug.'
        ),
        observation(0, '', 'c1'),
        bash('python repro.py', 'c2', thought='THOUGHT: Run it.'),
        observation(1, 'Traceback (most recent call last):\n  File "repro.py", line 5\nTypeError: boom', 'c2'),
        say('The script reproduces the TypeError.'),
    ]
    block = block_of(messages, COUNTER)
    memento = ExtractiveCompressor(counter=COUNTER).extract(block)
    assert "$ cat <<'EOF' > repro.py -> exit 0\n  class Reproducer; def run\n" in memento
    assert RubricJudge(counter=COUNTER).check(block, memento).score == 10.0


def test_a_write_file_tools_content_is_outlined_under_its_call() -> None:
    code = '\n'.join(
        ['class Cart:', *[f'    rate_{i} = {i}' for i in range(150)], '    def total(self):', '        return 0']
    )
    messages: list[ModelMessage] = [
        ModelResponse(parts=[ToolCallPart('write_file', {'path': 'shop/cart.py', 'content': code}, tool_call_id='w1')]),
        returns(('write_file', 'w1', 'wrote 153 lines to shop/cart.py')),
        say('Cart is written.'),
    ]
    block = block_of(messages, COUNTER)
    memento = ExtractiveCompressor(counter=COUNTER).extract(block)
    assert '  class Cart; def total' in memento.splitlines()
    assert RubricJudge(counter=COUNTER).check(block, memento).score == 10.0


def test_a_failing_tests_source_is_not_outlined_again() -> None:
    source = '\n'.join(
        [
            '    def test_total():',
            '        cart = Cart("ann")',
            '>       assert cart.total() == 3',
            'E       assert 0 == 3',
        ]
    )
    messages: list[ModelMessage] = [
        bash('pytest tests/test_cart.py', 'c1', thought='THOUGHT: Run the cart tests.'),
        observation(1, f'{source}\nFAILED tests/test_cart.py::test_total - assert 0 == 3\n1 failed in 0.1s', 'c1'),
        say('The total test fails.'),
    ]
    memento = ExtractiveCompressor(counter=COUNTER).extract(block_of(messages, COUNTER))
    assert 'FAILED tests/test_cart.py::test_total' in memento
    assert 'def test_total' not in memento


def test_definitions_only_fill_room_the_target_leaves() -> None:
    block = _file_read_block(_cart_listing())
    memento = ExtractiveCompressor(target_ratio=0.02, counter=COUNTER).extract(block)
    assert "$ nl -ba src/shop/cart.py | sed -n '1,80p' -> exit 0" in memento
    assert 'class Cart' not in memento and 'def total' not in memento
    assert all(fact_present(fact, memento) for fact in critical_facts(block.text))
