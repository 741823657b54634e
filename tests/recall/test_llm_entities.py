"""The optional LLM entity extractor, with a scripted model: verbatim guard, merge, failure fallback, setting."""

from __future__ import annotations

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mementograph.knowledge_graph.entities import ENTITY_MODEL_ENV, LLMEntityExtractor, llm_extractor_from_env

TEXT = 'Caroline: I went to the support group at the community center and then researched adoption agencies.'


def scripted(names: list[tuple[str, str]]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool = info.output_tools[0]
        args = {'entities': [{'name': name, 'kind': kind} for name, kind in names]}
        return ModelResponse(parts=[ToolCallPart(tool.name, args)])

    return FunctionModel(respond)


async def test_model_entities_are_kept_only_when_verbatim_and_merged() -> None:
    model = scripted([('support group', 'concept'), ('adoption agencies', 'organisation'), ('Narnia', 'place')])
    mentions = await LLMEntityExtractor(model).mentions_for('blk_1', TEXT)
    keys = {m.entity.key for m in mentions}
    assert {'concept:support group', 'name:adoption agencies', 'name:caroline'} <= keys
    assert 'name:narnia' not in keys  # not in the text: never an edge
    assert all(m.source_id == 'blk_1' for m in mentions)


async def test_a_failing_model_leaves_the_deterministic_entities() -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError('model down')

    entities = await LLMEntityExtractor(FunctionModel(broken)).extract(TEXT)
    assert 'name:caroline' in {e.key for e in entities}


def test_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENTITY_MODEL_ENV, raising=False)
    assert llm_extractor_from_env() is None
    monkeypatch.setenv(ENTITY_MODEL_ENV, 'test')
    extractor = llm_extractor_from_env()
    assert extractor is not None and extractor.model == 'test'
