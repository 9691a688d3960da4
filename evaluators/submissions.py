"""The files benchmarks publish, read as they are: each entry as one prediction record of ours.

`compare score --predictions FILE [--format NAME]` takes, besides our own JSON Lines (`jsonl`):

- `dab-leaderboard` (dab): DAB's leaderboard submission, one JSON list of `{dataset, query, run, answer}` or
  `{id, run, answer}` (`id` = `<dataset>/query<N>` or `<dataset>/<N>`), the dataset in either case (task
  id `<dataset lower case>/query<N>`); one run per entry.
- `dabstep-submission` (dabstep): DABstep's leaderboard JSON Lines `{task_id, agent_answer,
  reasoning_trace?}`, read line by line as ours.
- `dbgorilla-results` (dbgorilla): a file (or a folder of files) of weaviate-gorilla's
  `experimental-results/*.json`: `{model_name, average_ast_score, detailed_results: [{query_index,
  predicted_query, ast_score, ...}]}`; one run per model.
- `fdabench-results` (fdabench): the reference harness's result rows (`FDABench/utils/test_utils.py`,
  `create_query_row`): its DuckDB file (table `query_results`) or the rows as JSON / JSON Lines, matched
  to a task by (`instance_id`, `question_type`).

The format is recognised from the content when `--format` is not given. A published format is
read whole before anything is scored: an entry of the wrong shape, an unknown dataset or query,
a run given twice or an answer that is not text is a `SubmissionError` naming the entry (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The 12 datasets of DAB's final release as the leaderboard spells them.
DAB_DATASETS = (
    "agnews", "bookreview", "crmarenapro", "deps_dev_v1", "github_repos", "googlelocal",
    "music_brainz_20k", "pancancer_atlas", "patents", "stockindex", "stockmarket", "yelp",
)  # fmt: skip
FORMAT_BENCHMARK = {
    "jsonl": None,
    "dab-leaderboard": "dab",
    "dabstep-submission": "dabstep",
    "dbgorilla-results": "dbgorilla",
    "fdabench-results": "fdabench",
}
FORMATS = tuple(FORMAT_BENCHMARK)
HAS_RUNS = {"dab-leaderboard", "dbgorilla-results"}  # two entries for one task are two runs (epochs)
# Read line by line like ours (`predictions.read_predictions`): a bad line is reported and skipped (exit 1).
# DABstep's submission lines are our DABstep lines: `task_id`, `agent_answer` (`reasoning_trace` ignored).
LINE_FORMATS = {"jsonl", "dabstep-submission"}


class SubmissionError(Exception):
    """The submission as a whole cannot be scored (names the file and the entry): exit 2."""


@dataclass
class Entry:
    """One prediction of a published file, as our record (`task_id` + the benchmark's answer field)."""

    where: str  # "entry 12", "line 3", "gpt-4o.json detailed_results[4]"
    record: dict[str, Any]
    run: str | None = None
    model: str | None = None
    published: dict[str, Any] = field(default_factory=dict)  # the publisher's own per-entry figures


@dataclass
class Submission:
    format: str
    entries: list[Entry]
    published: dict[str, float] = field(default_factory=dict)  # the publisher's aggregate, by name


def detect_format(path: Path) -> str:
    """The format of `path` from its content (a folder: DBGorilla results; a DuckDB file: FDABench)."""
    if path.is_dir():
        return "dbgorilla-results"
    with path.open("rb") as file:
        head = file.read(4096)
    if head.startswith(b"DUCK", 8):  # DuckDB's file header: 8 bytes of checksum, then the magic
        return "fdabench-results"
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if text.startswith("["):
        keys = _first_keys(path)
        if {"instance_id", "question_type"} <= keys:
            return "fdabench-results"
        if "run" in keys and ({"dataset", "query"} <= keys or "id" in keys):
            return "dab-leaderboard"
        return "jsonl"
    if text.startswith("{") and '"detailed_results"' in path.read_text(encoding="utf-8", errors="replace")[:100_000]:
        return "dbgorilla-results"
    first = text.split("\n", 1)[0]
    if '"instance_id"' in first and '"question_type"' in first and '"design_pattern"' in first:
        return "fdabench-results"
    if '"agent_answer"' in first and '"task_id"' in first:
        return "dabstep-submission"
    return "jsonl"


def _first_keys(path: Path) -> set[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return set()
    return set(data[0]) if isinstance(data, list) and data and isinstance(data[0], dict) else set()


def read_submission(path: Path, fmt: str) -> Submission:
    """The entries of a published file read whole (not `LINE_FORMATS`: those are read line by line)."""
    readers = {
        "dab-leaderboard": _dab_leaderboard,
        "dbgorilla-results": _dbgorilla_results,
        "fdabench-results": _fdabench_results,
    }
    return readers[fmt](path)


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as bad:
        raise SubmissionError(f"{path}: not UTF-8 (byte offset {bad.start})") from None
    except json.JSONDecodeError as bad:
        raise SubmissionError(f"{path}: not valid JSON (line {bad.lineno}: {bad.msg})") from None


# ---------------------------------------------------------------- DAB


def _dab_leaderboard(path: Path) -> Submission:
    data = _load_json(path)
    if not isinstance(data, list) or not data:
        raise SubmissionError(f"{path}: a DAB submission is a non-empty JSON list of {{dataset, query, run, answer}}")
    return Submission("dab-leaderboard", [_dab_entry(path, number, item) for number, item in enumerate(data)])


def _dab_entry(path: Path, number: int, item: Any) -> Entry:
    where = f"{path}: entry {number}"
    if not isinstance(item, dict):
        raise SubmissionError(f"{where}: expected an object, got {type(item).__name__}")
    dataset, query = _dab_task(where, item)
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


def _dab_task(where: str, item: dict[str, Any]) -> tuple[str, str]:
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


# ---------------------------------------------------------------- shared


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as bad:
        raise SubmissionError(f"{path}: not UTF-8 (byte offset {bad.start})") from None
    return [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


# ---------------------------------------------------------------- DBGorilla


def _dbgorilla_results(path: Path) -> Submission:
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    entries, published = [], {}
    for file in files:
        data = _load_json(file)
        if not isinstance(data, dict) or not isinstance(data.get("detailed_results"), list):
            if path.is_dir():
                continue  # the folder also holds other JSON (plots' inputs, legacy files)
            raise SubmissionError(f"{file}: expected an experiment summary with detailed_results")
        model = data.get("model_name")
        if not isinstance(model, str) or not model:
            raise SubmissionError(f"{file}: field 'model_name': expected the model's name")
        if isinstance(data.get("average_ast_score"), int | float):
            published[f"{model} average_ast_score"] = float(data["average_ast_score"])
        entries += [_gorilla_entry(file, model, i, item) for i, item in enumerate(data["detailed_results"])]
    if not entries:
        raise SubmissionError(f"{path}: no DBGorilla experiment results found")
    return Submission("dbgorilla-results", entries, published)


def _gorilla_entry(file: Path, model: str, number: int, item: Any) -> Entry:
    where = f"{file.name} detailed_results[{number}]"
    if not isinstance(item, dict) or isinstance(item.get("query_index"), bool):
        raise SubmissionError(f"{file}: detailed_results[{number}]: expected an object with query_index")
    if not isinstance(item.get("query_index"), int):
        raise SubmissionError(f"{file}: detailed_results[{number}]: field 'query_index': expected an integer")
    predicted = item.get("predicted_query")
    if predicted is not None and not isinstance(predicted, dict):
        raise SubmissionError(
            f"{file}: detailed_results[{number}]: field 'predicted_query': expected an object or null"
        )
    record = {"task_id": f"dbgorilla-{item['query_index']}", "predicted_query": predicted}
    published = {"ast_score": item["ast_score"]} if isinstance(item.get("ast_score"), int | float) else {}
    return Entry(where, record, run=model, model=model, published=published)


# ---------------------------------------------------------------- FDABench


def _fdabench_results(path: Path) -> Submission:
    rows = _fdabench_rows(path)
    entries = []
    for number, row in enumerate(rows):
        where = f"row {number}"
        if not isinstance(row, dict) or not row.get("instance_id") or not row.get("question_type"):
            raise SubmissionError(f"{path}: {where}: expected a result row with instance_id and question_type")
        record = {"instance_id": str(row["instance_id"]), "question_type": str(row["question_type"])}
        if row["question_type"] in ("single_choice", "multiple_choice"):
            record["selected_answer"] = _text_field(path, where, row, "selected_answer")
        else:
            record["generated_report"] = _text_field(path, where, row, "report")
        tools = row.get("tools_executed")
        if tools:
            record["tools_executed"] = tools
        model = str(row["model"]) if row.get("model") else None
        run = "/".join(str(row[k]) for k in ("design_pattern", "model") if row.get(k)) or None
        published = {k: row[k] for k in ("rouge1", "rouge2", "rougeL", "tool_recall") if isinstance(row.get(k), float)}
        entries.append(Entry(where, record, run=run, model=model, published=published))
    if not entries:
        raise SubmissionError(f"{path}: no result rows")
    return Submission("fdabench-results", entries)


def _text_field(path: Path, where: str, row: dict[str, Any], name: str) -> str:
    value = row.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SubmissionError(f"{path}: {where}: field {name!r}: expected text, got {type(value).__name__}")
    return value


def _fdabench_rows(path: Path) -> list[Any]:
    with path.open("rb") as file:
        head = file.read(16)
    if head[8:12] == b"DUCK":
        import duckdb

        try:
            with duckdb.connect(str(path), read_only=True) as con:
                cursor = con.execute("SELECT * FROM query_results")
                names = [column[0] for column in cursor.description]
                return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        except duckdb.Error as bad:
            raise SubmissionError(f"{path}: not a FDABench result database (table query_results): {bad}") from None
    text = path.read_text(encoding="utf-8").lstrip("\ufeff")
    if text.lstrip().startswith("["):
        return _load_json(path)
    rows = []
    for number, line in _lines(path):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as bad:
            raise SubmissionError(f"{path}: line {number}: not valid JSON ({bad.msg})") from None
    return rows
