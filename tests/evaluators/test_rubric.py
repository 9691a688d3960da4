"""Rubric score (RS): SQL_ACC by values on bundled gold results; the LLM judge is a scripted test model."""

import json
import re

import pytest

from data_agent_compare.core.model import CallContext, Message, MeteredModel, ModelError, ModelRequest
from data_agent_compare.core.scorer import ScoringError, score
from data_agent_compare.core.task import Answer, Gold, QuestionType, Rubric, RubricDimension, Task
from data_agent_compare.core.trace import Budgets, Trace, TraceRecorder
from data_agent_compare.evaluators.rubric import (
    JUDGE_AGENT,
    JUDGE_PROMPT_HASH,
    JUDGE_VERSION,
    MAX_ROWS,
    RubricJudge,
    score_rubric,
    sql_accuracy_by_values,
)
from data_agent_compare.providers.scripted import ScriptedProvider

from helpers import SCRIPTED, load_tasks

VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "number", "enum": [0, 0.5, 1]}, "justification": {"type": "string"}},
    "required": ["score", "justification"],
    "additionalProperties": False,
}


def report_task(task_id: str = "BND004") -> Task:
    return next(t for t in load_tasks("bundled") if t.id == task_id)


def dimension_of(request: ModelRequest) -> str:
    return re.search(r"^Dimension: (\w+)$", request.messages[-1].content or "", re.M).group(1)


class ScriptedJudge:
    """A scripted test judge: replies per dimension from a table, records every request."""

    def __init__(self, replies: dict[str, str | float]) -> None:
        self.replies = replies
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest, context: CallContext) -> Message:
        self.requests.append(request)
        reply = self.replies[dimension_of(request)]
        if isinstance(reply, str):  # raw content, e.g. malformed JSON
            return Message(role="assistant", content=reply)
        return Message(role="assistant", content=json.dumps({"score": reply, "justification": "scripted"}))

    def dimensions(self) -> list[str]:
        return [dimension_of(r) for r in self.requests]


def judge_model(respond) -> MeteredModel:
    recorder = TraceRecorder(Trace(task_id="judge", system="rubric_judge", model=SCRIPTED.alias), Budgets())
    return MeteredModel(SCRIPTED, ScriptedProvider(respond), recorder, system="rubric_judge")


ALL_ONE = {"SQL_ACCURACY": 1, "EXTERNAL_INTEGRATION": 1, "LOGICAL_REASONING": 1, "COMPLETENESS": 1}


# ---------------------------------------------------------------- SQL_ACC by values


@pytest.mark.parametrize("task_id", ["BND004", "BND008", "BND012", "BND016"])
def test_gold_report_shows_every_value_of_its_gold_sql_result(task_id):
    gold = report_task(task_id).gold
    assert sql_accuracy_by_values(gold.sql_result, gold.report) == 1.0


def test_one_changed_number_fails_sql_acc_by_values():
    gold = report_task().gold
    assert "$3,481,010.29" in gold.report
    assert sql_accuracy_by_values(gold.sql_result, gold.report.replace("$3,481,010.29", "$3,481,010.92")) == 0.0


def test_gold_report_with_flags_written_as_yes_no_misses_by_values():
    gold = report_task("BND020").gold  # watch_list 1/0 in the result, "yes"/"no" in the report
    assert sql_accuracy_by_values(gold.sql_result, gold.report) == 0.0


@pytest.mark.parametrize(
    "report",
    ["Founded in 2012.", "Plan FY12.", "It grew 12.5 %.", "1,012 orders", "WARE-NBV12", "v12", "12,5"],
)
def test_a_number_inside_another_token_is_not_read(report):
    assert sql_accuracy_by_values("n\n12\n", report) == 0.0


@pytest.mark.parametrize(
    ("cell", "report"),
    [
        ("12", "There were 12 orders."),
        ("1234567.8", "Revenue was $1,234,567.80."),
        ("1234567.8", "Revenue was 1234567.8"),
        ("-295007.41", "a gap of $-295,007.41"),
        ("-295007.41", "a shortfall of $295,007.41"),  # sign stated in words
        ("105.49", "attainment 105.49 %"),
        ("105.49", "attainment 105.5%"),  # rounded for display, within 0.5 %
        ("105.49", "attainment 105 %"),
        ("0.1235", "a share of 12.35 %"),  # fraction shown as a percentage
        ("0.1235", "a share of 12.35 percent"),
        ("26.9", "margin 26.90 %"),
        ("0.0", "$0.00 of discount"),
    ],
)
def test_number_formats_that_show_a_gold_number(cell, report):
    assert sql_accuracy_by_values(f"v\n{cell}\n", report) == 1.0


@pytest.mark.parametrize(
    ("cell", "report"),
    [
        ("105.49", "attainment 105.4 %"),  # not a rounding of 105.49
        ("20.36", "about 20 days"),  # a rounding, but 1.8 % off
        ("0.4", "0 of them"),
        ("3481010.29", "$3.48M"),  # scale suffixes are left to the semantic fallback
    ],
)
def test_number_formats_that_do_not_show_a_gold_number(cell, report):
    assert sql_accuracy_by_values(f"v\n{cell}\n", report) == 0.0


def test_text_values_match_whole_phrases_case_insensitively():
    result = "region,kitchen\nWest,Kitchen & Dining\n"
    assert sql_accuracy_by_values(result, "the WEST region sold kitchen &\n dining items") == 1.0
    assert sql_accuracy_by_values(result, "Midwest and Western stores sold Kitchen & Dining") == 0.0


def test_only_the_first_rows_of_a_long_result_count():
    rows = [f"r{i},{1000 + i}" for i in range(MAX_ROWS + 5)]
    result = "name,value\n" + "\n".join(rows) + "\n"
    shown = " ".join(r.replace(",", " ") for r in rows[:MAX_ROWS])
    assert sql_accuracy_by_values(result, shown) == 1.0


def test_no_sql_result_gives_none():
    assert sql_accuracy_by_values("", "any report") is None
    assert sql_accuracy_by_values("region,revenue\n", "any report") is None


# ---------------------------------------------------------------- the judge (a scripted test model)


def test_scripted_judge_gets_one_call_per_dimension_with_schema_temperature_0_and_full_report():
    task, scripted = report_task(), ScriptedJudge(ALL_ONE)
    report = task.gold.report + "\n\nAppendix: " + "x" * 20_000  # long, but under the limit
    scores = RubricJudge(judge_model(scripted)).score(task, Answer(report=report))
    # SQL_ACC comes from the values; the judge is asked about the other three only.
    assert scripted.dimensions() == ["EXTERNAL_INTEGRATION", "LOGICAL_REASONING", "COMPLETENESS"]
    for request in scripted.requests:
        assert request.response_schema == VERDICT_SCHEMA
        assert request.temperature == 0
        assert report in request.messages[-1].content
    assert "Defines FY2020 as 1 July 2019 to 30 June 2020" in scripted.requests[0].messages[-1].content
    assert [d.source for d in scores.dimensions] == ["values", "judge", "judge", "judge"]
    assert scores.rs == 1.0
    assert scores.errors == []


def test_rs_uses_the_task_weights_with_a_scripted_judge():
    weights = {"SQL_ACCURACY": 0.4, "EXTERNAL_INTEGRATION": 0.3, "LOGICAL_REASONING": 0.2, "COMPLETENESS": 0.1}
    task = report_task()
    rubric = Rubric(dimensions=[RubricDimension(name=n, weight=w) for n, w in weights.items()])
    task = task.model_copy(update={"gold": task.gold.model_copy(update={"rubric": rubric})})
    scripted = ScriptedJudge({"EXTERNAL_INTEGRATION": 0.5, "LOGICAL_REASONING": 0, "COMPLETENESS": 1})
    scores = RubricJudge(judge_model(scripted)).score(task, Answer(report=task.gold.report))
    assert [d.weight for d in scores.dimensions] == list(weights.values())
    assert scores.rs == pytest.approx((0.4 * 1 + 0.3 * 0.5 + 0.2 * 0 + 0.1 * 1) / 1.0)


def test_dimensions_missing_from_the_task_rubric_are_inactive_with_a_scripted_judge():
    task = report_task()
    rubric = Rubric(dimensions=[RubricDimension(name="SQL_ACCURACY"), RubricDimension(name="COMPLETENESS")])
    task = task.model_copy(update={"gold": task.gold.model_copy(update={"rubric": rubric})})
    scripted = ScriptedJudge({"COMPLETENESS": 0})
    scores = RubricJudge(judge_model(scripted)).score(task, Answer(report=task.gold.report))
    assert [d.name for d in scores.dimensions] == ["SQL_ACCURACY", "COMPLETENESS"]
    assert scores.rs == 0.5


def test_changed_number_makes_exactly_one_sql_fallback_call_to_the_scripted_judge():
    task, scripted = report_task(), ScriptedJudge({**ALL_ONE, "SQL_ACCURACY": 0})
    report = task.gold.report.replace("$3,481,010.29", "$3,481,010.92")
    scores = RubricJudge(judge_model(scripted)).score(task, Answer(report=report))
    assert scripted.dimensions().count("SQL_ACCURACY") == 1
    fallback = next(r for r in scripted.requests if dimension_of(r) == "SQL_ACCURACY")
    assert fallback.response_schema["properties"]["score"]["enum"] == [0, 1]
    assert fallback.temperature == 0
    assert "not found written out in the report: 3481010.29." in fallback.messages[-1].content
    assert report in fallback.messages[-1].content
    sql = scores.dimensions[0]
    assert (sql.name, sql.score, sql.source) == ("SQL_ACCURACY", 0.0, "judge")
    assert scores.rs == 0.75


def test_scripted_judge_can_accept_a_result_written_differently():
    task, scripted = report_task("BND020"), ScriptedJudge(ALL_ONE)  # yes/no flags for 1/0
    scores = RubricJudge(judge_model(scripted)).score(task, Answer(report=task.gold.report))
    assert (scores.dimensions[0].score, scores.dimensions[0].source) == (1.0, "judge")
    assert scores.rs == 1.0


@pytest.mark.parametrize(
    "reply",
    [
        "not json",
        json.dumps({"score": 0.7, "justification": "x"}),  # not a level
        json.dumps({"score": 1}),  # missing justification
        json.dumps({"score": 1, "justification": "x", "extra": 1}),
        json.dumps({"score": True, "justification": "x"}),
    ],
)
def test_invalid_reply_of_scripted_judge_leaves_the_dimension_unscored(reply):
    task = report_task()
    scripted = ScriptedJudge({"EXTERNAL_INTEGRATION": 0, "LOGICAL_REASONING": reply, "COMPLETENESS": 1})
    scores = RubricJudge(judge_model(scripted)).score(task, Answer(report=task.gold.report))
    assert scores.score_of("LOGICAL_REASONING") is None
    assert len(scores.errors) == 1 and scores.errors[0].startswith("LOGICAL_REASONING: invalid judge reply")
    assert scores.rs is None  # never the mean of the three dimensions that did get a verdict


def test_a_failing_scripted_judge_call_is_a_scoring_error_with_rs_a_failure_and_the_judged_dimensions_kept():
    def fails(request: ModelRequest, context: CallContext) -> Message:
        raise ModelError("provider down")

    task = report_task()
    with pytest.raises(ScoringError, match="EXTERNAL_INTEGRATION: judge call failed: provider down") as raised:
        score_rubric(task, Answer(report=task.gold.report), RubricJudge(judge_model(fails)))
    assert raised.value.scores == {"sql_acc": 1.0, "ext_integ": None, "log_reason": None, "complete": None}


def test_a_judge_failing_on_two_of_four_dimensions_gives_a_scoring_error_and_no_rs_in_the_record():
    task = report_task()
    scripted = ScriptedJudge({"EXTERNAL_INTEGRATION": "not json", "LOGICAL_REASONING": "not json", "COMPLETENESS": 1})
    judge = judge_model(scripted)
    trace = Trace(task_id=task.id, system="s", model="m")
    sheet = score(task, Answer(report=task.gold.report), trace, ["rubric"], judge)
    assert sheet.scores["rs"] is None  # was 1.0 (the mean of SQL_ACC and COMPLETENESS alone), then 0.0
    assert (sheet.scores["sql_acc"], sheet.scores["complete"], sheet.scores["ext_integ"]) == (1.0, 1.0, None)
    assert sheet.error.startswith("rubric: ScoringError: RS not scored: EXTERNAL_INTEGRATION: invalid judge reply")
    assert "LOGICAL_REASONING: invalid judge reply" in sheet.error


def test_a_scripted_judge_answering_500_on_one_dimension_leaves_rs_out_of_its_mean_and_counted_beside_it():
    """Issue 25 item 4: a judge 500 on one dimension used to set RS = 0, inside the mean."""
    from data_agent_compare.core.runlog import ResultRecord
    from data_agent_compare.core.trace import Usage
    from data_agent_compare.reports.summary import summarize

    task = report_task()

    def fails_on_completeness(request: ModelRequest, context: CallContext) -> Message:
        if dimension_of(request) == "COMPLETENESS":
            raise ModelError("HTTP 500: internal error", status_code=500)
        return Message(role="assistant", content=json.dumps({"score": 1, "justification": "scripted"}))

    trace = Trace(task_id=task.id, system="s", model="m")
    failed = score(task, Answer(report=task.gold.report), trace, ["rubric"], judge_model(fails_on_completeness))
    assert failed.scores["rs"] is None and "COMPLETENESS: judge call failed: HTTP 500" in failed.error
    judged = score(task, Answer(report=task.gold.report), trace, ["rubric"], judge_model(ScriptedJudge(ALL_ONE)))
    assert judged.scores["rs"] == 1.0 and judged.error is None

    def record(task_id: str, sheet) -> ResultRecord:
        return ResultRecord(
            task_id=task_id, benchmark="bundled", system="s", model="m", epoch=1, question_type="report",
            status="completed", answer={"report": "r"}, scores=sheet.scores, scoring_error=sheet.error,
            usage=Usage(), latency_s=1.0, latency_by_phase={}, model_calls=4, tool_calls=[], trace_file="t.json",
        )  # fmt: skip

    (row,) = summarize([record("T1", failed), record("T2", judged)])
    assert row.rs == 1.0  # the unjudged record is out of RS's mean (it was 0.5 with RS = 0 inside it)
    assert row.scoring_errors == 1  # and counted beside it


def test_scripted_judge_calls_land_in_the_judge_trace_not_the_system_trace():
    task = report_task()

    def writes_report(request: ModelRequest, context: CallContext) -> Message:
        return Message(role="assistant", content=task.gold.report)

    system_recorder = TraceRecorder(Trace(task_id=task.id, system="tool_use", model=SCRIPTED.alias), Budgets())
    system = MeteredModel(SCRIPTED, ScriptedProvider(writes_report), system_recorder, system="tool_use")
    report = system.generate([Message(role="user", content=task.question)]).message.content
    judge = judge_model(ScriptedJudge(ALL_ONE))
    score_rubric(task, Answer(report=report), RubricJudge(judge))
    assert len(system_recorder.trace.model_calls) == 1
    calls = judge.recorder.trace.model_calls
    assert len(calls) == 3
    assert {(c.agent, c.success) for c in calls} == {(JUDGE_AGENT, True)}
    assert judge.recorder.trace.usage().total_tokens > 0


def test_report_over_the_limit_is_not_judged_nor_truncated_by_the_scripted_judge():
    task, scripted = report_task(), ScriptedJudge(ALL_ONE)
    report = task.gold.report + "x" * 100
    scores = RubricJudge(judge_model(scripted), max_report_chars=len(task.gold.report)).score(
        task, Answer(report=report)
    )
    assert scripted.requests == []
    assert scores.score_of("SQL_ACCURACY") == 1.0  # values need no model call
    assert [e.split(":")[0] for e in scores.errors] == ["EXTERNAL_INTEGRATION", "LOGICAL_REASONING", "COMPLETENESS"]
    assert "over the judge's limit" in scores.errors[0]
    assert scores.rs is None  # not SQL_ACC alone
    with pytest.raises(ScoringError, match="over the judge's limit"):
        score_rubric(task, Answer(report=report), RubricJudge(judge_model(scripted), max_report_chars=len(report) - 1))


def test_empty_report_scores_zero_without_calling_the_scripted_judge():
    task, scripted = report_task(), ScriptedJudge(ALL_ONE)
    scores = RubricJudge(judge_model(scripted)).score(task, Answer(status="time_limit"))
    assert scripted.requests == []
    assert scores.rs == 0.0
    assert {d.source for d in scores.dimensions} == {"no_report"}


def test_task_without_sql_result_has_no_sql_dimension_with_a_scripted_judge():
    task = Task(id="r", benchmark="b", question="q", question_type=QuestionType.REPORT, gold=Gold(report="ref"))
    scripted = ScriptedJudge({"EXTERNAL_INTEGRATION": 1, "LOGICAL_REASONING": 0.5, "COMPLETENESS": 0})
    result = score_rubric(task, Answer(report="some report"), RubricJudge(judge_model(scripted)))
    assert result == {"rs": 0.5, "sql_acc": None, "ext_integ": 1.0, "log_reason": 0.5, "complete": 0.0}


def test_judge_describes_its_prompt_version_and_hash():
    described = RubricJudge(judge_model(ScriptedJudge({}))).describe()
    assert described == {"model": "scripted", "prompt_version": JUDGE_VERSION, "prompt_hash": JUDGE_PROMPT_HASH}
    assert re.fullmatch(r"[0-9a-f]{16}", JUDGE_PROMPT_HASH)


# ---------------------------------------------------------------- without a judge


def test_without_a_judge_only_sql_acc_is_scored():
    task = report_task()
    assert score_rubric(task, Answer(report=task.gold.report), None) == {
        "rs": None,
        "sql_acc": 1.0,
        "ext_integ": None,
        "log_reason": None,
        "complete": None,
    }
    assert score_rubric(task, Answer(report="nothing"), None)["sql_acc"] == 0.0


def test_non_report_tasks_get_no_rubric_scores():
    task = next(t for t in load_tasks("bundled") if t.question_type != QuestionType.REPORT)
    assert score_rubric(task, Answer(text="A"), None) == {}
