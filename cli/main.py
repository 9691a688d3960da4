"""The `compare` command: one verb per module in `cli/commands/`, put together here.

    compare [--workflows tool_use,...|all] [--models local,...] [--benchmark bundled] [--limit N] [--out DIR]
    compare run ...                   the same: a run of systems × models on a benchmark (cli/commands/run.py)
    compare resume RUN_DIR            finish an interrupted run with the configuration in its manifest
    compare resume RUN_DIR --retry-errors   also run again its units that ended infra_error
    compare replay RUN_DIR            re-run a run's systems on its recorded model responses (no model)
    compare report DIR                rebuild a run directory's summary
    compare rescore DIR --out NEW     score a run's records again with today's scorers, into NEW
    compare transcript DIR TASK       one unit's whole conversation (--system, --model, --epoch; --json)
    compare view [DIR...]             the runs in the browser: overviews, conversations, a running run live
    compare import FORMAT PATH --out DIR    published trajectories as a run directory
    compare tasks / score             validate a benchmark / score predictions made elsewhere
    compare systems / benchmarks / models    what is registered

`compare --resume --out DIR` and `compare --replay RUN_DIR` still work: they name the verbs.

Exit status: 0 done; 1 some task ended with status "error" or "infra_error" (for `score`: a bad
record); 2 bad configuration or input (nothing was run); 74 the run directory could not be written
(a full disk, a read-only folder); 130 interrupted by Ctrl-C; 143 stopped by SIGTERM. Results so far
are kept in every case, and `compare resume DIR` finishes the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperCommand

# Only typer and rich: `compare --help` must not pay for the core's pydantic models, the config or the run log
# (tests/app/test_startup.py). Each verb imports what it uses when it runs.
from .commands import (
    benchmarks,
    importing,
    models,
    replay,
    report,
    rescore,
    resume,
    run,
    score,
    systems,
    tasks,
    transcript,
    view,
)
from .commands.common import command_of
from .commands.group import RecordedRunCommand, VerbCommand, VerbGroup
from .commands.running import failure_causes, progress_line  # noqa: F401  (the run display's helpers, as before)
from .terminal import sanitize_log_records

VERBS: list[tuple[str, type[Any], Callable[[Any], None], type[TyperCommand]]] = [
    ("run", run.RunOptions, run.run, VerbCommand),
    ("resume", resume.ResumeOptions, resume.resume, RecordedRunCommand),
    ("replay", replay.ReplayOptions, replay.replay, RecordedRunCommand),
    ("report", report.ReportOptions, report.report, VerbCommand),
    ("rescore", rescore.RescoreOptions, rescore.rescore, VerbCommand),
    ("transcript", transcript.TranscriptOptions, transcript.transcript, VerbCommand),
    ("view", view.ViewOptions, view.view, VerbCommand),
    ("import", importing.ImportOptions, importing.import_run, VerbCommand),
    ("tasks", tasks.TasksOptions, tasks.tasks, VerbCommand),
    ("score", score.ScoreOptions, score.score, VerbCommand),
    ("systems", systems.SystemsOptions, systems.systems, VerbCommand),
    ("benchmarks", benchmarks.BenchmarksOptions, benchmarks.benchmarks, VerbCommand),
    ("models", models.ModelsOptions, models.models, VerbCommand),
]


def build_app(verbs: list[tuple[str, type[Any], Callable[[Any], None], type[TyperCommand]]] = VERBS) -> typer.Typer:
    """The root command with these verbs (name, options dataclass, what it does, command class); a test builds
    one whose verbs only parse."""
    root = typer.Typer(
        cls=VerbGroup,
        add_completion=False,
        rich_markup_mode=None,
        help="Compare data agents: run systems × models on a benchmark (compare with no verb is compare run), "
        "then report, score, rescore.",
    )
    for name, options, body, command_class in verbs:
        root.command(name, cls=command_class)(command_of(options, body))
    return root


app = build_app()


def main() -> None:
    sanitize_log_records()  # what libraries log quotes agents and servers: no escape sequence reaches the terminal
    app(prog_name="compare")
