"""Entities: what blocks and mementos `MENTIONS` -- a deterministic extractor, key normalisation, an optional LLM
extractor, and reindexing what was archived before the extractor changed. Recall matches a query's entities against
these keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import LazyExports

if TYPE_CHECKING:
    from ._extract import (
        DEFAULT_MAX_CONCEPTS,
        ENTITY_KINDS,
        ExtractedEntity,
        extract_entities,
        mentions_for,
        merge_entities,
    )
    from ._llm import (
        ENTITY_MODEL_ENV,
        EntityModelError,
        LLMEntityExtractor,
        check_entity_model_name,
        llm_extractor_from_env,
    )
    from ._normalize import (
        KEY_CLASSES,
        STOPWORDS,
        aliases,
        entity_key,
        key_class,
        normalize_name,
        normalize_path,
        stem,
        stopwords_for,
    )
    from ._reindex import MentionExtractor, ReindexReport, default_mention_extractor, reindex_entities

__all__ = (
    'DEFAULT_MAX_CONCEPTS',
    'ENTITY_KINDS',
    'ENTITY_MODEL_ENV',
    'KEY_CLASSES',
    'STOPWORDS',
    'EntityModelError',
    'ExtractedEntity',
    'LLMEntityExtractor',
    'MentionExtractor',
    'ReindexReport',
    'aliases',
    'check_entity_model_name',
    'default_mention_extractor',
    'entity_key',
    'extract_entities',
    'key_class',
    'llm_extractor_from_env',
    'mentions_for',
    'merge_entities',
    'normalize_name',
    'normalize_path',
    'reindex_entities',
    'stem',
    'stopwords_for',
)

__getattr__ = LazyExports(
    __name__,
    globals(),
    {
        '._extract': (
            'DEFAULT_MAX_CONCEPTS',
            'ENTITY_KINDS',
            'ExtractedEntity',
            'extract_entities',
            'mentions_for',
            'merge_entities',
        ),
        '._llm': (
            'ENTITY_MODEL_ENV',
            'EntityModelError',
            'LLMEntityExtractor',
            'check_entity_model_name',
            'llm_extractor_from_env',
        ),
        '._normalize': (
            'KEY_CLASSES',
            'STOPWORDS',
            'aliases',
            'entity_key',
            'key_class',
            'normalize_name',
            'normalize_path',
            'stem',
            'stopwords_for',
        ),
        '._reindex': ('MentionExtractor', 'ReindexReport', 'default_mention_extractor', 'reindex_entities'),
    },
)
