"""DBGorilla scoring fidelity: the official AST score on the real sample, scores computed by hand.

AST = 0.4 (collection) + 0.15 search + 0.15 × filter matches/counted + 0.15 × aggregation
matches/counted + 0.15 groupby; rules in evaluators/dbgorilla.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from data_agent_compare.core.task import Answer, Gold, QuestionType, Task, ToolCall
from data_agent_compare.evaluators.dbgorilla import (
    COMPONENTS,
    argument_bucket,
    ast_score,
    component_matches,
    exact_match,
    gold_argument_count,
    prediction_from_tool_call,
    score_dbgorilla,
    summarize_dbgorilla,
)

from helpers import FIXTURES

SAMPLE = FIXTURES / "dbgorilla" / "queries-sample.json"
GOLD = {record["index"]: record["query"] for record in json.loads(SAMPLE.read_text())}


def as_tool_call(query: dict[str, Any]) -> ToolCall:
    """The gold query as a model would emit it: collection_name, null arguments omitted."""
    arguments = {"collection_name": query["target_collection"]}
    arguments |= {name: query[name] for name in COMPONENTS if query[name] is not None}
    return ToolCall(name="query_database", arguments=arguments)


def changed(index: int, **changes: Any) -> dict[str, Any]:
    return {**GOLD[index], **changes}


TRUE_FILTER = {"property_name": "openNow", "operator": "=", "value": True}
ALL_AGGREGATIONS = {
    "integer_property_aggregation": {"property_name": "averageRating", "metrics": "MEAN"},
    "text_property_aggregation": {"property_name": "name", "metrics": "COUNT"},
    "boolean_property_aggregation": {"property_name": "openNow", "metrics": "TOTAL_TRUE"},
}
PARTY_OF_5_AS_TEXT = {"property_name": "partySize", "operator": "=", "value": "5"}
ALL_FILTERS = {
    "integer_property_filter": {"property_name": "currentValuation", "operator": ">", "value": 1},
    "text_property_filter": {"property_name": "title", "operator": "=", "value": "x"},
    "boolean_property_filter": {"property_name": "onDisplay", "operator": "=", "value": True},
}

# Sample 6: Restaurants, search, integer filter averageRating > 4.5, groupby openNow.
# Sample 21: Restaurants, search, boolean filter openNow = true, boolean aggregation openNow COUNT.
# Sample 32: Reservations, integer filter partySize > 5, integer aggregation partySize MEAN, groupby confirmed.
# Sample 240: TravelDestinations, boolean filter popular = true, text aggregation TOP_OCCURRENCES limit 5.
# Sample 309: ArtPieces, integer aggregation currentValuation SUM only.
CASES = [
    (6, None, 0.0),  # no tool call
    (6, changed(6, target_collection="Menus"), 0.0),  # collection differs → 0, nothing else looked at
    (6, changed(6, target_collection="restaurants"), 0.0),  # collection names are case-sensitive
    (6, changed(6, search_query="cheap pizza"), 1.0),  # search text never compared: both truthy → +0.15
    (6, changed(6, search_query=None), 0.85),  # 0.4 + 0 search + 0.15 + 0.15 + 0.15
    (6, changed(6, search_query=""), 0.85),  # "" is neither truthy nor null → no search credit
    (6, changed(6, groupby_property="name"), 0.85),  # 0.4 + 0.15 + 0.15 + 0.15 + 0 groupby
    (6, changed(6, groupby_property=None), 0.85),  # gold "openNow" ≠ null
    # filter value 4.0 ≠ 4.5: int counted unmatched, text and boolean both null → 0.15 × 2/3 = 0.1:
    (6, changed(6, integer_property_filter={"property_name": "averageRating", "operator": ">", "value": 4.0}), 0.95),
    # operator ">=" ≠ ">": same arithmetic, 0.4 + 0.15 + 0.1 + 0.15 + 0.15
    (6, changed(6, integer_property_filter={"property_name": "averageRating", "operator": ">=", "value": 4.5}), 0.95),
    # the official pydantic models coerce "4.5" to 4.5, so the filter matches: full score
    (6, changed(6, integer_property_filter={"property_name": "averageRating", "operator": ">", "value": "4.5"}), 1.0),
    (6, changed(6, boolean_property_filter=TRUE_FILTER), 1.0),  # boolean kind one-sided → not counted: int + text 2/2
    (6, changed(6, **ALL_AGGREGATIONS), 0.85),  # all three kinds one-sided → nothing counted → +0, not +0.15
    (6, changed(6, text_property_filter={}), 0.0),  # malformed (official records a validation error, score 0)
    (6, changed(6, integer_property_filter={"property_name": "averageRating", "operator": "==", "value": 4.5}), 0.0),
    # aggregation metrics TOTAL_TRUE ≠ COUNT: int and text both null, boolean unmatched → 0.15 × 2/3 = 0.1
    (21, changed(21, boolean_property_aggregation={"property_name": "openNow", "metrics": "TOTAL_TRUE"}), 0.95),
    (21, changed(21, boolean_property_filter={**TRUE_FILTER, "value": False}), 0.95),  # filters 2/3 → 0.1
    # both of the above: 0.4 + 0.15 + 0.1 + 0.1 + 0.15
    (
        21,
        changed(
            21,
            boolean_property_filter={**TRUE_FILTER, "value": False},
            boolean_property_aggregation={"property_name": "openNow", "metrics": "TOTAL_TRUE"},
        ),
        0.9,
    ),
    (21, changed(21, groupby_property="openNow"), 0.85),  # gold null ≠ "openNow"
    # the filter given as a text filter instead (partySize = "5"): int and text one-sided, not counted;
    # boolean both null → 1/1, so the wrong filter kind costs nothing
    (32, changed(32, integer_property_filter=None, text_property_filter=PARTY_OF_5_AS_TEXT), 1.0),
    # the gold filter copied verbatim into the text kind: ">" and a number are invalid there → malformed → 0
    (32, changed(32, integer_property_filter=None, text_property_filter=GOLD[32]["integer_property_filter"]), 0.0),
    (32, changed(32, integer_property_filter=None), 1.0),  # dropping the only gold filter: text + boolean null 2/2
    (32, changed(32, search_query="large parties"), 0.85),  # gold has no search, prediction has one → no credit
    # top_occurrences_limit 3 ≠ 5 is not compared by the AST score
    (
        240,
        changed(240, text_property_aggregation={**GOLD[240]["text_property_aggregation"], "top_occurrences_limit": 3}),
        1.0,
    ),
    # text aggregation property differs: int and boolean both null, text unmatched → 0.1
    (
        240,
        changed(
            240, text_property_aggregation={"property_name": "destinationDescription", "metrics": "TOP_OCCURRENCES"}
        ),
        0.95,
    ),
    (309, {"target_collection": "ArtPieces"}, 1.0),  # only the collection: the int aggregation is one-sided, 2/2 null
    (309, changed(309, integer_property_aggregation={"property_name": "currentValuation", "metrics": "MEAN"}), 0.95),
    (309, changed(309, **ALL_FILTERS), 0.85),  # three one-sided filters → nothing counted → +0
]


@pytest.mark.parametrize("index", sorted(GOLD))
def test_every_gold_call_scores_perfectly_against_itself(index):
    prediction = prediction_from_tool_call(as_tool_call(GOLD[index]))
    assert ast_score(prediction, GOLD[index]) == 1.0
    assert exact_match(prediction, GOLD[index])
    assert all(component_matches(prediction, GOLD[index]).values())


@pytest.mark.parametrize(("index", "prediction", "expected"), CASES)
def test_hand_computed_ast_scores(index, prediction, expected):
    assert ast_score(prediction, GOLD[index]) == pytest.approx(expected)


def test_exact_match_is_stricter_than_a_perfect_ast_score():
    assert exact_match(changed(6, search_query="cheap pizza"), GOLD[6])  # search compared by presence only
    assert not exact_match(changed(6, boolean_property_filter=TRUE_FILTER), GOLD[6])  # AST 1.0, extra filter
    assert not exact_match(changed(32, integer_property_filter=None), GOLD[32])  # AST 1.0, missing filter
    limit_3 = {**GOLD[240]["text_property_aggregation"], "top_occurrences_limit": 3}
    assert not exact_match(changed(240, text_property_aggregation=limit_3), GOLD[240])  # AST 1.0, other limit


# Published per-query results (weaviate-gorilla src/test_gorilla/results/gpt-4o-02-28-25.json), query 1: the
# predicted search text differs and the prediction adds five one-sided parts; published ast_score 0.7000000000000001.
PUBLISHED_GOLD = {
    "target_collection": "Restaurants",
    "search_query": "Find restaurants with cozy ambiance and Italian cuisine",
    "integer_property_filter": {"property_name": "averageRating", "operator": ">=", "value": 4},
}
PUBLISHED_PREDICTION = {
    "target_collection": "Restaurants",
    "search_query": "Italian cuisine restaurants with a cozy ambiance",
    "integer_property_filter": {"property_name": "averageRating", "operator": ">=", "value": 4},
    "text_property_filter": {"property_name": "description.cuisine", "operator": "=", "value": "Italian"},
    "boolean_property_filter": {"property_name": "openNow", "operator": "=", "value": True},
    "integer_property_aggregation": {"property_name": "averageRating", "metrics": "MEAN"},
    "text_property_aggregation": {"property_name": "description.cuisine", "metrics": "TOP_OCCURRENCES"},
    "boolean_property_aggregation": {"property_name": "openNow", "metrics": "TOTAL_TRUE"},
    "groupby_property": "openNow",
}


def test_reproduces_a_published_score_to_the_last_bit():
    # 0.4 + 0.15 (search text ignored) + 0.15 × 1/1 (int only) + 0 (no aggregation counted) + 0 (groupby)
    assert ast_score(PUBLISHED_PREDICTION, PUBLISHED_GOLD) == 0.7000000000000001


# ---------------------------------------------------------------- tool calls


def test_prediction_from_tool_call():
    call = ToolCall(name="query_database", arguments={"collection_name": "Museums", "groupby_property": "openToday"})
    prediction = prediction_from_tool_call(call)
    assert prediction is not None
    assert prediction["target_collection"] == "Museums"
    assert prediction["groupby_property"] == "openToday"
    assert prediction["search_query"] is None
    assert prediction_from_tool_call(None) is None
    assert prediction_from_tool_call(ToolCall(name="answer", arguments={"answer": "x"})) is None


def test_a_call_without_collection_is_malformed_not_missing():
    prediction = prediction_from_tool_call(ToolCall(name="query_database", arguments={"search_query": "art"}))
    assert prediction is not None
    assert ast_score(prediction, GOLD[282]) == 0.0
    summary = summarize_dbgorilla([(prediction, GOLD[282])])
    assert summary["no_tool_call_rate"] == 0.0
    assert summary["malformed_call_rate"] == 1.0


def dbgorilla_task(index: int) -> Task:
    gold = Gold(tool_call=as_tool_call(GOLD[index]))
    return Task(
        id=f"dbgorilla-{index}",
        benchmark="dbgorilla",
        question="q",
        question_type=QuestionType.FUNCTION_CALL,
        gold=gold,
    )


def test_score_dbgorilla_per_task():
    task = dbgorilla_task(6)
    drop_groupby = Answer(tool_call=as_tool_call(changed(6, groupby_property=None)))
    scores = score_dbgorilla(task, drop_groupby)
    assert scores["ast_score"] == pytest.approx(0.85)  # 0.4 + 0.15 + 0.15 + 0.15, groupby lost
    assert scores["exact_match"] == 0.0
    assert scores["collection_routing"] == 1.0
    assert scores["no_tool_call"] == scores["malformed_call"] == 0.0
    assert scores["component_exact_match.search_query"] == 1.0
    assert scores["component_exact_match.groupby_property"] == 0.0
    assert scores["component_exact_match.text_property_filter"] is None  # not in the gold: not counted
    missing = score_dbgorilla(task, Answer(status="no_tool_call"))
    assert (missing["ast_score"], missing["no_tool_call"], missing["collection_routing"]) == (0.0, 1.0, 0.0)


def test_score_dbgorilla_without_gold_is_none():
    task = dbgorilla_task(6).model_copy(update={"gold": None})
    assert set(score_dbgorilla(task, Answer()).values()) == {None}


# ---------------------------------------------------------------- aggregate metrics on a hand-made set

G1 = {"target_collection": "A", "search_query": "x"}
G2 = {
    "target_collection": "A",
    "integer_property_filter": {"property_name": "p", "operator": ">", "value": 3},
    "groupby_property": "g",
}
G3 = {
    "target_collection": "B",
    "search_query": "y",
    "text_property_filter": {"property_name": "t", "operator": "LIKE", "value": "a%"},
    "boolean_property_aggregation": {"property_name": "b", "metrics": "COUNT"},
}
G4 = {
    "target_collection": "B",
    "boolean_property_filter": {"property_name": "b", "operator": "=", "value": True},
    "integer_property_aggregation": {"property_name": "p", "metrics": "MEAN"},
    "text_property_aggregation": {"property_name": "t", "metrics": "TOP_OCCURRENCES", "top_occurrences_limit": 5},
    "groupby_property": "t",
}
G5 = {"target_collection": "A", "boolean_property_aggregation": {"property_name": "b", "metrics": "TOTAL_TRUE"}}
ROWS = [
    ({**G1, "search_query": "other words"}, G1),  # AST 1.0, exact (search by presence)
    ({**G2, "integer_property_filter": {"property_name": "p", "operator": ">", "value": 4}}, G2),  # AST 0.95
    (None, G3),  # no tool call: AST 0
    ({**G4, "target_collection": "A"}, G4),  # misrouted: AST 0, yet its components match
    ({**G5, "boolean_property_aggregation": {"property_name": "b", "metrics": "TRUE_COUNT"}}, G5),  # malformed: 0
]


def test_gold_argument_counts_and_buckets():
    assert [gold_argument_count(g) for _, g in ROWS] == [1, 2, 3, 4, 1]
    assert [argument_bucket(gold_argument_count(g)) for _, g in ROWS] == ["1", "2", "3+", "3+", "1"]
    assert gold_argument_count(GOLD[6]) == 3  # search, integer filter, groupby; NL query and collection excluded


def test_component_matches_cover_only_gold_components():
    assert component_matches(*ROWS[1]) == {"integer_property_filter": False, "groupby_property": True}
    assert component_matches(*ROWS[2]) == {
        "search_query": False,
        "text_property_filter": False,
        "boolean_property_aggregation": False,
    }
    assert all(component_matches(*ROWS[3]).values())  # components are judged apart from routing
    assert component_matches(*ROWS[4]) == {"boolean_property_aggregation": False}


def test_summary_on_the_hand_made_set():
    summary = summarize_dbgorilla(ROWS)
    expected = {
        "n": 5,
        "ast_score": (1.0 + 0.95) / 5,
        "exact_match": 1 / 5,
        "collection_routing_accuracy": 3 / 5,  # rows 1, 2 and the malformed row 5 name the right collection
        "no_tool_call_rate": 1 / 5,
        "malformed_call_rate": 1 / 5,
        "component_exact_match.search_query": 1 / 2,  # G1 yes, G3 no call
        "component_support.search_query": 2,
        "component_exact_match.integer_property_filter": 0.0,  # G2 value 4 ≠ 3
        "component_exact_match.text_property_filter": 0.0,  # G3 no call
        "component_exact_match.boolean_property_filter": 1.0,  # G4
        "component_exact_match.integer_property_aggregation": 1.0,  # G4
        "component_exact_match.text_property_aggregation": 1.0,  # G4, limit 5 = 5
        "component_exact_match.boolean_property_aggregation": 0.0,  # G3 no call, G5 malformed
        "component_support.boolean_property_aggregation": 2,
        "component_exact_match.groupby_property": 1.0,  # G2 and G4
        "args_1.n": 2,
        "args_1.ast_score": (1.0 + 0.0) / 2,  # G1, G5
        "args_1.exact_match": 1 / 2,
        "args_2.n": 1,
        "args_2.ast_score": 0.95,
        "args_2.exact_match": 0.0,
        "args_3+.n": 2,
        "args_3+.ast_score": 0.0,  # G3 no call, G4 misrouted
        "args_3+.exact_match": 0.0,
    }
    assert {key: summary[key] for key in expected} == pytest.approx(expected)
    assert "args_0.n" not in summary


def test_summary_of_nothing_and_of_a_gold_without_arguments():
    empty = summarize_dbgorilla([])
    assert empty["n"] == 0
    assert empty["ast_score"] is None
    assert empty["component_exact_match.search_query"] is None
    only_collection = {"target_collection": "A"}
    summary = summarize_dbgorilla([(only_collection, only_collection)])
    assert summary["args_0.n"] == 1
    assert summary["args_0.ast_score"] == 1.0
    assert summary["args_1.n"] == 0
    assert summary["args_1.ast_score"] is None


def test_the_earlier_official_rule_compares_the_search_text_ignoring_case():
    """Revision ast-2024-11 (behind the published gpt-4o results) earns the search 0.15 only for the same
    text ignoring case; today's rule earns it whenever both calls search."""
    reworded = changed(6, search_query="candle-lit restaurants")
    recased = changed(6, search_query="ROMANTIC Dining Locations")
    assert ast_score(reworded, GOLD[6]) == ast_score(GOLD[6], GOLD[6]) == 1.0
    assert ast_score(reworded, GOLD[6], search="equal_ignoring_case") == pytest.approx(0.85)
    assert ast_score(recased, GOLD[6], search="equal_ignoring_case") == 1.0
    no_search = changed(32)  # a gold without search: both null still earns it under both rules
    assert ast_score(no_search, GOLD[32], search="equal_ignoring_case") == ast_score(no_search, GOLD[32]) == 1.0


def test_score_command_takes_the_earlier_rule_by_name(tmp_path):
    from typer.testing import CliRunner

    from data_agent_compare.cli.main import app

    predictions = tmp_path / "predictions.jsonl"
    reworded = {**GOLD[6], "search_query": "candle-lit restaurants"}
    predictions.write_text(json.dumps({"task_id": "dbgorilla-6", "predicted_query": reworded}) + "\n")
    flags = ["score", "--benchmark", "dbgorilla", "--tasks", str(SAMPLE), "--predictions", str(predictions)]
    runner = CliRunner()
    for rule, expected in ((None, 1.0), ("ast-2024-11", 0.85)):
        out = tmp_path / f"{rule}.jsonl"
        result = runner.invoke(app, [*flags, "--out", str(out), *(["--rule", rule] if rule else [])])
        assert result.exit_code == 0, result.output
        assert json.loads(out.read_text())["ast_score"] == pytest.approx(expected)
    unknown = runner.invoke(app, [*flags, "--rule", "ast-1999"])
    assert unknown.exit_code == 2 and "ast-2024-11" in unknown.output
