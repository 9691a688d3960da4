"""`compare view [DIR...]`: the local, read-only web viewer of run directories (`reports/viewer`): the runs,
a run's overview with filters, a task's units and conversations side by side, a running run followed live.
Bound to 127.0.0.1 unless --host says otherwise; bound elsewhere, behind a token printed at start."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from .common import console, fail

DEFAULT_FOLDER = Path("runs")


@dataclass(frozen=True)
class ViewOptions:
    folders: Annotated[
        list[Path] | None, typer.Argument(help="Run directories, or folders holding them (default: runs/).")
    ] = None
    host: Annotated[
        str, typer.Option(help="Address to bind (default 127.0.0.1; any other needs the token printed at start).")
    ] = "127.0.0.1"
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free one).")] = 8765


def view(options: ViewOptions) -> None:
    """Serve the viewer until Ctrl-C."""
    from ...reports.viewer import is_loopback, port_free, serve

    folders = options.folders or [DEFAULT_FOLDER]
    missing = [str(folder) for folder in folders if not folder.is_dir()]
    if missing:
        raise fail(f"no such folder: {', '.join(missing)} (compare view takes run directories or folders of them)")
    if not 0 <= options.port <= 65535:
        raise fail(f"--port {options.port}: a port is 0 to 65535")
    if options.port and not port_free(options.host, options.port):
        raise fail(f"{options.host}:{options.port} is taken (another viewer?): choose another with --port")
    if not is_loopback(options.host):
        console.print(
            f"[yellow]warning:[/yellow] serving on {options.host}: anyone who can reach it and has the token sees "
            "every question, answer and conversation of these runs",
            highlight=False,
        )

    def announce(url: str) -> None:
        console.print(f"viewer: {url}  (read-only; Ctrl-C stops it)", highlight=False, markup=False, soft_wrap=True)

    try:
        serve([folder.resolve() for folder in folders], options.host, options.port, announce)
    except KeyboardInterrupt:  # Ctrl-C is how a viewer ends: not an interrupted piece of work
        pass
    except OSError as problem:
        raise fail(f"cannot serve on {options.host}:{options.port}: {problem.strerror or problem}") from None
    raise typer.Exit(0)
