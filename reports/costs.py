"""Cost per task, with index building amortised over the tasks that used the index.

A RAG system builds its indexes (entity graph, community summaries, embeddings) once, before any task's
clock, metered apart (`manifest.systems.<name>.indexing`), so no task record holds that spend and the
per-task mean alone makes such a system look cheaper than it is. The headline cost per task and the
cost-vs-quality chart use `amortised_cost_per_task`:

- a run's index cost for one system × model is spread evenly over the tasks that run ran with it (every
  task of a RAG row reads its task's index; when tasks use different corpora, the row's mean is the same
  as charging each index to the tasks that read it), and a report on several runs charges each kept
  record its own run's share;
- an index read from the cache is charged what building it cost (the report's `built`), so a second run
  is not cheaper than the first; a build that failed is charged what it spent;
- the per-task-only figure (`cost_per_task`, what the records hold) is shown beside it;
- a row with a unit whose cost is unknown (an imported trajectory) has no cost per task: unknown, never $0;
- an index several systems use (one entity graph for `rag_graph` and `rag_hippo`: the same cache key, corpus
  and model) is one build, charged once: split evenly between the systems of the run that used it, so no
  total counts it twice (`SHARED_RULE`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from ..core.runlog import Manifest
from .runs import ReportData, row_names
from .summary import SummaryRow

SHARED_RULE = "an index several systems used is charged once, split evenly between them"

IndexId = tuple[object, ...]


def index_uses(manifest: Manifest) -> dict[IndexId, tuple[float | None, set[str]]]:
    """Each distinct index of the run (its layer, corpus, cache key and model) -> what building it cost (an
    index read from the cache: what its build cost; None: unknown) and the systems that used it. An entry
    without a cache key (runs written before it was kept) is an index of its own system."""
    uses: dict[IndexId, tuple[float | None, set[str]]] = {}
    for system, described in manifest.systems.items():
        for position, entry in enumerate((described or {}).get("indexing") or []):
            where = (entry.get("index"), entry.get("corpus"), entry.get("model"))
            identity: IndexId = (*where, entry["key"]) if entry.get("key") else (*where, system, position)
            spent = (entry.get("built") or {}) if entry.get("cached") else entry
            cost = None if "cost_usd" in spent and spent["cost_usd"] is None else float(spent.get("cost_usd") or 0.0)
            earlier, users = uses.get(identity, (cost, set()))
            built_here = not entry.get("cached")  # the build this run made is the figure (a cache read repeats it)
            uses[identity] = (cost if built_here else earlier, users | {system})
    return uses


def index_cost(manifest: Manifest, system: str, model: str) -> float | None:
    """USD of `system`'s indexes with `model` charged to its row: each index's build cost (read from the cache:
    what the build cost), split evenly between the systems that used it (`SHARED_RULE`); None when a build's
    cost is unknown (recorded as null: a model without a price)."""
    total = 0.0
    for (_, _, built_with, *_), (cost, users) in index_uses(manifest).items():
        if system not in users or built_with not in (None, "", model):
            continue
        if cost is None:
            return None
        total += cost / len(users)
    return total


def index_shares(data: ReportData) -> dict[tuple[str, str], float | None]:
    """(row system, model) -> the index cost charged to that row's records in the report (None: unknown)."""
    names = row_names(data.runs, merge_runs=data.merge_runs)
    kept = set(data.common_tasks)
    charged: dict[tuple[str, str], float | None] = {}
    for position, run in enumerate(data.runs):
        ran = [r for r in run.records if r.status != "data_unavailable"]
        tasks = Counter((r.system, r.model) for r in ran)
        shown = Counter((r.system, r.model) for r in ran if r.task_id in kept)
        for (system, model), count in tasks.items():
            cost = index_cost(run.manifest, system, model)
            row = (names[(position, system, model)], model)
            if cost is None:  # an index of unknown cost makes the row's amortised cost unknown
                charged[row] = None
            elif cost and (earlier := charged.get(row, 0.0)) is not None:
                charged[row] = earlier + cost * shown[(system, model)] / count
    return charged


def cost_per_task(row: SummaryRow) -> float | None:
    """The records' own mean cost per task (a task's epochs averaged first; no index building); None when
    some unit's cost is unknown: a mean over the known part would make the row look cheaper than it was."""
    return row.cost_per_task_usd if row.cost_complete else None


def amortised_cost_per_task(row: SummaryRow, shares: Mapping[tuple[str, str], float | None]) -> float | None:
    """Mean cost per task with the row's index cost amortised over its tasks (module docstring); None when
    some unit's cost, or its index's, is unknown."""
    own, index = cost_per_task(row), shares.get((row.system, row.model), 0.0)
    # the per-task figure is one run of a task (epochs averaged), so the index is spread over the units that ran
    return None if own is None or index is None else own + index / max(1, row.units - row.unavailable)
