"""Cypher's null semantics for grand-cypher, which the embedded store's queries run on.

grand-cypher treats a missing property as a value: `count(b.started_at)` counted blocks without one, `avg` and
`sum` read it as 0, `min` as infinity (printed as a bare `Infinity`, which strict JSON refuses), `NOT x IN [...]`
and `x <> 'y'` held for a null `x`, and `ORDER BY` a text property some rows lack raised `TypeError`. Each answered
differently from Neo4j with no error. Cypher says: aggregates skip nulls (`count` of none is 0, `avg` / `min` /
`max` of none are null), a comparison with null is null, and a `WHERE` keeps a row only when its predicate is
true, negated or not. `apply()` makes grand-cypher's aggregates, comparisons and ordering follow that; the shared
contract tests run the same queries on Neo4j and compare.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

__all__ = ('apply',)

_applied = False
_lock: Final = threading.Lock()
_NULL_OR_MISMATCH: Final = (TypeError, AttributeError)


def _aggregates() -> dict[str, Callable[[Sequence[Any]], Any]]:
    def present(values: Sequence[Any]) -> list[Any]:
        return [value for value in values if value is not None]

    def average(values: Sequence[Any]) -> Any:
        kept = present(values)
        return sum(kept) / len(kept) if kept else None

    return {
        'COUNT': lambda values: len(present(values)),
        'SUM': lambda values: sum(present(values)),
        'AVG': average,
        'MAX': lambda values: max(present(values), default=None),
        'MIN': lambda values: min(present(values), default=None),
    }


def _null_aware(compare: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """`compare`, null (`None`) when either side is null or the two cannot be compared, as in Cypher."""

    def checked(left: Any, right: Any) -> Any:
        if left is None or right is None:
            return None
        try:
            return compare(left, right)
        except _NULL_OR_MISMATCH:
            return None

    return checked


_COMPARISONS: Final[dict[str, Callable[[Any, Any], Any]]] = {
    '=': lambda x, y: x == y,
    '==': lambda x, y: x == y,
    '>=': lambda x, y: x >= y,
    '<=': lambda x, y: x <= y,
    '<': lambda x, y: x < y,
    '>': lambda x, y: x > y,
    '!=': lambda x, y: x != y,
    '<>': lambda x, y: x != y,
    'in': lambda x, y: x in y,
    'contains': lambda x, y: y in x,
    'starts_with': lambda x, y: x.startswith(y),
    'ends_with': lambda x, y: x.endswith(y),
}
"""Every operator but `is` (`IS NULL`, which must see the null)."""


def _order_key(value: Any) -> tuple[bool, Any]:
    """Nulls after every value ascending (and so before them descending, the order reversed), as in Neo4j."""
    return (value is None, 0 if value is None else value)


def _by(column: Sequence[Any]) -> Callable[[int], tuple[bool, Any]]:
    return lambda index: _order_key(column[index])


def apply() -> None:
    """Give grand-cypher Cypher's null semantics, once per process (idempotent, thread-safe)."""
    global _applied
    with _lock:
        if _applied:
            return
        import grandcypher  # type: ignore[import-untyped]

        for name, aggregate in _aggregates().items():
            grandcypher._AGGREGATION_FUNCTIONS[name].aggregate = staticmethod(aggregate)
        for operator, compare in _COMPARISONS.items():
            grandcypher._OPERATORS[operator] = grandcypher.LambdaCompareCondition(_null_aware(compare), operator)
        grandcypher.CompoundCondition.__call__ = _compound_call(grandcypher)
        _patch_order(grandcypher)
        from grandcypher import indexer

        for querier in (indexer.IncrementIndexQuerier, indexer.NoIndexQuerier):
            querier.get_comparator = _comparable_only(querier.get_comparator)
        _applied = True


def _compound_call(grandcypher: Any) -> Callable[..., tuple[bool, list[Any]]]:
    """A leaf of a `WHERE`: true keeps the row; null (a missing property, values that do not compare) drops it
    whether or not the leaf is negated -- `NOT null` is null."""

    def call(self: Any, match: Any, host: Any, return_edges: list[Any], scope: Any = None) -> tuple[bool, list[Any]]:
        if isinstance(self._operator, grandcypher.SUBOP):
            value = self._operator(match.node_mappings, self._right)
        else:
            left = grandcypher._resolve_operand(self._left, match, host, return_edges, scope)
            right = grandcypher._resolve_operand(self._right, match, host, return_edges, scope)
            try:
                value = self._operator(left, right)
            except _NULL_OR_MISMATCH:
                value = None
        if value is None:
            return False, [value]
        return bool(value) == self._should_be, [value]

    return call


def _comparable_only(get_comparator: Callable[[Any, str], Callable[[Any], set[Any]]]) -> Callable[..., Any]:
    """The attribute index's comparisons (what a `WHERE` on a node property with a literal is answered from): a
    value of another type (`b.tokens >= '2000'`) raised `TypeError`; in Cypher it compares as null, so the rows
    that hold one are left out and the others are compared."""

    def comparator(self: Any, op: str) -> Callable[[Any], set[Any]]:
        fast = get_comparator(self, op)
        compare = _null_aware(_COMPARISONS[op])

        def query(value: Any) -> set[Any]:
            try:
                return fast(value)
            except _NULL_OR_MISMATCH:
                pairs = zip(self.indexed_entity_ids, self.indexed_entity_attributes, strict=True)
                return {entity for entity, attribute in pairs if compare(attribute, value)}

        return query

    return comparator


def _patch_order(grandcypher: Any) -> None:
    """`ORDER BY` a node property: nulls last ascending, first descending, whatever the values' type (it sorted
    nulls as infinity, which fails against text)."""
    executor = grandcypher.GrandCypherExecutor
    original = executor._apply_order_by

    def apply_order_by(self: Any, results: dict[Any, list[Any]]) -> dict[Any, list[Any]]:
        keys = [self._entity2alias.get(field, field) for field, _ in self._order_by or ()]
        columns = [results[key] for key in keys if key in results]
        if not columns or len(columns) != len(keys) or any(isinstance(v, dict) for c in columns for v in c):
            ordered: dict[Any, list[Any]] = original(self, results)  # edge attributes (dicts per edge): its own way
            return ordered
        indices = list(range(len(columns[0])))
        for column, (_, direction) in reversed(list(zip(columns, self._order_by, strict=True))):
            indices.sort(key=_by(column), reverse=direction == 'DESC')
        return {key: [values[i] for i in indices] for key, values in results.items()}

    executor._apply_order_by = apply_order_by
