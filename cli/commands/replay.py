"""`compare replay RUN_DIR` (formerly `compare --replay RUN_DIR`): re-run a run's systems on its recorded
model responses, with no model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from .common import AllowDrift, PostgresUrlAgain, fail


@dataclass(frozen=True)
class ReplayOptions:
    """Only the source, where to write, and the PostgreSQL URL (its password is not recorded)."""

    source: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="The run whose model responses are replayed.")]
    out: Annotated[str | None, typer.Option(help="The new run directory (default runs/<time>-<benchmark>).")] = None
    postgres_url: PostgresUrlAgain = None
    allow_drift: AllowDrift = False


def replay(options: ReplayOptions) -> None:
    """Re-run a run directory's systems on its recorded model responses (no model is asked)."""
    from ...engine.config import ConfigError
    from ...engine.runner import plan_replay
    from .running import run_plan

    try:
        plan = plan_replay(str(options.source), options.out, postgres_url=options.postgres_url)
    except ConfigError as problem:
        raise fail(str(problem)) from None
    raise typer.Exit(run_plan(plan, allow_drift=options.allow_drift))
