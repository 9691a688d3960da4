"""Trajectory statistics (the DAB paper's Tables 5 and 6) for a benchmark that declares them
(`ReportTableSpec("trajectory_statistics", title)`), of runs of ours or imported.

Per trajectory (one trace): latency (its wall time), iterations (model calls), tool calls (answer calls
left out) split into database queries (`query_db` and `list_db`: both run against a database) and Python
executions (`execute_python`), the turns (model calls) that asked for two or more tools at once and the
largest number asked in one turn. Per system × model: the mean of each over its trajectories, the
DB:Python ratio of the totals, the share of turns with parallel calls, the largest burst of any turn,
and (Table 5) the share of tool calls that explore rather than analyse, by the report's one rule
(`failures.is_exploring`: `list_db`, catalogue introspection, a sample query `SELECT … FROM one table`
without a condition). Traces whose model calls carry no latency (published trials without
llm_calls.jsonl) still have their trial's wall time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ..core.benchmark import ReportTableSpec
from ..core.trace import Phase, Trace
from .cells import ReportTable, count, label, plain
from .failures import is_exploring
from .runs import ReportData

DB_TOOLS = {"query_db", "list_db"}
PYTHON_TOOLS = {"execute_python"}


@dataclass(frozen=True)
class TrajectoryStats:
    latency_s: float
    iterations: int
    tool_calls: int
    db_queries: int
    python_runs: int
    exploring: int
    turns: int
    parallel_turns: int
    largest_burst: int


def trajectory_stats(trace: Trace) -> TrajectoryStats:
    calls = [call for call in trace.tool_calls if call.phase != Phase.GENERATE]
    bursts = [len(call.tool_calls) for call in trace.model_calls]
    return TrajectoryStats(
        latency_s=trace.wall_time_s,
        iterations=len(trace.model_calls),
        tool_calls=len(calls),
        db_queries=sum(call.tool in DB_TOOLS for call in calls),
        python_runs=sum(call.tool in PYTHON_TOOLS for call in calls),
        exploring=sum(is_exploring(call.tool, call.arguments) for call in calls),
        turns=len(bursts),
        parallel_turns=sum(n >= 2 for n in bursts),
        largest_burst=max(bursts, default=0),
    )


def summarize(stats: list[TrajectoryStats]) -> dict[str, float | None]:
    """The Table 5/6 figures of one system × model's trajectories."""
    n = len(stats)
    db, python = sum(s.db_queries for s in stats), sum(s.python_runs for s in stats)
    turns, calls = sum(s.turns for s in stats), sum(s.tool_calls for s in stats)
    return {
        "trajectories": n,
        "latency_s": sum(s.latency_s for s in stats) / n,
        "iterations": sum(s.iterations for s in stats) / n,
        "tool_calls": calls / n,
        "db_queries": db / n,
        "python_runs": python / n,
        "db_python_ratio": db / python if python else None,
        "parallel_turn_share": sum(s.parallel_turns for s in stats) / turns if turns else None,
        "largest_burst": max(s.largest_burst for s in stats),
        "exploring_share": sum(s.exploring for s in stats) / calls if calls else None,
    }


def trajectory_table(
    data: ReportData, traces: dict[tuple, Trace | None], spec: ReportTableSpec
) -> ReportTable | None:
    """The trajectory statistics per system × model; None when no trace queried a database or ran Python."""
    groups: dict[tuple[str, str], list[TrajectoryStats]] = defaultdict(list)
    for record in data.records:
        trace = traces.get(record.key)
        if trace is not None and record.status != "data_unavailable":
            groups[(record.system, record.model)].append(trajectory_stats(trace))
    if not any(s.db_queries or s.python_runs for stats in groups.values() for s in stats):
        return None
    columns = ["system", "model", "trajectories", "latency s", "iterations", "tool calls", "DB queries"]
    columns += ["Python runs", "DB:Python", "parallel turns", "largest burst", "exploring share"]
    table = ReportTable(key="trajectories", title=spec.title, columns=columns)
    for (system, model), stats in sorted(groups.items()):
        s = summarize(stats)
        cells = [label(system), label(model), count(len(stats)), plain(s["latency_s"], 1), plain(s["iterations"], 1)]
        cells += [plain(s["tool_calls"], 1), plain(s["db_queries"], 1), plain(s["python_runs"], 1)]
        cells += [
            plain(s["db_python_ratio"], 2),
            plain(s["parallel_turn_share"], 3),
            count(int(s["largest_burst"] or 0)),
        ]
        cells.append(plain(s["exploring_share"], 3))
        table.rows.append(cells)
    table.note = (
        "Per trajectory, then the mean over trajectories. DB queries: query_db and list_db; Python runs: "
        "execute_python; answer calls are left out. DB:Python is the ratio of the totals; parallel turns the "
        "share of model calls asking for two or more tools at once; exploring share by the rule of the "
        "exploring table." + (f" {spec.note}" if spec.note else "")
    )
    return table
