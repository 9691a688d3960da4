"""`compare transcript RUN_DIR TASK`: one unit's whole conversation, in order (`reports/transcript.py`): the
messages as sent, each reply, each tool call with its arguments, result, duration and phase, tokens and cost per
call, the answer and its verdict. Coloured and wrapped on a terminal, plain text when piped, JSON with --json."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .common import fail

if TYPE_CHECKING:
    from ...reports.transcript import Transcript, TranscriptEntry


@dataclass(frozen=True)
class TranscriptOptions:
    run_dir: Annotated[Path, typer.Argument(help="A run directory.")]
    task: Annotated[str, typer.Argument(help="The task's id.")]
    system: Annotated[str | None, typer.Option(help="The unit's system (needed when several ran the task).")] = None
    model: Annotated[str | None, typer.Option(help="The unit's model alias (needed when several ran it).")] = None
    epoch: Annotated[int | None, typer.Option(help="The unit's epoch (needed with several epochs).")] = None
    json_output: Annotated[bool, typer.Option("--json", help="The transcript as JSON.")] = False


def transcript(options: TranscriptOptions) -> None:
    """Print one unit's whole conversation: every request as sent, every reply and tool call, with tokens,
    cost, durations and phases, then the answer, the gold and the verdict."""
    from ...core.conversations import StoreError
    from ...core.runlog import RunLogError, read_run
    from ...reports.transcript import UnitNotFound, one_unit, unit_transcript

    try:
        run = read_run(options.run_dir)
        record = one_unit(run, options.task, options.system, options.model, options.epoch)
        told = unit_transcript(run, record)
    except (RunLogError, UnitNotFound, StoreError) as problem:
        raise fail(str(problem)) from None
    except OSError as problem:
        raise fail(f"{problem.filename or options.run_dir}: {problem.strerror or problem}") from None
    if options.json_output:
        sys.stdout.write(json.dumps(told.model_dump(mode="json"), ensure_ascii=False, indent=1) + "\n")
        return
    _print(told)


def _print(told: Transcript) -> None:
    from ...core.sanitize import terminal_text
    from ..terminal import TerminalConsole

    console = TerminalConsole()  # stdout: the transcript is the command's output, messages go to stderr
    on_terminal = console.is_terminal
    for style, text in lines_of(told):
        text = terminal_text(text)
        if on_terminal:
            console.print(text, style=style or None, markup=False, highlight=False)
        else:
            sys.stdout.write(text + "\n")


def lines_of(told: Transcript) -> list[tuple[str, str]]:
    """The transcript as (style, line) pairs: a head, each entry, then the answer and verdict."""
    verdict_style = {"correct": "bold green", "wrong": "bold red"}.get(told.verdict, "yellow")
    head = f"{told.task_id} · {told.system} / {told.model} · epoch {told.epoch} · {told.status}"
    lines = [("bold", head + (f" · attempt {told.attempt}" if told.attempt else ""))]
    if told.question:
        lines.append(("", f"question: {told.question}"))
    if not told.stored:
        lines.append(("yellow", "(this run kept no requests: model calls are shown without the messages sent)"))
    for entry in told.entries:
        lines += [("", ""), *_entry_lines(entry)]
    lines += [("", ""), ("bold", f"answer: {_short(json.dumps(told.answer, ensure_ascii=False), 2000)}")]
    lines.append(("", f"gold: {told.gold if told.gold is not None else '(none)'}"))
    scores = ", ".join(f"{name}={value}" for name, value in told.scores.items()) or "(none)"
    lines.append((verdict_style, f"verdict: {told.verdict} · scores: {scores}"))
    if told.error:
        lines.append(("red", f"error: {told.error}"))
    lines.append(("dim", f"unit: {_usage(told.usage)} · {told.latency_s:.3f} s"))
    return lines


def _entry_lines(entry: TranscriptEntry) -> list[tuple[str, str]]:
    where = f"{entry.phase} phase" + (f" · agent {entry.agent}" if entry.agent else "")
    at = f" · at {entry.start_s:.3f} s" if entry.start_s is not None else ""
    if entry.kind == "tool_call":
        outcome = "ok" if entry.success else f"failed: {entry.error}"
        title = f"[{entry.step}] tool {entry.tool} · {where} · {entry.duration_s:.3f} s{at} · {outcome}"
        lines = [("bold cyan", title)]
        lines.append(("", f"  arguments: {json.dumps(entry.arguments, ensure_ascii=False)}"))
        truncated = " (truncated)" if entry.truncated else ""
        return lines + _block("  result" + truncated, entry.result or "")
    if entry.kind == "message":
        title = f"[{entry.step}] message {entry.agent} → {entry.recipient} · {where}"
        return [("bold", title), *_block("  ", entry.content or "")]
    role = "" if entry.role == "system" else " (judge)"
    outcome = "" if entry.success else f" · failed: {entry.error}"
    cached = " · from the cache" if entry.cached else ""
    usage = _usage(entry.usage or {})
    lines = [("bold magenta", f"[{entry.step}] model call{role} · {where} · {entry.duration_s:.3f} s{at} · {usage}")]
    lines[0] = (lines[0][0], lines[0][1] + cached + outcome)
    if entry.earlier_messages:
        lines.append(("dim", f"  ({entry.earlier_messages} earlier message(s) as sent before)"))
    if entry.tool_specs is not None:
        lines.append(("dim", f"  tools offered: {', '.join(entry.tools) or '(none)'}"))
    elif not entry.tools_recorded and entry.earlier_messages == 0:
        lines.append(("dim", "  tools offered: not recorded (the conversation was imported)"))
    if entry.settings:
        settings = _short(json.dumps(entry.settings, ensure_ascii=False), 300)
        settings = settings.replace(" characters)", " characters: --json shows all)")
        lines.append(("dim", f"  settings: {settings}"))
    for message in entry.messages:
        lines += _message_lines(message)
    reply = entry.reply or {}
    if reply.get("content"):
        lines += _block("  → reply", str(reply["content"]), "green")
    for call in reply.get("tool_calls") or []:
        arguments = json.dumps(call.get("arguments"), ensure_ascii=False)
        lines.append(("green", f"  → calls {call.get('name')} {_short(arguments, 2000)}"))
    return lines


def _message_lines(message: dict[str, Any]) -> list[tuple[str, str]]:
    role = str(message.get("role"))
    label = f"  {role}" + (f" ({message['name']})" if message.get("name") else "")
    calls = message.get("tool_calls") or []
    content = str(message.get("content") or "")
    lines = _block(label, content, "blue" if role == "user" else "") if content or not calls else []
    for call in calls:
        arguments = json.dumps(call.get("arguments"), ensure_ascii=False)
        lines.append(("", f"{label}: calls {call.get('name')} {_short(arguments, 2000)}"))
    return lines


def _block(label: str, text: str, style: str = "") -> list[tuple[str, str]]:
    """`label: text`, a text of several lines indented under its label."""
    first, *rest = text.splitlines() or [""]
    lines = [(style, f"{label}: {first}" if label.strip() else f"    {first}")]
    return lines + [(style, f"    {line}") for line in rest]


def _usage(usage: dict[str, Any]) -> str:
    def count(name: str) -> str:
        value = usage.get(name)
        return "?" if value is None else str(value)

    cost = usage.get("cost_usd")
    dollars = "$?" if cost is None else f"${cost:.6f}"
    return f"{count('input_tokens')} in / {count('output_tokens')} out · {dollars}"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"
