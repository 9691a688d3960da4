"""Registries: systems, benchmarks, model providers and scorers are all found by name.

A registry maps a name to a target: either an object registered in this process (the
`register_*` decorators, used by a user's module or by a test fixture) or a
`"module:attribute"` string, imported only when the name is first used. Every registry also
reads one Python entry-point group, so another distribution adds a system with one line of
its own pyproject.toml and no edit of ours:

    [project.entry-points."data_agent_compare.systems"]
    my_agent = "my_package.agent:MyAgent"

The suite registers its own built-ins the same way (its pyproject.toml), which is why the
core never names a module above it.
"""

from __future__ import annotations

import importlib
import re
import sys
import threading
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

ENTRY_POINT_PREFIX = "data_agent_compare"
# A name becomes a folder of the run directory (traces/<system>/...) and an item of comma-separated flags: no
# path separator, no comma, no space, nothing that starts like an option or a hidden file.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}")
NAME_RULE = "1 to 64 letters, digits, '_', '-', '.' or '+', not starting with '.', '-' or '+'"

T = TypeVar("T")


class RegistryError(LookupError):
    """An unknown name, a name registered twice, or a target that cannot be imported."""

    def __str__(self) -> str:  # LookupError would quote the message
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Entry:
    name: str
    target: Any  # the registered object, or "module:attribute"
    origin: str  # where the name comes from, for error messages and listings

    @property
    def path(self) -> str:
        """The target as "module:attribute", whether or not it is loaded."""
        if isinstance(self.target, str):
            return self.target
        return f"{self.target.__module__}:{getattr(self.target, '__qualname__', type(self.target).__name__)}"


class Registry(Generic[T]):
    """Names of one kind (`systems`, `benchmarks`, ...) and what they resolve to. Thread-safe."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.group = f"{ENTRY_POINT_PREFIX}.{kind}"
        self._registered: dict[str, Entry] = {}
        self._discovered: dict[str, Entry] | None = None
        self._loaded: dict[str, T] = {}
        self._lock = threading.RLock()

    @property
    def singular(self) -> str:
        return self.kind.removesuffix("s")

    def register(self, name: str, target: T | str, origin: str | None = None) -> None:
        """Add `name`. Registering the object an entry point already names is not a conflict."""
        entry = Entry(name, target, origin or _origin_of(target))
        check_name(name, self.singular, entry.origin)
        with self._lock:
            existing = self._entries().get(name)
            if existing is not None and existing.path != entry.path:
                raise RegistryError(
                    f"{self.singular} name {name!r} is registered twice: {existing.origin} ({existing.path}) "
                    f"and {entry.origin} ({entry.path})"
                )
            self._registered[name] = entry
            self._loaded.pop(name, None)

    def unregister(self, name: str) -> None:
        with self._lock:
            self._registered.pop(name, None)
            self._loaded.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._entries())

    def entries(self) -> dict[str, Entry]:
        return dict(sorted(self._entries().items()))

    def __contains__(self, name: object) -> bool:
        return name in self._entries()

    def load(self, name: str) -> T:
        """The object behind `name`, imported on first use."""
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
            entry = self._entries().get(name)
            if entry is None:
                valid = ", ".join(self.names()) or "none"
                raise RegistryError(f"unknown {self.singular} {name!r}; registered: {valid}")
            # Whatever a name points to is taken as the registry's kind (a plug-in's own responsibility).
            loaded: T = _import(entry, self.singular) if isinstance(entry.target, str) else entry.target
            self._loaded[name] = loaded
            return loaded

    def refresh(self) -> None:
        """Read the entry points again (after a distribution was installed in this process)."""
        with self._lock:
            self._discovered = None
            self._loaded.clear()

    def _entries(self) -> dict[str, Entry]:
        with self._lock:
            if self._discovered is None:
                self._discovered = _discover(self.group, self.singular)
            return {**self._discovered, **self._registered}


def check_name(name: object, singular: str, origin: str) -> None:
    """RegistryError unless `name` is a name the registries take (`NAME_PATTERN`)."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise RegistryError(f"{singular} name {name!r} ({origin}) is not a name: a name is {NAME_RULE}")


def _origin_of(target: Any) -> str:
    if isinstance(target, str):
        return "registered by name"
    return f"registered in {getattr(target, '__module__', '?')}"


def _discover(group: str, singular: str) -> dict[str, Entry]:
    import importlib.metadata  # 0.07 s to import; entry points are read on a registry's first lookup only

    found: dict[str, Entry] = {}
    for point in importlib.metadata.entry_points(group=group):
        dist = point.dist.name if point.dist else "an unnamed distribution"
        entry = Entry(point.name, point.value, f"entry point of {dist}")
        check_name(point.name, singular, entry.origin)
        known = found.get(point.name)
        if known is not None and known.path != entry.path:
            raise RegistryError(
                f"{singular} name {point.name!r} is registered twice: {known.origin} ({known.path}) "
                f"and {entry.origin} ({entry.path})"
            )
        found[point.name] = entry
    return found


def _import(entry: Entry, singular: str) -> Any:
    module_name, _, attribute = entry.target.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split(".") if attribute else []:
            target = getattr(target, part)
    except (ImportError, AttributeError) as error:
        raise RegistryError(
            f"{singular} {entry.name!r} ({entry.target}, {entry.origin}) cannot be loaded: {error}"
        ) from error
    return target


def summary_line(cls: type) -> str:
    """What a listing (`compare systems`, `compare benchmarks`) says of a registered class: its
    `description`, else its docstring's first line."""
    return getattr(cls, "description", "") or (cls.__doc__ or "").strip().split("\n", 1)[0].strip()


def import_lazy_dependencies() -> list[str]:
    """Import, in this thread, what every loaded module says it imports on first use (its `LAZY_IMPORTS`:
    a framework kept out of the command's start), before units run on threads. Two threads importing a
    package with circular imports at once can each find it half-initialized, and a unit failed with
    `ImportError: cannot import name 'validator_for' from partially initialized module` (256 units in
    flight). Only modules already loaded are read: a run imports what its systems and scorers use.
    Returns the modules imported."""
    modules = list(sys.modules.values())  # read as is: a module's own __getattr__ may import on a miss
    wanted = [name for module in modules for name in getattr(module, "__dict__", {}).get("LAZY_IMPORTS", ())]
    for name in wanted:
        importlib.import_module(name)
    return wanted
