"""The memento engine: segmentation, critical facts, compressors, judges and the refine loop."""

from __future__ import annotations

from ._block import BlockInput
from ._compress import (
    SECTION_LABELS,
    CompressionError,
    Compressor,
    ExtractiveCompressor,
    LLMCompressor,
    MementoDraft,
    render_draft,
)
from ._dates import TimeZone, time_zone
from ._engine import MementoEngine, MementoResult
from ._facts import FACT_KINDS, Fact, FactKind, critical_facts, fact_present, fact_retention, missing_facts
from ._judge import (
    DIMENSIONS,
    PASS_SCORE,
    CombinedJudge,
    Judge,
    JudgeDraft,
    JudgeError,
    LLMJudge,
    RubricJudge,
    Verdict,
)
from ._outline import Definition, definitions_in, definitions_shown, definitions_written, without_outlines
from ._render import OBSERVATION_PREFIX, Region, parse_regions, render_block
from ._segment import Segment, segment_blocks
from ._usage import UsageMeter, usage_meter

__all__ = (
    'DIMENSIONS',
    'FACT_KINDS',
    'OBSERVATION_PREFIX',
    'PASS_SCORE',
    'SECTION_LABELS',
    'BlockInput',
    'CombinedJudge',
    'CompressionError',
    'Compressor',
    'Definition',
    'ExtractiveCompressor',
    'Fact',
    'FactKind',
    'Judge',
    'JudgeDraft',
    'JudgeError',
    'LLMCompressor',
    'LLMJudge',
    'MementoDraft',
    'MementoEngine',
    'MementoResult',
    'Region',
    'RubricJudge',
    'Segment',
    'TimeZone',
    'UsageMeter',
    'Verdict',
    'critical_facts',
    'definitions_in',
    'definitions_shown',
    'definitions_written',
    'fact_present',
    'fact_retention',
    'missing_facts',
    'parse_regions',
    'render_block',
    'render_draft',
    'segment_blocks',
    'time_zone',
    'usage_meter',
    'without_outlines',
)
