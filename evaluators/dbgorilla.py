"""DBGorilla scoring: the official AST score of a predicted `query_database` call, and paper metrics.

A call (gold or predicted) is a dict shaped like a DBGorilla `query` record: `target_collection`,
`search_query`, three filters, three aggregations, `groupby_property`; absent parts are null or
missing. `prediction_from_tool_call` builds it from a tool call (`collection_name` → `target_collection`).

Official AST score (weaviate/weaviate-gorilla `abstract_syntax_tree_match_score`, in the form
behind the published per-query results):
- no tool call → 0. Collection differs → 0. Otherwise 0.4, then
- search: +0.15 when both search queries are truthy (the text is NOT compared) or both are null;
  one empty string and one null, or two empty strings, earn nothing;
- filters: over the integer / text / boolean kinds, a kind counts when both sides are null (a
  match) or both are present (a match only if property_name, operator and value are all equal);
  a kind present on one side only is not counted; +0.15 × matches / counted, and nothing at all
  when no kind is counted (e.g. the prediction adds all three filters to a gold with none);
- aggregations: the same over the three aggregation kinds, comparing property_name and metrics
  only (`top_occurrences_limit` is ignored);
- groupby: +0.15 when equal (null = null counts).
The terms are added in this order so the floats equal the published ones (e.g. 0.7000000000000001).

Earlier revision `ast-2024-11` (`compare score --rule ast-2024-11`, scorer `dbgorilla_ast_2024_11`): the
published gpt-4o results (and 3 of gpt-4o-mini's) were scored by an earlier revision of the official
scorer, which is the same except for the search term: +0.15 only when the predicted and gold search
queries are equal ignoring case (both null also counts as equal; an empty string and null do not).
Today's rule, the default, awards it whenever both are present. Only the AST score differs; the other
metrics are computed as above under both rules.

Malformed calls: the official harness parses each call into pydantic models (operators and metrics
restricted to the documented values, values typed as number / text / boolean, with pydantic's lax
coercion) and records an error with score 0 when that fails — e.g. `"text_property_filter": {}`.
We do the same: a malformed prediction scores 0, matches nothing and is not counted as "no tool call".

Further metrics (definitions ours where the paper gives only the name):
- exact match: the whole call equal — collection, search (compared as above: presence only,
  since the text is free-form), every filter (name, operator, value), every aggregation (name,
  metrics and `top_occurrences_limit`), groupby;
- per-component exact match, over the queries whose gold has that component, with the component
  compared as in exact match; independent of the collection, which routing accuracy measures;
- collection-routing accuracy: the predicted `target_collection` equals the gold one (read from
  the call even if another part of it is malformed);
- no-tool-call rate; malformed-call rate;
- breakdown by number of gold arguments, i.e. non-null fields other than `target_collection`
  and `corresponding_natural_language_query` (1 / 2 / 3+; a gold with none goes to "0").

`score_dbgorilla(task, answer)` gives one task's scores (the gold is `task.gold.tool_call`, a
`query_database` call); `summarize_dbgorilla` aggregates (prediction, gold) pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from ..core.model import MeteredModel
from ..core.scorer import ScoreResult, reports, versioned
from ..core.task import Answer, Task, ToolCall
from ..core.trace import Trace

FILTERS = ("integer_property_filter", "text_property_filter", "boolean_property_filter")
AGGREGATIONS = ("integer_property_aggregation", "text_property_aggregation", "boolean_property_aggregation")
COMPONENTS = ("search_query", *FILTERS, *AGGREGATIONS, "groupby_property")
BUCKETS = ("1", "2", "3+")
TOOL_NAME = "query_database"

_COLLECTION_WEIGHT = 0.4
_PART_WEIGHT = 0.15


class _IntFilter(BaseModel):
    property_name: str
    operator: Literal["=", "<", ">", "<=", ">="]
    value: int | float


class _TextFilter(BaseModel):
    property_name: str
    operator: Literal["=", "LIKE"]
    value: str


class _BoolFilter(BaseModel):
    property_name: str
    operator: Literal["=", "!="]
    value: bool


class _IntAggregation(BaseModel):
    property_name: str
    metrics: Literal["COUNT", "TYPE", "MIN", "MAX", "MEAN", "MEDIAN", "MODE", "SUM"]


class _TextAggregation(BaseModel):
    property_name: str
    metrics: Literal["COUNT", "TYPE", "TOP_OCCURRENCES"]
    top_occurrences_limit: int | None = None


class _BoolAggregation(BaseModel):
    property_name: str
    metrics: Literal["COUNT", "TYPE", "TOTAL_TRUE", "TOTAL_FALSE", "PERCENTAGE_TRUE", "PERCENTAGE_FALSE"]


_Filter = _IntFilter | _TextFilter | _BoolFilter
_Aggregation = _IntAggregation | _TextAggregation | _BoolAggregation


class _Call(BaseModel):
    """The official `WeaviateQuery` shape; unknown keys are ignored, as upstream."""

    target_collection: str
    search_query: str | None = None
    integer_property_filter: _IntFilter | None = None
    text_property_filter: _TextFilter | None = None
    boolean_property_filter: _BoolFilter | None = None
    integer_property_aggregation: _IntAggregation | None = None
    text_property_aggregation: _TextAggregation | None = None
    boolean_property_aggregation: _BoolAggregation | None = None
    groupby_property: str | None = None


def _parse(call: dict[str, Any] | None) -> _Call | None:
    """The call as the official models read it; None when absent or malformed."""
    if call is None:
        return None
    try:
        return _Call.model_validate(call)
    except ValidationError:
        return None


def _parse_gold(gold: dict[str, Any]) -> _Call:
    parsed = _parse(gold)
    if parsed is None:
        raise ValueError(f"malformed DBGorilla gold query: {gold!r}")
    return parsed


def prediction_from_tool_call(call: ToolCall | None) -> dict[str, Any] | None:
    """A `query_database` call in the gold `query` shape; None when there is no such call."""
    if call is None or call.name != TOOL_NAME:
        return None
    prediction: dict[str, Any] = {"target_collection": call.arguments.get("collection_name")}
    prediction.update({name: call.arguments.get(name) for name in COMPONENTS})
    return prediction


SearchRule = Literal["present", "equal_ignoring_case"]  # today's official rule; the ast-2024-11 revision's


def _search_matches(predicted: _Call, gold: _Call, rule: SearchRule = "present") -> bool:
    if rule == "equal_ignoring_case":
        a, b = predicted.search_query, gold.search_query
        return (a is None and b is None) or (a is not None and b is not None and a.lower() == b.lower())
    if predicted.search_query and gold.search_query:
        return True
    return predicted.search_query is None and gold.search_query is None


def _filter_equal(a: _Filter, b: _Filter) -> bool:
    return (a.property_name, a.operator, a.value) == (b.property_name, b.operator, b.value)


def _aggregation_equal(a: _Aggregation, b: _Aggregation) -> bool:
    return (a.property_name, a.metrics) == (b.property_name, b.metrics)  # top_occurrences_limit ignored, as upstream


def _kinds_term(predicted: _Call, gold: _Call, kinds: tuple[str, ...], equal: Callable[[Any, Any], bool]) -> float:
    """0.15 × matches / counted over `kinds`; 0 when no kind is counted (one-sided kinds never count)."""
    matches = counted = 0
    for kind in kinds:
        a, b = getattr(predicted, kind), getattr(gold, kind)
        if a is None and b is None:
            matches, counted = matches + 1, counted + 1
        elif a is not None and b is not None:
            matches, counted = matches + equal(a, b), counted + 1
    return _PART_WEIGHT * (matches / counted) if counted else 0.0


def ast_score(predicted: dict[str, Any] | None, gold: dict[str, Any], search: SearchRule = "present") -> float:
    """The official AST score in [0, 1] (rules in the module docstring); `search="equal_ignoring_case"`
    gives the earlier revision ast-2024-11."""
    expected, call = _parse_gold(gold), _parse(predicted)
    if call is None or call.target_collection != expected.target_collection:
        return 0.0
    score = _COLLECTION_WEIGHT
    if _search_matches(call, expected, search):
        score += _PART_WEIGHT
    score += _kinds_term(call, expected, FILTERS, _filter_equal)
    score += _kinds_term(call, expected, AGGREGATIONS, _aggregation_equal)
    if call.groupby_property == expected.groupby_property:
        score += _PART_WEIGHT
    return score


def _component_equal(predicted: _Call, gold: _Call, component: str) -> bool:
    if component == "search_query":
        return _search_matches(predicted, gold)
    return getattr(predicted, component) == getattr(gold, component)  # pydantic compares every field


def component_matches(predicted: dict[str, Any] | None, gold: dict[str, Any]) -> dict[str, bool]:
    """For each component the gold call has: does the prediction have it exactly (see module docstring)?"""
    expected, call = _parse_gold(gold), _parse(predicted)
    present = [c for c in COMPONENTS if getattr(expected, c) is not None]
    return {c: call is not None and _component_equal(call, expected, c) for c in present}


def exact_match(predicted: dict[str, Any] | None, gold: dict[str, Any]) -> bool:
    """The whole call equal: collection and every component (search by presence only)."""
    expected, call = _parse_gold(gold), _parse(predicted)
    if call is None or call.target_collection != expected.target_collection:
        return False
    return all(_component_equal(call, expected, c) for c in COMPONENTS)


def gold_argument_count(gold: dict[str, Any]) -> int:
    """Non-null fields other than the collection (and the natural-language query)."""
    return sum(gold.get(c) is not None for c in COMPONENTS)


def argument_bucket(count: int) -> str:
    return "3+" if count >= 3 else str(count)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _routed(predicted: dict[str, Any] | None, gold: dict[str, Any]) -> bool:
    return predicted is not None and predicted.get("target_collection") == gold["target_collection"]


def _malformed(predicted: dict[str, Any] | None) -> bool:
    return predicted is not None and _parse(predicted) is None


def score_dbgorilla(task: Task, answer: Answer, search: SearchRule = "present") -> dict[str, float | None]:
    """One task's scores; everything None without a gold call.

    ast_score; exact_match, collection_routing, no_tool_call, malformed_call as 1.0 / 0.0; and
    `component_exact_match.<component>`, None where the gold lacks the component, so a mean over
    tasks that skips None is the per-component metric.
    """
    gold = prediction_from_tool_call(task.gold.tool_call if task.gold else None)
    keys = ["ast_score", "exact_match", "collection_routing", "no_tool_call", "malformed_call"]
    keys += [f"component_exact_match.{c}" for c in COMPONENTS]
    scores: dict[str, float | None] = dict.fromkeys(keys)
    if gold is None:
        return scores
    predicted = prediction_from_tool_call(answer.tool_call)
    scores.update(
        ast_score=ast_score(predicted, gold, search),
        exact_match=float(exact_match(predicted, gold)),
        collection_routing=float(_routed(predicted, gold)),
        no_tool_call=float(predicted is None),
        malformed_call=float(_malformed(predicted)),
    )
    for component, matched in component_matches(predicted, gold).items():
        scores[f"component_exact_match.{component}"] = float(matched)
    return scores


def summarize_dbgorilla(rows: Iterable[tuple[dict[str, Any] | None, dict[str, Any]]]) -> dict[str, float | None]:
    """Aggregate metrics over (prediction, gold) pairs; rates are None when nothing qualifies.

    Keys: n, ast_score, exact_match, collection_routing_accuracy, no_tool_call_rate,
    malformed_call_rate, `component_exact_match.<component>` with `component_support.<component>`,
    and `args_<bucket>.n` / `.ast_score` / `.exact_match` for buckets 1, 2, 3+ (and 0 if present).
    """
    pairs = list(rows)
    asts = [ast_score(p, g) for p, g in pairs]
    exacts = [float(exact_match(p, g)) for p, g in pairs]
    summary: dict[str, float | None] = {
        "n": len(pairs),
        "ast_score": _mean(asts),
        "exact_match": _mean(exacts),
        "collection_routing_accuracy": _mean([float(_routed(p, g)) for p, g in pairs]),
        "no_tool_call_rate": _mean([float(p is None) for p, _ in pairs]),
        "malformed_call_rate": _mean([float(_malformed(p)) for p, _ in pairs]),
    }
    per_component: dict[str, list[float]] = {c: [] for c in COMPONENTS}
    for p, g in pairs:
        for component, matched in component_matches(p, g).items():
            per_component[component].append(float(matched))
    for component, values in per_component.items():
        summary[f"component_exact_match.{component}"] = _mean(values)
        summary[f"component_support.{component}"] = len(values)
    buckets = [argument_bucket(gold_argument_count(g)) for _, g in pairs]
    for bucket in sorted(set(BUCKETS) | set(buckets)):
        members = [i for i, b in enumerate(buckets) if b == bucket]
        summary[f"args_{bucket}.n"] = len(members)
        summary[f"args_{bucket}.ast_score"] = _mean([asts[i] for i in members])
        summary[f"args_{bucket}.exact_match"] = _mean([exacts[i] for i in members])
    return summary


@versioned("1")
@reports("ast_score", "exact_match")
def dbgorilla_scorer(task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> ScoreResult:
    """Scorer `dbgorilla`: the official AST score, exact match and per-component matches."""
    return ScoreResult(score_dbgorilla(task, answer))


@versioned("1")
@reports("ast_score", "exact_match")
def dbgorilla_ast_2024_11_scorer(task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> ScoreResult:
    """Scorer `dbgorilla_ast_2024_11`: the earlier official AST rule (search compared ignoring case)."""
    return ScoreResult(score_dbgorilla(task, answer, search="equal_ignoring_case"))
