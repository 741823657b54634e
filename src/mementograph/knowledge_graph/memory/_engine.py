"""`MementoEngine` -- compress, judge, refine: one verified (or honestly unverified) memento per block.

The loop follows the Memento paper: compress, judge; while the verdict fails and refinements remain, compress
again with the judge's feedback and the previous candidate, and judge the new candidate too -- every candidate,
including the last, is judged. The stored memento is the best-scored candidate (the latest among equals).

Failure policy:

- **The first compression fails** -> `CompressionError`: there is no memento, so the caller must not evict.
- **A refinement fails** -> the best candidate so far is kept and the failure is noted in `feedback`.
- **A judge raises or cannot score** -> that candidate is unscored. With no score there is no feedback to act on,
  so no refinement follows; the memento is stored unverified (fail closed, never passed).
- **No judge configured** -> every memento is unverified (`score=None`).
- **The memento is not shorter than its block** -> `CompressionError` (evicting it would grow the context).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..._tokens import TokenCounter
from .._schema import MementoRecord
from ._block import BlockInput
from ._compress import CompressionError, Compressor, ExtractiveCompressor
from ._facts import critical_facts, fact_present
from ._judge import PASS_SCORE, Judge, RubricJudge, Verdict, unscored
from ._usage import usage_meter

__all__ = ('MementoEngine', 'MementoResult')


@dataclass(frozen=True)
class MementoResult:
    """A memento and how it was made; `as_record` turns it into the store's `Memento` node."""

    text: str
    """The memento text that replaces the block in the live context."""
    tokens: int
    """Tokens of `text`."""
    score: float | None
    """The judge's score 0-10 of the stored candidate; `None` when no judge could score it."""
    verified: bool
    """True only when a judge actually scored it at or above the pass mark."""
    iterations: int
    """Refinements done (0 to `max_refinements`)."""
    compressor: str
    """Name of the compressor."""
    judge: str
    """Name of the judge that produced the stored verdict ('' without a judge)."""
    feedback: str
    """The stored candidate's verdict feedback (and notes on judge or refinement failures)."""
    facts_total: int
    """Critical facts in the block."""
    facts_kept: int
    """Of those, present in the memento."""
    usage_tokens: int
    """LLM tokens spent compressing and judging this block (0 for the extractive compressor and rubric)."""
    scores: tuple[float | None, ...] = ()
    """Score of each judged candidate in order (first candidate, then each refinement)."""

    @property
    def fact_retention(self) -> float:
        """Fraction of the block's critical facts kept (1.0 when it has none)."""
        return self.facts_kept / self.facts_total if self.facts_total else 1.0

    def as_record(
        self, *, id: str, session_id: str, namespace: str, summarizes: tuple[str, ...], level: int = 1
    ) -> MementoRecord:
        """The `(:Memento)` node for this result."""
        return MementoRecord(
            id=id,
            session_id=session_id,
            namespace=namespace,
            text=self.text,
            tokens=self.tokens,
            summarizes=summarizes,
            score=self.score,
            verified=self.verified,
            iterations=self.iterations,
            compressor=self.compressor,
            level=level,
        )


@dataclass
class MementoEngine:
    """Turns blocks into mementos with a compressor, a judge and at most `max_refinements` refinements."""

    compressor: Compressor = field(default_factory=ExtractiveCompressor)
    """Writes candidates (default: the extractive compressor, no LLM)."""
    judge: Judge | None = field(default_factory=RubricJudge)
    """Scores candidates (default: the deterministic rubric); `None` stores every memento unverified."""
    pass_score: float = PASS_SCORE
    """A memento is verified only when a judge scored it at least this (and the judge passed it)."""
    max_refinements: int = 2
    """Refinements after the first candidate (the paper's default: 2)."""
    counter: TokenCounter | None = None
    """Counts memento tokens; a default `TokenCounter()` is made on first use."""

    def __post_init__(self) -> None:
        if self.max_refinements < 0:
            raise ValueError(f'max_refinements must be >= 0, got {self.max_refinements}')
        if not 0 <= self.pass_score <= 10:
            raise ValueError(f'pass_score must be within 0-10, got {self.pass_score}')

    def _count(self, text: str) -> int:
        if self.counter is None:
            self.counter = TokenCounter()
        return self.counter.count_text(text)

    async def _verdict(self, block: BlockInput, memento: str) -> Verdict:
        if self.judge is None:
            return unscored('', 'no judge configured')
        try:
            return await self.judge.judge(block, memento)
        except Exception as exc:  # fail closed: an error is never a pass
            name = getattr(self.judge, 'name', type(self.judge).__name__)
            return unscored(str(name), f'judge failed: {type(exc).__name__}: {exc}')

    def _passes(self, verdict: Verdict) -> bool:
        return verdict.passed and verdict.score is not None and verdict.score >= self.pass_score

    async def make_memento(self, block: BlockInput) -> MementoResult:
        """Compress `block`, judge, refine with feedback while it fails (at most `max_refinements` times).

        Raises:
            CompressionError: The first compression failed or returned nothing, or the memento is not shorter
                than the block. The block must then stay in the context.
        """
        with usage_meter() as meter:
            try:
                candidate = await self.compressor.compress(block)
            except CompressionError:
                raise
            except Exception as exc:
                raise CompressionError(f'{self.compressor.name} failed: {type(exc).__name__}: {exc}') from exc
            if not isinstance(candidate, str) or not candidate.strip():
                raise CompressionError(f'{self.compressor.name} returned an empty memento')
            verdict = await self._verdict(block, candidate)
            best, best_verdict = candidate, verdict
            scores: list[float | None] = [verdict.score]
            notes: list[str] = []
            refinements = 0
            while not self._passes(verdict) and verdict.score is not None and refinements < self.max_refinements:
                try:
                    refined = await self.compressor.compress(block, feedback=verdict.feedback, previous=candidate)
                except Exception as exc:
                    notes.append(f'refinement {refinements + 1} failed: {type(exc).__name__}: {exc}')
                    break
                refinements += 1
                if not isinstance(refined, str) or not refined.strip() or refined == candidate:
                    notes.append(f'refinement {refinements} produced nothing new')
                    break
                candidate = refined
                verdict = await self._verdict(block, candidate)
                scores.append(verdict.score)
                if _better(verdict, best_verdict):
                    best, best_verdict = candidate, verdict
            usage = meter.tokens

        tokens = self._count(best)
        if block.tokens and tokens >= block.tokens:
            raise CompressionError(
                f'{self.compressor.name}: the memento has {tokens} tokens, not fewer than its block ({block.tokens})'
            )
        facts = critical_facts(block.text)
        kept = sum(1 for fact in facts if fact_present(fact, best))
        feedback = '\n'.join([best_verdict.feedback, *notes]) if notes else best_verdict.feedback
        return MementoResult(
            text=best,
            tokens=tokens,
            score=best_verdict.score,
            verified=self._passes(best_verdict),
            iterations=refinements,
            compressor=self.compressor.name,
            judge=best_verdict.judge,
            feedback=feedback,
            facts_total=len(facts),
            facts_kept=kept,
            usage_tokens=usage,
            scores=tuple(scores),
        )


def _better(new: Verdict, old: Verdict) -> bool:
    """Scored beats unscored; a pass beats a fail; then the higher score; ties go to the newer candidate."""
    if new.score is None:
        return old.score is None
    if old.score is None:
        return True
    if new.passed != old.passed:
        return new.passed
    return new.score >= old.score
