"""Search results recorded with a task, replayed (FDABench's `frozen_web_search` and
`frozen_vector_search`).

The recorded results come back whatever the query, so every system sees the same external
context and a run is reproducible offline. Live web search is not offered: the suite runs
without internet, and a live search would make runs incomparable.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import Field

from ..core.tool import Tool, ToolResult
from .parameters import Parameters, parameters_schema

FROZEN_SOURCES = {"frozen_web_search": "web_search", "frozen_vector_search": "search_documents"}
DESCRIPTIONS = {
    "web_search": "Search the web for external context (replays the results recorded for this task).",
    "search_documents": "Search the document store for relevant passages (replays the results recorded for this task).",
}


class FrozenSearchParameters(Parameters):
    query: str = Field(description="what to search for")  # not used: the recorded results come back


class FrozenSearchTool(Tool):
    parameters: ClassVar[dict[str, Any]] = parameters_schema(FrozenSearchParameters)

    def __init__(self, name: str, recorded: Any) -> None:
        self.name = name
        self.description = DESCRIPTIONS[name]
        self.recorded = recorded

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(success=True, content=render(self.recorded), data=self.recorded)


def render(recorded: Any) -> str:
    if isinstance(recorded, str):
        return recorded
    if isinstance(recorded, list):
        return "\n\n".join(_item(i, entry) for i, entry in enumerate(recorded, start=1))
    return json.dumps(recorded, ensure_ascii=False, indent=1, default=str)


def _item(number: int, entry: Any) -> str:
    if not isinstance(entry, dict):
        return f"[{number}] {entry}"
    title = entry.get("title") or entry.get("source") or ""
    text = entry.get("content") or entry.get("snippet") or entry.get("text") or json.dumps(entry, default=str)
    url = f" ({entry['url']})" if entry.get("url") else ""
    return f"[{number}] {title}{url}\n{text}".strip()


def frozen_search_tools(metadata: dict[str, Any], taken: set[str]) -> list[Tool]:
    """A replaying tool for each recorded search of the task, unless a real tool has that name."""
    return [
        FrozenSearchTool(name, metadata[field])
        for field, name in FROZEN_SOURCES.items()
        if metadata.get(field) not in (None, "", [], {}) and name not in taken
    ]
