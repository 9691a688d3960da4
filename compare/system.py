"""A system under test: anything that turns a `Task` into an `Answer`.

Our workflows (workflows/) and the adapters for external frameworks (systems/) all
subclass `System` and register under a name. A system gets the task (without gold),
the task's tool environment and a metered model; everything it does through those
two lands in the trace, so it never handles timing, tokens or cost itself.

To add a system: subclass `System`, set `name`, implement `run`, decorate the class
with `@register_system`, and import its module from `workflows/__init__.py` or
`systems/__init__.py`. One instance runs many tasks, concurrently with `--concurrency`:
keep per-task state in locals or a per-run object, never on `self`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from compare.model import MeteredModel
from compare.task import Answer, Task
from compare.tools.base import ToolEnvironment


class System(ABC):
    name: ClassVar[str]
    kind: ClassVar[str] = "workflow"  # workflow | workflow-variant | framework | semantic-operator | rag

    @abstractmethod
    def run(self, task: Task, env: ToolEnvironment, model: MeteredModel) -> Answer:
        """Answer the task. Raise nothing for ordinary failures: return an Answer with a status."""

    def describe(self) -> dict[str, Any]:
        """What the manifest records about this system (prompt hashes, settings)."""
        return {"name": self.name, "kind": self.kind}


_SYSTEMS: dict[str, type[System]] = {}


def register_system(cls: type[System]) -> type[System]:
    if cls.name in _SYSTEMS and _SYSTEMS[cls.name] is not cls:
        raise ValueError(f"system name {cls.name!r} registered twice")
    _SYSTEMS[cls.name] = cls
    return cls


def _load_builtins() -> None:
    import systems  # noqa: F401 - registers adapters
    import workflows  # noqa: F401 - registers our workflows


def system_names(kind: str | None = None) -> list[str]:
    _load_builtins()
    return sorted(name for name, cls in _SYSTEMS.items() if kind is None or cls.kind == kind)


def create_system(name: str) -> System:
    _load_builtins()
    if name not in _SYSTEMS:
        raise KeyError(name)
    return _SYSTEMS[name]()
