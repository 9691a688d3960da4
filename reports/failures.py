"""How systems fail, read from the record and its trace (the analysis the DAB paper does by hand):

- one failure mode per record, the first that applies: unavailable, provider error (infra_error), no
  verdict (a status the quality means leave out), runtime error (the system raised), request refused (the
  provider refused what the system sent: context overflow, output limit, invalid request), budget stop, correct,
  no tool call (the system answered, or gave up, without calling any tool), malformed answer (nothing
  usable: no choice letters, an empty or refused answer, a malformed call), unscored (no correctness
  metric, e.g. a report without --judge), wrong answer;
- the share of tool calls spent exploring (schema listing, introspection, sample queries) rather than
  analysing, per system; answer tools count as neither;
- the tool-usage profile: calls per tool and their error rate.

DAB's judged modes of wrong answers (incorrect plan / data selection / implementation) need an LLM judge:
`judged.py` (`compare report --judge MODEL`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from ..core.model import REQUEST_FAULTS
from ..core.runlog import ResultRecord
from ..core.trace import Phase, Trace
from .cells import Cell, ReportTable, count, label, link_of, plain
from .runs import ReportData
from .summary import BUDGET_STATUSES, correctness, judged

MODES = (
    "correct",
    "wrong answer",
    "malformed answer",
    "no tool call",
    "budget stop",
    "request refused",
    "runtime error",
    "provider error",
    "unscored",
    "no verdict",
    "unavailable",
)

EXPLORING_TOOLS = {"get_schema_info", "list_db", "list_files"}  # listing what is there
SQL_TOOLS = {"execute_sql", "query_db"}
_INTROSPECTION = re.compile(
    r"\b(sqlite_master|sqlite_schema|information_schema|pg_catalog|pragma|describe|show\s+tables)\b", re.I
)
_NAME = r"(?:\"[^\"]+\"|`[^`]+`|[\w.]+)"  # a bare, "quoted" or `quoted` name
_SAMPLE = re.compile(rf"^\s*select\s+(\*|{_NAME}(\s*,\s*{_NAME})*)\s+from\s+{_NAME}\s*(limit\s+\d+)?\s*;?\s*$", re.I)


def failure_mode(record: ResultRecord) -> str:
    """The first mode that applies, in the order of the module docstring."""
    status = record.status
    if status == "data_unavailable":
        return "unavailable"
    if status == "infra_error":
        return "provider error"
    if not judged([record], infra_errors_as_failures=True):
        return "no verdict"  # a status the quality means leave out (e.g. a replay miss): no verdict on the system
    if status == "error":
        return "runtime error"
    if status in REQUEST_FAULTS.values():
        return "request refused"
    if status in BUDGET_STATUSES:
        return "budget stop"
    verdict = correctness(record)
    if verdict is not None and verdict >= 1.0:
        return "correct"  # also without a tool call: a right answer is no failure
    if status == "no_tool_call" or not record.tool_calls:
        return "no tool call"
    if status == "no_answer" or _malformed(record):
        return "malformed answer"
    return "unscored" if verdict is None else "wrong answer"


def _malformed(record: ResultRecord) -> bool:
    answer = record.answer
    if record.scores.get("malformed_call"):
        return True
    if record.question_type in ("single_choice", "multiple_choice"):
        return not answer.get("choices")
    if record.question_type == "function_call":
        return not answer.get("tool_call")
    return not str(answer.get("text") or answer.get("report") or "").strip()


def failure_table(data: ReportData) -> ReportTable:
    """Records of each failure mode per system × model (share of its records in brackets)."""
    columns = ["system", "model", "records", *MODES]
    table = ReportTable(key="failures", title="Failure modes (automatic, from the record)", columns=columns)
    by_pair: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for record in data.records:
        by_pair[(record.system, record.model)][failure_mode(record)] += 1
    for (system, model), modes in sorted(by_pair.items()):
        total = sum(modes.values())
        cells = [label(system), label(model, link_of(system, model)), count(total)]
        for mode in MODES:
            link = link_of(system, model, failure=mode) if modes[mode] else None
            text = f"{modes[mode]} ({100 * modes[mode] / total:.0f}%)" if modes[mode] else "0"
            cells.append(Cell(text=text, value=float(modes[mode]), n=modes[mode], link=link))
        table.rows.append(cells)
    table.note = (
        "One mode per record, the first that applies: provider error, runtime error, budget stop, correct, no tool "
        "call, malformed answer, wrong answer. `compare report --judge MODEL` adds judged modes "
        "of wrong answers (the DataAgentBench paper's)."
    )
    return table


def is_exploring(tool: str, arguments: dict) -> bool:
    """Schema listing, catalogue introspection, or a sample query (SELECT … FROM one table, no condition)."""
    if tool in EXPLORING_TOOLS:
        return True
    if tool not in SQL_TOOLS:
        return False
    query = str(arguments.get("sql") or arguments.get("query") or "")
    return bool(_INTROSPECTION.search(query) or _SAMPLE.match(query))


def exploring_calls(trace: Trace) -> tuple[int, int]:
    """(exploring, all tool calls but answers) of one trace."""
    calls = [call for call in trace.tool_calls if call.phase != Phase.GENERATE]
    return sum(is_exploring(call.tool, call.arguments) for call in calls), len(calls)


def exploring_table(data: ReportData, traces: dict[tuple, Trace | None]) -> ReportTable:
    """Share of tool calls spent exploring versus analysing, per system × model."""
    columns = ["system", "model", "tool calls", "exploring", "analysing", "exploring share"]
    table = ReportTable(key="exploring", title="Exploring vs analysing tool calls", columns=columns)
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for record in data.records:
        trace = traces.get(record.key)
        if trace is not None:
            explored, calls = exploring_calls(trace)
            totals[(record.system, record.model)][0] += explored
            totals[(record.system, record.model)][1] += calls
    for (system, model), (explored, calls) in sorted(totals.items()):
        link = link_of(system, model)
        share = explored / calls if calls else None
        cells = [label(system), label(model, link), count(calls), count(explored), count(calls - explored)]
        cells.append(plain(share, 3))
        table.rows.append(cells)
    table.note = (
        "Exploring: schema/table listing, catalogue introspection and sample queries (SELECT from one table "
        "without a condition); answer calls count as neither. The DataAgentBench paper found the best agents near 0.2."
    )
    return table


def tool_profile(data: ReportData) -> ReportTable:
    """Calls per tool, per task, failures and error rate, per system × model."""
    columns = ["system", "model", "tool", "calls", "calls/task", "failed", "error rate", "mean s"]
    table = ReportTable(key="tools", title="Tool usage profile", columns=columns)
    stats: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0, 0, 0.0])
    tasks: Counter[tuple[str, str]] = Counter()
    for record in data.records:
        if record.status == "data_unavailable":
            continue
        tasks[(record.system, record.model)] += 1
        for call in record.tool_calls:
            entry = stats[(record.system, record.model, call.tool)]
            entry[0] += 1
            entry[1] += not call.success
            entry[2] += call.duration_s
    for (system, model, tool), (calls, failed, seconds) in sorted(stats.items()):
        link = link_of(system, model)
        cells = [label(system), label(model, link), label(tool), count(int(calls))]
        cells += [plain(calls / tasks[(system, model)], 2), count(int(failed)), plain(failed / calls, 3)]
        cells.append(plain(seconds / calls, 3))
        table.rows.append(cells)
    return table
