"""The consoles' safe side: whatever a server, an agent or a dataset wrote (an error body, an answer, a task
id) reaches the terminal without its escape sequences or control characters (`core/sanitize.py`), so it
cannot move the cursor, clear the screen, retitle the window or hide a line.

    TerminalConsole          what the suite prints itself (messages, tables, progress)
    sanitize_log_records()   what any library logs: every log record of the process, whichever handler prints it
                             (the `mcp` library logs an agent's tool name as the agent sent it)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rich.console import Console


class TerminalConsole(Console):
    """A rich Console whose `print` strips escape sequences and control characters from every text it is given
    (Rich passes ESC sequences through as they are)."""

    def print(self, *objects: Any, **options: Any) -> None:  # type: ignore[override]
        from ..core.sanitize import terminal_text  # here: `compare --help` must not load the core

        super().print(*(terminal_text(o) if isinstance(o, str) else o for o in objects), **options)


def sanitize_log_records() -> None:
    """From now on every log record this process makes carries a terminal-safe message, traceback and stack:
    made safe where records are made (the record factory), so no library's handler, Python's last-resort
    handler included, can print an escape sequence. Idempotent."""
    previous = logging.getLogRecordFactory()
    if not getattr(previous, "terminal_safe", False):
        logging.setLogRecordFactory(_safe_records(previous))


def _safe_records(make: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    def make_safe(*args: Any, **kwargs: Any) -> logging.LogRecord:
        from ..core.sanitize import terminal_text

        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the format: logging reports that itself, as it would
            return record
        record.msg, record.args = terminal_text(message), None
        if record.exc_info and not record.exc_text:  # the traceback quotes the exception's message
            record.exc_text = terminal_text(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = terminal_text(record.stack_info)
        return record

    make_safe.terminal_safe = True  # type: ignore[attr-defined]
    return make_safe
