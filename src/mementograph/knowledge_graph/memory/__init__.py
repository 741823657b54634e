"""The memento engine: segmentation, critical facts, compressors, judges and the refine loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import LazyExports

if TYPE_CHECKING:
    from ._block import BlockInput
    from ._compress import (
        CompressionError,
        Compressor,
        ExtractiveCompressor,
        LLMCompressor,
        MementoDraft,
        render_draft,
    )
    from ._dates import TimeZone, time_zone
    from ._dialogue import is_conversation_memento
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
    from ._regions import OBSERVATION_PREFIX, SECTION_LABELS, Region, parse_regions
    from ._render import render_block
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
    'is_conversation_memento',
    'missing_facts',
    'parse_regions',
    'render_block',
    'render_draft',
    'segment_blocks',
    'time_zone',
    'usage_meter',
    'without_outlines',
)

__getattr__ = LazyExports(
    __name__,
    globals(),
    {
        '._block': ('BlockInput',),
        '._compress': (
            'CompressionError',
            'Compressor',
            'ExtractiveCompressor',
            'LLMCompressor',
            'MementoDraft',
            'render_draft',
        ),
        '._dates': ('TimeZone', 'time_zone'),
        '._dialogue': ('is_conversation_memento',),
        '._engine': ('MementoEngine', 'MementoResult'),
        '._facts': (
            'FACT_KINDS',
            'Fact',
            'FactKind',
            'critical_facts',
            'fact_present',
            'fact_retention',
            'missing_facts',
        ),
        '._judge': (
            'DIMENSIONS',
            'PASS_SCORE',
            'CombinedJudge',
            'Judge',
            'JudgeDraft',
            'JudgeError',
            'LLMJudge',
            'RubricJudge',
            'Verdict',
        ),
        '._outline': ('Definition', 'definitions_in', 'definitions_shown', 'definitions_written', 'without_outlines'),
        '._regions': ('OBSERVATION_PREFIX', 'SECTION_LABELS', 'Region', 'parse_regions'),
        '._render': ('render_block',),
        '._segment': ('Segment', 'segment_blocks'),
        '._usage': ('UsageMeter', 'usage_meter'),
    },
)
