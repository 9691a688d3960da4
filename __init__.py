"""data-agent-compare: compare data-agent workflows, frameworks and models on one task interface.

The public API is the core's (`core/`): everything needed to write a system, a tool, a
scorer or a benchmark. `from data_agent_compare import System, RunContext, Task, ...` — and the engine's
entry point (`engine/api.py`): `data_agent_compare.run(...)` returns a `RunResult`; `plan(...)`, `RunConfig`.
"""

from __future__ import annotations

import importlib
from typing import Any

# The core is imported on first use of one of its names (PEP 562), not with this package: `compare --help`
# imports the package and must not build every pydantic model of the core (tests/app/test_startup.py).
# Absolute, unlike the rest of the suite: pytest collects the repository root (this folder) as a package and
# imports this file under the folder's own name, which fails for a relative import when that name is no
# identifier (a checkout in /tmp/tmp.x1Y) and would load the core a second time under it otherwise.
_CORE = "data_agent_compare.core"
_ENGINE = {"run": "data_agent_compare.engine.api", "plan": "data_agent_compare.engine.api",
           "RunResult": "data_agent_compare.engine.api", "RunConfig": "data_agent_compare.engine.config"}  # fmt: skip
# `reports` is the report package: the core's scorer decorator of that name is served as `reports_metrics`.
_SUBPACKAGES = frozenset(
    {"cli", "core", "engine", "evaluators", "providers", "reports", "systems", "tasks", "tools", "workflows"}
)


def __getattr__(name: str) -> Any:
    """`__all__`, `__version__` and the core's public names; `from data_agent_compare import *` gets the core's
    API. A subpackage's name is left to the import system (importing it does not need the core first)."""
    if name in _ENGINE:
        return getattr(importlib.import_module(_ENGINE[name]), name)
    if name not in _SUBPACKAGES and (name in ("__all__", "__version__") or not name.startswith("__")):
        core = importlib.import_module(_CORE)
        if name in ("__all__", "__version__") or name in core.__all__:
            return getattr(core, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
