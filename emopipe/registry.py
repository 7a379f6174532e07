"""One registry shape for every extension point: a name → a factory, imported only when it is used.

Detectors, engine backends and source kinds are chosen by name. Each registry maps names to
``"module:attribute"`` strings, so listing the valid names (``--help``, an error) imports nothing
heavy, and an unknown name is a :class:`~emopipe.errors.UsageError` that lists the valid ones.
Entries are written where the registry is defined, never added by an import's side effect; tests
call :meth:`Registry.register`. A registry with a ``plugins`` group also takes the entries installed
packages declare under that entry-point group (``[project.entry-points."emopipe.captures"]`` in their
``pyproject.toml``): found the first time the registry is asked, so every process that has the package
installed — a Ray worker too — knows the same names without any code run first. Built-in entries win
over a plug-in's of the same name.
"""

from __future__ import annotations

import importlib
import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from importlib import metadata
from typing import Any, Generic, TypeVar

from emopipe.errors import UsageError

T = TypeVar("T")

logger = logging.getLogger(__name__)


class Registry(Generic[T]):
    """Names → lazily imported factories of one kind (``what`` names the kind in errors)."""

    def __init__(self, what: str, entries: Mapping[str, str | T], *, plugins: str | None = None,
                 valid_name: Callable[[str], bool] | None = None) -> None:
        """``plugins``: the entry-point group whose entries join these; ``valid_name``: which plug-in names can be
        used at all (others are left out with a warning)."""
        self.what = what
        self._entries: dict[str, str | T] = dict(entries)
        self._plugins = plugins
        self._valid_name = valid_name
        self._found_plugins = plugins is None
        self._finding = threading.RLock()  # (a fleet's cameras open on threads of their own)
        self.origins: dict[str, str] = {}  # a plug-in's name → the package that declared it (for its errors)

    def _all(self) -> dict[str, str | T]:
        if not self._found_plugins:
            with self._finding:
                if not self._found_plugins:
                    self._found_plugins = True  # (first: a plug-in that asks this registry does not look again)
                    self._add_plugins()
        return self._entries

    def _add_plugins(self) -> None:
        assert self._plugins is not None
        for point in metadata.entry_points(group=self._plugins):
            package = point.dist.name if point.dist is not None else "an installed package"
            if point.name in self._entries:
                logger.warning("%s %r of %s left out: %s has one of that name", self.what, point.name, package,
                               self.origins.get(point.name, "emopipe"))
            elif self._valid_name is not None and not self._valid_name(point.name):
                logger.warning("%s %r of %s left out: not a valid name for one", self.what, point.name, package)
            elif not re.fullmatch(r"[\w.]+:[\w.]+", point.value):
                logger.warning("%s %r of %s left out: %r is not module:attribute", self.what, point.name, package,
                               point.value)
            else:
                self._entries[point.name] = point.value
                self.origins[point.name] = package

    def __contains__(self, name: object) -> bool:
        return name in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def names(self) -> tuple[str, ...]:
        return tuple(self._all())

    def check(self, name: str) -> str:
        """``name`` if registered, else a UsageError listing the valid names."""
        if name not in self._all():
            raise UsageError(f"unknown {self.what} {name!r}; choose from {', '.join(self._entries)}")
        return name

    def get(self, name: str) -> T:
        """The factory registered as ``name``, imported now if it was given as ``module:attribute``."""
        entry = self._all()[self.check(name)]
        if isinstance(entry, str):
            module, _, attribute = entry.partition(":")
            try:
                factory: Any = getattr(importlib.import_module(module), attribute)
            except Exception as exc:  # (a plug-in's module may fail in any way as it imports its SDK)
                if name not in self.origins:
                    raise  # (emopipe's own: a broken installation, not the user's doing)
                raise UsageError(f"{self.what} {name!r} (a plug-in of {self.origins[name]}): cannot load {entry}: "
                                 f"{type(exc).__name__}: {exc}") from exc
            return factory  # type: ignore[no-any-return]
        return entry

    def register(self, name: str, factory: str | T) -> None:
        self._all()[name] = factory  # (after the plug-ins are found: this one is not left out as a clash)
        self.origins.pop(name, None)

    def unregister(self, name: str) -> None:
        self._all().pop(name, None)
        self.origins.pop(name, None)
