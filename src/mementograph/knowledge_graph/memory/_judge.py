"""`_judge` -- judges score a memento against its block on the Memento paper's rubric (0-10, pass at 8).

Dimensions (after microsoft/memento's judge prompt, with its correctness filter replaced by a check we can make):
formulas verbatim 0-3, values 0-2, methods 0-2, validation/test outcomes 0-1, no hallucination 0-1 and result
first 0-1, with deductions of 2 points for any missing must-keep fact and 2 for anything invented.

- `RubricJudge` scores all six mechanically from the block's critical facts (`critical_facts`): each dimension is
  its maximum times the fraction of its facts the memento keeps; *must-keep* facts (formulas, numbers, versions,
  commands with their exit codes on the same line, errors, tests, file paths) cost the deduction when any is
  missing, while identifiers, URLs and short output lines only cost their share of a dimension; anything in the
  memento that is not in the block -- a fact (path, number, identifier, exit code, ...) or a code-shaped token
  (with a digit, `_`, `/`, an inner `.` or an inner capital) -- zeroes "no hallucination" and costs the deduction.
  Plain English words are not checked (paraphrase is allowed for prose). A conversation's memento, and a memento
  of conversation mementos, may lead with a line of one of its speakers instead of `RESULT:` (a conversation has
  no outcome; `_dialogue`), which "result first" accepts. A memento that is not shorter than its block never
  passes. Date anchors a dialogue memento adds ("yesterday (7 May 2023)", `_dialogue`) are accepted exactly as the
  resolver derives them from the block's messages and timestamps; any other date-shaped parenthesis that the block
  does not hold counts as invented.
- `LLMJudge` asks any pydantic-ai model for the same six scores plus what is missing or invented: it can judge
  what words cannot be matched for (a wrong claim, process narrative, a paraphrased formula).
- `CombinedJudge` takes, per dimension, the lower of the two scores, keeps the rubric's deductions, and passes
  only when both pass. If the LLM judge fails it falls back to the rubric (or, with `require_llm`, to no score).

Fail closed: a judge that raises, or returns no score, leaves the memento unverified (`Verdict.score is None`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.models import KnownModelName, Model
from pydantic_ai.settings import ModelSettings

from ..._tokens import TokenCounter
from ._block import BlockInput, actions_for
from ._compress import _model_name
from ._dialogue import is_conversation_memento, is_dialogue, model_view, opens_with_speaker, strip_derived_anchors
from ._facts import MUST_KEEP_KINDS, command_facts, critical_facts, exit_codes_in, fact_present
from ._usage import record_usage

__all__ = (
    'DIMENSIONS',
    'PASS_SCORE',
    'CombinedJudge',
    'Judge',
    'JudgeDraft',
    'JudgeError',
    'LLMJudge',
    'RubricJudge',
    'Verdict',
    'unscored',
)

PASS_SCORE: Final = 8.0
DIMENSIONS: Final[Mapping[str, float]] = {
    'formulas': 3.0,
    'values': 2.0,
    'methods': 2.0,
    'validation': 1.0,
    'no_hallucination': 1.0,
    'result_first': 1.0,
}
"""The six rubric dimensions and their maxima (sum 10)."""

MISSING_DEDUCTION: Final = 2.0
INVENTED_DEDUCTION: Final = 2.0
_DIMENSION_KINDS: Final[Mapping[str, frozenset[str]]] = {
    'formulas': frozenset({'formula'}),
    'values': frozenset({'number', 'version', 'output'}),
    'methods': frozenset({'command', 'path', 'url', 'identifier'}),
    'validation': frozenset({'test', 'error', 'exit_code'}),
}
_MAX_LISTED: Final = 40
_TOKEN = re.compile(r'[A-Za-z0-9_][\w.:/@+-]*\w|\w')
_RESULT_FIRST = re.compile(r'^RESULT\s*:\s*\S', re.IGNORECASE)


class JudgeError(RuntimeError):
    """A judge could not score a memento (model failure, malformed output)."""


@dataclass(frozen=True)
class Verdict:
    """A judge's verdict on one memento."""

    score: float | None
    """0-10; `None` when the judge could not score (the memento then stays unverified)."""
    passed: bool
    """Scored at or above the pass mark (and, for the rubric, shorter than the block)."""
    dimensions: Mapping[str, float]
    """Score per rubric dimension (the rubric adds `deductions`, a non-positive number)."""
    missing: tuple[str, ...]
    """What the memento lacks, as `kind: verbatim text`."""
    invented: tuple[str, ...]
    """What the memento holds that the block does not, as `kind: text`."""
    feedback: str
    """Actionable text for the next refinement (names exactly what is missing or invented)."""
    judge: str
    """Which judge (or judges) produced the verdict."""


def unscored(judge: str, reason: str) -> Verdict:
    """The fail-closed verdict: no score, not passed."""
    return Verdict(None, False, {}, (), (), reason, judge)


@runtime_checkable
class Judge(Protocol):
    """Scores a memento against its block."""

    async def judge(self, block: BlockInput, memento: str) -> Verdict:
        """The verdict; may raise (the engine then treats the memento as unscored)."""
        ...


def _significant(token: str) -> bool:
    """A code-shaped token: the kind of word a memento must not make up."""
    return bool(re.search(r'[\d_/]', token) or re.search(r'\w\.\w', token) or re.search(r'[a-z][A-Z]', token))


def _listed(title: str, entries: Sequence[str]) -> list[str]:
    if not entries:
        return []
    lines = [title]
    lines.extend(f'- {entry}' for entry in entries[:_MAX_LISTED])
    if len(entries) > _MAX_LISTED:
        lines.append(f'- ... and {len(entries) - _MAX_LISTED} more')
    return lines


def _format_score(dimensions: Mapping[str, float]) -> str:
    parts = [f'{name} {dimensions.get(name, 0.0):g}/{maximum:g}' for name, maximum in DIMENSIONS.items()]
    return ', '.join(parts)


@dataclass
class RubricJudge:
    """Deterministic rubric checker: scores what can be checked mechanically (see the module docstring)."""

    pass_score: float = PASS_SCORE
    """Pass mark (0-10)."""
    counter: TokenCounter | None = None
    """Counts memento tokens for the size check; a default `TokenCounter()` is made on first use."""
    name: str = 'rubric'
    """Recorded on each verdict."""

    async def judge(self, block: BlockInput, memento: str) -> Verdict:
        """Score `memento` (see `check`)."""
        return self.check(block, memento)

    def check(self, block: BlockInput, memento: str) -> Verdict:
        """Synchronous scoring: the rubric never waits on anything."""
        if not memento.strip():
            return Verdict(0.0, False, dict.fromkeys(DIMENSIONS, 0.0), (), (), 'the memento is empty', self.name)
        facts = critical_facts(block.text)
        kept = {fact: fact_present(fact, memento) for fact in facts}
        pairs_total, missing_pairs = self._exit_code_pairs(block, memento)

        dimensions: dict[str, float] = {}
        for dimension, kinds in _DIMENSION_KINDS.items():
            relevant = [fact for fact in facts if fact.kind in kinds]
            total = len(relevant)
            held = sum(1 for fact in relevant if kept[fact])
            if dimension == 'validation':  # each command's exit code must sit on the command's line
                total += pairs_total
                held += pairs_total - len(missing_pairs)
            dimensions[dimension] = round(DIMENSIONS[dimension] * (held / total if total else 1.0), 2)
        invented = self._invented(block, memento)
        dimensions['no_hallucination'] = 0.0 if invented else 1.0
        first_line = next((line for line in memento.splitlines() if line.strip()), '')
        # a conversation, or a merge of its mementos, may lead with a line of one of its speakers
        dialogue = is_dialogue(block) or any(is_conversation_memento(child) for child in block.merges)
        leads = bool(_RESULT_FIRST.match(first_line.strip())) or (dialogue and opens_with_speaker(block, memento))
        dimensions['result_first'] = 1.0 if leads else 0.0

        missing = [f'{fact.kind}: {fact.text}' for fact in facts if not kept[fact]]
        missing.extend(missing_pairs)
        must_keep_missing = bool(missing_pairs) or any(not kept[fact] for fact in facts if fact.kind in MUST_KEEP_KINDS)
        deductions = -(MISSING_DEDUCTION if must_keep_missing else 0.0) - (INVENTED_DEDUCTION if invented else 0.0)
        dimensions['deductions'] = deductions
        score = round(max(0.0, min(10.0, sum(dimensions[name] for name in DIMENSIONS) + deductions)), 2)

        size_problem = self._size_problem(block, memento)
        passed = score >= self.pass_score and size_problem is None
        lines = [
            f'rubric score {score:g}/10 (pass at {self.pass_score:g}): {_format_score(dimensions)}'
            + (f'; deductions {deductions:g}' if deductions else ''),
        ]
        if size_problem:
            lines.append(f'SIZE: {size_problem}')
        if not dimensions['result_first']:
            lines.append(
                'RESULT: start with a line "RESULT: <the outcome of the block>"'
                + (' or, in this conversation, with a line of one of its speakers ("Name: ...").' if dialogue else '.')
            )
        lines.extend(_listed('MISSING (copy verbatim from the block):', missing))
        lines.extend(_listed('INVENTED (not in the block; remove, or quote the block exactly):', invented))
        return Verdict(score, passed, dimensions, tuple(missing), tuple(invented), '\n'.join(lines), self.name)

    def _exit_code_pairs(self, block: BlockInput, memento: str) -> tuple[int, list[str]]:
        """`(commands with an exit code, problems)`: each such command's exit code must sit on a memento line that
        holds one of the command's lines -- one line per run, so a command run twice needs two such lines."""
        problems: list[str] = []
        total = 0
        lines = memento.splitlines()
        used: set[int] = set()
        for action in actions_for(block):
            if action.exit_code is None:
                continue
            commands = [fact for fact in command_facts(action.command) if fact.kind == 'command']
            if not commands:
                continue
            total += 1
            holder = next(
                (
                    number
                    for number, line in enumerate(lines)
                    if number not in used
                    and action.exit_code in exit_codes_in(line)
                    and any(fact_present(command, line) for command in commands)
                ),
                None,
            )
            if holder is not None:
                used.add(holder)
                continue
            problems.append(f'exit_code: `{commands[-1].text}` -> exit {action.exit_code}')
        return total, problems

    def _invented(self, block: BlockInput, memento: str) -> list[str]:
        # Date anchors ("yesterday (7 May 2023)") are derived from the messages' timestamps, not copied: accept
        # exactly the ones the resolver derives for this block, and count any other date anchor as invented.
        memento, wrong_anchors = strip_derived_anchors(memento, block)
        invented: list[str] = [f'anchor: {anchor}' for anchor in wrong_anchors]
        block_codes = exit_codes_in(block.text)
        for fact in critical_facts(memento):
            if fact.kind == 'exit_code':
                if not exit_codes_in(fact.text) <= block_codes:
                    invented.append(f'{fact.kind}: {fact.text}')
            elif fact.text not in block.text:
                invented.append(f'{fact.kind}: {fact.text}')
        seen = {entry.split(': ', 1)[1] for entry in invented}
        for line in memento.splitlines():
            for code in exit_codes_in(line) - block_codes:
                entry = f'exit_code: exit {code}'
                if entry not in invented:
                    invented.append(entry)
            for token in _TOKEN.findall(line):
                if _significant(token) and token not in block.text and not any(token in text for text in seen):
                    seen.add(token)
                    invented.append(f'token: {token}')
        return invented

    def _size_problem(self, block: BlockInput, memento: str) -> str | None:
        if block.tokens <= 0:
            return None if len(memento) < len(block.text) else 'the memento is not shorter than its block'
        if self.counter is None:
            self.counter = TokenCounter()
        tokens = self.counter.count_text(memento)
        if tokens >= block.tokens:
            return f'the memento has {tokens} tokens, not fewer than its block ({block.tokens}); shorten it'
        return None


# ----------------------------------------------------------------------------------------------- LLM judge


class JudgeDraft(BaseModel):
    """What an LLM judge returns."""

    formulas: float = Field(ge=0, le=3, description='Formulas kept verbatim, 0-3.')
    values: float = Field(ge=0, le=2, description='Numbers and intermediate values kept, 0-2.')
    methods: float = Field(ge=0, le=2, description='Methods, commands, files and symbols named, 0-2.')
    validation: float = Field(ge=0, le=1, description='Test outcomes, exit codes and errors kept, 0-1.')
    no_hallucination: float = Field(ge=0, le=1, description='1 if nothing in the memento is absent from the block.')
    result_first: float = Field(ge=0, le=1, description='1 if the memento starts with the result.')
    missing: list[str] = Field(default_factory=list, description='Critical items missing, verbatim from the block.')
    invented: list[str] = Field(default_factory=list, description='Items in the memento that the block lacks.')
    feedback: str = Field(default='', description='Ranked, actionable instructions to fix the memento.')


DEFAULT_JUDGE_INSTRUCTIONS: Final = """\
You judge a memento: a terse replacement for a block of an agent's context; the agent continues from the memento
alone. Score it against the block on this rubric:
- formulas 0-3: formulas and code expressions copied verbatim (paraphrase scores 0 for that formula);
- values 0-2: numbers with units, versions and intermediate values kept exactly;
- methods 0-2: commands (verbatim), files, functions and approaches named;
- validation 0-1: test outcomes, exit codes and errors kept;
- no_hallucination 0-1: 1 only if every claim in the memento is supported by the block;
- result_first 0-1: 1 if the memento opens with the outcome, not with process narrative (in a conversation, with
  a speaker's statement).
A date in parentheses after a relative expression in a conversation ("yesterday (7 May 2023)") was resolved from
the message's time: it is supported by the block.
List exactly what is missing (verbatim from the block) and what is invented. Be strict: a missing critical value
or command outcome is a failure.
"""


@dataclass
class LLMJudge:
    """Scores with any pydantic-ai model (structured `JudgeDraft` output)."""

    model: Model | KnownModelName | str
    """The model (an instance, or a name like `'openai:gpt-4o-mini'`)."""
    pass_score: float = PASS_SCORE
    """Pass mark (0-10)."""
    instructions: str = DEFAULT_JUDGE_INSTRUCTIONS
    """System instructions of the judging agent."""
    model_settings: ModelSettings | None = None
    """Passed to every run (e.g. temperature 0)."""
    name: str = ''
    """Recorded on each verdict; defaults to `llm:<model name>`."""
    tokens_spent: int = field(default=0, init=False)
    """Tokens (input + output) spent by this judge so far."""
    _agent: Agent[None, JudgeDraft] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = f'llm:{_model_name(self.model)}'

    def _get_agent(self) -> Agent[None, JudgeDraft]:
        if self._agent is None:
            self._agent = Agent(
                self.model,
                output_type=JudgeDraft,
                instructions=self.instructions,
                name='memento_judge',
                defer_model_check=True,
            )
        return self._agent

    async def judge(self, block: BlockInput, memento: str) -> Verdict:
        """One model run.

        Raises:
            JudgeError: The model failed or its output did not validate after pydantic-ai's retries.
        """
        prompt = '\n\n'.join(
            [
                *([f'<context>\n{block.context}\n</context>'] if block.context else []),
                f'<block>\n{model_view(block)}\n</block>',
                f'<memento>\n{memento}\n</memento>',
            ]
        )
        try:
            result = await self._get_agent().run(prompt, model_settings=self.model_settings)
        except Exception as exc:
            raise JudgeError(f'{self.name} failed: {type(exc).__name__}: {exc}') from exc
        spent = result.usage.total_tokens
        self.tokens_spent += spent
        record_usage(spent)
        draft = result.output
        dimensions = {name: float(getattr(draft, name)) for name in DIMENSIONS}
        score = round(sum(dimensions.values()), 2)
        missing = tuple(f'llm: {item}' for item in draft.missing if item.strip())
        invented = tuple(f'llm: {item}' for item in draft.invented if item.strip())
        lines = [f'{self.name} score {score:g}/10 (pass at {self.pass_score:g}): {_format_score(dimensions)}']
        if draft.feedback.strip():
            lines.append(draft.feedback.strip())
        lines.extend(_listed('MISSING (copy verbatim from the block):', missing))
        lines.extend(_listed('INVENTED (not in the block; remove, or quote the block exactly):', invented))
        return Verdict(score, score >= self.pass_score, dimensions, missing, invented, '\n'.join(lines), self.name)


@dataclass
class CombinedJudge:
    """The rubric for what can be checked mechanically, an LLM judge for the rest; the stricter view wins."""

    rubric: Judge = field(default_factory=RubricJudge)
    """Mechanical judge (usually `RubricJudge`)."""
    llm: Judge | None = None
    """LLM judge; without one this is the rubric alone."""
    require_llm: bool = False
    """When the LLM judge fails: `False` falls back to the rubric's verdict (it did score the memento mechanically);
    `True` leaves the memento unscored (unverified)."""
    pass_score: float = PASS_SCORE
    """Pass mark for the combined score."""
    name: str = 'rubric+llm'
    """Recorded on each verdict."""

    async def judge(self, block: BlockInput, memento: str) -> Verdict:
        """Both judges; per dimension the lower score, the rubric's deductions, pass only if both pass."""
        rubric, rubric_error = await _try_judge(self.rubric, block, memento)
        llm, llm_error = (
            (None, 'no LLM judge configured') if self.llm is None else await _try_judge(self.llm, block, memento)
        )
        if rubric is None and llm is None:
            return unscored(self.name, f'no judge could score the memento: rubric: {rubric_error}; llm: {llm_error}')
        if llm is None:
            assert rubric is not None
            if self.require_llm and self.llm is not None:
                return Verdict(
                    None,
                    False,
                    rubric.dimensions,
                    rubric.missing,
                    rubric.invented,
                    f'{rubric.feedback}\nLLM judge failed ({llm_error}); unscored because require_llm is set',
                    self.name,
                )
            note = '' if self.llm is None else f'\nLLM judge failed ({llm_error}); rubric verdict only'
            return Verdict(
                rubric.score,
                rubric.passed,
                rubric.dimensions,
                rubric.missing,
                rubric.invented,
                rubric.feedback + note,
                f'{rubric.judge} (llm failed)' if self.llm is not None else rubric.judge,
            )
        if rubric is None:
            return Verdict(
                llm.score,
                llm.passed,
                llm.dimensions,
                llm.missing,
                llm.invented,
                f'{llm.feedback}\nrubric failed ({rubric_error}); LLM verdict only',
                f'{llm.judge} (rubric failed)',
            )
        if rubric.score is None or llm.score is None:
            scored = rubric if rubric.score is not None else llm
            return Verdict(
                scored.score,
                scored.passed,
                scored.dimensions,
                scored.missing,
                scored.invented,
                scored.feedback,
                scored.judge,
            )
        dimensions = {name: min(rubric.dimensions.get(name, 0.0), llm.dimensions.get(name, 0.0)) for name in DIMENSIONS}
        deductions = rubric.dimensions.get('deductions', 0.0)
        dimensions['deductions'] = deductions
        score = round(max(0.0, sum(dimensions[name] for name in DIMENSIONS) + deductions), 2)
        passed = score >= self.pass_score and rubric.passed and llm.passed
        missing = tuple(dict.fromkeys((*rubric.missing, *llm.missing)))
        invented = tuple(dict.fromkeys((*rubric.invented, *llm.invented)))
        feedback = f'combined score {score:g}/10 (pass at {self.pass_score:g})\n{rubric.feedback}\n{llm.feedback}'
        return Verdict(score, passed, dimensions, missing, invented, feedback, f'{rubric.judge}+{llm.judge}')


async def _try_judge(judge: Judge, block: BlockInput, memento: str) -> tuple[Verdict | None, str]:
    try:
        verdict = await judge.judge(block, memento)
    except Exception as exc:
        return None, f'{type(exc).__name__}: {exc}'
    return verdict, ''
