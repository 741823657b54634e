"""`missing_members` -- what a store object lacks of the protocol, named, so a refusal says what to add."""

from __future__ import annotations

from typing import Final, cast

from ._protocol import GraphStore

__all__ = ('CUSTOM_STORES_DOC', 'missing_members', 'protocol_members', 'require_members', 'require_store')

CUSTOM_STORES_DOC: Final = 'docs/custom-stores.md'
"""Where each member's contract is written down, and how to run the contract suite on a store of one's own."""


def protocol_members(protocol: type) -> tuple[str, ...]:
    """The public members of a protocol class and of the protocols it extends, base members first, each in the
    order it is declared: the protocol itself is the only list of what a store must have."""
    names: dict[str, None] = {}
    for cls in reversed(protocol.__mro__):
        if not getattr(cls, '_is_protocol', False) or cls.__module__ == 'typing':
            continue
        for name in (*vars(cls), *getattr(cls, '__annotations__', {})):
            if not name.startswith('_'):
                names[name] = None
    return tuple(names)


def missing_members(obj: object, protocol: type = GraphStore) -> tuple[str, ...]:
    """The members of `protocol` that `obj` lacks, in the protocol's order (`()`: it has them all).

    An attribute counts as present when `getattr` finds it, so a store that delegates through `__getattr__` is
    judged by what it delegates to, on every Python version (`isinstance` against the protocol looks attributes up
    statically from 3.12 on, and would refuse such a store there only).
    """
    return tuple(name for name in protocol_members(protocol) if not hasattr(obj, name))


def require_members(obj: object, protocol: type = GraphStore, *, role: str = 'store', expected: str = '') -> None:
    """Raise `TypeError` unless `obj` has every member of `protocol`, naming the ones it lacks.

    Args:
        obj: what the caller passed.
        protocol: the protocol it must implement.
        role: what the caller calls it (a parameter name), for an object that is no store at all.
        expected: what the caller accepts (default: `a <protocol>`), for the same message.
    """
    missing = missing_members(obj, protocol)
    if not missing:
        return
    name = type(obj).__name__
    if len(missing) == len(protocol_members(protocol)):  # not a store at all: listing 30 members would not help
        raise TypeError(f'{role} must be {expected or f"a {protocol.__name__}"}, not {name}')
    raise TypeError(
        f'{name} is not a {protocol.__name__}: missing {", ".join(missing)} '
        f'(what each must do, and the contract tests to run: {CUSTOM_STORES_DOC})'
    )


def require_store(obj: object, *, role: str = 'store', expected: str = '') -> GraphStore:
    """`obj` as a `GraphStore`, or `TypeError` naming the members it lacks (`require_members`)."""
    require_members(obj, GraphStore, role=role, expected=expected)
    return cast(GraphStore, obj)
