"""How many published DAB answers the hedge check (evaluators/hedging.py) flags; issue 25 item 9's figures.

    .venv/bin/python tests/evaluators/measure_hedging.py [DATA]    (DATA: /work/shared/data by default)

Reads the shared leaderboard submission (270 answers) and the shared published trajectories (their final
answers). An answer is checked against its query's ground_truth.csv when the data holds it (the submission's
other datasets have no ground truth here, so their answers cannot be checked and are counted apart)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from data_agent_compare.evaluators.dab import fallback_validate, ground_truth_items
from data_agent_compare.evaluators.hedging import hedge_of
from data_agent_compare.tasks.dab_trajectories import find_trials, read_trial


def ground_truth_file(root: Path, dataset: str, query: str) -> Path | None:
    folders = [f for f in root.glob("query_*") if f.name.lower() == f"query_{dataset.lower()}"]
    csv = folders[0] / f"query{query}" / "ground_truth.csv" if folders else None
    return csv if csv is not None and csv.is_file() else None


def flag(csv: Path | None, answer: str) -> str | None:
    """The hedge's detail, with whether the answer passes DAB's containment fallback; None when not flagged."""
    hedge = hedge_of(answer, ground_truth_items(csv)) if csv is not None else None
    if hedge is None:
        return None
    return f"{hedge.detail}; containment check: {'pass' if fallback_validate(csv, answer).passed else 'fail'}"


def measure_submission(data: Path) -> None:
    root = data / "dab-final-sample"
    entries = json.loads(next((root / "submissions").glob("*.json")).read_text())
    checked, flagged = 0, []
    for entry in entries:
        csv = ground_truth_file(root, entry["dataset"], entry["query"])
        checked += csv is not None
        detail = flag(csv, entry["answer"])
        if detail is not None:
            flagged.append(f"{entry['dataset']}/query{entry['query']} run {entry['run']}: {detail}")
    print(f"submission: {len(entries)} answers, {checked} with ground truth here, {len(flagged)} flagged hedged")
    print("".join(f"  {line}\n" for line in flagged), end="")


def measure_trajectories(data: Path) -> None:
    root, gold_root = data / "dab-trajectories", data / "dab-sample"
    trials = [read_trial(folder, "dab-react") for folder in find_trials(root)]
    flagged = []
    for trial in trials:
        dataset, _, query = trial.task_id.partition("/")
        detail = flag(ground_truth_file(gold_root, dataset, query.removeprefix("query")), trial.answer.text)
        if detail is not None:
            flagged.append(f"{trial.model} {trial.task_id} run {trial.run}: {detail}")
    print(f"trajectories: {len(trials)} final answers, {len(flagged)} flagged hedged")
    print("".join(f"  {line}\n" for line in flagged), end="")


if __name__ == "__main__":
    shared = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/work/shared/data")
    measure_submission(shared)
    measure_trajectories(shared)
