"""The compress -> judge -> refine loop with FunctionModel-scripted LLM compressors and judges (fail closed)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from mementograph._tokens import TokenCounter
from mementograph.knowledge_graph.memory import (
    BlockInput,
    CombinedJudge,
    CompressionError,
    ExtractiveCompressor,
    LLMCompressor,
    LLMJudge,
    MementoEngine,
    RubricJudge,
)

from ._build import debugging_block

COUNTER = TokenCounter()
RUN_TOKENS = 120  # input 100 + output 20 per scripted model run

DRAFT: dict[str, object] = {
    'result': 'The fix works: all 41 tests pass after changing line 13 of src/calc.py.',
    'commands': ['pytest tests/test_calc.py -q -> exit 1', 'pytest tests/test_calc.py -q -> exit 0'],
    'files_and_symbols': ['src/calc.py'],
}
BETTER_DRAFT: dict[str, object] = DRAFT | {'errors': ['FAILED tests/test_calc.py::test_add']}


def scores(total: float) -> dict[str, object]:
    """A judge output summing to `total` (fills dimensions in rubric order)."""
    out: dict[str, object] = {}
    remaining = total
    for name, maximum in (
        ('formulas', 3.0),
        ('values', 2.0),
        ('methods', 2.0),
        ('validation', 1.0),
        ('no_hallucination', 1.0),
        ('result_first', 1.0),
    ):
        out[name] = min(maximum, remaining)
        remaining = max(0.0, remaining - maximum)
    if total < 8:
        out['missing'] = ['FAILED tests/test_calc.py::test_add']
        out['feedback'] = 'Add the failing test name.'
    return out


@dataclass
class Script:
    """A FunctionModel function answering each run with the next scripted structured output (the last repeats).

    pydantic-ai retries a run whose output does not validate; a retry gets the same answer as its run.
    """

    outputs: list[dict[str, object] | Exception]
    prompts: list[str] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        prompt = next((p.content for p in last.parts if isinstance(p, UserPromptPart)), None)
        if isinstance(prompt, str):
            self.prompts.append(prompt)
        output = self.outputs[min(len(self.prompts), len(self.outputs)) - 1]
        if isinstance(output, Exception):
            raise output
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, output)],
            usage=RequestUsage(input_tokens=100, output_tokens=20),
        )

    @property
    def runs(self) -> int:
        return len(self.prompts)


def llm_engine(compressor: Script, judge: Script, **kwargs: object) -> MementoEngine:
    return MementoEngine(
        compressor=LLMCompressor(FunctionModel(compressor)),
        judge=LLMJudge(FunctionModel(judge)),
        counter=COUNTER,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture(scope='module')
def block() -> BlockInput:
    return debugging_block(COUNTER)


async def test_pass_first_time(block: BlockInput) -> None:
    compressor, judge = Script([DRAFT]), Script([scores(9)])
    result = await llm_engine(compressor, judge).make_memento(block)
    assert result.verified and result.score == 9.0 and result.iterations == 0
    assert result.text.startswith('RESULT: The fix works')
    assert 'pytest tests/test_calc.py -q -> exit 1' in result.text
    assert result.compressor.startswith('llm:') and result.judge.startswith('llm:')
    assert result.usage_tokens == 2 * RUN_TOKENS
    assert compressor.runs == 1 and judge.runs == 1
    assert 0 < result.tokens < block.tokens


async def test_refine_then_pass(block: BlockInput) -> None:
    compressor, judge = Script([DRAFT, BETTER_DRAFT]), Script([scores(6), scores(9)])
    result = await llm_engine(compressor, judge).make_memento(block)
    assert result.verified and result.iterations == 1 and result.scores == (6.0, 9.0)
    assert 'FAILED tests/test_calc.py::test_add' in result.text
    # the refinement saw the judge's feedback and the previous candidate
    assert '<judge_feedback>' in compressor.prompts[1] and 'Add the failing test name.' in compressor.prompts[1]
    assert '<previous_memento>' in compressor.prompts[1] and str(DRAFT['result']) in compressor.prompts[1]
    assert result.usage_tokens == 4 * RUN_TOKENS


async def test_never_pass_is_stored_unverified_and_the_last_candidate_is_judged(block: BlockInput) -> None:
    compressor = Script([DRAFT, DRAFT | {'result': 'Second try.'}, DRAFT | {'result': 'Third try.'}])
    judge = Script([scores(5)])
    result = await llm_engine(compressor, judge).make_memento(block)
    assert not result.verified and result.score == 5.0
    assert result.iterations == 2 and compressor.runs == 3
    assert judge.runs == 3  # every candidate, the final one included, was judged
    assert result.text.startswith('RESULT: Third try.')  # among equal scores, the latest


async def test_best_candidate_is_kept_when_a_refinement_is_worse(block: BlockInput) -> None:
    compressor = Script([DRAFT, DRAFT | {'result': 'Worse.'}, DRAFT | {'result': 'Also worse.'}])
    judge = Script([scores(7), scores(3), scores(5)])
    result = await llm_engine(compressor, judge).make_memento(block)
    assert result.score == 7.0 and not result.verified and result.scores == (7.0, 3.0, 5.0)
    assert result.text.startswith('RESULT: The fix works')


async def test_judge_raising_is_fail_closed(block: BlockInput) -> None:
    compressor, judge = Script([DRAFT]), Script([RuntimeError('judge backend down')])
    result = await llm_engine(compressor, judge).make_memento(block)
    assert not result.verified and result.score is None
    assert result.iterations == 0 and compressor.runs == 1  # no feedback: nothing to refine on
    assert 'judge failed' in result.feedback and 'judge backend down' in result.feedback


async def test_malformed_judge_output_is_unscored(block: BlockInput) -> None:
    judge = Script([{'formulas': 9, 'values': 'lots'}])  # out of range / wrong type: fails validation on retry too
    result = await llm_engine(Script([DRAFT]), judge).make_memento(block)
    assert result.score is None and not result.verified
    assert 'JudgeError' in result.feedback


async def test_malformed_compressor_output_raises_compression_error(block: BlockInput) -> None:
    engine = llm_engine(Script([{'commands': 'not a list', 'result': None}]), Script([scores(10)]))
    with pytest.raises(CompressionError, match='failed'):
        await engine.make_memento(block)


async def test_compressor_model_raising_raises_compression_error(block: BlockInput) -> None:
    engine = llm_engine(Script([ConnectionError('provider unreachable')]), Script([scores(10)]))
    with pytest.raises(CompressionError, match='provider unreachable'):
        await engine.make_memento(block)


async def test_any_compressor_exception_becomes_compression_error(block: BlockInput) -> None:
    @dataclass
    class Broken:
        name: str = 'broken'

        async def compress(self, block: BlockInput, *, feedback: str | None = None, previous: str | None = None) -> str:
            raise ValueError('boom')

    with pytest.raises(CompressionError, match='broken failed: ValueError: boom') as info:
        await MementoEngine(compressor=Broken(), counter=COUNTER).make_memento(block)
    assert isinstance(info.value.__cause__, ValueError)


async def test_refinement_failure_keeps_the_scored_candidate(block: BlockInput) -> None:
    compressor, judge = Script([DRAFT, RuntimeError('rate limited')]), Script([scores(6)])
    result = await llm_engine(compressor, judge).make_memento(block)
    assert result.score == 6.0 and not result.verified and result.iterations == 0
    assert 'refinement 1 failed' in result.feedback


async def test_no_judge_means_unverified(block: BlockInput) -> None:
    result = await MementoEngine(judge=None, counter=COUNTER).make_memento(block)
    assert result.score is None and not result.verified and result.judge == ''


async def test_memento_not_shorter_than_block_is_a_compression_error() -> None:
    tiny = BlockInput((), 'RESULT: ok', tokens=3)

    @dataclass
    class Verbose:
        name: str = 'verbose'

        async def compress(self, block: BlockInput, *, feedback: str | None = None, previous: str | None = None) -> str:
            return 'RESULT: ok ok ok ok ok ok ok ok'

    with pytest.raises(CompressionError, match='not fewer than its block'):
        await MementoEngine(compressor=Verbose(), counter=COUNTER).make_memento(tiny)


async def test_combined_judge_takes_the_stricter_view(block: BlockInput) -> None:
    llm = Script([scores(8.5)])
    engine = MementoEngine(
        compressor=ExtractiveCompressor(counter=COUNTER),
        judge=CombinedJudge(RubricJudge(counter=COUNTER), LLMJudge(FunctionModel(llm))),
        counter=COUNTER,
    )
    result = await engine.make_memento(block)
    assert result.verified and result.score == 8.5  # rubric 10, LLM 8.5: per-dimension minimum
    assert result.judge.startswith('rubric+llm:')
    assert result.usage_tokens == RUN_TOKENS


async def test_combined_judge_falls_back_to_the_rubric_when_the_llm_fails(block: BlockInput) -> None:
    def engine(require_llm: bool) -> MementoEngine:
        llm = LLMJudge(FunctionModel(Script([RuntimeError('llm down')])))
        judge = CombinedJudge(RubricJudge(counter=COUNTER), llm, require_llm=require_llm)
        return MementoEngine(compressor=ExtractiveCompressor(counter=COUNTER), judge=judge, counter=COUNTER)

    lenient = await engine(require_llm=False).make_memento(block)
    assert lenient.verified and lenient.score == 10.0 and lenient.judge == 'rubric (llm failed)'
    assert 'LLM judge failed' in lenient.feedback
    strict = await engine(require_llm=True).make_memento(block)
    assert not strict.verified and strict.score is None


async def test_combined_judge_with_no_working_judge_is_unscored(block: BlockInput) -> None:
    @dataclass
    class Raising:
        async def judge(self, block: BlockInput, memento: str) -> object:
            raise RuntimeError('down')

    judge = CombinedJudge(Raising(), Raising())  # type: ignore[arg-type]
    result = await MementoEngine(judge=judge, counter=COUNTER).make_memento(block)
    assert result.score is None and not result.verified
    assert 'no judge could score' in result.feedback


async def test_extractive_refinement_raises_the_cap_and_pins_named_facts(block: BlockInput) -> None:
    # a cap far below what the block's facts need: the first candidate drops must-keep facts and fails
    compressor = ExtractiveCompressor(target_ratio=0.02, max_ratio=0.05, refine_ratios=(0.5, 0.9), counter=COUNTER)
    result = await MementoEngine(compressor=compressor, counter=COUNTER).make_memento(block)
    assert result.scores[0] is not None and result.scores[0] < 8
    assert result.verified and result.iterations == 1
    assert result.facts_kept == result.facts_total


async def test_usage_is_counted_per_block_even_concurrently(block: BlockInput) -> None:
    one = llm_engine(Script([DRAFT]), Script([scores(9)]))
    two = llm_engine(Script([DRAFT, BETTER_DRAFT]), Script([scores(6), scores(9)]))
    first, second = await asyncio.gather(one.make_memento(block), two.make_memento(block))
    assert first.usage_tokens == 2 * RUN_TOKENS and second.usage_tokens == 4 * RUN_TOKENS
    assert isinstance(one.compressor, LLMCompressor) and one.compressor.tokens_spent == RUN_TOKENS


async def test_result_as_store_record(block: BlockInput) -> None:
    result = await MementoEngine(counter=COUNTER).make_memento(block)
    record = result.as_record(id='mem_1', session_id='s', namespace='default', summarizes=('blk_1',))
    assert (record.text, record.tokens, record.score, record.verified) == (
        result.text,
        result.tokens,
        result.score,
        result.verified,
    )
    assert record.iterations == result.iterations and record.compressor == 'extractive'
