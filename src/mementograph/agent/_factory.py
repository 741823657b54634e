"""`create_agent` -- a pydantic-ai `Agent` with memento compaction on by default."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, overload

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models import KnownModelName, Model
from pydantic_ai.output import OutputSpec

from ..capabilities import MementoCompaction
from ..knowledge_graph.store import GraphStore

__all__ = ('create_agent',)


OutputT = TypeVar('OutputT')
DepsT = TypeVar('DepsT')


@overload
def create_agent(
    model: Model | KnownModelName | str | None = None,
    *,
    output_type: OutputSpec[OutputT],
    deps_type: type[DepsT],
    memento: bool | MementoCompaction[Any] = True,
    store: GraphStore | str | None = None,
    capabilities: Sequence[AbstractCapability[Any]] = (),
    **agent_kwargs: Any,
) -> Agent[DepsT, OutputT]: ...


@overload
def create_agent(
    model: Model | KnownModelName | str | None = None,
    *,
    output_type: OutputSpec[OutputT],
    memento: bool | MementoCompaction[Any] = True,
    store: GraphStore | str | None = None,
    capabilities: Sequence[AbstractCapability[Any]] = (),
    **agent_kwargs: Any,
) -> Agent[None, OutputT]: ...


@overload
def create_agent(
    model: Model | KnownModelName | str | None = None,
    *,
    deps_type: type[DepsT],
    memento: bool | MementoCompaction[Any] = True,
    store: GraphStore | str | None = None,
    capabilities: Sequence[AbstractCapability[Any]] = (),
    **agent_kwargs: Any,
) -> Agent[DepsT, str]: ...


@overload
def create_agent(
    model: Model | KnownModelName | str | None = None,
    *,
    memento: bool | MementoCompaction[Any] = True,
    store: GraphStore | str | None = None,
    capabilities: Sequence[AbstractCapability[Any]] = (),
    **agent_kwargs: Any,
) -> Agent[None, str]: ...


def create_agent(
    model: Model | KnownModelName | str | None = None,
    *,
    memento: bool | MementoCompaction[Any] = True,
    store: GraphStore | str | None = None,
    capabilities: Sequence[AbstractCapability[Any]] = (),
    **agent_kwargs: Any,
) -> Agent[Any, Any]:
    """Build an `Agent` whose context is managed by `MementoCompaction` unless told otherwise.

    Args:
        model: Any pydantic-ai model or model name.
        memento: `True` (default) adds `MementoCompaction(store=store)`; pass a configured `MementoCompaction`
            to choose its settings, or `False` to leave it out.
        store: Store (or URI) for the default capability; `None` is `MEMENTOGRAPH_STORE` or the embedded default.
        capabilities: Further capabilities, after memento compaction (so request-only injectors see its result).
        **agent_kwargs: Passed to `Agent` (instructions, tools, output_type, deps_type, ...); `output_type` and
            `deps_type` keep their types in the agent's (`Agent[DepsT, OutputT]`).
    """
    extra = list(capabilities)
    if any(isinstance(capability, MementoCompaction) for capability in extra) and memento is not False:
        # pydantic-ai's own refusal of a second capability id talks about the capability's internals
        raise ValueError(
            'create_agent adds MementoCompaction itself: pass yours as memento=MementoCompaction(...), '
            'not in capabilities'
        )
    if memento is False and store is not None:
        raise ValueError('store= is the store of memento compaction, which memento=False turns off: drop one')
    if memento is True:
        extra.insert(0, MementoCompaction(store=store))
    elif isinstance(memento, MementoCompaction):
        if store is not None:
            raise ValueError('pass store= to your MementoCompaction, not to create_agent, when you configure it')
        extra.insert(0, memento)
    elif memento is not False:
        raise TypeError(f'memento must be True, False or a MementoCompaction, not {type(memento).__name__}')
    return Agent(model, capabilities=extra, **agent_kwargs)
