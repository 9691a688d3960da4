"""DAB's leaderboard submission (`dab-leaderboard`), read as it is published.

One JSON list of `{dataset, query, run, answer}` or `{id, run, answer}` (`id` = `<dataset>/query<N>` or
`<dataset>/<N>`), the dataset in either case (task id `<dataset lower case>/query<N>`); one run per entry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.published import Entry, PublishedFormat, Sample, Submission, SubmissionError, load_json

# The 12 datasets of DAB's final release as the leaderboard spells them.
DAB_DATASETS = (
    "agnews", "bookreview", "crmarenapro", "deps_dev_v1", "github_repos", "googlelocal",
    "music_brainz_20k", "pancancer_atlas", "patents", "stockindex", "stockmarket", "yelp",
)  # fmt: skip


def recognizes(sample: Sample) -> bool:
    keys = sample.first_keys
    return "run" in keys and ({"dataset", "query"} <= keys or "id" in keys)


def read_leaderboard(path: Path) -> Submission:
    data = load_json(path)
    if not isinstance(data, list) or not data:
        raise SubmissionError(f"{path}: a DAB submission is a non-empty JSON list of {{dataset, query, run, answer}}")
    return Submission("dab-leaderboard", [_entry(path, number, item) for number, item in enumerate(data)])


def _entry(path: Path, number: int, item: Any) -> Entry:
    where = f"{path}: entry {number}"
    if not isinstance(item, dict):
        raise SubmissionError(f"{where}: expected an object, got {type(item).__name__}")
    dataset, query = _task(where, item)
    if dataset not in DAB_DATASETS:
        raise SubmissionError(f"{where}: field 'dataset': unknown DAB dataset {dataset!r}")
    run = item.get("run")
    if isinstance(run, bool) or not isinstance(run, str | int) or not str(run).strip():
        raise SubmissionError(f"{where}: field 'run': expected a run number as text (\"0\"), got {run!r}")
    answer = item.get("answer")
    if not isinstance(answer, str):
        raise SubmissionError(f"{where}: field 'answer': expected text, got {type(answer).__name__}")
    record = {"task_id": f"{dataset}/query{query}", "answer": answer}
    return Entry(where=f"entry {number}", record=record, run=str(run).strip())


def _task(where: str, item: dict[str, Any]) -> tuple[str, str]:
    """(dataset in lower case, query number) from `dataset` + `query` or from `id`."""
    if "id" in item and "dataset" not in item:
        ident = item["id"]
        if not isinstance(ident, str) or "/" not in ident:
            raise SubmissionError(f"{where}: field 'id': expected '<dataset>/query<N>', got {ident!r}")
        dataset, _, query = ident.rpartition("/")
    elif "dataset" in item and "query" in item:
        dataset, query = item["dataset"], item["query"]
        if not isinstance(dataset, str):
            raise SubmissionError(f"{where}: field 'dataset': expected text, got {type(dataset).__name__}")
    else:
        missing = [key for key in ("dataset", "query", "run", "answer") if key not in item]
        raise SubmissionError(f"{where}: missing field(s) {missing} (or give 'id', 'run', 'answer')")
    query = str(query).strip().lower().removeprefix("query")
    if isinstance(item.get("query"), bool) or not query.isdigit():
        raise SubmissionError(f"{where}: field 'query': expected a query number, got {item.get('query', query)!r}")
    return dataset.strip().lower().removeprefix("query_"), str(int(query))


DAB_LEADERBOARD = PublishedFormat("dab-leaderboard", recognizes, read_leaderboard, has_runs=True)
