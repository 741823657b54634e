"""The benchmarks' measures, checked by hand against their definitions."""

from __future__ import annotations

import math

import pytest

from mementograph.eval import dcg, evidence_recall, ndcg_any, recall_all, retains_answer


def test_evidence_recall_is_the_share_found() -> None:
    ranked = ['D1:1', 'D1:2', 'D1:3', 'D2:1']
    assert evidence_recall(ranked, ['D1:2', 'D2:1'], 2) == 0.5
    assert evidence_recall(ranked, ['D1:2', 'D2:1'], 4) == 1.0
    assert evidence_recall(ranked, [], 4) == 0.0


def test_recall_all_needs_every_gold_item() -> None:
    assert recall_all(['a', 'b', 'c'], ['a', 'c'], 3) == 1.0
    assert recall_all(['a', 'b', 'c'], ['a', 'c'], 2) == 0.0
    assert recall_all(['a'], [], 1) == 1.0  # upstream: all([]) is True


def test_dcg_and_ndcg_follow_upstream() -> None:
    assert dcg([1, 1, 1], 3) == pytest.approx(1 + 1 / math.log2(2) + 1 / math.log2(3))
    assert ndcg_any(['x', 'a', 'b'], ['a', 'b'], 5) == pytest.approx(
        (1 / math.log2(2) + 1 / math.log2(3)) / (1 + 1 / math.log2(2))
    )
    assert ndcg_any(['a', 'b'], ['a', 'b'], 5) == 1.0
    assert ndcg_any(['x'], [], 5) == 0.0


def test_answer_retention_needs_every_answer_word() -> None:
    assert retains_answer('Adoption agencies', 'Researching adoption agencies today') is True
    assert retains_answer('7 May 2023', 'on 8 May, 2023') is False
    assert retains_answer(2022, 'since 2022') is True
    assert retains_answer('', 'anything') is None
