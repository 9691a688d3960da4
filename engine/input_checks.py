"""Checks of a run's inputs that an attack found passing (issue 26, item 6), each a one-line ConfigError (exit 2)
naming the field, flag, file or task, raised by `plan_run` before any model call:

- numbers that are not finite anywhere in the configuration or a model's price (`wall_time_s: .inf` ran
  unbounded; a price of `.inf` made every cost `$nan` and the run unreadable by its own report);
- a concurrency no machine can run (`concurrency: 100000000` hung starting threads);
- `--out` naming a folder that holds other files and is no run directory (the run wrote into it);
- task ids that cannot name a file (a NUL character crashed the run; 300 characters failed with
  "File name too long" and then suggested `--resume`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..core.model import ModelConfig
from ..core.task import Task
from .config import ConfigError, RunConfig

MAX_CONCURRENCY = 1024  # units in flight; each is a thread (or a worker's) with its own connections
# A task id names its trace file (`traces/<system>/<model>/<task id>[.eN].json`, at most 255 bytes on
# common file systems): this leaves room for the epoch suffix and the extension.
TASK_ID_MAX_BYTES = 200
MANIFEST = "manifest.json"


def check_run_inputs(config: RunConfig, models: Iterable[ModelConfig]) -> None:
    """The configuration's numbers, concurrency and --out folder, and each model's numbers."""
    bad = non_finite(config.model_dump(mode="python"))
    if bad:
        raise ConfigError(f"configuration: field {bad[0]!r} is {bad[1]}, not a finite number")
    for model in models:
        bad = non_finite(model.model_dump(mode="python"))
        if bad:
            raise ConfigError(f"model {model.alias!r}: field {bad[0]!r} is {bad[1]}, not a finite number")
    if config.concurrency is not None and config.concurrency > MAX_CONCURRENCY:
        raise ConfigError(
            f"--concurrency {config.concurrency:,}: more than {MAX_CONCURRENCY} units at once cannot run here; "
            "give a smaller number"
        )
    check_out_folder(config.out)


def non_finite(value: Any, path: str = "") -> tuple[str, float] | None:
    """(dotted field, value) of the first float that is infinite or NaN in nested dicts and lists."""
    pending: list[tuple[str, Any]] = [(path, value)]
    while pending:
        where, item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return where, item
        if isinstance(item, dict):
            pending += [(f"{where}.{key}" if where else str(key), inner) for key, inner in item.items()]
        elif isinstance(item, list | tuple):
            pending += [(f"{where}[{index}]", inner) for index, inner in enumerate(item)]
    return None


def check_out_folder(out: str | None) -> None:
    """`--out` may be new, empty, or a run directory (it has a manifest.json): not any other folder."""
    if not out:
        return
    folder = Path(out)
    if folder.is_dir() and not (folder / MANIFEST).exists() and any(folder.iterdir()):
        raise ConfigError(
            f"--out {out}: the folder holds other files and is not a run directory (no {MANIFEST}); "
            "give a new or empty folder"
        )


def check_task_ids(tasks: Iterable[Task], where: str) -> None:
    """Every task id can name its trace file: no control characters, no more than TASK_ID_MAX_BYTES."""
    for task in tasks:
        shown = repr(task.id[:60] + ("…" if len(task.id) > 60 else ""))
        if any(ord(c) < 32 or c == "\x7f" for c in task.id):
            raise ConfigError(f"{where}: task {shown}: field 'id' holds a control character; fix the task file")
        size = len(task.id.encode())
        if size > TASK_ID_MAX_BYTES:
            raise ConfigError(
                f"{where}: task {shown}: field 'id' is {size} bytes, more than {TASK_ID_MAX_BYTES} (it names the "
                "task's trace file); shorten it in the task file"
            )
