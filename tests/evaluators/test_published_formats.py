"""Each benchmark names the files it publishes (issue 28 item 2): `compare score` finds every format through the
registered benchmarks, so a plug-in benchmark's published format is recognised and read like a built-in one,
and `evaluators/submissions.py` holds no benchmark's format."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from data_agent_compare.core import BENCHMARKS, register_benchmark
from data_agent_compare.core.published import Entry, PublishedFormat, Submission
from data_agent_compare.evaluators import submissions
from data_agent_compare.tasks.dabstep import DabStep


def read_toy(path: Path) -> Submission:
    answers = json.loads(path.read_text())["toy_answers"]
    records = [{"task_id": task, "agent_answer": text} for task, text in answers.items()]
    entries = [Entry(f"answer {number}", record) for number, record in enumerate(records)]
    return Submission("toy-results", entries)


TOY = PublishedFormat("toy-results", recognizes=lambda sample: '"toy_answers"' in sample.text_start, read=read_toy)


class ToyBench(DabStep):
    """A test plug-in benchmark with a published format of its own."""

    name = "test_toy_published"
    loading = replace(DabStep.loading, published_formats=(TOY,))


def test_a_plug_in_benchmarks_published_format_is_recognised_and_read_like_a_built_in_one(tmp_path):
    path = tmp_path / "toy.json"
    path.write_text(json.dumps({"toy_answers": {"5": "NL", "49": "B"}}))
    register_benchmark(ToyBench)
    try:
        assert submissions.detect_format(path) == "toy-results"
        assert submissions.FORMAT_BENCHMARK["toy-results"] == "test_toy_published"
        assert "toy-results" in submissions.FORMATS and "toy-results" not in submissions.LINE_FORMATS
        entries = submissions.read_submission(path, "toy-results").entries
        assert [e.record["task_id"] for e in entries] == ["5", "49"] and entries[0].record["agent_answer"] == "NL"
    finally:
        BENCHMARKS.unregister("test_toy_published")
    assert submissions.detect_format(path) == "jsonl"  # without the benchmark nobody reads it


def test_the_built_in_formats_belong_to_their_benchmarks_and_submissions_names_none():
    assert submissions.FORMAT_BENCHMARK == {
        "jsonl": None,
        "dab-leaderboard": "dab",
        "dabstep-submission": "dabstep",
        "dbgorilla-results": "dbgorilla",
        "fdabench-results": "fdabench",
    }
    assert {"dab-leaderboard", "dbgorilla-results"} == submissions.HAS_RUNS
    source = Path(submissions.__file__).read_text()
    assert not any(name in source for name in ("dab-leaderboard", "detailed_results", "instance_id", "agent_answer"))
