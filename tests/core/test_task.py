"""One Task shape carries a task of each of the four benchmarks (and the gold side each needs)."""

import pytest
from pydantic import ValidationError

from data_agent_compare.core.task import (
    Answer,
    DagEdge,
    DagNode,
    DataSource,
    EdgeType,
    Gold,
    GoldDag,
    QuestionType,
    Rubric,
    RubricDimension,
    Task,
    ToolCall,
    answer_from_text,
    answer_from_tool,
)


def fdabench_report() -> Task:
    dag = GoldDag(
        nodes=[
            DagNode(id="schema", type="schema", tool="get_schema_info"),
            DagNode(id="sql", type="sql", tool="execute_sql", critical=True),
            DagNode(id="web", type="search", tool="web_context_search", required=False),
            DagNode(id="vec", type="search", tool="vectorDB_search", required=False),
            DagNode(id="report", type="synthesize", tool="answer", critical=True),
        ],
        edges=[
            DagEdge(source="schema", target="sql"),
            DagEdge(source="sql", target="report"),
            DagEdge(source="web", target="vec", type=EdgeType.ALT_GROUP),
            DagEdge(source="web", target="report", type=EdgeType.SOFT_DEP),
        ],
        critical_path=["schema", "sql", "report"],
        alt_groups={"g1": {"node_ids": ["web", "vec"], "min_required": 1}},
    )
    rubric = Rubric(dimensions=[RubricDimension(name="SQL_ACCURACY", criteria=["states 42 orders"])])
    return Task(
        id="FDA0010",
        benchmark="fdabench",
        question="Write a report on ...",
        question_type=QuestionType.REPORT,
        level="hard",
        data=[DataSource(name="professional_basketball", kind="sqlite", location="/db/pb.sqlite")],
        gold=Gold(report="## Executive Summary ...", dag=dag, rubric=rubric, sql="SELECT 1", sql_result="1\n1\n"),
    )


def test_one_shape_for_all_four_benchmarks():
    choice = Task(
        id="FDA1248",
        benchmark="fdabench",
        question="Which ...?",
        question_type=QuestionType.MULTIPLE_CHOICE,
        options={"A": "x", "B": "y", "C": "z"},
        gold=Gold(answer=["B", "C"]),
    )
    factoid = Task(
        id="1273",
        benchmark="dabstep",
        question="Average fee?",
        question_type=QuestionType.FACTOID,
        level="hard",
        guidelines="Answer must be just a number rounded to 6 decimals",
        data_dir="/ctx",
        gold=Gold(answer="0.120132"),
    )
    dab = Task(
        id="bookreview/query1",
        benchmark="dab",
        question="Which decade ...?",
        question_type=QuestionType.FACTOID,
        data=[
            DataSource(name="books_dataset", kind="postgres", location="postgresql://127.0.0.1/bookreview_db"),
            DataSource(name="review_dataset", kind="sqlite", location="/q/review_query.db"),
        ],
        gold=Gold(validator="/q/query1/validate.py", ground_truth_file="/q/query1/ground_truth.csv"),
    )
    gorilla = Task(
        id="dbgorilla-6",
        benchmark="dbgorilla",
        question="Find open vegetarian restaurants",
        question_type=QuestionType.FUNCTION_CALL,
        tool_specs=[{"name": "query_database", "parameters": {"type": "object"}}],
        max_steps=1,
        gold=Gold(tool_call=ToolCall(name="query_database", arguments={"collection_name": "Restaurants"})),
    )
    report = fdabench_report()
    for task in (choice, factoid, dab, gorilla, report):
        round_tripped = Task.model_validate_json(task.model_dump_json())
        assert round_tripped == task
    assert report.gold.dag.critical_path == ["schema", "sql", "report"]
    assert [s.kind.value for s in dab.data] == ["postgres", "sqlite"]


def test_agent_never_sees_gold():
    task = fdabench_report().model_copy(update={"metadata": {"gold_subtasks": [{"tool": "x"}], "db": "pb"}})
    assert task.for_agent().gold is None
    assert task.for_agent().metadata == {"db": "pb"}
    assert task.gold is not None  # the original keeps it for scoring


def test_choice_task_without_options_is_rejected():
    with pytest.raises(ValidationError, match="needs options"):
        Task(id="x", benchmark="b", question="q", question_type=QuestionType.SINGLE_CHOICE)


def test_dag_referencing_unknown_node_is_rejected():
    with pytest.raises(ValidationError, match="unknown node ids"):
        GoldDag(nodes=[DagNode(id="a")], edges=[DagEdge(source="a", target="b")])


def test_dag_whose_order_edges_make_a_cycle_is_rejected_naming_it():
    nodes = [DagNode(id=node_id) for node_id in ("x", "a", "b", "c")]
    mixed = [
        DagEdge(source="b", target="c"),
        DagEdge(source="c", target="a", type=EdgeType.SOFT_DEP),  # a preferred order is an order too
        DagEdge(source="a", target="b"),
    ]
    with pytest.raises(ValidationError, match="cycle in its HARD_DEP/SOFT_DEP edges: a → b → c → a"):
        GoldDag(nodes=nodes, edges=mixed)
    with pytest.raises(ValidationError, match="edges: x → x"):
        GoldDag(nodes=nodes, edges=[DagEdge(source="x", target="x")])


def test_acyclic_dag_with_alternatives_is_accepted():
    nodes = [DagNode(id=node_id) for node_id in ("sql", "web", "vec", "report")]
    edges = [
        DagEdge(source="sql", target="report"),
        DagEdge(source="web", target="vec", type=EdgeType.SOFT_DEP),
        DagEdge(source="vec", target="web", type=EdgeType.ALT_GROUP),  # alternatives, no order
        DagEdge(source="vec", target="report", type=EdgeType.SOFT_DEP),
    ]
    dag = GoldDag(nodes=nodes, edges=edges, alt_groups={"search": {"node_ids": ["web", "vec"]}})
    assert [e.type for e in dag.edges].count(EdgeType.ALT_GROUP) == 1
    assert dag.alt_groups["search"].min_required == 1


def test_answer_tool_arguments_become_typed_answers():
    choice = Task(
        id="x", benchmark="b", question="q", question_type=QuestionType.MULTIPLE_CHOICE, options={"A": "1", "B": "2"}
    )
    assert answer_from_tool(choice, {"answer": ["b", "A"]}).choices == ["B", "A"]
    assert answer_from_tool(choice, {"answer": "a"}).choices == ["A"]
    report = fdabench_report()
    assert answer_from_text(report, "## Executive Summary").report == "## Executive Summary"
    assert Answer().status == "completed"
