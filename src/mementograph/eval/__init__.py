"""Benchmarks: LoCoMo and LongMemEval retrieval through the real engine and store, every method in one run."""

from __future__ import annotations

from ._common import ALL_METHODS, EVAL_METHODS, Table, dense_index, format_table
from ._ingest import (
    DIALOGUE_MAX_TOKENS,
    DIALOGUE_MIN_TOKENS,
    Dialogue,
    DialogueIngestor,
    EngineSpec,
    IngestedBlock,
    IngestedDialogue,
    Progress,
    Segment,
    Turn,
    default_workers,
    ingest_all,
)
from ._locomo import LocomoReport, evaluate_locomo, load_locomo, locomo_tables
from ._longmemeval import LongMemEvalReport, evaluate_longmemeval, longmemeval_tables
from ._metrics import dcg, evidence_recall, ndcg_any, recall_all, retains_answer

__all__ = (
    'ALL_METHODS',
    'DIALOGUE_MAX_TOKENS',
    'DIALOGUE_MIN_TOKENS',
    'EVAL_METHODS',
    'Dialogue',
    'DialogueIngestor',
    'EngineSpec',
    'IngestedBlock',
    'IngestedDialogue',
    'LocomoReport',
    'LongMemEvalReport',
    'Progress',
    'Segment',
    'Table',
    'Turn',
    'dcg',
    'default_workers',
    'dense_index',
    'evaluate_locomo',
    'evaluate_longmemeval',
    'evidence_recall',
    'format_table',
    'ingest_all',
    'load_locomo',
    'locomo_tables',
    'longmemeval_tables',
    'ndcg_any',
    'recall_all',
    'retains_answer',
)
