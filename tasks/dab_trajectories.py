"""DAB's published agent trajectories read as traces of ours (`compare import dab-trajectories`).

Layout (DataAgentBench's `results-<model>/` folders, kept as published):

    results-<model>/query_<dataset>/query<N>/data_agent/run_<k>/
        final_agent.json   the whole trial: messages (OpenAI chat format), final_result, terminate_reason,
                           start_time / end_time / duration (Unix seconds), deployment_name, llm_call_count
        llm_calls.jsonl    optional: one line per model call (start/end/duration, response.usage)
        tool_calls.jsonl   optional: one line per executed tool call (time, tool_name, result.success)

One trial becomes one trace: task `<dataset lower case>/query<N>`, epoch = run + 1 (run_0 is epoch 1),
the model from the folder name (`results-<model>`), else `deployment_name`, else the calls. Steps are
rebuilt from the conversation alone: each assistant message is a model call (its `tool_calls` the calls
it asked for), each of its tool calls a tool step, successful unless its tool message says the
execution failed. `llm_calls.jsonl`, when present, adds each call's start, duration, finish reason and
tokens (input = prompt_tokens; output = total_tokens - prompt_tokens, which holds the hidden reasoning
tokens gemini reports only in the total, those being `reasoning_tokens`); `tool_calls.jsonl` adds each
tool call's duration. What the files do not record stays unknown (None in the trace's `Usage`, never
0) and is named in `missing` (never estimated): without llm_calls.jsonl no model call has tokens and the
trace's split into phases is unknown (`step_times_known`); no published file records cost. Tool steps
without a recorded start follow the step before them (the trace's rule for steps without a start).
Phases follow the suite's one set of rules (`PhaseRules`, answer tool `return_answer`). `terminate_reason`
→ status: return_answer → completed, no_tool_call → no_tool_call, max_iterations → max_steps, a time limit
→ time_limit, anything else → error (named).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..core.safe_load import DocumentTooComplex, load_json
from ..core.task import Answer, AnswerStatus, ToolCall
from ..core.trace import ModelCallStep, PhaseRules, ToolCallStep, Trace, Usage
from ..tools.dab import DAB_TOOL_NAMES, ReturnAnswerTool

# What the importer (engine/importer.py) needs to know of these trajectories, said here, with DAB's other knowledge:
BENCHMARK = "dab"  # the benchmark whose tasks the trials answer
FORMAT = "dab-trajectories"  # `compare import FORMAT PATH`
DEFAULT_SYSTEM = "dab-react"  # the row's name unless --system gives another
AGENT = "DAB's ReAct agent"
QUESTION_TYPE = "factoid"  # DAB's questions: free text checked by its validators
HARNESS_BUDGETS = {"max_steps": 100, "wall_time_s": 3600, "tool_result_max_chars": 10_000, "max_tokens": 2_000_000}
FINAL_FILE, LLM_FILE, TOOL_FILE = "final_agent.json", "llm_calls.jsonl", "tool_calls.jsonl"
RUN_PATH = re.compile(r"query_(?P<dataset>[^/]+)/query(?P<query>\d+)/data_agent/run_(?P<run>\d+)$")
ANSWER_TOOL = ReturnAnswerTool.name
STATUSES: dict[str, AnswerStatus] = {
    "return_answer": "completed",
    "no_tool_call": "no_tool_call",
    "max_iterations": "max_steps",
    "max_iteration": "max_steps",
    "timeout": "time_limit",
    "time_limit": "time_limit",
}
FAILED = re.compile(r"The tool \S+ execution failed")


class TrajectoryError(ValueError):
    """A trial's files cannot be read (names the file and what is wrong)."""


@dataclass
class Trial:
    """One published trial as a trace and an answer, with what its files did not record."""

    folder: Path
    task_id: str
    run: int
    model: str
    trace: Trace
    answer: Answer
    missing: list[str] = field(default_factory=list)

    @property
    def epoch(self) -> int:
        return self.run + 1

    def requests(self) -> list[tuple[int, list[str]]]:
        """Each model call's request as the conversation shows it: the trace step's index and the messages
        before its assistant turn, as JSON texts in the suite's message shape (the tools offered and the
        settings sent are not in the published files)."""
        final = _json_file(self.folder / FINAL_FILE)
        messages = [m for m in final.get("messages") or [] if isinstance(m, dict)]
        turns = [at for at, message in enumerate(messages) if message.get("role") == "assistant"]
        steps = [step.index for step in self.trace.model_calls]
        return [(step, [_as_sent(m) for m in messages[:at]]) for step, at in zip(steps, turns, strict=False)]


def find_trials(root: Path) -> list[Path]:
    """Every run folder under `root` (or `root` itself) that holds final_agent.json, in path order."""
    root = Path(root)
    if (root / FINAL_FILE).is_file():
        return [root]
    return sorted(path.parent for path in root.rglob(FINAL_FILE))


def read_trial(folder: Path, system: str) -> Trial:
    """The trial of run folder `folder` as a trace of system `system`."""
    match = RUN_PATH.search(folder.as_posix())
    if match is None:
        raise TrajectoryError(f"{folder}: not a run folder (…/query_<dataset>/query<N>/data_agent/run_<k>)")
    final = _json_file(folder / FINAL_FILE)
    messages = final.get("messages")
    if not isinstance(messages, list):
        raise TrajectoryError(f"{folder / FINAL_FILE}: field 'messages': expected a list")
    llm = _json_lines(folder / LLM_FILE)
    tools = _json_lines(folder / TOOL_FILE)
    model = _model(folder, final, llm)
    task_id = f"{match['dataset'].lower()}/query{int(match['query'])}"
    trace = Trace(task_id=task_id, system=system, model=model, started_at=_iso(final.get("start_time")))
    trace.wall_time_s = float(final["duration"]) if isinstance(final.get("duration"), int | float) else 0.0
    missing = _rebuild(trace, messages, llm, tools, final, model)
    trace.step_times_known = llm is not None
    answer = _answer(final, folder)
    trace.status, trace.error = answer.status, answer.error
    return Trial(folder, task_id, int(match["run"]), model, trace, answer, missing)


def _json_file(path: Path) -> dict[str, Any]:
    try:
        data = load_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, DocumentTooComplex) as bad:
        raise TrajectoryError(f"{path}: unreadable: {bad}") from None
    if not isinstance(data, dict):
        raise TrajectoryError(f"{path}: expected a JSON object")
    return data


def _json_lines(path: Path) -> list[dict[str, Any]] | None:
    if not path.is_file():
        return None
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                records.append(load_json(line))
            except json.JSONDecodeError as bad:
                raise TrajectoryError(f"{path}:{number}: not valid JSON ({bad.msg})") from None
            except DocumentTooComplex as bad:
                raise TrajectoryError(f"{path}:{number}: refused: {bad}") from None
    return records


def _model(folder: Path, final: dict[str, Any], llm: list[dict[str, Any]] | None) -> str:
    for parent in folder.parents:
        if parent.name.startswith("results-"):
            return parent.name.removeprefix("results-")
    if final.get("deployment_name"):
        return str(final["deployment_name"])
    return str((llm or [{}])[0].get("model") or "unknown")


def _iso(seconds: Any) -> str:
    return (
        datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")
        if isinstance(seconds, int | float)
        else ""
    )


def _answer(final: dict[str, Any], folder: Path) -> Answer:
    reason = str(final.get("terminate_reason") or "")
    text = final.get("final_result") or ""
    if not isinstance(text, str):
        raise TrajectoryError(f"{folder / FINAL_FILE}: field 'final_result': expected text")
    status = STATUSES.get(reason, "error")
    error = None if status in ("completed",) else f"terminate_reason: {reason or '(none)'}"
    return Answer(text=text, status=status, error=error)


def _rebuild(
    trace: Trace,
    messages: list[Any],
    llm: list[dict[str, Any]] | None,
    tools: list[dict[str, Any]] | None,
    final: dict[str, Any],
    model: str,
) -> list[str]:
    """Append the trial's steps to `trace`; returns the fields the files did not record."""
    missing = ["cost (no published file records it)"]
    if llm is None:
        missing.append("model calls' latency and tokens (no llm_calls.jsonl)")
    if tools is None:
        missing.append("tool calls' latency (no tool_calls.jsonl)")
    rules = PhaseRules()
    rules.answer_tools.add(ANSWER_TOOL)
    results = {m.get("tool_call_id"): m for m in messages if isinstance(m, dict) and m.get("role") == "tool"}
    start = final.get("start_time") if isinstance(final.get("start_time"), int | float) else None
    assistant = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    if llm is not None and len(llm) != len(assistant):
        missing.append(f"llm_calls.jsonl has {len(llm)} calls for {len(assistant)} assistant turns: matched in order")
    tool_log = list(tools or [])
    for number, message in enumerate(assistant):
        call = llm[number] if llm is not None and number < len(llm) else None
        requested = [_tool_call(c) for c in message.get("tool_calls") or []]
        phase = rules.after_model_call(None, rules.before_model_call(None, DAB_TOOL_NAMES), [c.name for c in requested])
        trace.steps.append(_model_step(len(trace.steps), phase, model, call, message, requested, start))
        for request in requested:
            reply = results.get(request.id)
            content = str(reply.get("content") or "") if isinstance(reply, dict) else ""
            success = reply is not None and not FAILED.search(content)
            logged = _take(tool_log, request.name)
            tool_phase = rules.tool_call(None, request.name)
            trace.steps.append(
                ToolCallStep(
                    index=len(trace.steps),
                    phase=tool_phase,
                    tool=request.name,
                    arguments=request.arguments,
                    started_at="",
                    duration_s=float(logged["time"]) if logged and isinstance(logged.get("time"), int | float) else 0.0,
                    success=success,
                    error=None if success else (content.strip()[:500] or "no tool result in the conversation"),
                    result_summary=content.strip()[:300],
                )
            )
            if not success:
                rules.redo(None)
    return missing


def _as_sent(message: dict[str, Any]) -> str:
    """One published chat message as the request store keeps a message (`core.model.Message`'s fields)."""
    content = message.get("content")
    shown: dict[str, Any] = {"role": str(message.get("role"))}
    if content is not None:
        shown["content"] = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    if message.get("tool_calls"):
        shown["tool_calls"] = [_tool_call(raw).model_dump(mode="json") for raw in message["tool_calls"]]
    for name in ("tool_call_id", "name"):
        if message.get(name) is not None:
            shown[name] = str(message[name])
    return json.dumps(shown, ensure_ascii=False)


def _tool_call(raw: Any) -> ToolCall:
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict) or not function.get("name"):
        return ToolCall(id=str(raw.get("id", "")) if isinstance(raw, dict) else "", name="<malformed>")
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = load_json(arguments) if arguments.strip() else {}
        except ValueError:  # not JSON, or nested too deep
            arguments = {"<unparsed>": arguments}
    if not isinstance(arguments, dict):
        arguments = {"<value>": arguments}
    return ToolCall(id=str(raw.get("id", "")), name=str(function["name"]), arguments=arguments)


def _take(log: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The next logged execution of tool `name` (the log lists executions in order)."""
    for position, record in enumerate(log):
        if record.get("tool_name") == name:
            return log.pop(position)
    return None


def _model_step(
    index: int,
    phase: Any,
    model: str,
    call: dict[str, Any] | None,
    message: dict[str, Any],
    requested: list[ToolCall],
    trial_start: float | None,
) -> ModelCallStep:
    usage, duration, started, finish, start_s = Usage.unknown(), 0.0, "", None, None
    if call is not None:
        usage = _recorded_usage(call)
        duration = float(call.get("duration") or 0.0)
        started = _iso(call.get("start_time"))
        choices = (call.get("response") or {}).get("choices") or [{}]
        finish = choices[0].get("finish_reason")
        if trial_start is not None and isinstance(call.get("start_time"), int | float):
            start_s = call["start_time"] - trial_start
    content = message.get("content")
    return ModelCallStep(
        index=index,
        phase=phase,
        model=model,
        provider="dab-published",
        provider_model=str((call or {}).get("model") or model),
        started_at=started,
        duration_s=duration,
        usage=usage,
        success=bool(requested) or bool(content),
        error=None if requested or content else f"no tool call ({finish or 'the reply carried none'})",
        finish_reason=finish,
        content=content if isinstance(content, str) else None,
        tool_calls=requested,
        start_s=start_s,
    )


def _recorded_usage(call: dict[str, Any]) -> Usage:
    """The tokens one llm_calls.jsonl line records (unknown when it has no usage); cost is never recorded."""
    counts = (call.get("response") or {}).get("usage")
    if not isinstance(counts, dict) or counts.get("prompt_tokens") is None:
        return Usage.unknown()
    prompt, completion = int(counts.get("prompt_tokens") or 0), int(counts.get("completion_tokens") or 0)
    total = int(counts.get("total_tokens") or prompt + completion)
    return Usage(
        input_tokens=prompt,
        output_tokens=total - prompt,
        reasoning_tokens=max(0, total - prompt - completion),
        cached_tokens=None,
        cost_usd=None,
        cost_source="unknown",
    )
