"""data-agent-compare: compare data-agent workflows, frameworks and models on one task interface.

The public API is the core's (`compare/`): everything needed to write a system, a tool, a
scorer or a benchmark. `from data_agent_compare import System, RunContext, Task, ...`
"""

# Absolute, unlike the rest of the suite: pytest collects the repository root (this folder) as a package
# and imports this file under the folder's own name, which fails for a relative import when that name is
# no identifier (a checkout in /tmp/tmp.x1Y) and would load the core a second time under it otherwise.
from data_agent_compare.compare import *  # noqa: F403 - the namespace's face is the core's public API
from data_agent_compare.compare import __all__, __version__  # noqa: F401
