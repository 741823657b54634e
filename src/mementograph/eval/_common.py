"""`_common` -- what both benchmark evaluators share: methods, turn ordering inside a block, tables."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..knowledge_graph.entities import aliases, extract_entities
from ..knowledge_graph.recall import METHODS, Method, plan_query

__all__ = ('EVAL_METHODS', 'Table', 'format_table', 'key_weights', 'order_turns', 'query_keys', 'text_keys')

EVAL_METHODS: tuple[Method, ...] = METHODS


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
