"""The comparison report's tables. Every benchmark gets the overview and the latency by phase; the rest are the
tables its Benchmark declares (`Benchmark.report_tables`: a kind of table, its title and metrics), built by the
kinds here, so the reports name no benchmark and a plug-in's declarations are honoured like a built-in's:

- metrics: means of the declared metrics (a family of scores expands to one column per score);
- by_difficulty: per system × difficulty, the declared metrics (those present) with cost, calls, latency;
- model_by_workflow / workflow_by_difficulty: accuracy per model × workflow, per workflow × difficulty;
- pass_at_k: pass@k per dataset (the task id before its last "/") and the stratified average;
- per_trajectory: latency, iterations, tool calls, database queries, Python runs and cost per trajectory;
- trajectory_statistics: the trajectory table of `reports.trajectories` (needs the traces);
- accuracy_by_level_with_cost: accuracy per level, with cost;
- by_argument_count: the declared metrics by how many scores of the first metric's family a record has.

Every mean has its 95% bootstrap interval over tasks and its n; every cell links to its tasks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from ..core.benchmark import ReportMetric, ReportTableSpec, benchmark_class
from ..core.runlog import ResultRecord
from ..evaluators.dab import pass_at_k_table
from ..evaluators.statistics import bootstrap_ci
from .cells import Cell, ReportTable, count, expand, label, link_of, mean_cell, plain, present, reader
from .costs import SHARED_RULE, amortised_cost_per_task, index_shares
from .runs import ReportData
from .summary import PHASES, correctness, index_builds

LEVEL_ORDER = {"easy": 0, "medium": 1, "hard": 2}


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


def _cost(r: ResultRecord) -> float | None:
    return r.usage.cost_usd  # None: nobody recorded it (left out of the mean, which says its n)


def _some_unknown(records: list[ResultRecord]) -> bool:
    """Some unit's cost is unknown: the cost mean then says its n (the tasks whose cost is known)."""
    return any(r.usage.cost_usd is None for r in records)


def known_total(records: list[ResultRecord]) -> float | None:
    """The units' total cost; None (unknown) when any unit's cost is unknown."""
    costs = [r.usage.cost_usd for r in records]
    return None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)


def _latency(r: ResultRecord) -> float:
    return r.latency_s


def _calls(r: ResultRecord) -> float:
    return r.model_calls


def overview(data: ReportData) -> ReportTable:
    """One row per system × model: the counts beside the headline means."""
    flags = {"infra_errors_as_failures": data.infra_errors_as_failures}
    columns = ["system", "model", "tasks", "units", "completed", "errors", "refused requests", "infra errors"]
    columns += ["budget stops", "unavailable"]
    columns += ["scoring errors", "warnings", "accuracy [95% CI]", "cost $/task [95% CI]", "cost $/task incl. index"]
    columns += ["latency s [95% CI]", "model calls"]
    note = f"cost $/task incl. index: index building spread over the row's tasks; {SHARED_RULE}."
    table = ReportTable(key="overview", title="Overview: every system × model", columns=columns, note=note)
    by_pair, shares = groups(data.records, _system, _model), index_shares(data)
    for row in data.summary():
        rows, link = by_pair[(row.system, row.model)], link_of(row.system, row.model)
        table.rows.append(
            [
                label(row.system, link),
                label(row.model, link),
                count(row.tasks, link),
                count(row.units, link),
                count(row.completed, {**link, "status": "completed"}),
                count(row.errors, {**link, "status": "error"}),
                count(row.refused, {**link, "failure": "request refused"}),
                count(row.infra_errors, {**link, "status": "infra_error"}),
                count(row.stopped_by_budget, {**link, "failure": "budget stop"}),
                count(row.unavailable, {**link, "status": "data_unavailable"}),
                count(row.scoring_errors, link),
                count(sum(row.warnings.values()), link),
                mean_cell(rows, correctness, quality=True, link=link, **flags),
                mean_cell(rows, _cost, quality=False, digits=4, link=link, with_n=_some_unknown(rows), **flags),
                plain(amortised_cost_per_task(row, shares), 4),  # index building amortised (reports/costs.py)
                mean_cell(rows, _latency, quality=False, digits=2, link=link, with_n=False, **flags),
                mean_cell(rows, _calls, quality=False, digits=1, link=link, with_n=False, **flags),
            ]
        )
    return table


def by_difficulty(data: ReportData, spec: ReportTableSpec) -> ReportTable | None:
    """One row per system × model × difficulty: the spec's metrics that these records carry (the primary
    metric when it names none), then cost, model calls and latency."""
    if not levels(data.records):
        return None
    declared = expand(spec.metrics or (benchmark_class(data.benchmark).primary_metric,), data.records)
    shown = [m for m in declared if present(m, data.records)]
    metrics = [(m.title, reader(m), True, m.digits) for m in shown]
    metrics += [("cost $/task", _cost, False, 4), ("external calls", _calls, False, 1)]
    metrics += [("latency s", _latency, False, 2)]
    columns = ["system", "model", "difficulty", "tasks", *[name for name, *_ in metrics]]
    table = ReportTable(key="difficulty", title=spec.title, columns=columns)
    flags = {"infra_errors_as_failures": data.infra_errors_as_failures}
    for (system, model, level), rows in groups(data.records, _system, _model, lambda r: r.level).items():
        link = link_of(system, model, level=level)
        cells = [label(system), label(model), label(level or "–", link), count(len({r.task_id for r in rows}), link)]
        with_n = _some_unknown(rows)  # a mean over the known costs says its n
        cells += [
            mean_cell(rows, metric, quality=quality, digits=digits, link=link, with_n=quality or with_n, **flags)
            for _, metric, quality, digits in metrics
        ]
        table.rows.append(cells)
    table.note = spec.note or "external calls: model calls per task."
    return table


def model_by_workflow(data: ReportData, spec: ReportTableSpec) -> ReportTable | None:
    """Accuracy of every workflow (row) with every model (column)."""
    models = sorted({r.model for r in data.records})
    systems = sorted({r.system for r in data.records})
    if len(models) < 2 or not any(correctness(r) is not None for r in data.records):
        return None
    table = ReportTable(
        key="model_workflow",
        title=spec.title,
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


def workflow_by_difficulty(data: ReportData, spec: ReportTableSpec) -> ReportTable | None:
    """Accuracy of every workflow × model (row) at every difficulty (column)."""
    found = levels(data.records)
    if len(found) < 2 or not any(correctness(r) is not None for r in data.records):
        return None
    table = ReportTable(
        key="workflow_difficulty",
        title=spec.title,
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
    """Mean seconds per task in each phase, and its share of the wall time (FDABench's Table 8 for any run)."""
    summary = data.summary()
    columns = ["system", "model", *PHASES, "total s"]
    table = ReportTable(key="phases", title="Latency by phase: seconds per task (share)", columns=columns)
    for row in summary:
        link = link_of(row.system, row.model)
        timed = [v for v in row.mean_latency_by_phase_s.values() if v is not None]
        total = sum(timed) if timed else None
        cells = [label(row.system), label(row.model, link)]
        for phase in PHASES:
            seconds = row.mean_latency_by_phase_s[phase]
            if seconds is None:
                cells.append(Cell(text="–", link=link))
                continue
            share = f" ({100 * seconds / total:.1f}%)" if total else ""
            cells.append(Cell(text=f"{seconds:.3f}{share}", value=seconds, link=link))
        cells.append(plain(total, 3, link))
        table.rows.append(cells)
    table.note = (
        "queue: waiting for the model; other: wall time in no model or tool call. Phases add up to the total. "
        "–: the steps' times were not recorded (unknown)."
    )
    return table


# ---------------------------------------------------------------- pass@k and trajectories


def _tool_count(*names: str) -> Callable[[ResultRecord], float]:
    return lambda r: float(sum(call.tool in names for call in r.tool_calls))


def pass_at_k(data: ReportData, spec: ReportTableSpec) -> ReportTable:
    """pass@k per dataset (a task id's part before its last "/"), and the stratified average (datasets
    weighted equally)."""
    rows_by_pair = groups(data.records, _system, _model)
    tables = {pair: pass_at_k_table([r.model_dump() for r in rows]) for pair, rows in rows_by_pair.items()}
    ks = sorted({k for t in tables.values() for k in t.ks})
    datasets = sorted({d for t in tables.values() for d in t.datasets})
    columns = ["system", "model", "dataset", "queries", *[f"pass@{k}" for k in ks]]
    table = ReportTable(key="pass_at_k", title=spec.title, columns=columns)
    for (system, model), result in tables.items():
        for dataset in [*datasets, "stratified average"]:
            queries = [q for q in result.queries if q.dataset == dataset]
            link = link_of(system, model, task=f"{dataset}/" if queries else None)
            cells = [label(system), label(model), label(dataset, link), count(len(queries) or len(result.queries))]
            for k in ks:
                cells.append(_pass_cell(result, queries, dataset, k, link))
            table.rows.append(cells)
    table.note = spec.note or (
        "pass@k: the unbiased estimator over each query's trials (every failed trial counts). "
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


def per_trajectory(data: ReportData, spec: ReportTableSpec) -> ReportTable:
    """Per trajectory: latency, iterations, tool calls, database queries, Python executions and cost."""
    metrics = [
        ("latency s", _latency, 2),
        ("iterations", _calls, 1),
        ("tool calls", lambda r: float(len(r.tool_calls)), 1),
        ("DB queries", _tool_count("query_db", "execute_sql"), 1),
        ("Python executions", _tool_count("execute_python"), 1),
        ("cost $", _cost, 4),
    ]
    columns = ["system", "model", "trials", *[name for name, *_ in metrics]]
    table = ReportTable(key="per_trajectory", title=spec.title, columns=columns, note=spec.note)
    flags = {"infra_errors_as_failures": data.infra_errors_as_failures}
    for (system, model), rows in groups(data.records, _system, _model).items():
        link = link_of(system, model)
        cells = [label(system), label(model, link), count(len(rows), link)]
        cells += [
            mean_cell(rows, m, quality=False, digits=d, link=link, with_n=m is _cost and _some_unknown(rows), **flags)
            for _, m, d in metrics
        ]
        table.rows.append(cells)
    return table


# ---------------------------------------------------------------- by level, by argument count


def accuracy_by_level_with_cost(data: ReportData, spec: ReportTableSpec) -> ReportTable:
    """Accuracy on each level's tasks (easy and hard when none is named), with cost."""
    found = levels(data.records) or ["easy", "hard"]
    columns = ["system", "model", *[f"{level} accuracy" for level in found], "cost $/task", "total cost $"]
    table = ReportTable(key="accuracy_by_level", title=spec.title, columns=columns, note=spec.note)
    flags = {"infra_errors_as_failures": data.infra_errors_as_failures}
    for (system, model), rows in groups(data.records, _system, _model).items():
        cells = [label(system), label(model, link_of(system, model))]
        for level in found:
            link = link_of(system, model, level=level)
            cells.append(
                mean_cell([r for r in rows if r.level == level], correctness, quality=True, link=link, **flags)
            )
        cells.append(mean_cell(rows, _cost, quality=False, digits=4, with_n=_some_unknown(rows), **flags))
        cells.append(plain(known_total(rows), 4))
        table.rows.append(cells)
    return table


def metrics(data: ReportData, spec: ReportTableSpec) -> ReportTable:
    """Means of the spec's metrics (a family expanded to a column per score) per system × model."""
    declared = expand(spec.metrics, data.records)
    table = ReportTable(key="metrics", title=spec.title, columns=["system", "model", *[m.title for m in declared]])
    flags = {"infra_errors_as_failures": data.infra_errors_as_failures}
    for (system, model), rows in groups(data.records, _system, _model).items():
        link = link_of(system, model)
        cells = [label(system), label(model, link)]
        cells += [mean_cell(rows, reader(m), quality=True, digits=m.digits, link=link, **flags) for m in declared]
        table.rows.append(cells)
    table.note = spec.note
    return table


def _bucket_of(family: tuple[str, ...]) -> Callable[[ResultRecord], str]:
    """How many scores of the family a record has a verdict for (3 and more in one bucket)."""

    def bucket(record: ResultRecord) -> str:
        found = sum(v is not None for n, v in record.scores.items() if any(n.startswith(f) for f in family))
        return "3+" if found >= 3 else str(found)

    return bucket


def by_argument_count(data: ReportData, spec: ReportTableSpec) -> ReportTable | None:
    """The spec's metrics (after the first, the family that counts) by how many scores of that family each
    record has: e.g. a function call's gold arguments, read from which components its scorer judged."""
    if not spec.metrics:
        return None
    family, shown = spec.metrics[0].scores, spec.metrics[1:]
    columns = ["system", "model", spec.metrics[0].title, "queries", *[m.title for m in shown]]
    table = ReportTable(key="by_argument_count", title=spec.title, columns=columns, note=spec.note)
    flags = {"infra_errors_as_failures": data.infra_errors_as_failures}
    for (system, model, bucket), rows in groups(data.records, _system, _model, _bucket_of(family)).items():
        link = link_of(system, model)
        cells = [label(system), label(model, link), label(bucket), count(len({r.task_id for r in rows}))]
        cells += [mean_cell(rows, reader(m), quality=True, digits=m.digits, link=link, **flags) for m in shown]
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


TableBuilder = Callable[[ReportData, ReportTableSpec], ReportTable | None]
TABLE_KINDS: dict[str, TableBuilder] = {
    "metrics": metrics,
    "by_difficulty": by_difficulty,
    "model_by_workflow": model_by_workflow,
    "workflow_by_difficulty": workflow_by_difficulty,
    "pass_at_k": pass_at_k,
    "per_trajectory": per_trajectory,
    "accuracy_by_level_with_cost": accuracy_by_level_with_cost,
    "by_argument_count": by_argument_count,
}
TRACE_KINDS = {"trajectory_statistics"}  # built where the traces are read (`build.assemble`)


def benchmark_tables(data: ReportData) -> list[ReportTable]:
    """The overview, the tables the benchmark declares (in its order), and the latency by phase."""
    tables: list[ReportTable | None] = [overview(data)]
    for spec in benchmark_class(data.benchmark).report_tables:
        if spec.kind in TABLE_KINDS:
            tables.append(TABLE_KINDS[spec.kind](data, spec))
        elif spec.kind not in TRACE_KINDS:
            data.warnings.append(f"{data.benchmark} asks for a report table of unknown kind {spec.kind!r}: left out")
    tables.append(phase_latency(data))
    built = [table for table in tables if table is not None]
    for number, table in enumerate(built):  # two tables of one kind get keys of their own
        if any(other.key == table.key for other in built[:number]):
            table.key = f"{table.key}-{number}"
    return built


# ---------------------------------------------------------------- across benchmarks


def primary_metric(benchmark: str) -> tuple[str, Callable[[ResultRecord], float | None]]:
    """The benchmark's headline metric (`Benchmark.primary_metric`): its name and how to read it from a record."""
    declared: ReportMetric = benchmark_class(benchmark).primary_metric
    return declared.title, reader(declared)


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
                    mean_cell(
                        records, _cost, quality=False, digits=4, link=link, with_n=_some_unknown(records), **flags
                    ),
                    mean_cell(records, _latency, quality=False, digits=2, link=link, with_n=False, **flags),
                    plain(known_total(records), 4),
                ]
            )
    table.rows = sorted(rows, key=lambda row: (row[0].text, row[1].text, row[2].text))
    table.note = "Each benchmark's own metric and tasks; compare rows across benchmarks by rank, not by value."
    return table
