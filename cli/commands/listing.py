"""A table of what is registered (systems, benchmarks, models), as a table, one line per row, or JSON."""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table

from . import common
from .common import fail
from .reporting import wider

WHOLE_COLUMNS = {"name", "alias", "provider", "model id"}  # names a script reads back: never folded or cut


def print_listing(title: str, columns: list[str], rows: list[list[str]], as_json: bool) -> None:
    output = common.output
    if as_json:
        output.print_json(json.dumps([dict(zip(columns, row, strict=True)) for row in rows]))
        return
    table = Table(title=title)
    widest = [max([len(column), *(len(row[index]) for row in rows)]) for index, column in enumerate(columns)]
    for column, width in zip(columns, widest, strict=True):
        whole = column in WHOLE_COLUMNS
        table.add_column(column, overflow="fold", no_wrap=whole, min_width=width if whole else None)
    for row in rows:
        table.add_row(*row)
    if not output.is_terminal:  # a pipe or a file: rows as wide as they are
        wider(sum(widest) + 3 * len(columns) + 4).print(table)
        return
    needed = sum(w for c, w in zip(columns, widest, strict=True) if c in WHOLE_COLUMNS) + 8 * len(columns)
    if needed > output.width:  # too narrow for a table that keeps every name whole: one line per row
        for row in rows:
            output.print("  ".join(row), highlight=False, soft_wrap=True)
        return
    output.print(table)


def registered(registry: Any) -> list[tuple[str, Any, str]]:
    """(name, loaded object, where it comes from) of every entry; one that cannot be loaded: exit 2."""
    from ...core.registry import RegistryError

    try:
        return [(name, registry.load(name), _source(entry.origin)) for name, entry in registry.entries().items()]
    except RegistryError as problem:
        raise fail(str(problem)) from None


def _source(origin: str) -> str:
    source = origin.removeprefix("entry point of ")
    return "built-in" if source == "data-agent-compare" else source
