"""data-agent-compare: compare data-agent workflows, frameworks and models on one task interface.

The public API is the core's (`compare/`): everything needed to write a system, a tool, a
scorer or a benchmark. `from data_agent_compare import System, RunContext, Task, ...`
"""

from .compare import *  # noqa: F403 - the namespace's face is the core's public API
from .compare import __all__, __version__  # noqa: F401
