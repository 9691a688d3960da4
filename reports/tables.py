"""The papers' tables, each only when the runs' benchmark supports it:

- overview: counts beside every mean (tasks, completed, errors, infrastructure errors, budget stops,
  unavailable, scoring errors), accuracy, cost, latency, model calls;
- by difficulty (FDABench Tables 3–5 on FDABench's runs): per system × difficulty, RS, TOS, EX_SC, EX_MC,
  SR, cost, external calls, latency;
- FDABench Table 6 / 7: accuracy per model × workflow and per workflow × difficulty;
- FDABench Table 8: latency by phase in seconds and percent;
- DAB Tables 3–6, DABstep easy/hard with cost, DBGorilla's metrics by argument count.

Every mean has its 95% bootstrap interval over tasks and its n; every cell links to its tasks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from ..compare.runlog import ResultRecord
from ..evaluators.dab import pass_at_k_table
from ..evaluators.dbgorilla import argument_bucket
from ..evaluators.statistics import bootstrap_ci
from .cells import Cell, ReportTable, count, has_score, label, link_of, mean_cell, plain, score
from .costs import amortised_cost_per_task, index_shares
from .runs import ReportData
from .summary import BUDGET_STATUSES, PHASES, correctness, index_builds

LEVEL_ORDER = {"easy": 0, "medium": 1, "hard": 2}
COMPONENTS_PREFIX = "component_exact_match."


def groups(records: list[ResultRecord], *keys: Callable[[ResultRecord], str | None]) -> dict[tuple, list]:
    out: dict[tuple, list[ResultRecord]] = defaultdict(list)
    for record in records:
        out[tuple(key(record) for key in keys)].append(record)
    return dict(sorted(out.items(), key=lambda item: tuple(_order(v) for v in item[0])))


def _order(value: str | None) -> tuple[int, str]:
    return (LEVEL_ORDER.get(value or "", 9), value or "")


def levels(records: list[ResultRecord]) -> list[str]:
    return sorted({r.level for r in records if r.level}, key=_order)


def _system(r: ResultRecord) -> str:
    return r.system


def _model(r: ResultRecord) -> str:
    return r.model


def _cost(r: ResultRecord) -> float:
    return r.usage.cost_usd


def _latency(r: ResultRecord) -> float:
    return r.latency_s


def _calls(r: ResultRecord) -> float:
    return r.model_calls


def _paper(data: ReportData, tables: str) -> str:
    """The FDABench paper's table numbers, named only on FDABench's own runs."""
    return f" (FDABench {tables})" if data.benchmark == "fdabench" else ""


def overview(data: ReportData) -> ReportTable:
    """One row per system × model: the counts beside the headline means."""
    flags = {"infra_errors_as_failures": data.infra_errors_as_failures}
    columns = ["system", "model", "tasks", "completed", "errors", "refused requests", "infra errors", "budget stops"]
    columns += ["unavailable"]
    columns += ["scoring errors", "accuracy [95% CI]", "cost $/task [95% CI]", "cost $/task incl. index"]
    columns += ["latency s [95% CI]", "model calls"]
    table = ReportTable(key="overview", title="Overview: every system × model", columns=columns)
    by_pair, shares = groups(data.records, _system, _model), index_shares(data)
    for row in data.summary():
        rows, link = by_pair[(row.system, row.model)], link_of(row.system, row.model)
        table.rows.append(
            [
                label(row.system, link),
                label(row.model, link),
                count(row.tasks, link),
                count(row.completed, {**link, "status": "completed"}),
                count(row.errors, {**link, "status": "error"}),
                count(row.refused, {**link, "failure": "request refused"}),
                count(row.infra_errors, {**link, "status": "infra_error"}),
                count(row.stopped_by_budget, {**link, "failure": "budget stop"}),
                count(row.unavailable, {**link, "status": "data_unavailable"}),
                count(row.scoring_errors, link),
                mean_cell(rows, correctness, quality=True, link=link, **flags),
                mean_cell(rows, _cost, quality=False, digits=4, link=link, with_n=False, **flags),
                plain(amortised_cost_per_task(row, shares), 4),  # index building amortised (reports/costs.py)
                mean_cell(rows, _latency, quality=False, digits=2, link=link, with_n=False, **flags),
                mean_cell(rows, _calls, quality=False, digits=1, link=link, with_n=False, **flags),
            ]
        )
    return table


def _exact_by_type(question_type: str) -> Callable[[ResultRecord], float | None]:
    return lambda r: r.scores.get("exact_match") if r.question_type == question_type else None


# (column, metric, is it a quality metric, digits, is it present in these records)
def _difficulty_metrics(records: list[ResultRecord]) -> list[tuple[str, Callable, bool, int]]:
    candidates = [
        ("RS", score("rs"), True, 3, has_score(records, "rs")),
        ("TOS", score("tos"), True, 3, has_score(records, "tos")),
        ("tool coverage", score("coverage"), True, 3, has_score(records, "coverage")),  # beside TOS (evaluators/dag.py)
        ("EX_SC", _exact_by_type("single_choice"), True, 3, any(r.question_type == "single_choice" for r in records)),
        (
            "EX_MC",
            _exact_by_type("multiple_choice"),
            True,
            3,
            any(r.question_type == "multiple_choice" for r in records),
        ),
        ("EX", correctness, True, 3, any(correctness(r) is not None for r in records)),
        ("SR", score("sr"), True, 3, has_score(records, "sr")),
        ("cost $/task", _cost, False, 4, True),
        ("external calls", _calls, False, 1, True),
        ("latency s", _latency, False, 2, True),
    ]
    return [(name, metric, quality, digits) for name, metric, quality, digits, present in candidates if present]


def by_difficulty(data: ReportData) -> ReportTable | None:
    """FDABench Tables 3–5: one row per system × model × difficulty."""
    if not levels(data.records):
        return None
    metrics = _difficulty_metrics(data.records)
    columns = ["system", "model", "difficulty", "tasks", *[name for name, *_ in metrics]]
    table = ReportTable(key="difficulty", title="By difficulty" + _paper(data, "Tables 3–5"), columns=columns)
    flags = {"infra_errors_as_failures": data.infra_errors_as_failures}
    for (system, model, level), rows in groups(data.records, _system, _model, lambda r: r.level).items():
        link = link_of(system, model, level=level)
        cells = [label(system), label(model), label(level or "–", link), count(len({r.task_id for r in rows}), link)]
        cells += [
            mean_cell(rows, metric, quality=quality, digits=digits, link=link, with_n=quality, **flags)
            for _, metric, quality, digits in metrics
        ]
        table.rows.append(cells)
    table.note = "EX_SC / EX_MC: exact match on single- / multiple-choice tasks; external calls: model calls per task."
    return table


def model_by_workflow(data: ReportData) -> ReportTable | None:
    """FDABench Table 6: accuracy of every workflow (row) with every model (column)."""
    models = sorted({r.model for r in data.records})
    systems = sorted({r.system for r in data.records})
    if len(models) < 2 or not any(correctness(r) is not None for r in data.records):
        return None
    table = ReportTable(
        key="model_workflow",
        title="Accuracy per model × workflow" + _paper(data, "Table 6"),
        columns=["workflow", *models],
    )
    by_pair = groups(data.records, _system, _model)
    for system in systems:
        cells = [label(system, {"system": system})]
        for model in models:
            rows = by_pair.get((system, model), [])
            cells.append(_accuracy(rows, data, link_of(system, model)))
        table.rows.append(cells)
    return table


def _accuracy(rows: list[ResultRecord], data: ReportData, link: dict[str, str]) -> Cell:
    return mean_cell(rows, correctness, quality=True, infra_errors_as_failures=data.infra_errors_as_failures, link=link)


def workflow_by_difficulty(data: ReportData) -> ReportTable | None:
    """FDABench Table 7: accuracy of every workflow × model (row) at every difficulty (column)."""
    found = levels(data.records)
    if len(found) < 2 or not any(correctness(r) is not None for r in data.records):
        return None
    table = ReportTable(
        key="workflow_difficulty",
        title="Accuracy per workflow × difficulty" + _paper(data, "Table 7"),
        columns=["workflow", "model", *found],
    )
    by_level = groups(data.records, _system, _model, lambda r: r.level)
    for system, model in data.pairs():
        cells = [label(system), label(model, link_of(system, model))]
        for level in found:
            rows = by_level.get((system, model, level), [])
            cells.append(_accuracy(rows, data, link_of(system, model, level=level)))
        table.rows.append(cells)
    return table


def phase_latency(data: ReportData) -> ReportTable:
    """FDABench Table 8: mean seconds per task in each phase, and its share of the wall time."""
    summary = data.summary()
    columns = ["system", "model", *PHASES, "total s"]
    table = ReportTable(key="phases", title="Latency by phase: seconds per task (share)", columns=columns)
    for row in summary:
        link = link_of(row.system, row.model)
        total = sum(row.mean_latency_by_phase_s.values())
        cells = [label(row.system), label(row.model, link)]
        for phase in PHASES:
            seconds = row.mean_latency_by_phase_s[phase]
            share = f" ({100 * seconds / total:.1f}%)" if total else ""
            cells.append(Cell(text=f"{seconds:.3f}{share}", value=seconds, link=link))
        cells.append(plain(total, 3, link))
        table.rows.append(cells)
    table.note = "queue: waiting for the model; other: wall time in no model or tool call. Phases add up to the total."
    return table


# ---------------------------------------------------------------- DAB


def _tool_count(*names: str) -> Callable[[ResultRecord], float]:
    return lambda r: float(sum(call.tool in names for call in r.tool_calls))


def dab_pass_at_k(data: ReportData) -> ReportTable:
    """DAB Tables 3–4: pass@k per dataset, and the stratified average (datasets weighted equally)."""
    rows_by_pair = groups(data.records, _system, _model)
    tables = {pair: pass_at_k_table([r.model_dump() for r in rows]) for pair, rows in rows_by_pair.items()}
    ks = sorted({k for t in tables.values() for k in t.ks})
    datasets = sorted({d for t in tables.values() for d in t.datasets})
    columns = ["system", "model", "dataset", "queries", *[f"pass@{k}" for k in ks]]
    table = ReportTable(key="dab_pass", title="DAB pass@k per dataset and stratified average", columns=columns)
    for (system, model), result in tables.items():
        for dataset in [*datasets, "stratified average"]:
            queries = [q for q in result.queries if q.dataset == dataset]
            link = link_of(system, model, task=f"{dataset}/" if queries else None)
            cells = [label(system), label(model), label(dataset, link), count(len(queries) or len(result.queries))]
            for k in ks:
                cells.append(_pass_cell(result, queries, dataset, k, link))
            table.rows.append(cells)
    table.note = (
        "pass@k: the unbiased estimator over each query's trials (DAB's rule: every failed trial counts). "
        "The stratified average weighs datasets equally; its interval resamples queries within their dataset."
    )
    return table


def _pass_cell(result, queries, dataset: str, k: int, link: dict[str, str]) -> Cell:
    if dataset == "stratified average":
        if k not in result.overall:
            return Cell(text="–")
        mean, low, high = result.overall_ci(k)
        values = result.queries
    else:
        values = [q.pass_at[k] for q in queries if k in q.pass_at]
        if not values:
            return Cell(text="–")
        mean, low, high = bootstrap_ci(values)
    interval = "" if low != low else f" [{low:.3f}, {high:.3f}]"
    return Cell(text=f"{mean:.3f}{interval} (n={len(values)})", value=mean, n=len(values), link=link)


def dab_trajectories(data: ReportData) -> ReportTable:
    """DAB Tables 5–6: per trajectory, latency, iterations, tool calls, DB queries and Python executions."""
    metrics = [
        ("latency s", _latency, 2),
        ("iterations", _calls, 1),
        ("tool calls", lambda r: float(len(r.tool_calls)), 1),
        ("DB queries", _tool_count("query_db", "execute_sql"), 1),
        ("Python executions", _tool_count("execute_python"), 1),
        ("cost $", _cost, 4),
    ]
    columns = ["system", "model", "trials", *[name for name, *_ in metrics]]
    table = ReportTable(key="dab_trajectory", title="DAB: per trajectory (mean [95% CI])", columns=columns)
    flags = {"infra_errors_as_failures": data.infra_errors_as_failures}
    for (system, model), rows in groups(data.records, _system, _model).items():
        link = link_of(system, model)
        cells = [label(system), label(model, link), count(len(rows), link)]
        cells += [mean_cell(rows, m, quality=False, digits=d, link=link, with_n=False, **flags) for _, m, d in metrics]
        table.rows.append(cells)
    return table


# ---------------------------------------------------------------- DABstep


def dabstep_accuracy(data: ReportData) -> ReportTable:
    """DABstep: accuracy on easy and hard tasks, with cost."""
    found = levels(data.records) or ["easy", "hard"]
    columns = ["system", "model", *[f"{level} accuracy" for level in found], "cost $/task", "total cost $"]
    table = ReportTable(key="dabstep", title="DABstep accuracy by level, with cost", columns=columns)
    flags = {"infra_errors_as_failures": data.infra_errors_as_failures}
    for (system, model), rows in groups(data.records, _system, _model).items():
        cells = [label(system), label(model, link_of(system, model))]
        for level in found:
            link = link_of(system, model, level=level)
            cells.append(
                mean_cell([r for r in rows if r.level == level], correctness, quality=True, link=link, **flags)
            )
        cells.append(mean_cell(rows, _cost, quality=False, digits=4, with_n=False, **flags))
        cells.append(plain(sum(r.usage.cost_usd for r in rows), 4))
        table.rows.append(cells)
    return table


# ---------------------------------------------------------------- DBGorilla


def _components(records: list[ResultRecord]) -> list[str]:
    return sorted({name for r in records for name in r.scores if name.startswith(COMPONENTS_PREFIX)})


def _argument_bucket(record: ResultRecord) -> str:
    """The gold call's argument count, read from which components the scorer judged (None: not in gold)."""
    present = sum(value is not None for name, value in record.scores.items() if name.startswith(COMPONENTS_PREFIX))
    return argument_bucket(present)


def dbgorilla_metrics(data: ReportData) -> ReportTable:
    """DBGorilla: AST, exact match, routing, no-tool-call rate and exact match per component."""
    components = _components(data.records)
    metrics = ["ast_score", "exact_match", "collection_routing", "no_tool_call", *components]
    names = [m.removeprefix(COMPONENTS_PREFIX) + (" EM" if m.startswith(COMPONENTS_PREFIX) else "") for m in metrics]
    table = ReportTable(key="dbgorilla", title="DBGorilla metrics (mean [95% CI])", columns=["system", "model", *names])
    flags = {"infra_errors_as_failures": data.infra_errors_as_failures}
    for (system, model), rows in groups(data.records, _system, _model).items():
        link = link_of(system, model)
        cells = [label(system), label(model, link)]
        cells += [mean_cell(rows, score(m), quality=True, link=link, **flags) for m in metrics]
        table.rows.append(cells)
    table.note = "Per-component EM is over the queries whose gold has that component; no_tool_call is a rate."
    return table


def dbgorilla_by_arguments(data: ReportData) -> ReportTable:
    columns = ["system", "model", "gold arguments", "queries", "AST", "exact match"]
    table = ReportTable(key="dbgorilla_args", title="DBGorilla by number of gold arguments", columns=columns)
    flags = {"infra_errors_as_failures": data.infra_errors_as_failures}
    for (system, model, bucket), rows in groups(data.records, _system, _model, _argument_bucket).items():
        link = link_of(system, model)
        cells = [label(system), label(model, link), label(bucket), count(len({r.task_id for r in rows}))]
        cells += [mean_cell(rows, score(m), quality=True, link=link, **flags) for m in ("ast_score", "exact_match")]
        table.rows.append(cells)
    return table


def indexing(data: ReportData) -> ReportTable | None:
    """The indexes the systems built (or read from the cache) before the tasks, per run; None without any."""
    columns = ["run", "system", "model", "index", "corpus", "passages", "cached", "model calls"]
    columns += ["input tokens", "output tokens", "cost $", "seconds"]
    note = "Built before any task's clock and metered apart: not in the per-task means. Add them to compare totals."
    table = ReportTable(key="indexing", title="Index building (RAG)", columns=columns, note=note)
    for run in data.runs:
        for b in index_builds(run.manifest):
            table.rows.append(
                [
                    label(run.run_dir.name),
                    label(b.system),
                    label(b.model),
                    label(b.index),
                    label(b.corpus),
                    plain(None if b.passages is None else float(b.passages), 0),
                    label(b.state),
                    plain(float(b.model_calls), 0),
                    plain(float(b.input_tokens), 0),
                    plain(float(b.output_tokens), 0),
                    plain(b.cost_usd, 4),
                    plain(b.seconds, 1),
                ]
            )
    return table if table.rows else None


def budget_stops(records: list[ResultRecord]) -> int:
    return sum(r.status in BUDGET_STATUSES for r in records)


def benchmark_tables(data: ReportData) -> list[ReportTable]:
    """The tables this benchmark's records support, in the papers' order."""
    tables: list[ReportTable | None] = [overview(data)]
    if data.benchmark == "dab":
        tables += [dab_pass_at_k(data), dab_trajectories(data)]
    elif data.benchmark == "dabstep":
        tables += [dabstep_accuracy(data)]
    elif data.benchmark == "dbgorilla":
        tables += [dbgorilla_metrics(data), dbgorilla_by_arguments(data)]
    else:
        tables += [by_difficulty(data), model_by_workflow(data), workflow_by_difficulty(data)]
    tables.append(phase_latency(data))
    return [table for table in tables if table is not None]


# ---------------------------------------------------------------- across benchmarks

PRIMARY_METRICS = {"dbgorilla": ("AST", "ast_score")}  # else the correctness metric (exact match / correct)


def primary_metric(benchmark: str) -> tuple[str, Callable[[ResultRecord], float | None]]:
    """The benchmark's headline metric: its name and how to read it from a record."""
    if benchmark in PRIMARY_METRICS:
        name, key = PRIMARY_METRICS[benchmark]
        return name, score(key)
    return ("accuracy", correctness)


def across_benchmarks(parts: list[ReportData]) -> ReportTable:
    """One row per system × model × benchmark: the benchmark's primary metric [95% CI] (n), cost, latency."""
    columns = ["system", "model", "benchmark", "metric", "value [95% CI] (n)", "tasks"]
    columns += ["cost $/task [95% CI]", "latency s [95% CI]", "total cost $"]
    table = ReportTable(key="overview", title="Overview: every system × model × benchmark", columns=columns)
    rows = []
    for part in parts:
        name, metric = primary_metric(part.benchmark)
        flags = {"infra_errors_as_failures": part.infra_errors_as_failures}
        for (system, model), records in groups(part.records, _system, _model).items():
            link = link_of(system, model)
            rows.append(
                [
                    label(system, link),
                    label(model, link),
                    label(part.benchmark),
                    label(name),
                    mean_cell(records, metric, quality=True, link=link, **flags),
                    count(len({r.task_id for r in records}), link),
                    mean_cell(records, _cost, quality=False, digits=4, link=link, with_n=False, **flags),
                    mean_cell(records, _latency, quality=False, digits=2, link=link, with_n=False, **flags),
                    plain(sum(r.usage.cost_usd for r in records), 4),
                ]
            )
    table.rows = sorted(rows, key=lambda row: (row[0].text, row[1].text, row[2].text))
    table.note = "Each benchmark's own metric and tasks; compare rows across benchmarks by rank, not by value."
    return table
