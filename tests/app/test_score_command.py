"""`compare score` on each benchmark's real sample: predictions made elsewhere, scored by the official rules."""

import json
import shutil
from dataclasses import replace

from typer.testing import CliRunner

from data_agent_compare.cli.main import app

from helpers import FIXTURES

runner = CliRunner()


def score(tmp_path, benchmark, tasks_path, records):
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "scores.jsonl"
    flags = ["score", "--benchmark", benchmark, "--predictions", str(predictions), "--out", str(out)]
    result = runner.invoke(app, [*flags, "--tasks", str(tasks_path)])
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return result, {row["task_id"]: row for row in rows}


def test_dbgorilla_gold_calls_score_one_and_no_call_scores_zero(tmp_path):
    sample = json.loads((FIXTURES / "dbgorilla/queries-sample.json").read_text())
    records = [{"task_id": f"dbgorilla-{r['index']}", "predicted_query": r["query"]} for r in sample[1:]]
    records.append({"task_id": f"dbgorilla-{sample[0]['index']}", "predicted_query": None})
    result, rows = score(tmp_path, "dbgorilla", FIXTURES / "dbgorilla/queries-sample.json", records)
    assert result.exit_code == 0, result.output
    assert len(rows) == 40
    assert all(rows[f"dbgorilla-{r['index']}"]["ast_score"] == 1.0 for r in sample[1:])
    assert all(rows[f"dbgorilla-{r['index']}"]["exact_match"] == 1.0 for r in sample[1:])
    first = rows[f"dbgorilla-{sample[0]['index']}"]
    assert (first["ast_score"], first["exact_match"], first["no_tool_call"]) == (0.0, 0.0, 1.0)
    assert "collection_routing_accuracy" in result.output and "no_tool_call_rate" in result.output


def test_dabstep_answers_scored_by_the_official_rule(tmp_path):
    dev = [json.loads(line) for line in (FIXTURES / "dabstep/dev.jsonl").read_text().splitlines()]
    records = [{"task_id": t["task_id"], "agent_answer": t["answer"].upper()} for t in dev]  # case is ignored
    records[0]["agent_answer"] = "BE"  # task 5: gold NL
    result, rows = score(tmp_path, "dabstep", FIXTURES / "dabstep", records)
    assert result.exit_code == 0, result.output
    assert rows["5"]["correct"] == 0.0
    assert all(rows[t["task_id"]]["correct"] == 1.0 for t in dev[1:])


def test_fdabench_choices_and_tool_lists(tmp_path):
    tasks = FIXTURES / "fdabench"
    records = [
        {
            "task_id": "FDA1248",
            "selected_answer": ["B", "C", "E", "H"],
            "tools_executed": ["get_schema_info", "generated_sql", "execute_sql"],
        },
        {"task_id": "FDA1249", "selected_answer": "['A']"},
    ]
    result, rows = score(tmp_path, "fdabench", tasks, records)
    assert result.exit_code == 0, result.output
    assert rows["FDA1248"]["exact_match"] == 1.0 and rows["FDA1248"]["jaccard"] == 1.0
    assert 0.0 < rows["FDA1248"]["tos"] <= 1.0
    assert rows["FDA1249"]["exact_match"] == 0.0


def test_dab_answers_validated_against_the_ground_truth(tmp_path):
    records = [
        {"task_id": "bookreview/query1", "answer": "The 2020s have the highest average rating."},
        {"task_id": "bookreview/query3", "answer": "I could not find it."},
    ]
    dataset = tmp_path / "query_bookreview"  # a copy: loading builds the review SQLite next to the dump
    shutil.copytree(FIXTURES / "dab/query_bookreview", dataset)
    result, rows = score(tmp_path, "dab", dataset, records)
    assert result.exit_code == 0, result.output
    assert rows["bookreview/query1"]["correct"] == 1.0
    assert rows["bookreview/query3"]["correct"] == 0.0


def test_bad_tasks_path_exits_2_with_the_loader_error(tmp_path):
    predictions = tmp_path / "p.jsonl"
    predictions.write_text('{"task_id": "dbgorilla-1", "predicted_query": null}\n')
    broken = tmp_path / "queries.json"
    broken.write_text('[{"database_schema": "{}"}]')  # record 0 has no `query`
    flags = ["score", "--benchmark", "dbgorilla", "--tasks", str(broken), "--predictions", str(predictions)]
    result = runner.invoke(app, flags)
    assert result.exit_code == 2
    assert "queries.json:0" in result.output and "field" in result.output


def test_a_scorer_exploding_on_one_record_loses_no_other_row(tmp_path):
    """One prediction makes a scorer raise: its row is written with the failure and the error, and
    every other row is written too (rows go out as they are scored)."""

    from data_agent_compare.core import BENCHMARKS, SCORERS, register_benchmark, register_scorer, reports
    from data_agent_compare.tasks.dabstep import DabStep

    @reports("correct")
    def fragile(task, answer, trace, judge):
        if answer.text == "boom":
            raise ArithmeticError("29-digit number")
        return {"correct": 1.0}

    class FragileDabStep(DabStep):
        name = "test_fragile_dabstep"
        scoring = replace(DabStep.scoring, scorers=("test_fragile", "tool_success"))

    register_scorer("test_fragile")(fragile)
    register_benchmark(FragileDabStep)
    try:
        dev = [json.loads(line) for line in (FIXTURES / "dabstep/dev.jsonl").read_text().splitlines()]
        records = [
            {"task_id": t["task_id"], "agent_answer": "boom" if i == 3 else t["answer"]} for i, t in enumerate(dev)
        ]
        result, rows = score(tmp_path, "test_fragile_dabstep", FIXTURES / "dabstep", records)
    finally:
        BENCHMARKS.unregister("test_fragile_dabstep")
        SCORERS.unregister("test_fragile")
    assert result.exit_code == 1 and "scorer failed on" in result.output
    assert len(rows) == len(dev)
    exploded = rows[dev[3]["task_id"]]
    assert exploded["correct"] is None and "ArithmeticError: 29-digit number" in exploded["scoring_error"]
    assert all(rows[t["task_id"]]["correct"] == 1.0 for i, t in enumerate(dev) if i != 3)
