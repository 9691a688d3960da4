"""`compare systems`: the registered systems."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from .common import load_plugins
from .listing import print_listing, registered


@dataclass(frozen=True)
class SystemsOptions:
    plugin: Annotated[list[str] | None, typer.Option(help="A module or .py file to import first.")] = None
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False


def systems(options: SystemsOptions) -> None:
    """The registered systems: name, kind, one-line description and where each comes from."""
    from ...core.system import SYSTEMS

    load_plugins(options.plugin)
    rows = [[name, cls.kind, cls.summary(), origin] for name, cls, origin in registered(SYSTEMS)]
    title = "Systems (--systems NAME; all: every kind but workflow-variant; --workflows all: the workflows)"
    print_listing(title, ["name", "kind", "description", "from"], rows, options.as_json)
