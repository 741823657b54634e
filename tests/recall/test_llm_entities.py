"""The optional LLM entity extractor, with a scripted model: verbatim guard, merge, failure fallback, setting."""

from __future__ import annotations

import logging

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mementograph import MementoCompaction, open_store
from mementograph.knowledge_graph.entities import (
    ENTITY_MODEL_ENV,
    EntityModelError,
    LLMEntityExtractor,
    check_entity_model_name,
    llm_extractor_from_env,
)
from tests.scripted import ScriptedModel, scripted_agent

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


async def test_a_failing_model_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError('model down')

    extractor = LLMEntityExtractor(FunctionModel(broken))
    with caplog.at_level(logging.WARNING):
        await extractor.extract(TEXT)
        await extractor.extract(TEXT)
    reports = [r.getMessage() for r in caplog.records if 'LLM entity extractor' in r.getMessage()]
    assert len(reports) == 1 and 'RuntimeError: model down' in reports[0]


async def test_the_capability_links_the_models_entities() -> None:
    store = open_store('memory://')
    extractor = LLMEntityExtractor(scripted([('Step 0', 'organisation'), ('Atlantis', 'place')]))
    capability = MementoCompaction(store, max_tokens=1_500, session_id='s', mentions=extractor.mentions_for)
    await scripted_agent(ScriptedModel(steps=8), [capability]).run('Fix the modules.')
    blocks = store.list_blocks(session_id='s')
    keys = {entity.key for block in blocks for entity, _ in store.entities_of(block.id)}
    assert 'name:step 0' in keys and 'name:atlantis' not in keys  # the model's, where the text has it
    assert 'file:src/app/module_0.py' in keys  # the deterministic ones stay


async def test_the_setting_reaches_the_capability(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A name that can work but fails when called (here no API key) is warned about once, never a failed run."""
    monkeypatch.setenv(ENTITY_MODEL_ENV, 'huggingface:Qwen/Qwen3-8B')
    monkeypatch.delenv('HF_TOKEN', raising=False)
    store = open_store('memory://')
    capability = MementoCompaction(store, max_tokens=1_500, session_id='s')
    with caplog.at_level(logging.WARNING):
        await scripted_agent(ScriptedModel(steps=8), [capability]).run('Fix the modules.')
    assert any('LLM entity extractor (huggingface:Qwen/Qwen3-8B) failed' in r.getMessage() for r in caplog.records)
    assert store.list_blocks(session_id='s')  # archived all the same, with the deterministic entities


@pytest.mark.parametrize(
    ('name', 'reason'),
    [
        ('nosuch:model', 'Unknown model: nosuch:model'),
        ('gpt-4o', "Unknown model: gpt-4o. Did you mean 'openai-chat:gpt-4o'?"),
        ('google-gla:gemini-2.0-flash', "Unknown model: google-gla:gemini-2.0-flash. Did you mean 'google:"),
        ('huggingface:', 'no model after huggingface:'),
    ],
)
def test_a_name_that_can_never_give_a_model_is_refused_with_the_valid_forms(name: str, reason: str) -> None:
    with pytest.raises(EntityModelError) as raised:
        check_entity_model_name(name)
    message = str(raised.value)
    assert message.startswith(f'cannot use {name!r} as the entity model ({reason}')
    assert 'provider:model, e.g. openai:gpt-4o-mini' in message and 'test' in message


def test_a_misspelt_setting_is_refused_where_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """It was taken, and every model call of every run failed alike (a warning each run), while the archive was
    linked with the deterministic entities alone: refused when the capability is made, as `$MEMENTOGRAPH_STORE`
    and `$MEMENTOGRAPH_ENCODING` are."""
    monkeypatch.setenv(ENTITY_MODEL_ENV, 'nosuch:model')
    with pytest.raises(EntityModelError, match=r'\(from \$MEMENTOGRAPH_ENTITY_MODEL; unset it'):
        llm_extractor_from_env()
    with pytest.raises(ValueError, match="cannot use 'nosuch:model' as the entity model"):
        MementoCompaction('memory://', max_tokens=1_500)
    # an extractor given in code does not read the setting, so it does not stop the capability
    capability = MementoCompaction('memory://', max_tokens=1_500, mentions=LLMEntityExtractor('test').mentions_for)
    assert capability.mentions is not None
    check_entity_model_name('test')  # the offline test model is a name that works
