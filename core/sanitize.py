"""Text that came from outside (a server's error body, an agent's answer, a dataset's task id) made safe for
where the suite puts it: a terminal and a spreadsheet.

- `terminal_text`: no escape sequences or other control characters, so a server's error body cannot move
  the cursor, retitle the window, clear the screen or hide a line (`\\x1b[2J`, `\\x1b]0;…\\x07`, `\\x9b…`).
- `spreadsheet_cell`: a text cell that a spreadsheet would run as a formula (`=HYPERLINK(…)`, `+cmd|…`,
  `-2+3`, `@SUM(…)`) gets a leading apostrophe, OWASP's advice for CSV injection; a plain number such as
  `-5` stays as it is (a number, not a formula).
- `safe_log_record`, `install_safe_log_records`: every log record of a process made terminal-safe where it is
  made (the `mcp` library logs an agent's tool name as the agent sent it).
"""

from __future__ import annotations

import logging
import re
from typing import Any

_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window title, hyperlinks, clipboard
    r"|\x1b[P^_X][^\x1b]*(?:\x1b\\)?"  # DCS, PM, APC, SOS strings
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI: cursor, colours, clearing (7-bit and 8-bit)
    r"|\x1b[ -/]*[0-~]?"  # any other escape
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # keeps tab and newline
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def terminal_text(text: str) -> str:
    """`text` without escape sequences and control characters (tab and newline kept)."""
    if not any(c < " " or "\x7f" <= c <= "\x9f" for c in text if c not in "\t\n"):
        return text  # the common case: one pass, no regex
    return _CONTROL.sub("", _ESCAPE_SEQUENCE.sub("", text))


def spreadsheet_cell(value: Any) -> Any:
    """A text value that a spreadsheet would evaluate, prefixed with an apostrophe; anything else as it is."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def safe_log_record(record: logging.LogRecord) -> logging.LogRecord:
    """`record` with a terminal-safe message, traceback and stack (formatted now, as a handler would)."""
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


def install_safe_log_records() -> None:
    """From now on every log record this process makes is `safe_log_record`'s; idempotent."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "terminal_safe", False):
        return

    def make_safe(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return safe_log_record(previous(*args, **kwargs))

    make_safe.terminal_safe = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(make_safe)
