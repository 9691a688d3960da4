"""The comparison summary of a run directory: one row per system × model, and paired tests.

Built from the typed run log only (`core.runlog`). Who counts in which mean:

- `data_unavailable` records (the task's data cannot be reached here) are left out of every mean —
  quality, cost and latency — and shown as a count.
- A request the provider refused because of what the system sent (`context_overflow`, `output_limit`,
  `invalid_request`, `content_filter`) is the system's failure: it stays in every mean (scored as its answer,
  i.e. wrong) and is counted as `refused`.
- `infra_error` records (the model provider failed after its retries) are left out of the quality
  means by default and shown as a count; `infra_errors_as_failures=True` (`--infra-errors-as-failures`)
  counts them as failures instead. Their cost and latency count: they were spent.
- A scorer that raised gives no verdict (`core/scorer.py`): the metrics it declares have no value for that
  record, so it is out of those means (their n shows it) and counted as a `scoring error`.
- With several epochs, a task's trials are averaged first: every mean, interval and paired test is
  over tasks, so repeating a task never counts as more evidence than one task. "Tasks" are tasks; one run
  of a task by one system × model (an epoch) is a "unit", and the status counts are units.
- Unknown is not zero: a record whose tokens or cost nobody recorded (an imported trajectory) is left out
  of that mean, which says its n; a row with any unknown cost has no total, no $ per correct, and is never
  the cheapest (`cost_complete`).

Accuracy is the benchmark's correctness metric (`exact_match` or `correct`, whichever the records carry)
with a 95% bootstrap interval over tasks. Paired comparisons use the tasks both rows have a verdict for: a
paired bootstrap of the per-task differences and an exact paired test (`evaluators.statistics.paired_exact`:
exact McNemar when each task ran once with a 0/1 verdict, else the exact sign test on per-task means),
labelled by the test it is.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from statistics import fmean  # statistics.mean's exact fractions cost ~40× more
from typing import NamedTuple

from pydantic import BaseModel
from rich.table import Table
from rich.text import Text

from ..core.benchmark import ACCURACY, ReportMetric, benchmark_class
from ..core.model import REQUEST_FAULTS
from ..core.runlog import Manifest, ResultRecord
from ..core.trace import RunWarning
from ..evaluators.statistics import (
    BOOTSTRAP_MIN_TASKS,
    bootstrap_ci,
    bootstrap_p_resolution,
    holm,
    paired_bootstrap,
    paired_exact,
)

PHASES = ("decision", "execute", "retry", "generate", "queue", "backoff", "other")
BUDGET_STATUSES = ("max_steps", "max_tokens", "time_limit")


class SummaryRow(BaseModel):
    system: str
    model: str
    tasks: int  # distinct tasks
    units: int = 0  # records: one run of one task (task × epoch); the status counts below are units
    completed: int
    errors: int  # the system failed
    refused: int = 0  # the provider refused what the system sent (context overflow, ...): failures, in the means
    infra_errors: int  # the provider failed
    replay_misses: int = 0  # `--replay` met a request the recorded run never made: no verdict
    undecided: int = 0  # scoring errors with no verdict at all (a DAB validator that crashed or timed out)
    unavailable: int
    stopped_by_budget: int
    scoring_errors: int
    accuracy: float | None
    accuracy_ci: tuple[float, float] | None
    accuracy_by_type: dict[str, float]
    accuracy_by_level: dict[str, tuple[float, int]] = {}  # level -> (accuracy, tasks): DABstep's easy / hard
    accuracy_n: int  # tasks with a verdict
    tos: float | None  # tool orchestration score, over tasks with a gold DAG
    rs: float | None  # rubric score of reports (needs --judge)
    rouge_l: float | None
    ran_tasks: int = 0  # tasks with a unit that ran (not unavailable): what the per-task means below are over
    # means per task (a task's units averaged first) over the units that ran (not the unavailable ones)
    mean_latency_s: float | None
    mean_latency_by_phase_s: dict[str, float | None]  # None: no record of the row has its phases timed
    mean_model_calls: float | None
    mean_tool_calls: float | None
    mean_input_tokens: float | None  # over the units whose tokens are known (tokens_n)
    mean_output_tokens: float | None
    mean_reasoning_tokens: float | None
    tokens_n: int = 0  # tasks with a unit (that ran) whose tokens were recorded
    total_cost_usd: float | None  # the known costs summed; None when no unit's cost is known
    cost_unknown: int = 0  # units whose cost nobody recorded: in no total and no cost mean
    cost_per_task_usd: float | None = None  # mean over tasks (epochs averaged) of the known costs
    cost_n: int = 0  # tasks behind cost_per_task_usd
    cost_per_correct_usd: float | None  # total cost / correct trials; None when a cost is unknown
    retries: int = 0  # model-call attempts beyond the first (the retry policy at work), over all records
    provider_errors: int = 0  # failed attempts: every error a provider gave, retried or not
    backoff_s: float = 0.0  # total seconds slept between attempts (in no model latency)
    warnings: dict[str, int] = {}  # warning code -> records that carry it (the system skipped its main step)
    # the benchmark's own metrics (`declared_metrics`): title -> (mean over tasks, tasks)
    declared: dict[str, tuple[float | None, int]] = {}

    @property
    def cost_complete(self) -> bool:
        """Every unit's cost is known: only then is the total a total (and the row a candidate for cheapest)."""
        return self.cost_unknown == 0 and self.total_cost_usd is not None


class IndexBuild(BaseModel):
    """One index a system built or read before the tasks (RAG), as the manifest reports it."""

    system: str
    model: str
    index: str
    corpus: str
    passages: int | None = None
    cached: bool = False  # read from the cache: nothing spent in this run
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0  # None: a call's cost is unknown (a model without a price)
    seconds: float = 0.0
    error: str | None = None

    @property
    def state(self) -> str:
        """ "yes" (read from the cache), "no" (built in this run) or "failed: <why>"."""
        return "yes" if self.cached else (f"failed: {self.error}" if self.error else "no")


def index_builds(manifest: Manifest) -> list[IndexBuild]:
    """The indexes of every system of the run (`systems.<name>.indexing`), metered apart from the tasks."""
    builds = []
    for system, described in manifest.systems.items():
        for entry in described.get("indexing") or []:
            fields = {k: entry[k] for k in IndexBuild.model_fields if k in entry and entry[k] is not None}
            if "cost_usd" in entry and entry["cost_usd"] is None:
                fields["cost_usd"] = None  # unknown stays unknown, not the default $0
            builds.append(IndexBuild(**{"index": "", "corpus": "", "model": "", **fields, "system": system}))
    return builds


def index_lines(builds: list[IndexBuild]) -> list[str]:
    """summary.md's section on index building; nothing when no system built an index."""
    if not builds:
        return []
    lines = [
        "## Index building (before the tasks; not in the per-task means above)",
        "",
        "| system | model | index | corpus | passages | cached | model calls | tokens in/out | cost $ | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in builds:
        cached = b.state.replace("|", "/")[:130]  # a failure's message stays inside its table cell
        passages = "" if b.passages is None else str(b.passages)
        lines.append(
            f"| {b.system} | {b.model} | {b.index} | {b.corpus} | {passages} | {cached} | {b.model_calls} | "
            f"{_num(b.input_tokens)}/{_num(b.output_tokens)} | {_fmt(b.cost_usd, 4)} | {b.seconds:.1f} |"
        )
    spent = [b for b in builds if not b.cached]
    calls, costs = sum(b.model_calls for b in spent), [b.cost_usd for b in spent]
    cost = "$–" if None in costs else f"${sum(c or 0.0 for c in costs):.4f}"
    lines += ["", f"Spent on indexes in this run: {calls} model calls, {cost}; add it when comparing totals."]
    return lines


class PairRow(BaseModel):
    first: str  # "system/model"
    second: str
    tasks: int  # tasks both have a verdict for
    accuracy_difference: float  # first − second, mean over tasks
    difference_ci: tuple[float, float]
    bootstrap_p: float  # NaN below BOOTSTRAP_MIN_TASKS tasks: too few resamples for a p-value
    exact_p: float  # the exact paired test (`paired_exact`)
    exact_test: str = "exact sign test"  # which: "exact McNemar" (one 0/1 verdict per task) or "exact sign test"
    # Holm–Bonferroni adjusted over the pairs compared together (`pairwise`'s family): what "significant" reads
    bootstrap_p_holm: float = float("nan")
    exact_p_holm: float = float("nan")
    # Tasks each side has no verdict for because they ended `infra_error` (not in `tasks` above)
    first_infra_lost: int = 0
    second_infra_lost: int = 0


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return fmean(values) if values else None


def correctness(record: ResultRecord) -> float | None:
    """The records' correctness metric: `exact_match`, else `correct` (the scorers' own names for it)."""
    return record.scores.get("exact_match", record.scores.get("correct"))


def ran(records: Iterable[ResultRecord]) -> list[ResultRecord]:
    """The records that count for cost and latency: all but the unavailable ones."""
    return [r for r in records if r.status != "data_unavailable"]


def judged(records: Iterable[ResultRecord], infra_errors_as_failures: bool = False) -> list[ResultRecord]:
    """The records that count for quality: all but the unavailable ones and, unless asked, the
    infrastructure errors."""
    counted = [r for r in ran(records) if r.status != "replay_miss"]  # a replay miss is no verdict on the system
    return [r for r in counted if infra_errors_as_failures or r.status != "infra_error"]


def per_task(records: Iterable[ResultRecord], metric: Callable[[ResultRecord], float | None]) -> dict[str, float]:
    """Task id -> the metric's mean over that task's epochs (tasks without a value are left out)."""
    values: dict[str, list[float]] = defaultdict(list)
    for record in records:
        value = metric(record)
        if value is not None:
            values[record.task_id].append(value)
    return {task: sum(trials) / len(trials) for task, trials in values.items()}  # statistics.mean is 20× slower


def _score(name: str) -> Callable[[ResultRecord], float | None]:
    return lambda record: record.scores.get(name)


def summarize(records: list[ResultRecord], *, infra_errors_as_failures: bool = False) -> list[SummaryRow]:
    groups: dict[tuple[str, str], list[ResultRecord]] = defaultdict(list)
    for record in records:
        groups[(record.system, record.model)].append(record)
    metrics = declared_metrics(records[0].benchmark) if records else []
    rows = [_row(s, m, rows, infra_errors_as_failures) for (s, m), rows in sorted(groups.items())]
    for row in rows:
        quality = judged(groups[(row.system, row.model)], infra_errors_as_failures)
        row.declared = {m.title: _declared_mean(quality, m) for m in metrics}
    return rows


def declared_metrics(benchmark: str) -> list[ReportMetric]:
    """The benchmark's own per-row means for summary.md: its primary metric when it is not the accuracy, then
    its `summary_metrics` (`Benchmark`)."""
    declared = benchmark_class(benchmark)
    metrics = [] if declared.primary_metric == ACCURACY else [declared.primary_metric]
    return metrics + [m for m in declared.summary_metrics if m not in metrics]


def _declared_mean(records: list[ResultRecord], metric: ReportMetric) -> tuple[float | None, int]:
    by_task = per_task(records, reader(metric))
    return _mean(by_task.values()), len(by_task)


def reader(metric: ReportMetric) -> Callable[[ResultRecord], float | None]:
    """How to read a benchmark's declared metric from a record: its first score the record has, only on
    records of its question type when it names one."""

    def read(record: ResultRecord) -> float | None:
        if metric.question_type is not None and record.question_type != metric.question_type:
            return None
        return next((record.scores[name] for name in metric.scores if name in record.scores), None)

    return read


def phase_latency(record: ResultRecord, phase: str) -> float | None:
    """Seconds of the phase; None when the record's phases were not timed (no bucket has a latency)."""
    if not record.latency_by_phase or all(t.latency_s is None for t in record.latency_by_phase.values()):
        return None
    totals = record.latency_by_phase.get(phase)
    return (totals.latency_s or 0.0) if totals else 0.0


def _known(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def cost_of(record: ResultRecord) -> float | None:
    """The unit's cost in USD; None when nobody recorded it."""
    return record.usage.cost_usd


def _row(system: str, model: str, rows: list[ResultRecord], infra_errors_as_failures: bool) -> SummaryRow:
    quality, spent = judged(rows, infra_errors_as_failures), ran(rows)
    accuracy_by_task = per_task(quality, correctness)
    by_type: dict[str, list[float]] = defaultdict(list)
    types = {r.task_id: r.question_type for r in quality}
    by_level: dict[str, list[float]] = defaultdict(list)
    task_levels = {r.task_id: r.level for r in quality}
    for task, value in accuracy_by_task.items():
        by_type[types[task]].append(value)
        if task_levels[task]:
            by_level[task_levels[task]].append(value)
    interval = bootstrap_ci(list(accuracy_by_task.values())) if len(accuracy_by_task) > 1 else None
    statuses = [r.status for r in rows]
    return SummaryRow(
        system=system,
        model=model,
        tasks=len({r.task_id for r in rows}),
        units=len(rows),
        completed=statuses.count("completed"),
        errors=statuses.count("error"),
        refused=sum(s in REQUEST_FAULTS.values() for s in statuses),
        infra_errors=statuses.count("infra_error"),
        replay_misses=statuses.count("replay_miss"),
        unavailable=statuses.count("data_unavailable"),
        stopped_by_budget=sum(s in BUDGET_STATUSES for s in statuses),
        scoring_errors=sum(r.scoring_error is not None for r in rows),
        undecided=sum(r.scoring_error is not None and correctness(r) is None for r in rows),
        accuracy=_mean(accuracy_by_task.values()),
        accuracy_ci=(interval.low, interval.high) if interval else None,
        accuracy_by_type={t: fmean(v) for t, v in sorted(by_type.items())},
        accuracy_by_level={level: (fmean(v), len(v)) for level, v in by_level.items()},
        accuracy_n=len(accuracy_by_task),
        tos=_mean(per_task(quality, _score("tos")).values()),
        rs=_mean(per_task(quality, _score("rs")).values()),
        rouge_l=_mean(per_task(quality, _score("rougeL_f")).values()),
        ran_tasks=len({r.task_id for r in spent}),
        mean_latency_s=_task_mean(spent, lambda r: r.latency_s),
        mean_latency_by_phase_s={p: _task_mean(spent, _phase(p)) for p in PHASES},
        mean_model_calls=_task_mean(spent, lambda r: r.model_calls),
        mean_tool_calls=_task_mean(spent, lambda r: len(r.tool_calls)),
        **_token_means(spent),
        **_costs(rows, quality),
        retries=sum(r.retries for r in rows),
        provider_errors=sum(r.provider_errors for r in rows),
        backoff_s=sum(r.backoff_s for r in rows),
        warnings=dict(sorted(Counter(w.code for r in rows for w in r.warnings).items())),
    )


def _task_mean(records: list[ResultRecord], metric: Callable[[ResultRecord], float | None]) -> float | None:
    """The mean over tasks of the metric (a task's units averaged first; unknown values left out)."""
    return _mean(per_task(records, metric).values())


def _phase(name: str) -> Callable[[ResultRecord], float | None]:
    return lambda record: phase_latency(record, name)


def _token_means(spent: list[ResultRecord]) -> dict[str, float | int | None]:
    """Token means per task over the units whose tokens were recorded, and how many tasks those are."""
    known = [r for r in spent if r.usage.tokens_known]
    return {
        "mean_input_tokens": _task_mean(known, lambda r: r.usage.input_tokens),
        "mean_output_tokens": _task_mean(known, lambda r: r.usage.output_tokens),
        "mean_reasoning_tokens": _task_mean(known, lambda r: r.usage.reasoning_tokens),
        "tokens_n": len({r.task_id for r in known}),
    }


def _costs(rows: list[ResultRecord], quality: list[ResultRecord]) -> dict[str, float | int | None]:
    """Total, per task and per correct answer; unknown costs are in none of them (and make $ per correct unknown)."""
    known = _known(cost_of(r) for r in rows)
    unknown = len(rows) - len(known)
    total = sum(known) if known else None
    correct = sum(correctness(r) == 1.0 for r in quality)
    by_task = per_task(ran(rows), cost_of)
    return {
        "total_cost_usd": total,
        "cost_unknown": unknown,
        "cost_per_task_usd": _mean(by_task.values()),
        "cost_n": len(by_task),
        "cost_per_correct_usd": total / correct if correct and total is not None and not unknown else None,
    }


def pairwise(records: list[ResultRecord], *, infra_errors_as_failures: bool = False) -> list[PairRow]:
    """Every pair of system/model rows, compared on the tasks both have a verdict for (per-task means), with
    p-values Holm-adjusted over all the pairs returned, and the tasks each side lost to infrastructure errors."""
    rows: dict[str, list[ResultRecord]] = defaultdict(list)
    for r in judged(records, infra_errors_as_failures):
        rows[f"{r.system}/{r.model}"].append(r)
    verdicts = {name: per_task(group, correctness) for name, group in rows.items()}
    infra: dict[str, set[str]] = defaultdict(set)
    for r in records:
        if r.status == "infra_error":
            infra[f"{r.system}/{r.model}"].add(r.task_id)
    trials = Counter((f"{r.system}/{r.model}", r.task_id) for r in judged(records, infra_errors_as_failures))
    repeated = {task for (_, task), count in trials.items() if count > 1}  # tasks with several trials
    pairs = []
    names = sorted(name for name, by_task in verdicts.items() if by_task)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            common = sorted(verdicts[first].keys() & verdicts[second].keys())
            if len(common) < 2:
                continue
            a = [verdicts[first][task] for task in common]
            b = [verdicts[second][task] for task in common]
            paired, exact = paired_bootstrap(a, b), paired_exact(a, b, repeated=bool(repeated & set(common)))
            pairs.append(
                PairRow(
                    first=first,
                    second=second,
                    tasks=len(common),
                    accuracy_difference=paired.mean_difference,
                    difference_ci=(paired.low, paired.high),
                    bootstrap_p=paired.p_value if len(common) >= BOOTSTRAP_MIN_TASKS else math.nan,
                    exact_p=exact.p_value,
                    exact_test=exact.test,
                    first_infra_lost=len(infra[first] - verdicts[first].keys()),
                    second_infra_lost=len(infra[second] - verdicts[second].keys()),
                )
            )
    return with_holm(pairs)


def with_holm(pairs: list[PairRow]) -> list[PairRow]:
    """The pairs with both p-values Holm–Bonferroni adjusted over these pairs (one family per test)."""
    for field in ("bootstrap_p", "exact_p"):
        for pair, adjusted in zip(pairs, holm([getattr(p, field) for p in pairs]), strict=True):
            setattr(pair, f"{field}_holm", adjusted)
    return pairs


def comparisons(count: int) -> str:
    return f"{count} comparison" + ("" if count == 1 else "s")


def format_p(p: float, resamples: int | None = None) -> str:
    """A p-value as shown: "–" when not computed, "< 0.001" below what three decimals show, and a bootstrap's
    never below its resolution 1/(B+1)."""
    if p != p:
        return "–"
    floor = bootstrap_p_resolution(resamples) if resamples else 0.0
    if p < 0.001 or p <= floor:
        return f"< {max(0.001, floor):.3g}"
    return f"{p:.3f}"


BOOTSTRAP_RESAMPLES = 10_000  # what `paired_bootstrap` draws by default


def exact_tests(pairs: list[PairRow]) -> str:
    """The exact tests the pairs used, named as they are."""
    return " / ".join(sorted({p.exact_test for p in pairs})) or "exact test"


def pair_lines(pairs: list[PairRow]) -> list[str]:
    """summary.md's paired comparisons: raw and Holm-adjusted p side by side, the number of comparisons said."""
    lines = [
        f"## Paired comparisons ({comparisons(len(pairs))}, on the tasks both answered)",
        "",
        "| first | second | tasks | lost to infra errors | accuracy difference | 95% CI | bootstrap p (Holm) "
        "| exact test | exact p (Holm) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in pairs:
        low, high = p.difference_ci
        ci = "–" if low != low else f"[{low:+.3f}, {high:+.3f}]"
        boot = f"{format_p(p.bootstrap_p, BOOTSTRAP_RESAMPLES)} ({format_p(p.bootstrap_p_holm, BOOTSTRAP_RESAMPLES)})"
        lines.append(
            f"| {p.first} | {p.second} | {p.tasks} | {p.first_infra_lost} / {p.second_infra_lost} | "
            f"{p.accuracy_difference:+.3f} | {ci} | {boot} | {p.exact_test} | "
            f"{format_p(p.exact_p)} ({format_p(p.exact_p_holm)}) |"
        )
    lines += [
        "",
        f"Holm–Bonferroni: each p-value in brackets is adjusted over the {comparisons(len(pairs))} of this table "
        "(one family per test); a difference is significant at 5% when its adjusted p < 0.05. The exact test is "
        "McNemar's exact test when each task has one 0/1 verdict per side, else the exact sign test on per-task "
        f"means; below {BOOTSTRAP_MIN_TASKS} tasks no bootstrap p is computed (–) and the exact test alone decides. "
        "'Lost to infra errors': tasks each side has no verdict for (the provider failed), left out of this "
        "pair's tasks.",
    ]
    return lines


def _num(value: float) -> str:
    return "–" if value != value else f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"  # NaN → –


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _tokens(row: SummaryRow) -> str:
    if row.mean_input_tokens is None or row.mean_output_tokens is None:
        return "–"
    known = f" (n={row.tokens_n})" if row.tokens_n < row.ran_tasks else ""
    return f"{row.mean_input_tokens:.0f}/{row.mean_output_tokens:.0f}{known}"


def _total_cost(row: SummaryRow) -> str:
    """The total when every unit's cost is known; else the known part and how many units are unknown."""
    if row.total_cost_usd is None:
        return "–"
    if row.cost_unknown:
        return f"– ({row.total_cost_usd:.4f} known, {row.cost_unknown} unknown)"
    return f"{row.total_cost_usd:.4f}"


def _short_cost(row: SummaryRow) -> str:
    return f"{row.total_cost_usd:.4f}" if row.cost_complete and row.total_cost_usd is not None else "–"


class Column(NamedTuple):
    """A column of summary.md; `short` names it in the terminal's table (None: summary.md only)."""

    name: str
    cell: Callable[[SummaryRow], str]
    short: str | None = None


# One list for summary.md and the terminal: the terminal gets the columns with a short name.
COLUMNS = [
    Column("system", lambda r: r.system, "system"),
    Column("model", lambda r: r.model, "model"),
    Column("tasks", lambda r: str(r.tasks), "tasks"),
    Column("units", lambda r: str(r.units), "units"),
    Column("completed", lambda r: str(r.completed), "done"),
    Column("errors", lambda r: str(r.errors), "err"),
    Column("refused requests", lambda r: str(r.refused)),
    Column("infra errors", lambda r: str(r.infra_errors), "infra"),
    Column("unavailable", lambda r: str(r.unavailable), "n/a"),
    Column("budget stops", lambda r: str(r.stopped_by_budget), "budget"),
    Column(
        "total retries / provider errors / backoff s",
        lambda r: f"{r.retries} / {r.provider_errors} / {r.backoff_s:.1f}",
    ),
    Column("scoring errors", lambda r: str(r.scoring_errors)),
    Column("warnings", lambda r: str(sum(r.warnings.values()))),
    Column("accuracy", lambda r: f"{_fmt(r.accuracy)} (n={r.accuracy_n})", "acc"),
    Column("95% CI", lambda r: "–" if r.accuracy_ci is None else f"[{r.accuracy_ci[0]:.3f}, {r.accuracy_ci[1]:.3f}]"),
    Column("latency s", lambda r: _fmt(r.mean_latency_s, 1), "s/task"),
    Column("model calls", lambda r: _fmt(r.mean_model_calls, 1), "calls"),
    Column("tool calls", lambda r: _fmt(r.mean_tool_calls, 1)),
    Column("tokens in/out", _tokens),
    Column("cost $", _total_cost),
    Column("$ per task", lambda r: _fmt(r.cost_per_task_usd, 4)),
    Column("$ per correct", lambda r: _fmt(r.cost_per_correct_usd, 4)),
]
CONSOLE_TOTAL_COST = Column("cost $", _short_cost, "$")  # the terminal's narrow total: "–" when not all known

# Shown in the terminal only when some row counts any (summary.md always shows them)
OPTIONAL_CONSOLE_COLUMNS = {"infra": "infra_errors", "n/a": "unavailable", "budget": "stopped_by_budget"}


def table_lines(rows: list[SummaryRow], columns: list[Column]) -> list[str]:
    """A Markdown table of the rows: a header, a rule and a line per row."""
    lines = ["| " + " | ".join(c.name for c in columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    return lines + ["| " + " | ".join(c.cell(row) for c in columns) + " |" for row in rows]


def columns_for(benchmark: str) -> list[Column]:
    """summary.md's columns for a benchmark's rows: the shared ones with the benchmark's own means after the
    accuracy's interval (`declared_metrics`)."""
    after = next(i for i, c in enumerate(COLUMNS) if c.name == "95% CI") + 1
    own = [Column(m.title, _declared_cell(m)) for m in declared_metrics(benchmark)]
    return [*COLUMNS[:after], *own, *COLUMNS[after:]]


def _declared_cell(metric: ReportMetric) -> Callable[[SummaryRow], str]:
    def cell(row: SummaryRow) -> str:
        mean, n = row.declared.get(metric.title, (None, 0))
        return "–" if mean is None else f"{mean:.{metric.digits}f} (n={n})"

    return cell


def rich_table(rows: list[SummaryRow], title: str = "Comparison (means per task; $ is the total)") -> Table:
    table = Table(title=title)
    hidden = {name for name, field in OPTIONAL_CONSOLE_COLUMNS.items() if not any(getattr(r, field) for r in rows)}
    hidden |= {"units"} if all(r.units == r.tasks for r in rows) else set()
    shown = [c for c in COLUMNS if c.short is not None and c.short not in hidden] + [CONSOLE_TOTAL_COST]
    columns = [(c.short or c.name, _console_cell(c)) for c in shown]
    for name, cell in columns:  # no name or number is cut: print it with `width=table_width(table)` or wider
        widest = max([len(name), *(len(cell(row)) for row in rows)])
        justify = "left" if name in ("system", "model") else "right"
        table.add_column(name, justify=justify, no_wrap=True, min_width=widest)
    for row in rows:  # as plain text: a row label's "[max_steps=1]" is no Rich markup
        table.add_row(*(Text(cell(row)) for _, cell in columns))
    return table


def _console_cell(column: Column) -> Callable[[SummaryRow], str]:
    """The terminal's accuracy has two digits and no n; every other cell is summary.md's."""
    if column.name == "accuracy":
        return lambda r: _fmt(r.accuracy, 2)
    return column.cell


def table_width(table: Table) -> int:
    """The width at which a table of `rich_table` shows every cell whole (columns, padding and borders)."""
    return sum(column.min_width or 0 for column in table.columns) + 3 * len(table.columns) + 1


# (metric, whether it is a quality metric: quality metrics leave infrastructure errors out by default)
CI_METRICS: dict[str, tuple[Callable[[ResultRecord], float | None], bool]] = {
    "latency s": (lambda r: r.latency_s, False),
    "model calls": (lambda r: r.model_calls, False),
    "input tokens": (lambda r: r.usage.input_tokens, False),
    "output tokens": (lambda r: r.usage.output_tokens, False),
    "cost $": (lambda r: r.usage.cost_usd, False),
    "TOS": (_score("tos"), True),
    "tool coverage": (_score("coverage"), True),  # beside TOS: the required steps done (evaluators/dag.py)
    "RS": (_score("rs"), True),
}


def confidence_lines(records: list[ResultRecord], *, infra_errors_as_failures: bool = False) -> list[str]:
    """Mean [95% bootstrap CI over tasks] of every per-task metric of every row."""
    groups: dict[str, list[ResultRecord]] = defaultdict(list)
    for r in records:
        groups[f"{r.system}/{r.model}"].append(r)
    lines = ["| row | " + " | ".join(CI_METRICS) + " |", "|" + "---|" * (len(CI_METRICS) + 1)]
    for name, rows in sorted(groups.items()):
        cells = []
        for metric, is_quality in CI_METRICS.values():
            counted = judged(rows, infra_errors_as_failures) if is_quality else ran(rows)
            values = list(per_task(counted, metric).values())
            mean_, low, high = bootstrap_ci(values)
            tasks = len({r.task_id for r in counted})
            fewer = f" (n={len(values)} of {tasks})" if 0 < len(values) < tasks else ""  # the others unknown
            cells.append("–" if not values else f"{_num(mean_)} [{_num(low)}, {_num(high)}]{fewer}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


LEVELS = ("easy", "medium", "hard")


def _level_order(level: str) -> tuple[int, str]:
    return (LEVELS.index(level) if level in LEVELS else len(LEVELS), level)


def level_lines(rows: list[SummaryRow]) -> list[str]:
    """Accuracy per task level (DABstep's easy / hard split), when the tasks have levels."""
    found = sorted({level for r in rows for level in r.accuracy_by_level}, key=_level_order)
    if not found:
        return []
    lines = ["", "## Accuracy by level (n = tasks)", "", "| system | model | " + " | ".join(found) + " |"]
    lines.append("|" + "---|" * (len(found) + 2))
    for r in rows:
        cells = [r.accuracy_by_level.get(level) for level in found]
        shown = ["–" if c is None else f"{c[0]:.3f} (n={c[1]})" for c in cells]
        lines.append(f"| {r.system} | {r.model} | " + " | ".join(shown) + " |")
    return lines


def warning_lines(rows: list[SummaryRow]) -> list[str]:
    """Records whose system skipped its main step, per system and model: "lotus/gpt-5: 12 of 37 answered
    without running an operator" (`RunWarning`); nothing when no record carries a warning."""
    lines = []
    for row in rows:
        for code, count in row.warnings.items():
            lines.append(f"- {row.system}/{row.model}: {count} of {row.units} units {RunWarning(code=code).phrase}")
    return lines


def denominator_lines(rows: list[SummaryRow], infra_errors_as_failures: bool) -> list[str]:
    """What the means leave out, said next to them."""
    unavailable = sum(r.unavailable for r in rows)
    infra = sum(r.infra_errors for r in rows)
    scoring = sum(r.scoring_errors for r in rows)
    lines = []
    if unavailable:
        lines.append(f"- {unavailable} unit(s) with unavailable data are left out of every mean.")
    if infra and infra_errors_as_failures:
        lines.append(f"- {infra} infrastructure error(s) (provider failures) count as failures in the quality means.")
    elif infra:
        lines.append(
            f"- {infra} infrastructure error(s) (provider failures) are left out of the quality means "
            "(`compare report --infra-errors-as-failures` counts them as failures); their cost and latency count."
        )
    unknown = sum(r.cost_unknown for r in rows)
    if unknown:
        lines.append(
            f"- {unknown} unit(s) have no recorded cost (unknown, not $0): they are in no total or cost mean, and "
            "their row has no $ per correct and is never the cheapest; token means are over the units that "
            "recorded tokens (n shown)."
        )
    misses = sum(r.replay_misses for r in rows)
    if misses:
        lines.append(f"- {misses} replay miss(es) (requests the recorded run never made): not in the quality means.")
    if scoring:  # core.scorer: a scorer that fails gives no verdict, so its metrics have no value
        lines.append(
            f"- {scoring} record(s) had a scorer fail (a judge or validator gave no verdict), see scoring_error: "
            "that scorer's metrics have no value for them, so they are not in those means (n shows it)."
        )
    return lines


def generation_lines(manifest: Manifest, records: list[ResultRecord]) -> list[str]:
    """The sampling settings the requests carried, counted from the requests the gateway sent (never from the
    config): one line when every system and model sent the same, else one per system and model; and what each
    system asked for instead ("llamaindex_agent asked for temperature 0.1 (12 calls); sent 0"). Nothing for
    runs whose records do not say what was sent."""
    sent = _sampling_sent(records)
    if not sent:
        return []
    said = {key: _said(settings, calls) for key, (settings, calls) in sent.items()}
    if len(set(said.values())) == 1:
        lines = [f"- sampling sent with every request: {next(iter(said.values()))}"]
    else:
        lines = [f"- sampling sent by {system}/{model}: {text}" for (system, model), text in sorted(said.items())]
    asked: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    for record in records:
        for name, values in record.generation_asked.items():
            for value, calls in values.items():
                asked[record.system][name][value] += calls
    for system, settings in sorted(asked.items()):
        for name, values in settings.items():
            asked_for = ", ".join(f"{value} ({calls} call{'s' * (calls != 1)})" for value, calls in values.items())
            carried = sorted({v for (s, _), (got, _) in sent.items() if s == system for v in got.get(name, {})})
            carried_text = ", ".join(carried) or "none (provider default)"
            lines.append(f"- {system} asked for {name} {asked_for}; sent {carried_text}")
    return lines


def _sampling_sent(records: list[ResultRecord]) -> dict[tuple[str, str], tuple[dict[str, Counter[str]], int]]:
    """(system, model) -> (setting -> value -> calls, model calls) from the records' requests; a row with a
    record that does not say what it sent is left out (unknown, not the config's)."""
    sent: dict[tuple[str, str], tuple[dict[str, Counter[str]], int]] = {}
    unknown: set[tuple[str, str]] = set()
    for record in records:
        key = (record.system, record.model)
        if record.generation_sent is None:
            unknown.add(key)
            continue
        settings, calls = sent.get(key, ({}, 0))
        for name, values in record.generation_sent.items():
            settings.setdefault(name, Counter()).update(values)
        sent[key] = (settings, calls + record.model_calls)
    return {key: value for key, value in sent.items() if key not in unknown and value[1]}


def _said(settings: dict[str, Counter[str]], calls: int) -> str:
    """`temperature 0.3, max_output_tokens 123`; a value not in every call says in how many it was."""
    parts = []
    for name, values in settings.items():
        for value, count in values.items():
            parts.append(f"{name} {value}" + ("" if count == calls else f" ({count} of {calls} calls)"))
    return ", ".join(parts) or "provider defaults"


COST_TOLERANCE = 0.05  # a provider's bill further than this from the price table's figure is named


def cost_check_lines(records: list[ResultRecord]) -> list[str]:
    """Per model, where the provider's reported cost (the bill, which every $ figure shows) and the price table's
    figure for the same units differ by more than `COST_TOLERANCE`: both figures, so a stale or wrong `price:`
    in the alias table (or a provider charging otherwise) is seen. Units whose every call's cost the provider
    reported and the table could price are compared."""
    sums: dict[str, list[float]] = {}
    for record in records:
        usage = record.usage
        if usage.cost_source != "provider" or usage.cost_usd is None or usage.table_cost_usd is None:
            continue
        found = sums.setdefault(record.model, [0.0, 0.0, 0])
        found[0], found[1], found[2] = found[0] + usage.cost_usd, found[1] + usage.table_cost_usd, found[2] + 1
    lines = []
    for model, (billed, table, units) in sorted(sums.items()):
        if abs(billed - table) <= COST_TOLERANCE * table:
            continue
        off = f" ({(billed - table) / table:+.0%})" if table else ""
        lines.append(
            f"- {model}: the provider billed ${billed:.6f} where the price table gives ${table:.6f} for the same "
            f"{units} units{off}; every $ figure is the provider's (the bill): check the alias's price in the model "
            "table (configs/models.yaml)"
        )
    return lines


def provenance_lines(manifest: Manifest) -> list[str]:
    """Where the records come from when it is not one plain run: rescored from another run (with the scorer
    versions before and after), or resumed/replayed past a change with `--allow-drift` (what changed)."""
    lines = []
    if manifest.rescored is not None:
        now = manifest.identity.scorers if manifest.identity is not None else {}
        before = manifest.rescored.scorers_before
        changed = [f"{name} {before.get(name, '?')} → {version}" for name, version in sorted(now.items())
                   if before.get(name) != version]
        lines.append(
            f"- rescored from {manifest.rescored.source} at {manifest.rescored.at} with today's scorers"
            + (f" (versions changed: {', '.join(changed)})" if changed else " (same scorer versions)")
        )
    for drift in manifest.drift_allowed:
        lines.append(f"- {drift.by} at {drift.at} went on with --allow-drift past: {'; '.join(drift.changes)}")
    return lines


def sandbox_lines(manifest: Manifest, rows: list[SummaryRow]) -> list[str]:
    """How the run's external agents were isolated, naming every external row when they were not."""
    external = [r for r in rows if (manifest.systems.get(r.system) or {}).get("kind") == "external"]
    if manifest.agent_sandbox is None or not external:
        return []
    names = ", ".join(f"{r.system}/{r.model}" for r in external)
    if manifest.agent_sandbox == "unsandboxed":
        why = f" ({manifest.agent_sandbox_problem})" if manifest.agent_sandbox_problem else ""
        return [
            f"- external agents ran WITHOUT a sandbox (--unsandboxed-agents{why}): {names}. Each could read the "
            "task files and gold and anything the suite's user can: their scores are not evidence."
        ]
    limits = manifest.agent_sandbox_limits or {}
    return [
        f"- external agents each ran in a sandbox of their own (bubblewrap; {limits.get('memory_mb')} MB, "
        f"{limits.get('processes')} processes, network only to their gateway and tools): {names}"
    ]


def markdown_safe(text: str) -> str:
    """Markdown in which text from runs (a model alias, a run's label, an answer) cannot be HTML: every `<`
    outside a code span is written `&lt;` (a renderer shows it as `<`)."""
    return "\n".join(_line_safe(line) for line in text.split("\n"))


def _line_safe(line: str) -> str:
    if "<" not in line:
        return line
    parts = line.split("`")
    if len(parts) % 2 == 0:  # an unclosed backtick: no code span on this line
        return line.replace("<", "&lt;")
    return "`".join(part if index % 2 else part.replace("<", "&lt;") for index, part in enumerate(parts))


def markdown(
    rows: list[SummaryRow],
    manifest: Manifest,
    pairs: list[PairRow] | None = None,
    records: list[ResultRecord] | None = None,
    benchmark_lines: list[str] | None = None,
    *,
    infra_errors_as_failures: bool = False,
) -> str:
    """summary.md; `benchmark_lines` is the benchmark's own section (`Benchmark.report_lines`)."""
    m = manifest
    budgets = m.budgets.model_dump()
    lines = [
        f"# Run summary: {m.benchmark}",
        "",
        f"- started {m.started_at}, finished {m.finished_at}, status {m.status}",
        f"- suite {m.suite_version}, git {m.git.sha[:12]}",
        f"- tasks {len(m.task_ids)}, epochs {m.config.get('epochs')}, budgets {budgets}",
        *generation_lines(m, records or []),
        *provenance_lines(m),
        *sandbox_lines(m, rows),
        "",
        *table_lines(rows, columns_for(m.benchmark)),
    ]
    notes = denominator_lines(rows, infra_errors_as_failures)
    if notes:
        lines += ["", *notes]
    billed = cost_check_lines(records or [])
    if billed:
        lines += ["", "## Provider's cost against the price table", "", *billed]
    skipped = warning_lines(rows)
    if skipped:
        lines += ["", "## Main step skipped (records kept as they ended; see each record's warnings)", "", *skipped]
    lines += ["", "## Mean latency by phase (seconds per task)", "", "| system | model | " + " | ".join(PHASES) + " |"]
    lines.append("|" + "|".join("---" for _ in range(len(PHASES) + 2)) + "|")
    for row in rows:
        phases = " | ".join(_fmt(row.mean_latency_by_phase_s[p], 2) for p in PHASES)
        lines.append(f"| {row.system} | {row.model} | {phases} |")
    lines += level_lines(rows)
    if records:
        intervals = confidence_lines(records, infra_errors_as_failures=infra_errors_as_failures)
        lines += ["", "## Means with 95% bootstrap confidence intervals (over tasks)", "", *intervals]
    indexes = index_lines(index_builds(m))
    if indexes:
        lines += ["", *indexes]
    if benchmark_lines:
        lines += ["", *benchmark_lines]
    if pairs:
        lines += ["", *pair_lines(pairs)]
    lines += [
        "",
        "accuracy = the benchmark's correctness metric (its scorer's exact match or correct), averaged per task",
        "over its epochs, then over tasks (n = tasks), with a 95% bootstrap CI over tasks. A unit is one run of",
        "one task (task × epoch); the status counts are units. '–' is unknown (never 0).",
        "'queue' = waiting for the model (the embedded model runs one call at a time); 'other' = wall time",
        "outside any model or tool call. Overlapping steps share their time (no instant counts twice).",
        "'backoff' = sleeping between a model call's attempts (retries); it is in no model latency.",
    ]
    return markdown_safe("\n".join(lines) + "\n")


def comparison_markdown(title: str, rows: dict[str, list[SummaryRow]], sources: list[str]) -> str:
    """summary.md of a report over several runs (or benchmarks): each benchmark's rows, merged across runs."""
    lines = [f"# {title.replace('Comparison report', 'Comparison summary', 1)}", ""]
    lines += [f"- {source}" for source in sources]
    for benchmark, found in rows.items():
        lines += ["", f"## {benchmark}", "", *table_lines(found, columns_for(benchmark))]
        lines += [line.replace("## Accuracy", "### Accuracy") for line in level_lines(found)]
    lines += ["", "Rows are system × model on the tasks every row of the benchmark has, one per run (named @ the run's"]
    lines += ["label) unless --merge-runs made the runs of a system run alike one row; rows run otherwise are"]
    lines += ["labelled [with what differs]. report.md has the rest."]
    return markdown_safe("\n".join(lines) + "\n")
