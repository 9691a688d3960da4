"""What the suite prints reaches the terminal as the run wrote it: no escape sequence, and no `:name:` turned
into an emoji (a task id, an answer or an error body may say `:warning:`)."""

from __future__ import annotations

import io

from data_agent_compare.cli.terminal import TerminalConsole


def test_text_is_printed_as_it_is_without_escapes_or_emoji() -> None:
    out = io.StringIO()
    console = TerminalConsole(file=out, width=200, color_system=None)
    console.print("task :warning: said \x1b[2Jcleared", markup=False, highlight=False)
    assert out.getvalue() == "task :warning: said cleared\n"
