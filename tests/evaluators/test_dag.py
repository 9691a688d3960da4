"""The gold-DAG scorer (evaluators/dag.py): DAGs from FDABench gold_subtasks and bundled gold,
TOS components computed by hand with FDABench's DAGEvaluator rules, and properties over random DAGs."""

from __future__ import annotations

import json
from functools import cache
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_agent_compare.core.scorer import score
from data_agent_compare.core.task import AltGroup, Answer, DagEdge, DagNode, EdgeType, Gold, GoldDag, Task
from data_agent_compare.core.trace import Phase, ToolCallStep, Trace
from data_agent_compare.evaluators.dag import (
    gold_dag,
    normalize_dag,
    score_dag,
    tool_aliases,
    tool_orchestration,
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
        "generated_sql": "generated_sql",  # a step of its own, as in FDABench (our execute_sql also does it)
        "sql_generate": "generated_sql",  # FDABench's own alias table is part of ours
        "schema_understanding": "get_schema_info",
        "search": "web_search",  # FDABench: an alias of perplexity_search
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
    aliases = tool_aliases()
    assert {name: aliases.canonical(name) for name in expected} == expected
    assert all(aliases.canonical(name) == name for name in DEFAULT_TOOL_NAMES)
    known = set(aliases.names.values())
    offered = fdabench_record("test_report.jsonl", "FDA0010")["tools_available"]
    assert {aliases.canonical(name) for name in offered} <= known


# ---------------------------------------------------------------- DAGs from gold_subtasks

CHAIN_IDS = ["get_schema_info", "generated_sql", "execute_sql", "web_context_search", "vectorDB_search"]


@pytest.fixture(scope="module")
def chain() -> GoldDag:
    """FDA0722: get_schema_info, generated_sql, execute_sql, web_context_search, vectorDB_search; no depends_on."""
    dag = gold_dag(fdabench_task("test_singlechoice.jsonl", "FDA0722"))
    assert dag is not None
    return dag


def test_subtasks_without_depends_on_become_a_hard_chain(chain):
    subtasks = {s["subtask_id"]: s for s in fdabench_record("test_singlechoice.jsonl", "FDA0722")["gold_subtasks"]}
    assert [n.id for n in chain.nodes] == CHAIN_IDS
    tools = ["get_schema_info", "generated_sql", "execute_sql", "web_search", "search_documents"]
    assert [n.tool for n in chain.nodes] == tools
    assert [(e.source, e.target, e.type) for e in chain.edges] == [(a, b, HARD) for a, b in pairwise(CHAIN_IDS)]
    assert chain.critical_path == CHAIN_IDS  # the whole chain is the longest HARD_DEP path
    assert all(n.required and n.critical for n in chain.nodes)
    assert chain.nodes[1].expected_sql == subtasks["generated_sql"]["expected_SQL"]
    assert chain.nodes[2].expected_result == subtasks["execute_sql"]["expected_result"]


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
        ("get_schema_info", "generated_sql"),
        ("generated_sql", "execute_sql"),
        ("execute_sql", "synthesize_report"),
        ("web_context_search", "synthesize_report"),
        ("vectorDB_search", "synthesize_report"),
    ]
    assert {e.type for e in dag.edges} == {HARD}
    assert dag.critical_path == ["get_schema_info", "generated_sql", "execute_sql", "synthesize_report"]
    assert {n.id for n in dag.nodes if n.critical} == set(dag.critical_path)
    assert all(n.required for n in dag.nodes)


def test_depends_on_scored_by_hand():
    dag = gold_dag(report_with_dependencies())
    assert dag is not None
    # No vector search; execute_sql also writes its SQL (generated_sql). matched: web, schema, generated_sql,
    # execute_sql, synthesize (its vector-search predecessor never ran: matched anyway, FDABench's fallback).
    # GC = ½(5/6 + 4/4) = 11/12; tool sets: 5 of 6 gold tools, nothing else -> P 1, R 5/6, F1 10/11;
    # SS 0 (vectorDB_search -> synthesize_report: the target ran, its predecessor never did); TOS = ½·11/12
    calls = ok("web_search", "get_schema_info", "execute_sql", "answer")
    assert components(calls, dag) == pytest.approx({"gc": 11 / 12, "tf": 10 / 11, "ss": 0.0, "tos": 11 / 24})


def test_subtasks_before_the_first_with_depends_on_are_chained():
    # FDABench's DAGBuilder: explicit depends_on edges, then a chain through the leading subtasks without one
    subtasks = [
        {"subtask_id": "schema", "tool": "get_schema_info"},
        {"subtask_id": "search", "tool": "vectorDB_search"},
        {"subtask_id": "sql", "tool": "execute_sql", "depends_on": ["schema"]},
        {"subtask_id": "web", "tool": "web_context_search"},
    ]
    dag = gold_dag(fdabench_task("test_report.jsonl", "FDA0236", gold_subtasks=subtasks))
    assert dag is not None
    assert [(e.source, e.target) for e in dag.edges] == [("schema", "sql"), ("schema", "search")]
    assert dag.critical_path == ["schema", "sql"]  # the first of equally long paths, in edge order


def test_malformed_gold_subtasks_are_refused_naming_the_task():
    with pytest.raises(ValueError, match=r"FDA0236.*not a list"):
        gold_dag(fdabench_task("test_report.jsonl", "FDA0236", gold_subtasks="{'a': 1}"))
    bad = [{"subtask_id": "a", "tool": "execute_sql", "depends_on": ["missing"]}]
    with pytest.raises(ValueError, match=r"FDA0236.*unknown subtask ids \['missing'\]"):
        gold_dag(fdabench_task("test_report.jsonl", "FDA0236", gold_subtasks=bad))


# ---------------------------------------------------------------- TOS by hand on the FDA0722 chain
# Gold: 5 nodes S -> G -> X -> W -> V (schema, SQL written, SQL run, web search, vector search), all required
# and critical, no answer node (so `answer` calls are left out, as FDABench's agents have no answer tool).

CHAIN_CASES = {
    # FDABench's own tool names: all matched in order. GC 1; F1 1; SS 1; TOS 1
    "perfect": (
        ok("get_schema_info", "generated_sql", "execute_sql", "web_context_search", "vectorDB_search", "answer"),
        {"gc": 1.0, "tf": 1.0, "ss": 1.0, "tos": 1.0},
    ),
    # No schema step (execute_sql also writes its SQL: G and X). GC = ½(4/5 + 4/5) = 0.8; tool sets: P 1, R 4/5,
    # F1 8/9; SS 0 (G ran, its predecessor S never did); TOS = ½·0.8
    "missing critical step": (
        ok("execute_sql", "web_search", "search_documents", "answer"),
        {"gc": 0.8, "tf": 8 / 9, "ss": 0.0, "tos": 0.4},
    ),
    # SQL before schema breaks HARD_DEP S -> G: GC 1, F1 1, SS 0 -> TQ 0; TOS = ½(1 + 0) = 0.5
    "hard dependency reversed": (
        ok("execute_sql", "get_schema_info", "web_search", "search_documents"),
        {"gc": 1.0, "tf": 1.0, "ss": 0.0, "tos": 0.5},
    ),
    # A spurious Python call: tool sets 5 gold + 1 -> P 5/6, R 1, F1 10/11; GC 1; SS 1; TOS = ½(1 + 10/11) = 21/22
    "spurious tool": (
        ok("get_schema_info", "execute_sql", "execute_python", "web_search", "search_documents"),
        {"gc": 1.0, "tf": 10 / 11, "ss": 1.0, "tos": 21 / 22},
    ),
    # A failed SQL call is no executed tool (FDABench's agents list the tools that succeeded); the retry does G, X
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
    assert result.matched == {
        "generated_sql": 1,  # the successful execute_sql call wrote its SQL and ran it
        "execute_sql": 1,
        "get_schema_info": 2,
        "web_context_search": 3,
        "vectorDB_search": 4,
    }
    assert result.violations == [("get_schema_info", "generated_sql")]
    assert (result.precision, result.recall, result.tq) == (1.0, 1.0, 0.0)
    assert result.sr == 4 / 5  # failures count in SR only
    assert result.critical_path == CHAIN_IDS


# ---------------------------------------------------------------- FDABench's greedy matching


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


def test_an_extra_early_call_of_a_gold_tool_takes_a_later_step_as_fdabench_does():
    # Calls sql, sql, python, sql. FDABench gives each call to the first free node of its tool whose HARD_DEP
    # predecessors are matched, else to the first free node anyway: call 0 -> A; call 1 -> C (B not yet
    # matched: the fallback); call 2 -> B; call 3 -> nothing. C ran before B: SS 0. GC 1; F1 1; TOS ½
    result = tool_orchestration(sql_python_sql(), ok("execute_sql", "execute_sql", "execute_python", "execute_sql"))
    assert result.matched == {"A": 0, "C": 1, "B": 2}
    assert (result.gc, result.tf, result.ss, result.violations) == (1.0, 1.0, 0.0, [("B", "C")])
    assert result.tos == 0.5


def test_a_real_reversal_breaks_the_order():
    # python, sql, sql: B takes call 0 (A unmatched: the fallback), A call 1, C call 2. GC 1; F1 1; SS 0; TOS ½
    result = tool_orchestration(sql_python_sql(), ok("execute_python", "execute_sql", "execute_sql"))
    assert result.matched == {"B": 0, "A": 1, "C": 2} and result.violations == [("A", "B")]
    assert (result.gc, result.tf, result.ss, result.tos) == (1.0, 1.0, 0.0, 0.5)


def test_the_first_free_node_in_gold_order_takes_the_call_required_or_not():
    dag = GoldDag(
        nodes=[DagNode(id="optional", tool="execute_sql", required=False), DagNode(id="needed", tool="execute_sql")],
        critical_path=["needed"],
    )
    # `optional` comes first and has no predecessor: it takes the call. GC ½(0/1 + 0/1) = 0; tool sets {sql}
    # both sides: F1 1; SS 1; TOS ½ (the critical flags are never scored, the path is)
    result = tool_orchestration(dag, ok("execute_sql"))
    assert result.matched == {"optional": 0} and (result.gc, result.tf, result.tos) == (0.0, 1.0, 0.5)


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
        ("gen", "generated_sql"),
        ("sql", "execute_sql"),
        ("web", "web_search"),
        ("vec", "search_documents"),
        ("report", "answer"),
    ]
    assert dag.critical_path == ["schema", "gen", "sql", "report"]
    assert normalize_dag(dag) == dag


# Gold after normalizing: schema -> gen -> sql -> report, web|vec (ALT, SOFT_DEP into report); all 6 required,
# critical path schema, gen, sql, report; 6 gold tools. FDABench gives an ALT group no credit: it only reports
# whether the group was satisfied (coverage, ours, credits the other alternative).
ALT_CASES = {
    # vec only (execute_sql also does gen): GC = ½(5/6 + 4/4) = 11/12; P 1, R 5/6, F1 10/11; SS 1
    "one alternative": (ok("get_schema_info", "execute_sql", "vectorDB_search", "answer"), (11 / 12 + 10 / 11) / 2),
    # web only: the same
    "the other alternative": (ok("get_schema_info", "execute_sql", "web_search", "answer"), (11 / 12 + 10 / 11) / 2),
    # both: everything matched, F1 1: TOS 1
    "both alternatives": (ok("get_schema_info", "execute_sql", "web_search", "vectorDB_search", "answer"), 1.0),
    # neither: GC = ½(4/6 + 4/4) = 5/6; P 1, R 4/6, F1 0.8; TOS = ½(5/6 + 0.8)
    "no alternative": (ok("get_schema_info", "execute_sql", "answer"), (5 / 6 + 0.8) / 2),
}


@pytest.mark.parametrize("case", ALT_CASES)
def test_alternatives_scored_by_hand(case):
    calls, tos = ALT_CASES[case]
    assert tool_orchestration(report_dag(), calls).tos == pytest.approx(tos)


def test_alternative_is_credited():
    result = tool_orchestration(report_dag(), ALT_CASES["one alternative"][0])
    assert result.credited == ["web"] and set(result.matched) == {"schema", "gen", "sql", "vec", "report"}
    assert result.coverage == 1.0  # ours, beside TOS: every required step other than the answer done or credited


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


# BND004: search, schema -> sql -> answer (all required; critical path search, sql, answer), plus the optional
# rate step: rate_sql | rate_python (an ALT group), each a SOFT_DEP of answer (either one feeds it; a HARD edge from
# an optional alternative would zero SS for every one-way solution under FDABench's rule). GC 1 throughout.
BUNDLED_CASES = {
    # rate in Python: F1 1 (5 of the 5 gold tools); no HARD edge broken: SS 1; TOS 1
    "rate in python": (ok("search_documents", "get_schema_info", "execute_sql", "execute_python", "answer"), 1.0),
    # rate inside the main query: recall 4/5, precision 1, F1 8/9; SS 1; TOS (1 + 8/9) / 2 = 17/18
    "rate in the main query": (ok("search_documents", "get_schema_info", "execute_sql", "answer"), 17 / 18),
    # Python after the answer: rate_python -> answer is soft, so FDABench's SS does not see it; TOS 1
    "rate after answering": (ok("search_documents", "get_schema_info", "execute_sql", "answer", "execute_python"), 1.0),
    # both alternatives, then the answer: every node matched in order; TOS 1
    "both alternatives": (
        ok("search_documents", "get_schema_info", "execute_sql", "execute_sql", "execute_python", "answer"),
        1.0,
    ),
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

# Official values, worked by hand through FDABench's DAGEvaluator (fdabench/FDAbench,
# FDABench/evaluation/dag_evaluator.py at commit 0406d46: evaluate -> _match_execution_to_nodes,
# _compute_graph_coverage, _compute_tool_metrics, _check_dependency_violations, compute_composite_score) on
# the same DAG: for FDA0722 the TaskDAG of PUDDING/tools/dag_builder.py convert_subtasks_to_dag (a 5-node HARD_DEP
# chain, critical path = the chain), for BND001 TaskDAG.from_dict of its gold (schema -> sql -> answer, critical
# path as given), and `tools_executed` = the calls listed (FDABench's own tool names for FDA0722).
# TOS = ½·½(required cov + critical-path cov) + ½·F1(tool name sets)·SS.
PERFECT_FDA0722 = ("get_schema_info", "generated_sql", "execute_sql", "perplexity_search", "vectorDB_search")
PERFECT_BND001 = ("get_schema_info", "execute_sql", "answer")
OPERATORS = ("sem_filter", "sem_map", "docetl_reduce")
OFFICIAL = {  # (task, case) -> (calls, FDABench's TOS, our coverage beside it)
    # nothing covered, F1 0 (no tool ran: precision and recall 0)
    ("BND001", "empty trace"): ((), 0.0, 0.0),
    ("FDA0722", "empty trace"): ((), 0.0, 0.0),
    # BND001: answer matched (its predecessor sql never ran: matched anyway); GC ½(1/3 + 1/3), F1 of {answer} vs
    # {schema, sql, answer} = ½, SS 0 (sql never ran) -> 1/6. FDA0722: no answer step, nothing covered -> 0
    ("BND001", "answer only"): (("answer",), 1 / 6, 0.0),
    ("FDA0722", "answer only"): (("answer",), 0.0, 0.0),
    # no operator is a gold tool: nothing matched, TP 0, F1 0
    ("BND001", "operators only"): (OPERATORS, 0.0, 0.0),
    ("FDA0722", "operators only"): (OPERATORS, 0.0, 0.0),
    ("BND001", "perfect"): (PERFECT_BND001, 1.0, 1.0),
    ("FDA0722", "perfect"): (PERFECT_FDA0722, 1.0, 1.0),
    # one false positive: BND001 P 3/4, F1 6/7, TOS 13/14; FDA0722 P 5/6, F1 10/11, TOS 21/22
    ("BND001", "perfect + sem_filter"): ((*PERFECT_BND001, "sem_filter"), 13 / 14, 1.0),
    ("FDA0722", "perfect + sem_filter"): ((*PERFECT_FDA0722, "sem_filter"), 21 / 22, 1.0),
    # SQL before schema: the SQL step is matched anyway, schema later -> SS 0; GC 1, F1 1 -> ½
    ("BND001", "step before its predecessor"): (("execute_sql", "get_schema_info", "answer"), 0.5, 1.0),
    ("FDA0722", "step before its predecessor"): (
        ("generated_sql", "execute_sql", "get_schema_info", "perplexity_search", "vectorDB_search"),
        0.5,
        1.0,
    ),
}


@pytest.fixture(scope="module")
def edge_dags(bundled, chain) -> dict[str, GoldDag]:
    bnd001 = gold_dag(bundled["BND001"])
    assert bnd001 is not None
    return {"BND001": bnd001, "FDA0722": chain}


@pytest.mark.parametrize("key", OFFICIAL, ids=[f"{task}: {case}" for task, case in OFFICIAL])
def test_tos_is_fdabenchs_on_the_edge_cases_with_coverage_beside_it(edge_dags, key):
    calls, official, coverage = OFFICIAL[key]
    result = tool_orchestration(edge_dags[key[0]], ok(*calls))
    assert (result.tos, result.coverage) == (pytest.approx(official), coverage)


def test_our_agents_without_a_generated_sql_tool_score_as_fdabenchs_with_one(chain):
    # our execute_sql takes the SQL as its argument: it does FDABench's generated_sql and execute_sql steps
    ours = tool_orchestration(chain, ok("get_schema_info", "execute_sql", "web_search", "search_documents", "answer"))
    assert (ours.tos, list(ours.matched)) == (1.0, CHAIN_IDS)  # each execute_sql call did both steps
    # a semantic operator costs what an extra Python call costs: one false positive tool (TOS 21/22)
    with_operator = tool_orchestration(chain, ok(*PERFECT_FDA0722, "docetl_map")).tos
    assert with_operator == tool_orchestration(chain, ok(*PERFECT_FDA0722, "execute_python")).tos == 21 / 22


def test_a_semantic_operator_takes_a_gold_processing_step(bundled):
    # BND004's optional rate_python step (rate_sql | rate_python, both HARD_DEP before answer: see BUNDLED_CASES)
    calls = ok("search_documents", "get_schema_info", "execute_sql", "execute_sql", "sem_filter", "answer")
    assert tool_orchestration(bundled["BND004"].gold.dag, calls).tos == 1.0


def test_coverage_counts_the_required_steps_other_than_the_answer(bundled):
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
    """Every gold node's tool, in the HARD_DEP order that takes ready nodes first in gold order: FDABench's
    greedy matching then gives each call to its own node."""
    dag = normalize_dag(dag)
    before = {n.id: {e.source for e in dag.edges if e.target == n.id and e.type is HARD} for n in dag.nodes}
    calls: Calls = []
    done: set[str] = set()
    while len(done) < len(dag.nodes):
        node = next(n for n in dag.nodes if n.id not in done and before[n.id] <= done)
        calls.append((str(node.tool), True))
        done.add(node.id)
    return calls


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


def calls_of(tools: list[str]) -> st.SearchStrategy[Calls]:
    return st.lists(st.tuples(st.sampled_from(tools), st.booleans()), max_size=10)


@settings(max_examples=150, deadline=None)
@given(dags())
def test_perfect_trace_scores_one(dag):
    result = tool_orchestration(dag, perfect_calls(dag))
    assert (result.gc, result.tf, result.ss, result.tos) == (1.0, 1.0, 1.0, 1.0)


@settings(max_examples=150, deadline=None)
@given(dags(), calls_of([*TOOLS, "generated_sql"]), st.sampled_from(SPURIOUS), st.booleans(), st.data())
def test_a_call_of_no_gold_tool_changes_neither_coverage_nor_order_and_never_raises_tf(
    dag, calls, spurious, success, data
):
    position = data.draw(st.integers(0, len(calls)))
    before = tool_orchestration(dag, calls)
    after = tool_orchestration(dag, [*calls[:position], (spurious, success), *calls[position:]])
    assert (after.gc, after.ss, after.tf <= before.tf) == (before.gc, before.ss, True)
    assert all(0.0 <= value <= 1.0 for value in (after.gc, after.tf, after.tos, after.sr))
