"""The gold-DAG scorer (evaluators/dag.py): DAGs from FDABench gold_subtasks and bundled gold,
TOS components computed by hand, and properties over random DAGs."""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_agent_compare.compare.scorer import score
from data_agent_compare.compare.task import AltGroup, Answer, DagEdge, DagNode, EdgeType, Gold, GoldDag, Task
from data_agent_compare.compare.trace import Phase, ToolCallStep, Trace
from data_agent_compare.evaluators import dag as dag_module
from data_agent_compare.evaluators.dag import (
    alt_groups,
    canonical_tool,
    gold_dag,
    normalize_dag,
    score_dag,
    tool_aliases,
    tool_orchestration,
    topological_order,
)
from data_agent_compare.tools import DEFAULT_TOOL_NAMES

from helpers import FIXTURES, load_tasks

FDABENCH = FIXTURES / "fdabench"
HARD, SOFT, ALT = EdgeType.HARD_DEP, EdgeType.SOFT_DEP, EdgeType.ALT_GROUP
Calls = list[tuple[str, bool]]


@cache
def fdabench_record(file: str, task_id: str) -> dict[str, Any]:
    for line in (FDABENCH / file).read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["task_id"] == task_id:
            return record
    raise KeyError(task_id)


def fdabench_task(file: str, task_id: str, gold_subtasks: Any = None, dag: GoldDag | None = None) -> Task:
    record = fdabench_record(file, task_id)
    return Task(
        id=task_id,
        benchmark="fdabench",
        question=record["query"],
        question_type=record["question_type"],
        options=record.get("options"),
        metadata={"gold_subtasks": gold_subtasks if gold_subtasks is not None else record.get("gold_subtasks")},
        gold=Gold(dag=dag) if dag else None,
    )


def ok(*tools: str) -> Calls:
    return [(tool, True) for tool in tools]


def components(calls: Calls, dag: GoldDag) -> dict[str, float]:
    result = tool_orchestration(dag, calls)
    return {"gc": result.gc, "tf": result.tf, "ss": result.ss, "tos": result.tos}


# ---------------------------------------------------------------- alias table


def test_alias_table_maps_benchmark_and_framework_names_onto_canonical_tools():
    expected = {
        "generated_sql": "execute_sql",
        "query_db": "execute_sql",
        "list_db": "get_schema_info",
        "vectorDB_search": "search_documents",
        "VECTORDB_SEARCH ": "search_documents",  # case and whitespace do not matter
        "web_context_search": "web_search",
        "perplexity_search": "web_search",  # FDABench's tool for its web_context_search subtask
        "code_interpreter": "execute_python",
        "file_system": "read_file",
        "return_answer": "answer",
        "sql_debug": "sql_debug",
        "sem_filter": "execute_python",  # semantic operators transform fetched rows, as agents do in Python
        "docetl_reduce": "execute_python",
        "sem_search": "search_documents",  # ranking rows by similarity to a query is a retrieval
        "graph_search": "search_documents",
        "some_new_tool": "some_new_tool",  # unknown names stay themselves
    }
    assert {name: canonical_tool(name) for name in expected} == expected
    assert all(canonical_tool(name) == name for name in DEFAULT_TOOL_NAMES)
    known = set(tool_aliases().names.values())
    offered = fdabench_record("test_report.jsonl", "FDA0010")["tools_available"]
    assert {canonical_tool(name) for name in offered} <= known


# ---------------------------------------------------------------- DAGs from gold_subtasks

CHAIN_IDS = ["get_schema_info", "execute_sql", "web_context_search", "vectorDB_search"]


@pytest.fixture(scope="module")
def chain() -> GoldDag:
    """FDA0722: get_schema_info, generated_sql, execute_sql, web_context_search, vectorDB_search; no depends_on."""
    dag = gold_dag(fdabench_task("test_singlechoice.jsonl", "FDA0722"))
    assert dag is not None
    return dag


def test_subtasks_without_depends_on_become_a_hard_chain_with_generated_sql_folded(chain):
    subtasks = {s["subtask_id"]: s for s in fdabench_record("test_singlechoice.jsonl", "FDA0722")["gold_subtasks"]}
    assert [n.id for n in chain.nodes] == CHAIN_IDS
    assert [n.tool for n in chain.nodes] == ["get_schema_info", "execute_sql", "web_search", "search_documents"]
    assert [(e.source, e.target, e.type) for e in chain.edges] == [
        ("get_schema_info", "execute_sql", HARD),
        ("execute_sql", "web_context_search", HARD),
        ("web_context_search", "vectorDB_search", HARD),
    ]
    assert chain.critical_path == CHAIN_IDS  # the whole chain is the longest HARD_DEP path
    assert all(n.required and n.critical for n in chain.nodes)
    sql = chain.nodes[1]
    assert sql.expected_sql == subtasks["generated_sql"]["expected_SQL"]  # the folded SQL-writing step
    assert sql.expected_result == subtasks["execute_sql"]["expected_result"]
    assert sql.input == {"database_name": "ga360"}


def test_python_literal_strings_give_the_same_dag(chain):
    subtasks = fdabench_record("test_singlechoice.jsonl", "FDA0722")["gold_subtasks"]
    literal = [{**s, "input": repr(s["input"])} if s.get("input") else s for s in subtasks]
    assert gold_dag(fdabench_task("test_singlechoice.jsonl", "FDA0722", gold_subtasks=repr(literal))) == chain


def test_task_without_gold_subtasks_has_no_dag_and_no_scores():
    task = fdabench_task("test_singlechoice.jsonl", "FDA1005")
    assert gold_dag(task) is None
    assert score_dag(task, Trace(task_id=task.id, system="s", model="m")) == {}


def report_with_dependencies() -> Task:
    """FDA0236's five subtasks with depends_on added, plus a tool-less synthesize step."""
    subtasks = [dict(s) for s in fdabench_record("test_report.jsonl", "FDA0236")["gold_subtasks"]]
    for subtask in subtasks:
        subtask["depends_on"] = {"generated_sql": ["get_schema_info"], "execute_sql": "['generated_sql']"}.get(
            subtask["subtask_id"], []
        )
    subtasks.append(
        {
            "subtask_id": "synthesize_report",
            "description": "Write the report",
            "depends_on": ["execute_sql", "web_context_search", "vectorDB_search"],
        }
    )
    return fdabench_task("test_report.jsonl", "FDA0236", gold_subtasks=subtasks)


def test_depends_on_gives_hard_edges_and_the_longest_path_is_critical():
    dag = gold_dag(report_with_dependencies())
    assert dag is not None
    nodes = {n.id: n for n in dag.nodes}
    assert list(nodes) == [*CHAIN_IDS, "synthesize_report"]
    assert nodes["synthesize_report"].tool == "answer"  # a tool-less synthesize step is the final answer
    assert [(e.source, e.target) for e in dag.edges] == [
        ("get_schema_info", "execute_sql"),  # was get_schema_info -> generated_sql, folded into execute_sql
        ("execute_sql", "synthesize_report"),
        ("web_context_search", "synthesize_report"),
        ("vectorDB_search", "synthesize_report"),
    ]
    assert {e.type for e in dag.edges} == {HARD}
    assert dag.critical_path == ["get_schema_info", "execute_sql", "synthesize_report"]
    assert {n.id for n in dag.nodes if n.critical} == set(dag.critical_path)
    assert all(n.required for n in dag.nodes)


def test_depends_on_scored_by_hand():
    dag = gold_dag(report_with_dependencies())
    assert dag is not None
    # No vector search. matched: web, schema, sql, synthesize; required 5, critical 3 (all matched).
    # GC = ½(4/5 + 3/3) = 0.9; TF: TP 4, counted 4, gold items 5 -> 2·4/(4+5) = 8/9; SS = 1
    # TOS = ½(0.9 + 8/9)
    calls = ok("web_search", "get_schema_info", "execute_sql", "answer")
    assert components(calls, dag) == pytest.approx({"gc": 0.9, "tf": 8 / 9, "ss": 1.0, "tos": (0.9 + 8 / 9) / 2})


def test_malformed_gold_subtasks_are_refused_naming_the_task():
    with pytest.raises(ValueError, match=r"FDA0236.*not a list"):
        gold_dag(fdabench_task("test_report.jsonl", "FDA0236", gold_subtasks="{'a': 1}"))
    bad = [{"subtask_id": "a", "tool": "execute_sql", "depends_on": ["missing"]}]
    with pytest.raises(ValueError, match=r"FDA0236.*unknown subtask ids \['missing'\]"):
        gold_dag(fdabench_task("test_report.jsonl", "FDA0236", gold_subtasks=bad))


# ---------------------------------------------------------------- TOS by hand on the FDA0722 chain
# Gold: 4 nodes S -> X -> W -> V (schema, SQL, web search, vector search), all required and critical,
# no answer node (so `answer` calls are neutral in TF). Gold items for TF: 4.

CHAIN_CASES = {
    # FDABench's own tool names; generated_sql folds into execute_sql: steps S X W V answer.
    # GC = ½(4/4 + 4/4) = 1; TF: TP 4, counted 5 - 1 neutral answer = 4 -> F1 1; SS 1; TOS = ½(1 + 1) = 1
    "perfect": (
        ok("get_schema_info", "generated_sql", "execute_sql", "web_context_search", "vectorDB_search", "answer"),
        {"gc": 1.0, "tf": 1.0, "ss": 1.0, "tos": 1.0},
    ),
    # No schema step (critical). GC = ½(3/4 + 3/4) = 0.75; TF: TP 3, counted 3 -> 2·3/(3+4) = 6/7;
    # SS 1 (a missing predecessor is not an ordering violation); TOS = ½(0.75 + 6/7)
    "missing critical step": (
        ok("execute_sql", "web_search", "search_documents", "answer"),
        {"gc": 0.75, "tf": 6 / 7, "ss": 1.0, "tos": (0.75 + 6 / 7) / 2},
    ),
    # SQL before schema breaks HARD_DEP S -> X: GC 1, TF 1, SS 0 -> TQ 0; TOS = ½(1 + 0) = 0.5
    "hard dependency reversed": (
        ok("execute_sql", "get_schema_info", "web_search", "search_documents"),
        {"gc": 1.0, "tf": 1.0, "ss": 0.0, "tos": 0.5},
    ),
    # A spurious Python call: TP 4, counted 5 -> P 4/5, R 1, F1 = 8/9; GC 1; SS 1; TOS = ½(1 + 8/9) = 17/18
    "spurious tool": (
        ok("get_schema_info", "execute_sql", "execute_python", "web_search", "search_documents"),
        {"gc": 1.0, "tf": 8 / 9, "ss": 1.0, "tos": 17 / 18},
    ),
    # A failed SQL call matches nothing and is not counted in TF; the retry matches X: all 1
    "failed call retried": (
        [("get_schema_info", True), ("execute_sql", False), *ok("execute_sql", "web_search", "search_documents")],
        {"gc": 1.0, "tf": 1.0, "ss": 1.0, "tos": 1.0},
    ),
}


@pytest.mark.parametrize("case", CHAIN_CASES)
def test_chain_scored_by_hand(chain, case):
    calls, expected = CHAIN_CASES[case]
    assert components(calls, chain) == pytest.approx(expected)


def test_components_of_one_run(chain):
    calls = [("execute_sql", False), *CHAIN_CASES["hard dependency reversed"][0]]
    result = tool_orchestration(chain, calls)
    assert result.matched == {"execute_sql": 1, "get_schema_info": 2, "web_context_search": 3, "vectorDB_search": 4}
    assert result.violations == [("get_schema_info", "execute_sql")]
    assert (result.precision, result.recall, result.tq) == (1.0, 1.0, 0.0)
    assert result.sr == 4 / 5  # failures count in SR only
    assert result.critical_path == CHAIN_IDS


# ---------------------------------------------------------------- the best valid assignment


def sql_python_sql() -> GoldDag:
    """A:sql → B:python → C:sql (HARD_DEP), all required; the longest path A, B, C is critical."""
    return GoldDag(
        nodes=[
            DagNode(id="A", tool="execute_sql"),
            DagNode(id="B", tool="execute_python"),
            DagNode(id="C", tool="execute_sql"),
        ],
        edges=[DagEdge(source="A", target="B"), DagEdge(source="B", target="C")],
    )


def test_an_extra_call_of_a_gold_tool_is_not_taken_for_the_step():
    # Calls sql, sql, python, sql. The old greedy matching gave call 1 to C (before B's call 2):
    # SS 0, TOS ½(1 + 0) = 0.5.
    # Best: A = call 0 (the earlier of 0 and 1), B = 2, C = 3, and call 1 is spurious.
    # GC = ½(3/3 + 3/3) = 1; TF: TP 3, counted 4, gold items 3 -> 2·3/(4 + 3) = 6/7; SS 1
    # TOS = ½(1 + 6/7) = 13/14 = 0.92857...
    result = tool_orchestration(sql_python_sql(), ok("execute_sql", "execute_sql", "execute_python", "execute_sql"))
    assert result.matched == {"A": 0, "B": 2, "C": 3}
    assert (result.gc, result.tf, result.ss, result.violations) == (1.0, pytest.approx(6 / 7), 1.0, [])
    assert result.tos == pytest.approx(13 / 14) and round(result.tos, 3) == 0.929


def test_a_real_reversal_still_breaks_the_order():
    # python, sql, sql: every matching of all three nodes puts B's call before A's. Matching only B
    # and C would keep the order, but the most nodes come first. Order aside, A and C take the sql
    # calls in turn: A = 1, B = 0, C = 2. GC 1; TF: TP 3, counted 3, items 3 -> 1; SS 0; TOS ½(1 + 0)
    result = tool_orchestration(sql_python_sql(), ok("execute_python", "execute_sql", "execute_sql"))
    assert result.matched == {"B": 0, "A": 1, "C": 2} and result.violations == [("A", "B")]
    assert (result.gc, result.tf, result.ss, result.tos) == (1.0, 1.0, 0.0, 0.5)


def test_a_reading_that_keeps_the_order_is_found_wherever_it_exists():
    dag = GoldDag(
        nodes=[
            DagNode(id="sql", tool="execute_sql"),
            DagNode(id="schema", tool="get_schema_info"),
            DagNode(id="free_schema", tool="get_schema_info"),
            DagNode(id="free_sql", tool="execute_sql"),
        ],
        edges=[DagEdge(source="sql", target="schema")],
    )
    # sql = call 1, schema = call 2 keeps sql → schema; the free nodes take calls 0 and 3
    kept = tool_orchestration(dag, ok("get_schema_info", "execute_sql", "get_schema_info", "execute_sql"))
    assert kept.matched == {"free_schema": 0, "sql": 1, "schema": 2, "free_sql": 3} and kept.ss == 1.0
    # both schema calls come first: however the four are read, schema's call precedes sql's
    broken = tool_orchestration(dag, ok("get_schema_info", "get_schema_info", "execute_sql", "execute_sql"))
    assert broken.ss == 0.0 and len(broken.matched) == 4


def test_a_call_two_nodes_could_take_does_the_required_one():
    dag = GoldDag(
        nodes=[DagNode(id="optional", tool="execute_sql", required=False), DagNode(id="needed", tool="execute_sql")],
        critical_path=["needed"],
    )
    # needed matched: GC = ½(1/1 + 1/1) = 1; TP 1, counted 1, items 1 -> TF 1; TOS 1. The old greedy gave the
    # call to `optional`, first in gold order: GC ½(0 + 0) = 0, TP 0, counted 0 (neutral) -> TF 0; TOS 0
    result = tool_orchestration(dag, ok("execute_sql"))
    assert result.matched == {"needed": 0} and result.tos == 1.0


def test_a_search_beyond_its_bound_raises_instead_of_approximating(monkeypatch):
    dag = GoldDag(
        nodes=[DagNode(id="optional", tool="execute_sql", required=False), DagNode(id="needed", tool="execute_sql")]
    )
    calls = ok("execute_sql", "execute_sql")
    assert tool_orchestration(dag, calls).tos == 1.0
    monkeypatch.setattr(dag_module, "MAX_STATES", 1)  # after one call: {optional} and {needed}, both can grow
    with pytest.raises(ValueError, match="more than 1 node sets; refusing to approximate TOS"):
        tool_orchestration(dag, calls)


# ---------------------------------------------------------------- ALT_GROUP on an FDABench report DAG


def report_dag() -> GoldDag:
    """FDA0236's subtasks in the newer generator's `dag` shape: web and vector search are alternatives."""
    return GoldDag(
        nodes=[
            DagNode(id="schema", type="schema", tool="get_schema_info", critical=True),
            DagNode(id="gen", type="sql", tool="generated_sql", critical=True),
            DagNode(id="sql", type="sql", tool="execute_sql", critical=True),
            DagNode(id="web", type="search", tool="web_context_search"),
            DagNode(id="vec", type="search", tool="vectorDB_search"),
            DagNode(id="report", type="synthesize", critical=True),
        ],
        edges=[
            DagEdge(source="schema", target="gen"),
            DagEdge(source="gen", target="sql"),
            DagEdge(source="sql", target="report"),
            DagEdge(source="web", target="report", type=SOFT),
            DagEdge(source="vec", target="report", type=SOFT),
            DagEdge(source="web", target="vec", type=ALT),
        ],
        critical_path=["schema", "gen", "sql", "report"],
        alt_groups={"context": AltGroup(node_ids=["web", "vec"], min_required=1)},
    )


def test_given_dag_is_normalized():
    subtasks = fdabench_record("test_report.jsonl", "FDA0236")["gold_subtasks"]
    dag = gold_dag(fdabench_task("test_report.jsonl", "FDA0236", dag=report_dag()))  # gold.dag wins over subtasks
    assert dag is not None and len(subtasks) == 5
    assert [(n.id, n.tool) for n in dag.nodes] == [
        ("schema", "get_schema_info"),
        ("sql", "execute_sql"),
        ("web", "web_search"),
        ("vec", "search_documents"),
        ("report", "answer"),
    ]
    assert dag.critical_path == ["schema", "sql", "report"]
    assert normalize_dag(dag) == dag


# Gold after normalizing: schema, sql, web|vec (one of), report; required 5, critical {schema, sql, report}.
# TF gold items: schema, sql, report + the group counted as min_required = 1 -> 4.
ALT_CASES = {
    # vec matched, so web is credited: GC = ½(5/5 + 3/3) = 1; TP 4, counted 4 -> TF 1; SS 1; TOS 1
    "one alternative": (ok("get_schema_info", "execute_sql", "vectorDB_search", "answer"), 1.0),
    # the other alternative credits vec the same way: TOS 1
    "the other alternative": (ok("get_schema_info", "execute_sql", "web_search", "answer"), 1.0),
    # both: the group still counts min(2, 1) = 1 TP, the second is a false positive:
    # TP 4, counted 5 -> TF 8/9; GC 1; TOS = ½(1 + 8/9) = 17/18
    "both alternatives": (ok("get_schema_info", "execute_sql", "web_search", "vectorDB_search", "answer"), 17 / 18),
    # neither: GC = ½(3/5 + 3/3) = 0.8; TP 3, counted 3 -> TF 6/7; TOS = ½(0.8 + 6/7)
    "no alternative": (ok("get_schema_info", "execute_sql", "answer"), (0.8 + 6 / 7) / 2),
}


@pytest.mark.parametrize("case", ALT_CASES)
def test_alternatives_scored_by_hand(case):
    calls, tos = ALT_CASES[case]
    assert tool_orchestration(report_dag(), calls).tos == pytest.approx(tos)


def test_alternative_is_credited():
    result = tool_orchestration(report_dag(), ALT_CASES["one alternative"][0])
    assert result.credited == ["web"] and set(result.matched) == {"schema", "sql", "vec", "report"}


# ---------------------------------------------------------------- bundled benchmark


@pytest.fixture(scope="module")
def bundled() -> dict[str, Task]:
    return {task.id: task for task in load_tasks("bundled")}


def test_bundled_dags_are_already_normal(bundled):
    assert all(gold_dag(task) == task.gold.dag for task in bundled.values())


def test_bundled_perfect_traces_score_one(bundled):
    for task in bundled.values():
        dag = gold_dag(task)
        assert dag is not None
        assert tool_orchestration(dag, perfect_calls(dag)).tos == 1.0, task.id


# BND004: search, schema -> sql -> answer (all required, critical), plus the optional rate step:
# rate_sql | rate_python (an ALT group of optional nodes, both HARD_DEP before answer).
BUNDLED_CASES = {
    # rate in Python: rate_python matched, rate_sql credited. GC 1; the optional group is neutral in TF:
    # TP 4, counted 5 - 1 = 4, items 4 -> TF 1; SS 1; TOS 1
    "rate in python": (ok("search_documents", "get_schema_info", "execute_sql", "execute_python", "answer"), 1.0),
    # rate computed inside the main query: no rate call at all. GC 1 (rate nodes not required); TF 1; TOS 1
    "rate in the main query": (ok("search_documents", "get_schema_info", "execute_sql", "answer"), 1.0),
    # Python after the answer breaks HARD_DEP rate_python -> answer: GC 1, TF 1, SS 0; TOS = ½(1 + 0)
    "rate after answering": (ok("search_documents", "get_schema_info", "execute_sql", "answer", "execute_python"), 0.5),
}


@pytest.mark.parametrize("case", BUNDLED_CASES)
def test_bundled_report_scored_by_hand(bundled, case):
    calls, tos = BUNDLED_CASES[case]
    assert tool_orchestration(bundled["BND004"].gold.dag, calls).tos == pytest.approx(tos)


def test_score_dag_reads_the_trace(bundled):
    task = bundled["BND001"]
    calls = [("get_schema_info", True), ("execute_sql", False), ("execute_sql", True), ("answer", True)]
    steps = [
        ToolCallStep(
            index=i, phase=Phase.EXECUTE, tool=tool, arguments={}, started_at="", duration_s=0.0, success=success
        )
        for i, (tool, success) in enumerate(calls)
    ]
    scores = score_dag(task, Trace(task_id=task.id, system="s", model="m", steps=steps))
    # schema -> sql -> answer all matched in order (the failed SQL call is skipped): TOS 1; SR = 3/4
    assert scores == {"tos": 1.0, "gc": 1.0, "tq": 1.0, "tf": 1.0, "ss": 1.0, "sr": 0.75, "coverage": 1.0}


# ---------------------------------------------------------------- edge cases beside FDABench's own evaluator

# FDABench's DAGEvaluator (fdabench/FDAbench, FDABench/evaluation/dag_evaluator.py at commit 0406d46e19): TOS =
# ½·GC + ½·F1·SS, GC = ½(required coverage + critical-path coverage), F1 over the SETS of tool names (its alias
# table knows neither `answer` nor any semantic operator; generated_sql and execute_sql are two tools), SS 0 when a
# matched node's HARD_DEP source was not executed or ran later. Its values, worked through that code by hand:
PERFECT_FDA0722 = ("get_schema_info", "generated_sql", "execute_sql", "web_context_search", "vectorDB_search")
OFFICIAL_ON_FDA0722 = {  # case -> (calls, FDABench's TOS); FDA0722's chain, every subtask required and critical
    "empty trace": ([], 0.0),  # nothing covered, F1 0 (no tool), SS 1
    "answer only": (ok("answer"), 0.0),  # `answer` is no tool of its gold: nothing covered, F1 0
    "operators only": (ok("sem_filter", "sem_map", "docetl_reduce"), 0.0),  # unknown tools: F1 0
}


@pytest.mark.parametrize("case", OFFICIAL_ON_FDA0722)
def test_doing_nothing_scores_as_fdabenchs_evaluator_scores_it(chain, case):
    calls, official = OFFICIAL_ON_FDA0722[case]
    result = tool_orchestration(chain, calls)
    assert result.tos == pytest.approx(official)
    assert result.coverage == 0.0


def test_a_semantic_operator_beside_a_perfect_trace_costs_what_an_extra_python_call_costs(chain, bundled):
    # FDABench's evaluator charges the extra operator too: tools {5 gold} + sem_filter -> P 5/6, R 1, F1 10/11,
    # TOS ½(1 + 10/11) = 21/22. Ours folds generated_sql into execute_sql (4 gold items): TF 8/9, TOS 17/18.
    with_operator = tool_orchestration(chain, ok(*PERFECT_FDA0722, "sem_filter")).tos
    with_python = tool_orchestration(chain, ok(*PERFECT_FDA0722, "execute_python")).tos
    assert with_operator == with_python == pytest.approx(17 / 18)
    # where the gold has a processing step (BND004's optional rate_python), the operator takes it: TOS 1 (was 17/18)
    perfect = ok("search_documents", "get_schema_info", "execute_sql", "sem_filter", "answer")
    assert tool_orchestration(bundled["BND004"].gold.dag, perfect).tos == 1.0


def test_an_answer_only_trace_keeps_its_credit_with_coverage_zero_beside_it(bundled):
    # BND001: schema -> sql -> answer, all required and critical. FDABench's evaluator, given this DAG, credits
    # the answer node too: GC ½(1/3 + 1/3), F1 over tool sets ½, SS 0 (sql never ran) -> TOS 1/6. Ours keeps
    # GC 1/3 and TF 2·1/(1 + 3) = ½ with SS 1 (a missing step is no reversal) -> 5/12, and says what was done:
    result = tool_orchestration(bundled["BND001"].gold.dag, ok("answer"))
    assert (result.tos, result.coverage) == (pytest.approx(5 / 12), 0.0)
    assert tool_orchestration(bundled["BND001"].gold.dag, ok("get_schema_info", "answer")).coverage == 0.5


def test_tool_success_and_tool_dag_give_a_task_without_tool_calls_the_same_success_rate(bundled):
    task = bundled["BND001"]
    trace, answer = Trace(task_id=task.id, system="s", model="m"), Answer(text="x")
    dag_sheet = score(task, answer, trace, ["tool_dag", "tool_success"])
    assert dag_sheet.scores["sr"] == 0.0 and score(task, answer, trace, ["tool_success"]).scores == {"sr": 0.0}
    assert score_dag(task, trace)["sr"] == 0.0


# ---------------------------------------------------------------- properties

TOOLS = ["get_schema_info", "execute_sql", "search_documents", "execute_python", "answer"]
SPURIOUS = ["web_search", "sql_debug", "list_files"]  # never a tool of a generated gold DAG


def perfect_calls(dag: GoldDag) -> Calls:
    """Each gold node's tool in matching order, skipping alternatives once their group has enough."""
    dag = normalize_dag(dag)
    tools = {node.id: node.tool for node in dag.nodes}
    groups = alt_groups(dag)
    taken: Counter[int] = Counter()
    calls: Calls = []
    for node_id in topological_order(dag):
        group = next((i for i, g in enumerate(groups) if node_id in g.node_ids), None)
        if group is not None:
            if taken[group] >= groups[group].min_required:
                continue
            taken[group] += 1
        calls.append((str(tools[node_id]), True))
    return calls


TWO_TOOLS = ["execute_sql", "execute_python"]  # DAGs over these repeat tools most of the time


@st.composite
def dags(draw: st.DrawFn, with_groups: bool = True, tools: list[str] = TOOLS) -> GoldDag:
    """Random DAGs: forward edges between node indexes, the node list shuffled, at most one ALT group."""
    size = draw(st.integers(1, 7))
    nodes = [DagNode(id=f"n{i}", tool=draw(st.sampled_from(tools)), required=draw(st.booleans())) for i in range(size)]
    edges = [
        DagEdge(source=f"n{i}", target=f"n{j}", type=kind)
        for i in range(size)
        for j in range(i + 1, size)
        if (kind := draw(st.sampled_from([None, None, HARD, SOFT]))) is not None
    ]
    groups = {}
    members = draw(st.lists(st.integers(0, size - 1), unique=True, max_size=3)) if with_groups else []
    if len(members) >= 2:
        minimum = draw(st.integers(1, len(members) - 1))
        groups["g"] = AltGroup(node_ids=[f"n{i}" for i in members], min_required=minimum)
    return GoldDag(nodes=draw(st.permutations(nodes)), edges=edges, alt_groups=groups)


@st.composite
def chains(draw: st.DrawFn, tools: list[str] = TWO_TOOLS) -> GoldDag:
    """HARD_DEP chains of 1 to 6 nodes."""
    nodes = [
        DagNode(id=f"n{i}", tool=tool)
        for i, tool in enumerate(draw(st.lists(st.sampled_from(tools), min_size=1, max_size=6)))
    ]
    return GoldDag(nodes=nodes, edges=[DagEdge(source=a.id, target=b.id) for a, b in pairwise(nodes)])


def calls_of(tools: list[str]) -> st.SearchStrategy[Calls]:
    return st.lists(st.tuples(st.sampled_from(tools), st.booleans()), max_size=10)


@settings(max_examples=150, deadline=None)
@given(dags())
def test_perfect_trace_scores_one(dag):
    result = tool_orchestration(dag, perfect_calls(dag))
    assert (result.gc, result.tf, result.ss, result.tos) == (1.0, 1.0, 1.0, 1.0)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(chains(), dags(tools=TWO_TOOLS), dags()),
    st.sampled_from([*TOOLS, *SPURIOUS, "generated_sql"]),
    st.booleans(),
    st.data(),
)
def test_one_extra_call_anywhere_never_breaks_a_perfect_order(dag, extra, success, data):
    calls = perfect_calls(dag)
    assert tool_orchestration(dag, calls).tos == 1.0
    position = data.draw(st.integers(0, len(calls)))
    result = tool_orchestration(dag, [*calls[:position], (extra, success), *calls[position:]])
    assert (result.ss, result.violations) == (1.0, [])


@settings(max_examples=150, deadline=None)
@given(dags(), calls_of([*TOOLS, "generated_sql"]), st.sampled_from(SPURIOUS), st.booleans(), st.data())
def test_a_spurious_call_never_raises_tf(dag, calls, spurious, success, data):
    position = data.draw(st.integers(0, len(calls)))
    before = tool_orchestration(dag, calls)
    after = tool_orchestration(dag, [*calls[:position], (spurious, success), *calls[position:]])
    assert after.tf <= before.tf
    assert all(0.0 <= value <= 1.0 for value in (after.gc, after.tf, after.tos, after.sr))


@settings(max_examples=150, deadline=None)
@given(dags(with_groups=False), calls_of(TOOLS), st.data())
def test_swapping_calls_of_unrelated_nodes_keeps_an_order_that_holds(dag, extra, data):
    """Only one way round: a swap can also make an order hold. Gold n0:sql → n1:schema plus a free
    schema and sql node; schema, schema, sql, sql breaks the edge however it is read, while
    schema, sql, schema, sql (the middle calls swapped, matched to the free nodes) has a reading
    that keeps it."""
    calls = data.draw(st.permutations([*((str(n.tool), True) for n in dag.nodes), *extra]))  # gold tools, shuffled
    result = tool_orchestration(dag, calls)
    node_at = {position: node for node, position in result.matched.items()}
    linked = {frozenset((e.source, e.target)) for e in dag.edges}
    for k in range(len(calls) - 1):
        u, v = node_at.get(k), node_at.get(k + 1)
        if result.ss == 0.0 or u is None or v is None or frozenset((u, v)) in linked:
            continue
        swapped = [*calls[:k], calls[k + 1], calls[k], *calls[k + 2 :]]
        assert tool_orchestration(dag, swapped).ss == 1.0
