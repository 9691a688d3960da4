"""Hedged answers are visible (issue 25 item 9): on DAB's bookreview/query1 (gold `2020`) an answer listing
every decade from the 1900s to the 2020s passes DAB's containment check; it is now flagged `hedged` beside
that official verdict, and scores as wrong only under `--strict-answers` (strict_answers)."""

from __future__ import annotations

import shutil

import pytest

from data_agent_compare.core.scorer import score
from data_agent_compare.core.task import Answer
from data_agent_compare.core.trace import Trace
from data_agent_compare.evaluators.dab import gold_items
from data_agent_compare.evaluators.hedging import hedge_of

from helpers import FIXTURES, load_tasks

EVERY_DECADE = "Average rating by decade: " + ", ".join(f"{year}s" for year in range(1900, 2030, 10))
COMMITTED = "The 2020s have the highest average rating (4.6), ahead of the 2010s (4.4)."


@pytest.fixture(scope="module")
def dab_copy(tmp_path_factory):
    """The DAB fixture copied: loading DAB builds its missing review database beside the queries."""
    root = tmp_path_factory.mktemp("dab")
    shutil.copytree(FIXTURES / "dab", root, dirs_exist_ok=True)
    return root


@pytest.fixture(scope="module")
def query1(dab_copy):
    return next(t for t in load_tasks("dab", dab_copy) if t.id == "bookreview/query1")


def scored(task, text: str, strict: bool = False):
    trace = Trace(task_id=task.id, system="s", model="m")
    return score(task, Answer(text=text), trace, ["dab"], strict_answers=strict), trace


def test_the_answer_listing_every_decade_passes_the_official_check_and_is_flagged_hedged(query1):
    assert gold_items(query1) == ["2020"]
    sheet, trace = scored(query1, EVERY_DECADE)
    assert sheet.scores == {"correct": 1.0}  # the official verdict stays the headline: published parity
    assert [(w.code, w.detail) for w in trace.warnings] == [
        ("hedged", "the answer lists 13 years where the gold has 1")
    ]


def test_strict_answers_scores_the_hedged_answer_as_wrong_and_leaves_a_committed_one_alone(query1):
    assert scored(query1, EVERY_DECADE, strict=True)[0].scores == {"correct": 0.0}
    sheet, trace = scored(query1, COMMITTED, strict=True)
    assert sheet.scores == {"correct": 1.0} and trace.warnings == []


@pytest.mark.parametrize(
    ("text", "items", "flagged"),
    [
        ("It is 42.", ["42"], None),
        ("Maybe 40, 41, 42, 43 or 44.", ["42"], ("numbers", 5)),
        ("- Ann\n- Bob\n- Cy\n- Dee\n- Eve", ["Ann"], ("names", 5)),
        ("Ann, Bob, Cy, Dee, Eve", ["Ann", "Bob"], None),  # 5 names for a 2-name gold: under 2 × 2 + 3
        ("The 1990s, not the 1980s or 1970s.", ["1990s"], None),
    ],
)
def test_candidates_of_the_golds_kind_are_counted_against_the_gold(text, items, flagged):
    hedge = hedge_of(text, items)
    assert (hedge and (hedge.kind, hedge.candidates)) == flagged


def hedging_scripted_model(request, context):
    from data_agent_compare.providers.scripted import tool_call_message

    return tool_call_message("answer", {"answer": EVERY_DECADE})


@pytest.mark.parametrize(("strict", "correct"), [(False, 1.0), (True, 0.0)])
def test_a_run_records_the_hedge_beside_the_verdict_and_strict_answers_scores_it_wrong(
    tmp_path, scripted_model, query1, strict, correct
):
    from data_agent_compare.cli.commands.run import RunOptions
    from data_agent_compare.core import Benchmark, ScoringRules
    from data_agent_compare.core.runlog import read_run
    from data_agent_compare.engine.runner import execute
    from data_agent_compare.reports.summary import summarize
    from data_agent_compare.tools import default_tools

    from helpers import make_plan

    class Decades(Benchmark):
        """A test benchmark: bookreview/query1's gold, no database, DAB's scorer."""

        name = "dab"
        scoring = ScoringRules(scorers=("dab",))

        def load(self):
            return []

        def tools(self, task, settings):
            return default_tools(task, settings)

    assert RunOptions(strict_answers=True).overrides()["strict_answers"] is True  # --strict-answers
    task = query1.model_copy(update={"data": []})
    model = scripted_model(hedging_scripted_model)
    plan = make_plan(tmp_path, [task], model, ["tool_use"], Decades(tmp_path), strict_answers=strict)
    execute(plan)
    (record,) = read_run(plan.run_dir).records
    assert record.scores["correct"] == correct
    assert [w.code for w in record.warnings] == ["hedged"]
    assert summarize([record])[0].warnings == {"hedged": 1}  # counted as every warning is


def test_compare_score_rows_carry_the_hedge_beside_the_official_verdict(tmp_path, dab_copy):
    import json
    import subprocess

    from helpers import ROOT, compare_command

    entries = [{"dataset": "bookreview", "query": "1", "run": str(run), "answer": text}
               for run, text in enumerate([EVERY_DECADE, COMMITTED])]  # fmt: skip
    submission, out = tmp_path / "submission.json", tmp_path / "rows.jsonl"
    submission.write_text(json.dumps(entries))
    flags = ["score", "--benchmark", "dab", "--tasks-path", str(dab_copy), "--predictions", str(submission)]
    done = subprocess.run(compare_command(*flags, "--out", str(out)), cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    hedged, committed = [json.loads(line) for line in out.read_text().splitlines()]
    assert hedged["correct"] == committed["correct"] == 1.0
    assert [w["code"] for w in hedged.get("warnings", [])] == ["hedged"] and "warnings" not in committed
    said = " ".join(done.stdout.split())
    assert "1 of 2 answers gave a hedged answer (listed many candidates): the official verdict stands" in said

    strict = subprocess.run(compare_command(*flags, "--out", str(out), "--strict-answers"), cwd=ROOT,
                            capture_output=True, text=True)  # fmt: skip
    assert strict.returncode == 0, strict.stdout + strict.stderr
    assert [json.loads(line)["correct"] for line in out.read_text().splitlines()] == [0.0, 1.0]
    assert "scored as wrong (--strict-answers)" in " ".join(strict.stdout.split())
