"""DBGorilla's published results (`dbgorilla-results`): a file (or a folder of files) of weaviate-gorilla's
`experimental-results/*.json`: `{model_name, average_ast_score, detailed_results: [{query_index,
predicted_query, ast_score, ...}]}`; one run per model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.published import Entry, PublishedFormat, Sample, Submission, SubmissionError, load_json


def recognizes(sample: Sample) -> bool:
    return sample.is_dir or (sample.text_start.startswith("{") and '"detailed_results"' in sample.text_start)


def read_results(path: Path) -> Submission:
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    entries, published = [], {}
    for file in files:
        data = load_json(file)
        if not isinstance(data, dict) or not isinstance(data.get("detailed_results"), list):
            if path.is_dir():
                continue  # the folder also holds other JSON (plots' inputs, legacy files)
            raise SubmissionError(f"{file}: expected an experiment summary with detailed_results")
        model = data.get("model_name")
        if not isinstance(model, str) or not model:
            raise SubmissionError(f"{file}: field 'model_name': expected the model's name")
        if isinstance(data.get("average_ast_score"), int | float):
            published[f"{model} average_ast_score"] = float(data["average_ast_score"])
        entries += [_entry(file, model, i, item) for i, item in enumerate(data["detailed_results"])]
    if not entries:
        raise SubmissionError(f"{path}: no DBGorilla experiment results found")
    return Submission("dbgorilla-results", entries, published)


def _entry(file: Path, model: str, number: int, item: Any) -> Entry:
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


DBGORILLA_RESULTS = PublishedFormat("dbgorilla-results", recognizes, read_results, has_runs=True)
