"""A system under test: anything that turns a `Task` into an `Answer`.

Our workflows (`workflows/`) and the adapters for external frameworks (`systems/`) subclass
`System` and are found by name (`SYSTEMS`). A system gets the task (without gold) and its
`RunContext`: the task's tools, the metered model, the budgets, phase labelling and the
gateway's OpenAI-compatible endpoint. Everything it does through the context lands in the
trace, so it never handles timing, tokens or cost itself.

One instance runs many tasks, concurrently with `--concurrency`: keep per-task state in
locals or a per-run object, never on `self`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from .registry import Registry
from .task import Answer, Task

if TYPE_CHECKING:
    from .context import RunContext

SYSTEM_KINDS = ("workflow", "workflow-variant", "framework", "semantic-operator", "rag")


class System(ABC):
    name: ClassVar[str]
    kind: ClassVar[str] = "workflow"  # one of SYSTEM_KINDS; `--workflows all` runs the "workflow" kind
    description: ClassVar[str] = ""  # one line for `compare systems`; the docstring's first line if empty

    @abstractmethod
    def run(self, task: Task, ctx: RunContext) -> Answer:
        """Answer the task. Raise nothing for ordinary failures: return an Answer with a status."""

    def describe(self) -> dict[str, Any]:
        """What the manifest records about this system (prompt hashes, settings)."""
        return {"name": self.name, "kind": self.kind}

    @classmethod
    def summary(cls) -> str:
        return cls.description or first_line(cls.__doc__)


def first_line(text: str | None) -> str:
    return (text or "").strip().split("\n", 1)[0].strip()


SYSTEMS: Registry[type[System]] = Registry("systems")


def register_system(cls: type[System]) -> type[System]:
    """Class decorator: make `cls` available under `cls.name` (e.g. `--workflows my_system`)."""
    SYSTEMS.register(cls.name, cls)
    return cls


def create_system(name: str) -> System:
    return SYSTEMS.load(name)()


def system_names(kind: str | None = None) -> list[str]:
    return [name for name in SYSTEMS.names() if kind is None or SYSTEMS.load(name).kind == kind]
