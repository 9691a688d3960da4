"""`compare benchmarks`: the registered benchmarks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from .common import load_plugins
from .listing import print_listing, registered


@dataclass(frozen=True)
class BenchmarksOptions:
    plugin: Annotated[list[str] | None, typer.Option(help="A module or .py file to import first.")] = None
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False


def benchmarks(options: BenchmarksOptions) -> None:
    """The registered benchmarks: name, description, scorers, whether --tasks-path is needed."""
    from ...core.benchmark import BENCHMARKS

    load_plugins(options.plugin)
    rows = [
        [name, cls.summary(), ", ".join(cls.scorers), ", ".join(cls.rules), "yes" if cls.needs_path else "no", origin]
        for name, cls, origin in registered(BENCHMARKS)
    ]
    columns = ["name", "description", "scorers", "earlier rules", "needs --tasks-path", "from"]
    print_listing("Benchmarks (--benchmark NAME)", columns, rows, options.as_json)
