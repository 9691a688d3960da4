"""`compare rescore RUN_DIR --out NEW`: a run's records scored again with today's scorers, into a new run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from . import common
from .common import fail
from .reporting import write_report, write_summary


@dataclass(frozen=True)
class RescoreOptions:
    run_dir: Annotated[Path, typer.Argument(help="A run directory (left untouched).")]
    out: Annotated[Path, typer.Option(help="The new run directory for the records scored again.")]


def rescore(options: RescoreOptions) -> None:
    """Score a run's records again with today's scorers into a new run directory (with its summary and
    report); its manifest records the scorer versions before and after."""
    from ...core.runlog import RunLogError
    from ...engine.config import ConfigError
    from ...engine.rescore import rescore as score_again

    try:
        done = score_again(options.run_dir, options.out)
    except (ConfigError, RunLogError) as problem:
        raise fail(str(problem)) from None
    for name in sorted(done.before.keys() | done.after.keys()):
        before, after = done.before.get(name, "(not recorded)"), done.after.get(name, "(none)")
        change = f"{before} → {after}" if before != after else f"{after} (unchanged)"
        common.console.print(f"scorer {name}: version {change}", highlight=False, markup=False)
    common.console.print(
        f"{done.records} records scored again, {done.changed} with changed scores, {done.scoring_errors} with a "
        f"scoring error → {done.out}",
        highlight=False,
        markup=False,
    )
    write_report([write_summary(done.out)], None, at_end_of_run=True)
