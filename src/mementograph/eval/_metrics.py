"""`_metrics` -- the benchmarks' own retrieval measures, and the answer-retention measure.

- LoCoMo evidence recall@k (Maharana et al. 2024, Table 3): the share of a question's evidence turns (`dia_id`)
  found in the top k retrieved turns, averaged over questions.
- LongMemEval (`src/retrieval/eval_utils.py`): `recall_all@k` is 1 when **every** gold session is in the top k;
  `ndcg_any@k` is NDCG with binary relevance and upstream's DCG (`rel_1 + sum_{i>=2} rel_i / log2(i)`).
- Answer retention: whether every word of an answer occurs as a word of a text (case-folded).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Sequence

__all__ = ('answer_words', 'dcg', 'evidence_recall', 'ndcg_any', 'recall_all', 'retains_answer', 'words_of')

_WORDS = re.compile(r'[a-z0-9]+')


def evidence_recall(ranked: Sequence[str], evidence: Collection[str], k: int) -> float:
    """Share of `evidence` within the first `k` of `ranked` (0 when there is no evidence)."""
    if not evidence:
        return 0.0
    top = set(ranked[:k])
    return sum(1 for item in evidence if item in top) / len(evidence)


def recall_all(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 when every gold item is in the top `k` (upstream's `all(...)`: 1.0 for an empty gold set)."""
    top = set(ranked[:k])
    return float(all(item in top for item in gold))


def dcg(relevances: Sequence[float], k: int) -> float:
    """Upstream's DCG: the first relevance undiscounted, then `rel_i / log2(i)` for positions i >= 2."""
    values = list(relevances[:k])
    if not values:
        return 0.0
    return values[0] + sum(value / math.log2(position) for position, value in enumerate(values[1:], start=2))


def ndcg_any(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """NDCG@k with relevance 1 for gold items (0 when there is no gold item)."""
    gold_set = set(gold)
    ideal = dcg([1.0] * len(gold_set), k)
    if ideal == 0:
        return 0.0
    return dcg([1.0 if item in gold_set else 0.0 for item in ranked[:k]], k) / ideal


def words_of(text: str) -> set[str]:
    """Case-folded alphanumeric words of a text."""
    return set(_WORDS.findall(text.lower()))


def answer_words(answer: object) -> set[str]:
    """The words an answer consists of (every one of them, stop words included: the strict reading)."""
    return words_of(str(answer))


def retains_answer(answer: object, text: str) -> bool | None:
    """Whether every word of `answer` occurs in `text`; `None` for an answer without words."""
    wanted = answer_words(answer)
    if not wanted:
        return None
    return wanted <= words_of(text)
