"""The bundled benchmark: reproducible, execution-grounded, document-backed, with valid gold DAGs."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from data_agent_compare.core import TaskLoadError
from data_agent_compare.core.task import EdgeType, GoldDag, QuestionType, Task
from data_agent_compare.tasks.bundled import BUNDLED_ROOT, load_bundled
from data_agent_compare.tasks.bundled import generate as gen

CANONICAL_TOOLS = {"get_schema_info", "execute_sql", "search_documents", "execute_python", "answer"}
REPORT_SECTIONS = [
    "Executive Summary",
    "Data Analysis Results",
    "External Context & Insights",
    "Key Connections",
    "Conclusions",
]
RUBRIC_DIMENSIONS = ["SQL_ACCURACY", "EXTERNAL_INTEGRATION", "LOGICAL_REASONING", "COMPLETENESS"]


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load_bundled()


@pytest.fixture(scope="module")
def connection():
    con = gen.open_database()
    yield con
    con.close()


def test_checked_in_file_is_the_generators_fresh_output():
    assert gen.to_jsonl(gen.build_tasks()) == gen.OUTPUT.read_text(encoding="utf-8"), (
        "tasks.jsonl is stale: run python -m tasks.bundled.generate"
    )


def test_check_flag_reports_an_up_to_date_file():
    assert gen.main(["--check"]) == 0


def test_size_types_and_levels(tasks):
    assert 30 <= len(tasks) <= 40
    assert [t.id for t in tasks] == [f"BND{i:03d}" for i in range(1, len(tasks) + 1)]
    assert {t.benchmark for t in tasks} == {"bundled"}
    types = Counter(t.question_type for t in tasks)
    assert set(types) == {
        QuestionType.SINGLE_CHOICE,
        QuestionType.MULTIPLE_CHOICE,
        QuestionType.FACTOID,
        QuestionType.REPORT,
    }
    levels = Counter(t.level for t in tasks)
    assert set(levels) == {"easy", "medium", "hard"}
    assert all(count >= len(tasks) / 4 for count in levels.values()), levels  # roughly a third each


def test_every_gold_sql_executes_and_reproduces_the_stored_answer(tasks, connection):
    assert len(tasks) == len(gen.SPECS)
    for task, spec in zip(tasks, gen.SPECS, strict=True):
        assert task.gold and task.gold.sql == spec.sql and task.question == spec.question
        result, derived = gen.derive_gold(spec, connection)
        assert result.rows, f"{task.id}: gold SQL returns no rows"
        assert result.to_csv() == task.gold.sql_result, task.id
        assert (derived.answer, derived.options, derived.report) == (task.gold.answer, task.options, task.gold.report)


def test_choice_options_and_correct_letters(tasks):
    for task in tasks:
        if task.question_type not in (QuestionType.SINGLE_CHOICE, QuestionType.MULTIPLE_CHOICE):
            assert task.options is None, task.id
            continue
        letters = list(task.options)
        assert letters == [chr(ord("A") + i) for i in range(len(letters))], task.id
        assert len(set(task.options.values())) == len(letters), f"{task.id}: duplicate option texts"
        if task.question_type == QuestionType.SINGLE_CHOICE:  # one letter, as the answer tool takes it
            assert len(letters) == 4 and task.gold.answer in letters, task.id
        else:
            assert isinstance(task.gold.answer, list) and set(task.gold.answer) <= set(letters), task.id
            assert len(letters) in (6, 8) and 2 <= len(task.gold.answer) <= 4, task.id


def test_factoid_answers_are_strings_with_format_guidelines(tasks):
    for task in tasks:
        if task.question_type == QuestionType.FACTOID:
            assert isinstance(task.gold.answer, str) and task.gold.answer.strip() == task.gold.answer, task.id
            assert task.guidelines, task.id


def test_reports_have_sections_rubric_and_result(tasks):
    reports = [t for t in tasks if t.question_type == QuestionType.REPORT]
    assert reports
    for task in reports:
        headings = re.findall(r"^## (.+)$", task.gold.report, flags=re.M)
        assert headings == REPORT_SECTIONS, task.id
        dimensions = task.gold.rubric.dimensions
        assert [d.name for d in dimensions] == RUBRIC_DIMENSIONS and all(d.weight == 0.25 for d in dimensions)
        assert all(d.criteria for d in dimensions) and task.gold.rubric.chain_validation
        # the SQL criteria quote concrete figures of the result
        assert any(re.search(r"\d", c) for c in dimensions[0].criteria), task.id


def test_half_the_tasks_need_documents_and_every_cited_fact_is_in_exactly_one_document(tasks):
    doc_texts = {path.name: path.read_text(encoding="utf-8") for path in gen.DOCS_DIR.glob("*.md")}
    assert 6 <= len(doc_texts) <= 10
    needing = [t for t in tasks if t.metadata["needs_documents"]]
    assert len(needing) >= len(tasks) / 2
    for task in tasks:
        facts = task.metadata["doc_facts"]
        assert bool(facts) == task.metadata["needs_documents"]
        assert sorted({f["doc"] for f in facts}) == task.metadata["documents"]
        for fact in facts:
            assert fact["doc"] in doc_texts, f"{task.id}: missing document {fact['doc']}"
            holders = [name for name, body in doc_texts.items() if fact["text"] in body]
            assert holders == [fact["doc"]], f"{task.id}: {fact['text']!r} found in {holders}"


def test_data_sources_resolve_to_existing_files(tasks):
    for task in tasks:
        assert task.data_dir is None
        locations = {source.name: Path(source.location) for source in task.data}
        assert locations["regional_sales"].is_file() and locations["regional_sales"].is_absolute()
        assert locations["company_docs"].is_dir()


def hard_chain_is_longest(dag: GoldDag) -> bool:
    """No chain of HARD_DEP edges through critical nodes is longer than the stated critical path."""
    critical = {n.id for n in dag.nodes if n.critical}
    succ = {
        n: [e.target for e in dag.edges if e.type is EdgeType.HARD_DEP and e.source == n and e.target in critical]
        for n in critical
    }

    def longest(node: str) -> int:
        return 1 + max((longest(s) for s in succ[node]), default=0)

    return max(longest(n) for n in critical) == len(dag.critical_path)


def is_acyclic(dag: GoldDag) -> bool:
    order_edges = [(e.source, e.target) for e in dag.edges if e.type is not EdgeType.ALT_GROUP]
    try:
        import networkx as nx
    except ImportError:  # a plain DFS when networkx is not installed
        graph: dict[str, list[str]] = {n.id: [] for n in dag.nodes}
        for source, target in order_edges:
            graph[source].append(target)
        state: dict[str, int] = {}

        def visit(node: str) -> bool:
            state[node] = 1
            ok = all(state.get(nxt) != 1 and (nxt in state or visit(nxt)) for nxt in graph[node])
            state[node] = 2
            return ok

        return all(node in state or visit(node) for node in graph)
    graph = nx.DiGraph()
    graph.add_nodes_from(n.id for n in dag.nodes)
    graph.add_edges_from(order_edges)
    return nx.is_directed_acyclic_graph(graph)


def test_every_gold_dag_is_valid(tasks):
    for task in tasks:
        dag = task.gold.dag
        nodes = {n.id: n for n in dag.nodes}
        assert {n.tool for n in dag.nodes} <= CANONICAL_TOOLS, task.id
        assert is_acyclic(dag), task.id
        hard = {(e.source, e.target) for e in dag.edges if e.type is EdgeType.HARD_DEP}
        assert all(pair in hard for pair in zip(dag.critical_path, dag.critical_path[1:], strict=False)), task.id
        assert all(nodes[n].critical for n in dag.critical_path) and hard_chain_is_longest(dag), task.id
        assert dag.critical_path[-1] == "answer" and ("schema", "sql") in hard, task.id
        assert nodes["sql"].expected_sql == task.gold.sql and nodes["sql"].expected_result == task.gold.sql_result
        if task.metadata["needs_documents"]:
            assert nodes["search"].tool == "search_documents" and ("search", "sql") in hard, task.id
        for group in dag.alt_groups.values():
            a, b = group.node_ids
            alt = {(e.source, e.target) for e in dag.edges if e.type is EdgeType.ALT_GROUP}
            assert (a, b) in alt and {nodes[a].tool, nodes[b].tool} == {"execute_sql", "execute_python"}, task.id


def corrupted_copy(tmp_path: Path, line_number: int, edit) -> Path:
    """A copy of the bundled folder's task file with one record changed by `edit`."""
    target = tmp_path / "bundled"
    target.mkdir()
    lines = (BUNDLED_ROOT / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    lines[line_number - 1] = edit(lines[line_number - 1])
    (target / "tasks.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def test_loader_names_file_line_and_field_of_a_bad_record(tmp_path):
    def bad_type(line: str) -> str:
        record = json.loads(line)
        record["question_type"] = "essay"
        return json.dumps(record)

    with pytest.raises(TaskLoadError) as caught:
        load_bundled(corrupted_copy(tmp_path, 3, bad_type))
    error = caught.value
    assert (Path(error.file).name, error.line, error.field) == ("tasks.jsonl", 3, "question_type")
    assert "tasks.jsonl:3" in str(error) and "question_type" in str(error)


def test_loader_names_a_nested_field_and_broken_json(tmp_path):
    def bad_node(line: str) -> str:
        record = json.loads(line)
        record["gold"]["dag"]["nodes"][0]["required"] = "sometimes"
        return json.dumps(record)

    with pytest.raises(TaskLoadError) as caught:
        load_bundled(corrupted_copy(tmp_path, 5, bad_node) / "tasks.jsonl")
    assert (caught.value.line, caught.value.field) == (5, "gold.dag.nodes.0.required")

    shutil.rmtree(tmp_path / "bundled")
    with pytest.raises(TaskLoadError, match=r"tasks\.jsonl:2: invalid JSON"):
        load_bundled(corrupted_copy(tmp_path, 2, lambda line: line[:-10]))


def test_document_mappings_cover_the_database(connection):
    products = [row[0] for row in connection.execute('SELECT "Product Name" FROM Products')]
    categorized = [line for lines in gen.CATEGORIES.values() for line in lines]
    assert sorted(categorized) == sorted(products)  # every product line in exactly one category
    codes = {row[0] for row in connection.execute('SELECT DISTINCT WarehouseCode FROM "Sales Orders"')}
    assert codes == set(gen.DISTRIBUTION_CENTERS)
    channels = {row[0] for row in connection.execute('SELECT DISTINCT "Sales Channel" FROM "Sales Orders"')}
    assert channels == set(gen.CHANNEL_CAPS)
