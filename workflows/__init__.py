"""Our four data-agent workflow patterns. Importing this package registers them as systems:
planning (and planning_static), tool_use, reflection, multi_agent."""

from workflows import multi_agent, planning, reflection, tool_use  # noqa: F401
