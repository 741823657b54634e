"""`_common` -- what both benchmark evaluators share: methods, turn ordering inside a block, tables."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic_ai.embeddings import EmbeddingModel

from ..knowledge_graph import DEFAULT_NAMESPACE
from ..knowledge_graph.dense import DenseIndex, embedding_model
from ..knowledge_graph.entities import aliases, extract_entities
from ..knowledge_graph.recall import DENSE_METHODS, METHODS, Method, plan_query
from ._ingest import Dialogue, IngestedDialogue

__all__ = (
    'ALL_METHODS',
    'EVAL_METHODS',
    'Table',
    'dense_index',
    'format_table',
    'key_weights',
    'malformed',
    'methods_for',
    'order_turns',
    'query_keys',
    'read_benchmark',
    'text_keys',
)

EVAL_METHODS: tuple[Method, ...] = METHODS
ALL_METHODS: tuple[Method, ...] = (*METHODS, *DENSE_METHODS)


def malformed(exc: Exception) -> str:
    """What is wrong with a benchmark item, for a one-line error (a missing field is a `KeyError` of its name)."""
    if isinstance(exc, KeyError):
        return f'no field {exc.args[0]!r}'
    return f'malformed ({type(exc).__name__}: {exc})'


def read_benchmark(path: str | Path, holds: str) -> list[dict[str, object]]:
    """A benchmark file: a JSON list of `holds` (objects). Malformed input is a `ValueError` naming the file and,
    for invalid JSON, the line and column (the CLI prints it as one line)."""
    try:
        raw: object = json.loads(Path(path).read_text(encoding='utf-8'))
    except json.JSONDecodeError as exc:
        raise ValueError(f'{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}') from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f'{path}: not UTF-8 text (byte {exc.start})') from exc
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):  # pyright: ignore
        raise ValueError(f'{path}: expected a JSON list of {holds}')
    return raw  # pyright: ignore[reportUnknownVariableType]


def methods_for(methods: Sequence[Method] | None, model: EmbeddingModel | str | None) -> tuple[Method, ...]:
    """The methods to score: as asked, or every method the run can do (the dense ones only with a model)."""
    if methods is None:
        return ALL_METHODS if model is not None else EVAL_METHODS
    needing = [m for m in methods if m in DENSE_METHODS]
    if needing and model is None:
        raise ValueError(
            f'{", ".join(needing)} need an embedding model (e.g. onnx:PATH or openai:text-embedding-3-small)'
        )
    return tuple(methods)


def dense_index(
    model: EmbeddingModel | str,
    dialogues: Sequence[tuple[Dialogue, IngestedDialogue]],
    namespace: str = DEFAULT_NAMESPACE,
) -> DenseIndex:
    """Vectors of every ingested block: the text of the turns it holds (what the block's messages say)."""
    index = DenseIndex(embedding_model(model))
    for dialogue, ingested in dialogues:
        text = {turn.turn_id: turn.text for segment in dialogue.segments for turn in segment.turns}
        by_session: dict[str, list[tuple[str, str]]] = {}
        for block in ingested.blocks:
            body = '\n'.join(text[turn_id] for turn_id in block.turn_ids if turn_id in text)
            by_session.setdefault(block.session_id, []).append((block.block_id, body))
        for session_id, blocks in by_session.items():
            index.add(blocks, namespace=namespace, session_id=session_id)
    return index


def text_keys(text: str) -> frozenset[str]:
    """Entity keys a text mentions (with aliases)."""
    keys: set[str] = set()
    for entity in extract_entities(text):
        keys.add(entity.key)
        keys.update(aliases(entity.kind, entity.name))
    return frozenset(keys)


def query_keys(query: str) -> dict[str, int]:
    """Entity key -> query group (keys of one group stand for one thing the query names)."""
    return {key.key: key.group for key in plan_query(query).keys}


def order_turns(
    turn_ids: Sequence[str],
    turn_keys: Mapping[str, frozenset[str]],
    wanted: Mapping[str, int],
    weights: Mapping[str, float] | None = None,
) -> list[str]:
    """A retrieved block's turns, best first: by the summed weight (e.g. IDF over the dialogue's turns) of the query
    groups each turn names, then in dialogue order."""

    def matched(turn_id: str) -> float:
        keys = turn_keys.get(turn_id, frozenset())
        best: dict[int, float] = {}
        for key, group in wanted.items():
            if key in keys:
                weight = 1.0 if weights is None else weights.get(key, 0.0)
                best[group] = max(best.get(group, 0.0), weight)
        return sum(best.values())

    return sorted(turn_ids, key=lambda turn_id: -matched(turn_id))


def key_weights(turn_keys: Mapping[str, frozenset[str]]) -> dict[str, float]:
    """IDF of each key over a dialogue's turns: a key every turn names orders nothing."""
    counts: dict[str, int] = {}
    for keys in turn_keys.values():
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
    total = len(turn_keys)
    return {key: math.log(1.0 + (total - df + 0.5) / (df + 0.5)) for key, df in counts.items()}


@dataclass(frozen=True)
class Table:
    """A plain-text table: a title, column headers and rows of cells."""

    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def format_table(table: Table) -> str:
    """Columns padded to their widest cell; the first column left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in (table.headers, *table.rows)) for i in range(len(table.headers))]

    def line(cells: Sequence[str]) -> str:
        return '  '.join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(cells)
        ).rstrip()

    out = [table.title, line(table.headers), line(['-' * w for w in widths])]
    out.extend(line(row) for row in table.rows)
    return '\n'.join(out)
