"""DAB's judged failure modes of wrong answers (`compare report --judge MODEL`): for every record whose
automatic mode is "wrong answer", an LLM judge reads the question, the gold answer, the system's answer and
a summary of its trace, and names the root cause, as the DAB paper does by hand:

- incorrect plan: the approach could not answer the question (wrong steps, a misread question);
- incorrect data selection: the right approach over the wrong tables, columns, files, rows or filters;
- incorrect implementation: the right plan and data, carried out wrongly (a buggy query or code, a wrong
  calculation, a correct result misreported).

The judge is a MeteredModel with its own TraceRecorder per verdict, like the rubric judge (evaluators/
rubric.py): its calls are metered apart from every system, its traces are written under `judge/` in the
report folder, and its tokens and cost are reported beside the table, never in a system's numbers.
Every call: temperature 0 and a strict JSON schema; a failed call or an invalid reply leaves the record
unjudged with the error kept.

Verdicts are cached in `judge/verdicts.jsonl` of the report folder, keyed by the judge (provider, model id),
the prompt version, the record and the whole prompt: rendering the report again asks the judge nothing it has answered,
and the table says how many verdicts came from the cache (they cost nothing now). Failed verdicts are not
cached.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..core.model import Message, MeteredModel, ModelConfig, ModelError, get_provider
from ..core.runlog import ResultRecord, UnitKey, write_json
from ..core.safe_load import load_json
from ..core.trace import BudgetExceeded, Budgets, Trace, TraceRecorder, Usage
from .cells import Cell, ReportTable, answer_text, count, cut, label, link_of
from .failures import failure_mode
from .runs import ReportData

JUDGED_MODES = ("incorrect plan", "incorrect data selection", "incorrect implementation")
FAILURE_JUDGE_VERSION = "1"
FAILURE_JUDGE_AGENT = "failure_judge"
JUDGE_BUDGETS = Budgets(max_steps=2, max_tokens=200_000, wall_time_s=600.0)  # one verdict, one retry of room
TRACE_STEPS_SHOWN = 40  # the judge sees the first steps of long trajectories, each cut short

FAILURE_JUDGE_SYSTEM = """You analyse why a data agent answered a question wrongly. You are given the \
question, the correct (gold) answer, the agent's answer and the agent's trajectory (its tool calls with \
arguments and result summaries). Name the single root cause:
- "incorrect plan": the approach could not answer the question (wrong or missing steps, a misread question);
- "incorrect data selection": a workable approach over the wrong tables, columns, files, rows or filters;
- "incorrect implementation": the right plan and data carried out wrongly (a buggy query or code, a wrong \
calculation, a correct intermediate result misreported).
Reply with JSON only: {"mode": <one of the three>, "justification": <one or two sentences>}."""

FAILURE_JUDGE_PROMPT = """Question:
{question}

Gold answer:
{gold}

Agent's answer:
{answer}

Agent's trajectory ({shown} of {steps} steps):
{trajectory}"""

FAILURE_JUDGE_HASH = hashlib.sha256(
    "\n".join([FAILURE_JUDGE_VERSION, FAILURE_JUDGE_SYSTEM, FAILURE_JUDGE_PROMPT]).encode()
).hexdigest()[:16]

VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"mode": {"type": "string", "enum": list(JUDGED_MODES)}, "justification": {"type": "string"}},
    "required": ["mode", "justification"],
    "additionalProperties": False,
}


@dataclass
class Verdict:
    mode: str | None  # None: not judged (see error)
    justification: str = ""
    error: str | None = None


@dataclass
class JudgedFailures:
    judge: ModelConfig
    verdicts: dict[UnitKey, Verdict] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    cached: int = 0  # verdicts read from the cache: no call now


class VerdictCache:
    """Verdicts already given, one JSON object a line ({"key", "mode", "justification"}); appended as given."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.known: dict[str, Verdict] = {}
        if path.is_file():
            for line in path.read_text("utf-8").splitlines():
                try:
                    entry = json.loads(line)
                    self.known[entry["key"]] = Verdict(mode=entry["mode"], justification=entry["justification"])
                except (ValueError, KeyError, TypeError):  # a line cut by a crash: that verdict is asked again
                    continue

    @staticmethod
    def key(judge: ModelConfig, record: ResultRecord, prompt: str) -> str:
        """The judge, the prompt's version and text, and the record it is about (two systems that wrote the
        same answer the same way are judged each for itself)."""
        parts = [judge.provider, judge.model_id, FAILURE_JUDGE_HASH, str(record.key), prompt]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    def get(self, key: str) -> Verdict | None:
        return self.known.get(key)

    def put(self, key: str, verdict: Verdict) -> None:
        self.known[key] = verdict
        self.path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"key": key, "mode": verdict.mode, "justification": verdict.justification}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")


def _trajectory(trace: Trace | None) -> tuple[str, int, int]:
    if trace is None:
        return "(no trace recorded)", 0, 0
    lines = []
    for step in trace.tool_calls[:TRACE_STEPS_SHOWN]:
        outcome = "ok" if step.success else f"failed: {cut(step.error, 200)}"
        arguments = cut(json.dumps(step.arguments, ensure_ascii=False), 400)
        lines.append(f"- {step.tool}({arguments}) -> {outcome}; result: {cut(step.result_summary, 400)}")
    return "\n".join(lines) or "(no tool calls)", min(len(trace.tool_calls), TRACE_STEPS_SHOWN), len(trace.tool_calls)


def _prompt(record: ResultRecord, question: str | None, trace: Trace | None) -> str:
    trajectory, shown, steps = _trajectory(trace)
    gold = ", ".join(record.gold) if isinstance(record.gold, list) else str(record.gold)
    return FAILURE_JUDGE_PROMPT.format(
        question=question or "(not recorded)",
        gold=gold,
        answer=cut(answer_text(record), 2_000),
        shown=shown,
        steps=steps,
        trajectory=trajectory,
    )


def _parse(content: str | None) -> Verdict:
    data = load_json(content or "")
    if not isinstance(data, dict) or set(data) != {"mode", "justification"}:
        raise ValueError("expected an object with exactly 'mode' and 'justification'")
    if data["mode"] not in JUDGED_MODES or not isinstance(data["justification"], str):
        raise ValueError(f"mode must be one of {list(JUDGED_MODES)} and justification a string")
    return Verdict(mode=data["mode"], justification=data["justification"])


def _judge_one(judge: ModelConfig, record: ResultRecord, prompt: str) -> tuple[Verdict, Trace]:
    trace = Trace(task_id=record.task_id, system=f"failure-judge:{record.system}", model=judge.alias)
    recorder = TraceRecorder(trace, JUDGE_BUDGETS)
    model = MeteredModel(judge, get_provider(judge.provider), recorder, system="failure-judge")
    recorder.start()
    messages = [Message(role="system", content=FAILURE_JUDGE_SYSTEM), Message(role="user", content=prompt)]
    try:
        reply = model.generate(messages, response_schema=VERDICT_SCHEMA, temperature=0.0, agent=FAILURE_JUDGE_AGENT)
        verdict = _parse(reply.message.content)
    except (ModelError, BudgetExceeded) as error:
        verdict = Verdict(mode=None, error=f"judge call failed: {error}")
    except ValueError as error:
        verdict = Verdict(mode=None, error=f"invalid judge reply ({error})")
    return verdict, recorder.finish("completed" if verdict.mode else "error", verdict.error)


def judge_failures(
    data: ReportData, traces: dict[UnitKey, Trace | None], judge: ModelConfig, out: Path
) -> JudgedFailures:
    """Judge every wrong answer not judged before (`out/judge/verdicts.jsonl`); the judge's traces go to
    `out/judge/`."""
    result = JudgedFailures(judge=judge)
    cache = VerdictCache(out / "judge" / "verdicts.jsonl")
    for record in data.records:
        if failure_mode(record) != "wrong answer":
            continue
        question, _ = data.question(record)
        prompt = _prompt(record, question, traces.get(record.key))
        key = VerdictCache.key(judge, record, prompt)
        known = cache.get(key)
        if known is not None:
            result.verdicts[record.key] = known
            result.cached += 1
            continue
        verdict, trace = _judge_one(judge, record, prompt)
        result.verdicts[record.key] = verdict
        if verdict.mode is not None:
            cache.put(key, verdict)
        usage = trace.usage()
        result.calls += len(trace.model_calls)
        result.usage = result.usage.plus(usage)  # a judge without a price: its cost is unknown, never $0
        name = f"{record.task_id.replace('/', '_')}.e{record.epoch}.json"
        write_json(out / "judge" / record.system / record.model.replace("/", "_") / name, trace.model_dump(mode="json"))
    return result


def judged_table(data: ReportData, judged: JudgedFailures) -> ReportTable:
    """Wrong answers per system × model by judged root cause."""
    columns = ["system", "model", "wrong answers", *JUDGED_MODES, "not judged"]
    title = "Why answers were wrong (LLM judge, the DataAgentBench paper's modes)"
    table = ReportTable(key="judged_failures", title=title, columns=columns)
    by_pair: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for record in data.records:
        verdict = judged.verdicts.get(record.key)
        if verdict is not None:
            by_pair[(record.system, record.model)][verdict.mode or "not judged"] += 1
    for (system, model), modes in sorted(by_pair.items()):
        total = sum(modes.values())
        cells: list[Cell] = [label(system), label(model), count(total, link_of(system, model, failure="wrong answer"))]
        for mode in [*JUDGED_MODES, "not judged"]:
            share = f" ({100 * modes[mode] / total:.0f}%)" if modes[mode] else ""
            link = link_of(system, model, judged=mode) if modes[mode] else None
            cells.append(Cell(text=f"{modes[mode]}{share}", value=float(modes[mode]), n=modes[mode], link=link))
        table.rows.append(cells)
    usage = judged.usage
    table.note = (
        f"Judged by {judged.judge.alias} (prompt {FAILURE_JUDGE_HASH}, temperature 0), metered apart from the "
        f"systems: {judged.calls} calls, {usage.input_tokens:,} input / {usage.output_tokens:,} output tokens, "
        + ("$– (unknown: no price)" if usage.cost_usd is None else f"${usage.cost_usd:.4f}")
        + "; its traces are in judge/. Not in any system's cost."
    )
    if judged.cached:
        table.note += f" {judged.cached} verdict(s) came from judge/verdicts.jsonl (judged before; nothing spent now)."
    return table
