"""`LazyExports` -- a package's public names, each imported from its submodule when first read (PEP 562)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping, MutableMapping

__all__ = ('LazyExports',)


class LazyExports:
    """A package's module-level `__getattr__`: the submodule that defines a public name is imported when the name
    is first read, and the value is kept in the package's namespace so later reads skip this.

    Why: importing pydantic-ai takes most of a second, and the compressors, judges and agents that need it share
    packages with the store, entity and recall code. A process that only reads the store (the CLI's `stats`,
    `recall`, `pages`, `query`) then never pays for them.
    """

    def __init__(
        self, package: str, namespace: MutableMapping[str, object], modules: Mapping[str, Iterable[str]]
    ) -> None:
        """`modules` maps each submodule (relative, e.g. `._compress`) to the public names it defines."""
        self._package = package
        self._namespace = namespace
        self._module_of = {name: module for module, names in modules.items() for name in names}

    def __call__(self, name: str) -> object:
        module = self._module_of.get(name)
        if module is None:
            raise AttributeError(f'module {self._package!r} has no attribute {name!r}')
        value = getattr(importlib.import_module(module, self._package), name)
        self._namespace[name] = value
        return value
