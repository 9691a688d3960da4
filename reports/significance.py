"""Significance beside the numbers: for each pair among the top systems, the evaluators' paired tests
(`summary.pairwise`: a paired bootstrap of per-task differences from 20 tasks on, and the exact paired test —
exact McNemar or the exact sign test, labelled as the one it is), their p-values Holm–Bonferroni adjusted over
the pairs shown (raw beside adjusted; "significant" reads the adjusted ones), the tasks each side lost to
infrastructure errors, and how many tasks a difference of that size would need to be found significant.

Tasks needed: the normal approximation for a paired mean difference d with per-task standard deviation s,
n = ((z_{1−α/2} + z_{power}) · s / |d|)², at α = 0.05 and 80% power — the usual planning figure — but never
fewer than the exact test can ever call significant (`EXACT_MIN_TASKS`: 6 tasks all favouring one side give
p = 2·(1/2)^6 < 0.05). With no spread (every task differs by the same amount) the answer is exactly that
minimum: the exact test then reaches p < 0.05 at 6 tasks with certainty.
"""

from __future__ import annotations

import math
from statistics import NormalDist, stdev

from ..core.runlog import ResultRecord
from ..evaluators.statistics import BOOTSTRAP_MIN_TASKS, bootstrap_ci
from .cells import Cell, ReportTable, label
from .costs import cost_per_task
from .runs import ReportData
from .summary import (
    BOOTSTRAP_RESAMPLES,
    PairRow,
    SummaryRow,
    comparisons,
    correctness,
    format_p,
    judged,
    pairwise,
    per_task,
)

TOP_SYSTEMS = 5  # pairs grow quadratically; the leaders are what a reader compares
ALPHA = 0.05
POWER = 0.80


def exact_min_tasks(alpha: float = ALPHA) -> int:
    """The fewest tasks with which the exact paired test can give p < alpha: all discordant one way, 2·(1/2)^n."""
    return math.ceil(math.log2(2 / alpha) + 1e-12)


def tasks_needed(differences: list[float], alpha: float = ALPHA, power: float = POWER) -> int | None:
    """Tasks a paired comparison needs to find a mean difference of this size at `alpha` with `power`, never
    fewer than the exact test needs (module docstring); None when there is no difference."""
    if len(differences) < 2:
        return None
    mean = sum(differences) / len(differences)
    if mean == 0:
        return None
    spread = stdev(differences)
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    normal = math.ceil((z * spread / abs(mean)) ** 2) if spread else 0
    return max(normal, exact_min_tasks(alpha))


def ranked(data: ReportData) -> list[SummaryRow]:
    """The rows with an accuracy, best first — by their accuracy on the tasks every row has a verdict for
    (`shared_accuracy`: a row that lost tasks to infrastructure errors is ranked on the same tasks as the
    others), else their own; a tie goes to the cheaper per task (a row of unknown cost after the known
    ones), then by name. The headline's "most accurate" and its runner-up test read this one order."""
    rows = [r for r in data.summary() if r.accuracy is not None]
    figures = ranking_figures(data)
    return sorted(rows, key=lambda r: (-figures[_name(r)][0], _cost_key(r), r.system, r.model))


def _cost_key(row: SummaryRow) -> tuple[bool, float]:
    cost = cost_per_task(row)
    return (cost is None, cost or 0.0)


def _name(row: SummaryRow) -> str:
    return f"{row.system}/{row.model}"


def ranking_figures(data: ReportData) -> dict[str, tuple[float, int, tuple[float, float] | None]]:
    """"system/model" -> (accuracy, tasks, 95% CI) the ranking reads: on the tasks every row has a verdict for
    when the rows share tasks, else each row's own. The headline shows these figures, so what it names as most
    accurate (or tied) is what it shows."""
    shared_n, shared = shared_accuracy(data)
    verdicts = _verdicts(data)
    common = set.intersection(*(set(v) for v in verdicts.values())) if verdicts and shared else set()
    figures = {}
    for row in data.summary():
        if row.accuracy is None:
            continue
        if shared:
            values = [verdicts[_name(row)][task] for task in sorted(common)]
            interval = bootstrap_ci(values) if len(values) > 1 else None
            ci = (interval.low, interval.high) if interval else None
            figures[_name(row)] = (shared[_name(row)], shared_n, ci)
        else:
            figures[_name(row)] = (row.accuracy, row.accuracy_n, row.accuracy_ci)
    return figures


def _verdicts(data: ReportData) -> dict[str, dict[str, float]]:
    """"system/model" -> task -> the task's correctness (epochs averaged), for rows with any verdict."""
    groups: dict[str, list[ResultRecord]] = {}
    for record in judged(data.records, infra_errors_as_failures=data.infra_errors_as_failures):
        groups.setdefault(f"{record.system}/{record.model}", []).append(record)
    return {name: by_task for name, rows in groups.items() if (by_task := per_task(rows, correctness))}


def shared_accuracy(data: ReportData) -> tuple[int, dict[str, float]]:
    """Each row's accuracy ("system/model" → mean over tasks) on the tasks every row with a verdict has one for,
    and how many tasks that is; ({}) when those rows share no task."""
    verdicts = _verdicts(data)
    if not verdicts:
        return 0, {}
    common = set.intersection(*(set(by_task) for by_task in verdicts.values()))
    if not common:
        return 0, {}
    return len(common), {name: sum(v[t] for t in common) / len(common) for name, v in verdicts.items()}


def top_rows(data: ReportData, limit: int = TOP_SYSTEMS) -> list[str]:
    """The `limit` system/model rows with the highest accuracy (`ranked`)."""
    return [f"{r.system}/{r.model}" for r in ranked(data)[:limit]]


def _differences(records: list[ResultRecord], first: str, second: str, flags: dict) -> list[float]:
    verdicts = {}
    for name in (first, second):
        rows = [r for r in judged(records, **flags) if f"{r.system}/{r.model}" == name]
        verdicts[name] = per_task(rows, correctness)
    common = sorted(verdicts[first].keys() & verdicts[second].keys())
    return [verdicts[first][task] - verdicts[second][task] for task in common]


def significance_table(data: ReportData) -> ReportTable | None:
    """Every pair among the top systems: difference, its interval, both p-values, verdict, tasks needed."""
    top = top_rows(data)
    if len(top) < 2:
        return None
    flags = {"infra_errors_as_failures": data.infra_errors_as_failures}
    chosen = [r for r in data.records if f"{r.system}/{r.model}" in set(top)]
    columns = ["first", "second", "tasks", "lost to infra errors", "accuracy difference [95% CI]"]
    columns += ["bootstrap p", "bootstrap p (Holm)", "exact test", "exact p", "exact p (Holm)"]
    columns += ["significant (Holm p<0.05)", "tasks needed (80% power)"]
    pairs = pairwise(chosen, **flags)
    title = f"Paired comparisons among the top {len(top)} ({comparisons(len(pairs))})"
    table = ReportTable(key="significance", title=title, columns=columns)
    for pair in pairs:
        needed = tasks_needed(_differences(chosen, pair.first, pair.second, flags))
        low, high = pair.difference_ci
        interval = "" if low != low else f" [{low:+.3f}, {high:+.3f}]"
        table.rows.append(
            [
                label(pair.first, _link(pair.first)),
                label(pair.second, _link(pair.second)),
                Cell(text=str(pair.tasks), value=pair.tasks, n=pair.tasks),
                label(f"{pair.first_infra_lost} / {pair.second_infra_lost}"),
                Cell(text=f"{pair.accuracy_difference:+.3f}{interval}", value=pair.accuracy_difference),
                _p_cell(pair.bootstrap_p, BOOTSTRAP_RESAMPLES),
                _p_cell(pair.bootstrap_p_holm, BOOTSTRAP_RESAMPLES),
                label(pair.exact_test),
                _p_cell(pair.exact_p),
                _p_cell(pair.exact_p_holm),
                label("yes" if _significant(pair) else "no"),
                label("–" if needed is None else f"{needed:,}"),
            ]
        )
    table.note = (
        f"Significant: the exact test (exact McNemar with one 0/1 verdict per task, else the exact sign test) "
        f"and, from {BOOTSTRAP_MIN_TASKS} tasks on, the paired bootstrap give p < 0.05 on the tasks both rows "
        f"answered, after the Holm–Bonferroni adjustment over the {comparisons(len(pairs))} of this table (each "
        f"test adjusted as its own family); below {BOOTSTRAP_MIN_TASKS} tasks a bootstrap has too few distinct "
        "resamples for a p-value (–). A bootstrap p is never shown below its resolution 1/(B+1). Lost to infra "
        "errors: tasks each side has no verdict for because the provider failed (first / second), left out of "
        "the pair's tasks. Tasks needed: paired tasks for a difference of this size to reach p < 0.05 with 80% "
        f"power (never fewer than the {exact_min_tasks()} the exact test needs at the least)."
    )
    return table


def _significant(pair: PairRow) -> bool:
    """The exact test, and the bootstrap where there are tasks enough for one, reject at ALPHA (Holm)."""
    bootstrap = pair.bootstrap_p_holm < ALPHA or math.isnan(pair.bootstrap_p_holm)
    return pair.exact_p_holm < ALPHA and bootstrap


def _p_cell(p: float, resamples: int | None = None) -> Cell:
    return Cell(text=format_p(p, resamples), value=None if math.isnan(p) else p)


def leader_line(data: ReportData) -> str | None:
    """The most accurate row against the runner-up, in words: the difference, whether it is significant,
    and how many tasks it would need."""
    shown = top_rows(data)  # the family of the significance table: its Holm adjustment applies here too
    top = shown[:2]
    if len(top) < 2:
        return None
    flags = {"infra_errors_as_failures": data.infra_errors_as_failures}
    chosen = [r for r in data.records if f"{r.system}/{r.model}" in set(shown)]
    family = pairwise(chosen, **flags)
    pair = next((p for p in family if {p.first, p.second} == set(top)), None)
    if pair is None:
        return None
    sign = 1 if pair.first == top[0] else -1  # pairwise orders by name; say it leader − runner-up
    difference, (low, high) = sign * pair.accuracy_difference, sorted(sign * v for v in pair.difference_ci)
    verdict = "significant" if _significant(pair) else "not significant"
    lost = (pair.first_infra_lost, pair.second_infra_lost)[:: sign]
    interval = "" if math.isnan(low) else f" [{low:+.3f}, {high:+.3f}]"
    bootstrap = (
        f"bootstrap p {format_p(pair.bootstrap_p, BOOTSTRAP_RESAMPLES)}, Holm "
        f"{format_p(pair.bootstrap_p_holm, BOOTSTRAP_RESAMPLES)}; "
        if not math.isnan(pair.bootstrap_p)
        else f"no bootstrap p below {BOOTSTRAP_MIN_TASKS} tasks; "
    )
    line = (
        f"{top[0]} vs runner-up {top[1]}: {difference:+.3f}{interval} on {pair.tasks} common tasks, "
        f"{verdict} ({bootstrap}{pair.exact_test} p {format_p(pair.exact_p)}, Holm {format_p(pair.exact_p_holm)}; "
        f"Holm over {comparisons(len(family))})"
    )
    if any(lost):
        line += f"; tasks lost to infra errors: {top[0]} {lost[0]}, {top[1]} {lost[1]}"
    shared_n, shared = shared_accuracy(data)
    if shared and any(r.accuracy_n != shared_n for r in ranked(data)):  # rows lost different tasks: like for like
        line = (
            f"Ranked on the {shared_n} tasks every row has a verdict for ({top[0]} {shared[top[0]]:.3f}, "
            f"{top[1]} {shared[top[1]]:.3f}). " + line
        )
    needed = tasks_needed(_differences(chosen, top[0], top[1], flags))
    if not _significant(pair) and needed is not None:
        line += f"; a gap this size needs about {needed:,} tasks"
    return line


def _link(name: str) -> dict[str, str]:
    system, _, model = name.partition("/")  # system names have no "/"; model aliases may
    return {"system": system, "model": model}
