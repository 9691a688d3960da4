"""Our four data-agent workflow patterns, each a `System` (core/system.py) in its own module:
tool_use, planning (and planning_static), reflection, multi_agent. They are registered by name
in pyproject.toml (entry points `data_agent_compare.systems`), like any other system."""
