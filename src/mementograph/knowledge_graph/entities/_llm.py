"""`_llm` -- the optional LLM entity extractor (any pydantic-ai model), behind a setting.

The deterministic extractor finds what has a shape (paths, symbols, dates, capitalised names); a model also finds
what only meaning marks as a thing ("the adoption agency", "my sister's wedding"). It is off unless configured:
`MEMENTOGRAPH_ENTITY_MODEL=provider:model` (or an `LLMEntityExtractor` passed explicitly), because it costs one
model call per block and memento.

Guard rails: an entity the model names must occur verbatim in the text (case-insensitively) or it is dropped, so
a hallucinated entity never becomes a `MENTIONS` edge; kinds outside `ENTITY_KINDS` become `name`; keys go
through the same normalisation as the deterministic extractor's, and the two sets are merged (the deterministic
one is always kept, so a model failure loses nothing but the extras).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import Final

from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.models import KnownModelName, Model, infer_model, parse_model_id
from pydantic_ai.providers import infer_provider_class
from pydantic_ai.settings import ModelSettings

from .._schema import Mention
from ..memory._usage import record_usage
from ._extract import DEFAULT_MAX_CONCEPTS, ENTITY_KINDS, ExtractedEntity, extract_entities, merge_entities
from ._normalize import aliases, entity_key

__all__ = (
    'ENTITY_MODEL_ENV',
    'EntityItem',
    'EntityList',
    'EntityModelError',
    'LLMEntityExtractor',
    'check_entity_model_name',
    'llm_extractor_from_env',
)

ENTITY_MODEL_ENV: Final = 'MEMENTOGRAPH_ENTITY_MODEL'

_logger = logging.getLogger(__name__)

INSTRUCTIONS: Final = f"""\
List the entities the text names: files, code symbols, commands, errors, URLs, numbers with units, versions,
dates, people, places, organisations, quoted terms, and specific things or events that matter (e.g. "support
group", "adoption agency"). Copy each name exactly as written in the text. Kinds: {', '.join(ENTITY_KINDS)}.
Do not invent anything that is not in the text; skip generic words.
"""


class EntityItem(BaseModel):
    """One entity as the model reports it."""

    name: str = Field(description='The entity exactly as written in the text.')
    kind: str = Field(description=f'One of: {", ".join(ENTITY_KINDS)}.')


class EntityList(BaseModel):
    """The model's structured output."""

    entities: list[EntityItem] = Field(default_factory=list)


@dataclass
class LLMEntityExtractor:
    """Extracts entities with a pydantic-ai model; merged with the deterministic extractor's."""

    model: Model | KnownModelName | str
    model_settings: ModelSettings | None = None
    max_chars: int = 12_000
    """Text sent to the model per call (the deterministic extractor still reads all of it)."""
    max_concepts: int = DEFAULT_MAX_CONCEPTS
    _agent: Agent[None, EntityList] | None = field(default=None, init=False, repr=False, compare=False)
    _warned: bool = field(default=False, init=False, repr=False, compare=False)

    def _get_agent(self) -> Agent[None, EntityList]:
        if self._agent is None:
            self._agent = Agent(
                self.model, output_type=EntityList, instructions=INSTRUCTIONS, name='entity_extractor',
                defer_model_check=True,
            )  # fmt: skip
        return self._agent

    async def llm_entities(self, text: str) -> list[ExtractedEntity]:
        """The model's entities that occur verbatim in `text`, normalised and counted."""
        result = await self._get_agent().run(text[: self.max_chars], model_settings=self.model_settings)
        record_usage(result.usage.total_tokens)
        lowered = text.lower()
        found: dict[str, ExtractedEntity] = {}
        for item in result.output.entities:
            name = ' '.join(item.name.split())
            if len(name) < 2 or name.lower() not in lowered:
                continue  # not in the text: never an edge
            kind = item.kind if item.kind in ENTITY_KINDS else 'name'
            count = len(re.findall(re.escape(name.lower()), lowered)) or 1
            for key in (entity_key(kind, name), *aliases(kind, name)):
                if key not in found and not key.endswith(':'):
                    found[key] = ExtractedEntity(
                        key, name if key == entity_key(kind, name) else key.split(':', 1)[1], kind, count
                    )
        return list(found.values())

    async def extract(self, text: str) -> list[ExtractedEntity]:
        """Deterministic entities plus the model's; the model failing leaves the deterministic ones."""
        deterministic = extract_entities(text, max_concepts=self.max_concepts)
        try:
            extra = await self.llm_entities(text)
        except Exception as exc:
            if not self._warned:  # once: a misnamed model or a missing key fails every call alike
                self._warned = True
                _logger.warning(
                    'mementograph: the LLM entity extractor (%s) failed, so only the deterministic entities are '
                    'linked: %s: %s',
                    self.model if isinstance(self.model, str) else type(self.model).__name__,
                    type(exc).__name__,
                    exc,
                )
            return deterministic
        return merge_entities(deterministic, extra)

    async def mentions_for(self, source_id: str, text: str) -> tuple[Mention, ...]:
        """`mentions_for`, with the model's entities added."""
        return tuple(
            Mention(source_id=source_id, entity=entity.record(), count=entity.count)
            for entity in await self.extract(text)
        )


class EntityModelError(ValueError):
    """A model name for the LLM entity extractor that can never give a model."""


_NAME_FORMS: Final = (
    'a pydantic-ai model name provider:model, e.g. openai:gpt-4o-mini, anthropic:claude-3-5-haiku-latest, '
    'google:gemini-2.0-flash, groq:llama-3.3-70b-versatile, ollama:llama3.2 (or test, the offline test model)'
)


def check_entity_model_name(name: str) -> None:
    """Raise `EntityModelError` for a name that cannot work: no `provider:` prefix, an unknown provider, no model
    after the prefix, or a provider whose package is not installed.

    A misspelt name would otherwise fail every model call alike, each time as one warning, while the archive is
    linked with the deterministic entities alone. A name that fails only later (a key, the network) is not
    refused: the extractor then still warns once and keeps the deterministic entities. The model is not made
    here, so no key is needed to check a name.
    """
    if name == 'test':
        return
    provider, model = parse_model_id(name)
    reason = f'no model after {provider}:' if provider and not model.strip() else None
    if reason is None:
        try:
            if provider is None:
                raise ValueError(name)
            infer_provider_class(provider)
        except ValueError:
            try:
                infer_model(name)  # its message suggests a known name for a near miss
                reason = f'Unknown model: {name}'
            except Exception as exc:
                reason = str(exc)
        except ImportError as exc:
            raise EntityModelError(f'cannot use {name!r} as the entity model: {exc}') from None
    if reason is not None:
        raise EntityModelError(f'cannot use {name!r} as the entity model ({reason}): set {_NAME_FORMS}')


def llm_extractor_from_env() -> LLMEntityExtractor | None:
    """The extractor `MEMENTOGRAPH_ENTITY_MODEL` names (`provider:model`), or `None` when it is unset.

    Raises:
        EntityModelError: the variable names no model that could work (see `check_entity_model_name`), so a typo
            is refused where the setting is read instead of silently indexing without the model.
    """
    name = os.environ.get(ENTITY_MODEL_ENV, '').strip()
    if not name:
        return None
    try:
        check_entity_model_name(name)
    except EntityModelError as exc:
        raise EntityModelError(f'{exc} (from ${ENTITY_MODEL_ENV}; unset it for the deterministic extractor)') from None
    return LLMEntityExtractor(name)
