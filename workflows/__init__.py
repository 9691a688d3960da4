"""Our four data-agent workflow patterns. Importing this package registers them as systems."""

from workflows import tool_use  # noqa: F401
