"""The consoles' safe side: whatever a server, an agent or a dataset wrote (an error body, an answer, a task
id) reaches the terminal without its escape sequences or control characters (`core/sanitize.py`), so it
cannot move the cursor, clear the screen, retitle the window or hide a line."""

from __future__ import annotations

from typing import Any

from rich.console import Console


class TerminalConsole(Console):
    """A rich Console whose `print` strips escape sequences and control characters from every text it is given
    (Rich passes ESC sequences through as they are)."""

    def print(self, *objects: Any, **options: Any) -> None:  # type: ignore[override]
        from ..core.sanitize import terminal_text  # here: `compare --help` must not load the core

        super().print(*(terminal_text(o) if isinstance(o, str) else o for o in objects), **options)
