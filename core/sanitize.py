"""Text that came from outside (a server's error body, an agent's answer, a dataset's task id) made safe for
where the suite puts it: a terminal and a spreadsheet.

- `terminal_text`: no escape sequences or other control characters, so a server's error body cannot move
  the cursor, retitle the window, clear the screen or hide a line (`\\x1b[2J`, `\\x1b]0;…\\x07`, `\\x9b…`).
- `spreadsheet_cell`: a text cell that a spreadsheet would run as a formula (`=HYPERLINK(…)`, `+cmd|…`,
  `-2+3`, `@SUM(…)`) gets a leading apostrophe, OWASP's advice for CSV injection; a plain number such as
  `-5` stays as it is (a number, not a formula).
"""

from __future__ import annotations

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
