"""One registry shape for every extension point: a name → a factory, imported only when it is used.

Detectors, engine backends and source kinds are chosen by name. Each registry maps names to
``"module:attribute"`` strings, so listing the valid names (``--help``, an error) imports nothing
heavy, and an unknown name is a :class:`~emopipe.errors.UsageError` that lists the valid ones.
Entries are written where the registry is defined, never added by an import's side effect; tests
and plug-ins call :meth:`Registry.register`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

from emopipe.errors import UsageError

T = TypeVar("T")


class Registry(Generic[T]):
    """Names → lazily imported factories of one kind (``what`` names the kind in errors)."""

    def __init__(self, what: str, entries: Mapping[str, str | T]) -> None:
        self.what = what
        self._entries: dict[str, str | T] = dict(entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def check(self, name: str) -> str:
        """``name`` if registered, else a UsageError listing the valid names."""
        if name not in self._entries:
            raise UsageError(f"unknown {self.what} {name!r}; choose from {', '.join(self._entries)}")
        return name

    def get(self, name: str) -> T:
        """The factory registered as ``name``, imported now if it was given as ``module:attribute``."""
        entry = self._entries[self.check(name)]
        if isinstance(entry, str):
            module, _, attribute = entry.partition(":")
            factory: Any = getattr(importlib.import_module(module), attribute)
            return factory  # type: ignore[no-any-return]
        return entry

    def register(self, name: str, factory: str | T) -> None:
        self._entries[name] = factory

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)
