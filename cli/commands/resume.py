"""`compare resume RUN_DIR` (formerly `compare --resume --out RUN_DIR`): finish an interrupted run with the
configuration its manifest recorded."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from .common import AllowDrift, PostgresUrlAgain, fail


@dataclass(frozen=True)
class ResumeOptions:
    """Only where the run is, and the URLs whose passwords the manifest does not keep: the rest is recorded."""

    run_dir: Annotated[Path, typer.Argument(help="The run directory to finish.")]
    postgres_url: PostgresUrlAgain = None
    postgres_reader_url: Annotated[
        str | None, typer.Option(help="The run's read-only role again (its password is not recorded).")
    ] = None
    base_url: Annotated[
        str | None, typer.Option(help="The run's --base-url again, when it held a password (not recorded).")
    ] = None
    allow_drift: AllowDrift = False
    retry_errors: Annotated[
        bool,
        typer.Option(
            "--retry-errors",
            help="Run again the units that ended infra_error (the provider failed); the earlier attempts' spend "
            "is kept in the unit's cost.",
        ),
    ] = False


def resume(options: ResumeOptions) -> None:
    """Finish an interrupted run with the configuration in its manifest (a replay goes on replaying)."""
    from ...engine.config import ConfigError, load_plugins
    from ...engine.runner import plan_replay, plan_run, replayed_run, resumed_config
    from .running import run_plan

    out = str(options.run_dir)
    try:
        source = replayed_run(out)  # resuming a replay replays
        if source:
            plan = plan_replay(source, out, postgres_url=options.postgres_url)
        else:
            urls = {"postgres_url": options.postgres_url, "postgres_reader_url": options.postgres_reader_url}
            run_config = resumed_config(out, base_url=options.base_url, **urls)
            load_plugins(run_config.plugins)
            plan = plan_run(run_config)
    except ConfigError as problem:
        raise fail(str(problem)) from None
    plan.retry_errors = options.retry_errors
    raise typer.Exit(run_plan(plan, resume=True, allow_drift=options.allow_drift))
