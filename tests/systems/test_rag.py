"""The RAG systems (rag_naive, rag_graph, rag_hippo): indexes built once and metered apart, HippoRAG's
personalized PageRank, budgets, and each system end to end with the embedded model.

The scripted test model answers by the kind of call: an indexing call (agent "indexing") extracts
the capitalized phrases of the text as entities, or summarizes a community; the plan names the
question as its search query and the gold SQL of the task; the answer call picks the first option.
"""

import itertools
import json
import re
import shutil
import sqlite3
import uuid
from pathlib import Path

import pytest

from data_agent_compare.core import (
    Budgets,
    CallContext,
    Message,
    ModelConfig,
    ModelError,
    ModelRequest,
    ToolSettings,
    create_benchmark,
)
from data_agent_compare.core.system import SystemSetup
from data_agent_compare.core.task import DataSource, Task
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.scripted import tool_call_message
from data_agent_compare.systems.rag import HippoRag
from data_agent_compare.systems.rag_graph import EXTRACT_SYSTEM, SUMMARY_SYSTEM, text_units
from data_agent_compare.systems.rag_index import task_corpus

from helpers import FIXTURES, load_tasks, make_plan, no_network, postgres_bin_dir_or_skip, read_records

RAG_SYSTEMS = ["rag_naive", "rag_graph", "rag_hippo"]
PHRASE = re.compile(r"\b[A-Z][a-zA-Z]+(?: [A-Z][a-zA-Z]+)*")


def bundled_task(task_id: str = "BND003") -> Task:
    return next(t for t in load_tasks("bundled") if t.id == task_id)


def extraction(text: str) -> dict:
    names = list(dict.fromkeys(PHRASE.findall(text)))[:8]
    return {"entities": names, "triples": [f"{a} | appears with | {b}" for a, b in itertools.pairwise(names)]}


def answer_value(request: ModelRequest):
    schema = request.tools[0].parameters["properties"]["answer"]
    if "enum" in schema:
        return schema["enum"][0]
    if schema.get("type") == "array":
        return [schema["items"]["enum"][0]]
    return "unknown"


def rag_model(sql: str = "SELECT 1", entities: list[str] | None = None, query: dict | None = None):
    """A scripted model for the RAG systems (module docstring); `calls` counts its calls by kind. `query` is
    the plan's query in the task's query tool's arguments (default: execute_sql's, with `sql`)."""
    calls = {"extract": 0, "summary": 0, "plan": 0, "answer": 0}

    def respond(request: ModelRequest, context: CallContext) -> Message:
        system, text = request.messages[0].content, request.messages[-1].content or ""
        if system == EXTRACT_SYSTEM:
            calls["extract"] += 1
            return Message(role="assistant", content=json.dumps(extraction(text)))
        if system == SUMMARY_SYSTEM:
            calls["summary"] += 1
            return Message(role="assistant", content=json.dumps({"title": "A community", "summary": text[:300]}))
        if request.response_schema is not None:
            calls["plan"] += 1
            wanted = request.response_schema["properties"]
            question = request.messages[1].content.splitlines()[0][:150]
            plan = {"queries": [question], "entities": entities or [question], "sql": [query or {"sql": sql}]}
            return Message(role="assistant", content=json.dumps({k: v for k, v in plan.items() if k in wanted}))
        calls["answer"] += 1
        return tool_call_message("answer", {"answer": answer_value(request)})

    return respond, calls


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> ToolSettings:
    """One cache folder for the module, so the bundled documents' FAISS index is embedded once; RAG indexes
    never mix across tests, as each test's scripted model has an id of its own (`fresh`)."""
    return ToolSettings(cache_dir=str(tmp_path_factory.mktemp("cache")))


def fresh(model: ModelConfig) -> ModelConfig:
    return model.model_copy(update={"model_id": f"scripted-{uuid.uuid4().hex[:12]}"})


def run(tmp_path: Path, cache: ToolSettings, model, tasks: list[Task], systems: list[str], name: str = "run", **config):
    """Run the tasks through the real runner; returns the records, the manifest and the run directory."""
    plan = make_plan(tmp_path / name, tasks, model, systems, tools=cache, **config)
    manifest = execute(plan)
    return read_records(plan.run_dir), manifest, plan.run_dir


def steps(run_dir: Path, record, kind: str) -> list[dict]:
    trace = json.loads((run_dir / record.trace_file).read_text())
    return [s for s in trace["steps"] if s["kind"] == kind]


# ---------------------------------------------------------------- indexes built once


def test_scripted_graph_index_is_built_once_for_two_tasks_and_reused_by_a_second_run(tmp_path, cache, scripted_model):
    respond, calls = rag_model()
    model = fresh(scripted_model(respond))
    tasks = [bundled_task("BND003"), bundled_task("BND001")]  # one corpus: the bundled documents
    records, manifest, run_dir = run(tmp_path, cache, model, tasks, ["rag_graph"], concurrency=2)

    built = manifest.systems["rag_graph"]["indexing"]
    assert [(b["index"], b["cached"]) for b in built] == [("entity_graph", False), ("communities", False)]
    units = text_units(task_corpus(tasks[0]).passages)
    assert len(units) == calls["extract"] == built[0]["model_calls"] > 5  # one extraction call per text unit
    assert built[1]["model_calls"] == calls["summary"] > 0
    assert all(b["input_tokens"] > 0 and b["seconds"] > 0 for b in built)
    index_trace = json.loads((run_dir / built[0]["trace_file"]).read_text())
    indexing = [s for s in index_trace["steps"] if s["kind"] == "model_call"]
    assert len(indexing) == calls["extract"] + calls["summary"] and {s["agent"] for s in indexing} == {"indexing"}
    assert built[0]["trace_file"] == f"traces/_index/rag_graph/scripted/{built[0]['corpus']}.json"
    for record in records:  # per-task cost holds the task's own calls only: plan and answer
        assert record.status == "completed" and record.model_calls == 2
        assert "graph_search" in [c.tool for c in record.tool_calls]
        assert [s["phase"] for s in steps(run_dir, record, "model_call")] == ["decision", "generate"]

    extracted = calls["extract"]
    records, manifest, _ = run(tmp_path, cache, model, tasks, ["rag_graph", "rag_hippo"], name="again")
    assert calls["extract"] == extracted and calls["summary"] == built[1]["model_calls"]  # nothing rebuilt
    for system in ("rag_graph", "rag_hippo"):
        again = manifest.systems[system]["indexing"]
        assert again and all(b["cached"] and b["model_calls"] == 0 and "trace_file" not in b for b in again)
        assert again[0]["built"]["model_calls"] == extracted  # what building it cost, for reference
    assert all(r.status == "completed" and r.model_calls == 2 for r in records)


def test_two_threads_needing_the_same_unprepared_index_build_it_once(tmp_path, cache, scripted_model):
    from concurrent.futures import ThreadPoolExecutor

    respond, calls = rag_model()
    model = fresh(scripted_model(respond))
    task = bundled_task()
    systems = [HippoRag(), HippoRag()]
    setup = SystemSetup(model, cache)
    with ThreadPoolExecutor(2) as pool:
        reports = list(pool.map(lambda system: system.prepare([task], setup), systems))
    built = [r[0] for r in reports if not r[0]["cached"]]
    assert len(built) == 1 and built[0]["model_calls"] == calls["extract"] > 0  # the other thread waited, then read
    assert reports[0][0]["key"] == reports[1][0]["key"]


# ---------------------------------------------------------------- personalized PageRank


def test_scripted_hippo_pagerank_ranks_the_passage_of_the_question_entity_first(tmp_path, cache, scripted_model):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Loyalty\n\nAurora Program gives Gold Members a discount of 7 percent.\n")
    (docs / "b.md").write_text("# Regions\n\nNorthwind Region reports to the Western Division.\n")
    (docs / "c.md").write_text("# Stores\n\nHarbor Store belongs to the Western Division.\n")
    task = Task(
        id="tiny",
        benchmark="bundled",
        question="Which discount does the Aurora Program give?",
        question_type="factoid",
        data=[DataSource(name="docs", kind="documents", location=str(docs))],
    )
    respond, _ = rag_model(entities=["Aurora Program"])
    model = fresh(scripted_model(respond))
    system = HippoRag()
    system.prepare([task], SystemSetup(model, cache))
    index = next(iter(system._indexes.values()))
    seeds = index.seeds(["Aurora Program"])
    assert list(seeds) == ["aurora program"]
    ranked = index.rank(seeds, top_k=3)
    assert ranked[0][0].source == "a.md" and "Aurora Program" in ranked[0][0].text
    assert ranked[0][1] > ranked[1][1]
    # A passage two hops away (via the shared Western Division) scores above nothing but below the seed's.
    other = index.rank(index.seeds(["Northwind Region"]), top_k=3)
    assert [p.source for p, _ in other][:2] == ["b.md", "c.md"]


# ---------------------------------------------------------------- budgets


@pytest.mark.parametrize("system", RAG_SYSTEMS)
def test_scripted_budget_stop_ends_the_task_with_the_budgets_status(tmp_path, cache, scripted_model, system):
    respond, calls = rag_model(sql="SELECT 1")
    records, manifest, _ = run(
        tmp_path, cache, fresh(scripted_model(respond)), [bundled_task()], [system], budgets=Budgets(max_steps=1)
    )
    record = records[0]
    assert record.status == "max_steps" and record.model_calls == 1
    assert calls["answer"] == 0
    if system != "rag_naive":  # indexing is metered apart: the task's step budget never saw it
        assert manifest.systems[system]["indexing"][0]["model_calls"] == calls["extract"] > 1


def test_scripted_token_budget_stop(tmp_path, cache, scripted_model):
    respond, _ = rag_model()
    records, _, _ = run(
        tmp_path, cache, fresh(scripted_model(respond)), [bundled_task()], ["rag_naive"], budgets=Budgets(max_tokens=50)
    )
    assert records[0].status == "max_tokens"


# ---------------------------------------------------------------- traces and TOS


def test_scripted_rag_systems_trace_schema_retrieval_sql_and_answer(tmp_path, cache, scripted_model):
    task = bundled_task()
    respond, _ = rag_model(sql=task.gold.sql)
    records, _, run_dir = run(tmp_path, cache, fresh(scripted_model(respond)), [task], RAG_SYSTEMS)
    retrieval = {"rag_naive": "search_documents", "rag_graph": "graph_search", "rag_hippo": "ppr_search"}
    for record in records:
        tools = steps(run_dir, record, "tool_call")
        assert [t["tool"] for t in tools] == ["get_schema_info", retrieval[record.system], "execute_sql", "answer"]
        assert all(t["success"] for t in tools) and tools[2]["arguments"] == {"sql": task.gold.sql}
        assert tools[1]["result_summary"] and tools[1]["phase"] == "execute"
        assert record.usage.input_tokens > 0 and record.status == "completed"
        assert record.scores["sr"] == 1.0 and record.scores["gc"] == 1.0


# ---------------------------------------------------------------- the embedded model


def with_documents(task: Task, folder: Path, names: list[str]) -> Task:
    """The task with its document corpus narrowed to these files of it (copied into `folder`)."""
    folder.mkdir()
    data = []
    for source in task.data:
        if source.kind == "documents":
            for name in names:
                shutil.copy(Path(source.location) / name, folder / name)
            source = source.model_copy(update={"location": str(folder)})
        data.append(source)
    return task.model_copy(update={"data": data})


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the embedded model builds the graph index first: minutes on a shared CPU
def test_rag_systems_end_to_end_with_the_embedded_model_offline(tmp_path, cache):
    from data_agent_compare.engine.config import RunConfig, resolve_models

    model = resolve_models(["local"], RunConfig())[0]
    # BND003 (orders in 2019) over the two documents it touches: the index of the whole corpus takes the
    # embedded model ~20 calls, too long for a test; the pipeline is the same.
    task = with_documents(bundled_task(), tmp_path / "docs", ["fiscal_calendar.md", "order_classification.md"])
    with no_network() as attempts:
        records, manifest, run_dir = run(tmp_path, cache, model, [task], RAG_SYSTEMS, budgets=Budgets(max_steps=4))
    assert attempts == []
    retrieval = {"rag_naive": "search_documents", "rag_graph": "graph_search", "rag_hippo": "ppr_search"}
    for record in records:
        assert record.status in {"completed", "no_answer", "max_steps", "max_tokens", "time_limit"}, record.error
        assert record.status != "completed" or record.answer
        assert retrieval[record.system] in [c.tool for c in record.tool_calls]
        calls = steps(run_dir, record, "model_call")
        assert calls and all(c["provider"] == "local" and c["usage"]["input_tokens"] > 0 for c in calls)
    for system in ("rag_graph", "rag_hippo"):
        built = manifest.systems[system]["indexing"]
        assert built and all("error" not in b for b in built)
    assert manifest.systems["rag_graph"]["indexing"][0]["input_tokens"] > 0


def test_scripted_failed_indexing_calls_keep_the_index_out_of_the_cache(tmp_path, cache, scripted_model):
    respond, calls = rag_model()

    def first_extraction_fails(request: ModelRequest, context: CallContext) -> Message:
        if request.messages[0].content == EXTRACT_SYSTEM and calls["extract"] == 0:
            calls["extract"] += 1
            raise ModelError("the provider failed")
        return respond(request, context)

    model = fresh(scripted_model(first_extraction_fails))
    records, manifest, _ = run(tmp_path, cache, model, [bundled_task()], ["rag_hippo"])
    built = manifest.systems["rag_hippo"]["indexing"]
    assert built[0]["failed_calls"] == 1 and not built[0]["cached"]
    assert records[0].status == "completed"  # the other units' entities still serve this run
    records, manifest, _ = run(tmp_path, cache, model, [bundled_task()], ["rag_hippo"], name="again")
    assert manifest.systems["rag_hippo"]["indexing"][0]["cached"] is False  # built again: nothing was cached


def test_scripted_index_whose_every_call_fails_ends_its_tasks_as_infrastructure_errors(tmp_path, cache, scripted_model):
    respond, _ = rag_model()

    def extraction_fails(request: ModelRequest, context: CallContext) -> Message:
        if request.messages[0].content == EXTRACT_SYSTEM:
            raise ModelError("the provider failed")
        return respond(request, context)

    records, manifest, _ = run(
        tmp_path, cache, fresh(scripted_model(extraction_fails)), [bundled_task()], ["rag_graph"]
    )
    assert "every indexing call of entity_graph failed" in manifest.systems["rag_graph"]["indexing"][-1]["error"]
    assert records[0].status == "infra_error" and "index could not be built" in records[0].error


def test_scripted_frozen_vector_search_results_are_the_corpus_of_a_task_that_has_them(tmp_path, cache, scripted_model):
    recorded = [
        {"title": "Loyalty", "content": "Aurora Program members get Free Shipping on every order."},
        {"title": "Regions", "content": "Northwind Region reports to Western Division."},
    ]
    task = bundled_task()
    task = task.model_copy(
        update={
            "data": [s for s in task.data if s.kind != "documents"],
            "metadata": {**task.metadata, "frozen_vector_search": recorded},
        }
    )
    corpus = task_corpus(task)
    assert [p.source for p in corpus.passages] == ["frozen_vector_search"] and "Aurora Program" in corpus.passages[
        0
    ].text
    respond, calls = rag_model(entities=["Aurora Program"])
    records, manifest, run_dir = run(tmp_path, cache, fresh(scripted_model(respond)), [task], RAG_SYSTEMS)
    assert calls["extract"] == 1 and manifest.systems["rag_hippo"]["indexing"][0]["corpus"] == corpus.name
    for record in records:
        tools = steps(run_dir, record, "tool_call")
        assert record.status == "completed" and "Aurora Program" in tools[1]["result_summary"]


# ---------------------------------------------------------------- DAB: the databases' text columns


def dab_task(folder: Path) -> Task:
    """A DAB-shaped task over one SQLite database whose `body` column holds review texts."""
    folder.mkdir(parents=True)
    con = sqlite3.connect(folder / "shop.db")
    con.execute("CREATE TABLE reviews (review_id TEXT, product TEXT, body TEXT)")
    texts = {
        "Kettle": "The kettle boiled water quickly, but the Aurora Lid cracked after a month of daily use at home.",
        "Toaster": "This toaster browns bread evenly on both sides and the crumb tray slides out for easy cleaning.",
    }
    rows = [(f"r{n}", product, f"{text} Review number {n}.") for n in range(6) for product, text in texts.items()]
    con.executemany("INSERT INTO reviews VALUES (?, ?, ?)", rows)
    con.commit()
    con.close()
    source = DataSource(name="shop_reviews", kind="sqlite", location="shop.db")
    question = "How many reviews complain about a cracked lid?"
    fields = {"question": question, "question_type": "factoid", "data": [source], "data_dir": folder}
    return Task(id="shop/query1", benchmark="dab", **fields)


def test_scripted_rag_systems_search_the_text_columns_of_a_dab_database(tmp_path, cache, scripted_model):
    """A DAB task has no document corpus and no search tool: its text is in rows. rag_naive searches it with
    its own FAISS index (no model call), the graph systems index it; structured data goes through list_db
    and query_db, the DAB profile's own tools."""
    task = dab_task(tmp_path / "shop")
    query = {"db_name": "shop_reviews", "query": "SELECT COUNT(*) AS n FROM reviews WHERE body LIKE '%cracked%'"}
    respond, calls = rag_model(entities=["Aurora Lid"], query=query)
    records, manifest, run_dir = run(tmp_path, cache, fresh(scripted_model(respond)), [task], RAG_SYSTEMS)
    retrieval = {"rag_naive": "search_text_columns", "rag_graph": "graph_search", "rag_hippo": "ppr_search"}
    for record in records:
        tools = steps(run_dir, record, "tool_call")
        assert [t["tool"] for t in tools] == ["list_db", retrieval[record.system], "query_db", "return_answer"]
        assert all(t["success"] for t in tools) and record.status == "completed"
        assert "Aurora Lid cracked" in tools[1]["result_summary"]
    naive = steps(run_dir, next(r for r in records if r.system == "rag_naive"), "tool_call")[1]["result_summary"]
    assert naive.startswith("[") and " shop_reviews.reviews.body — review_id=r" in naive.splitlines()[0]
    vectors = manifest.systems["rag_naive"]["indexing"][0]
    assert vectors["index"] == "vectors" and vectors["model_calls"] == 0 and vectors["indexed_passages"] == 12
    column = {"source": "shop_reviews.reviews.body", "rows": 12, "passages": 12, "cut": False}
    assert vectors["text_columns"] == [column]
    assert calls["extract"] == manifest.systems["rag_graph"]["indexing"][0]["model_calls"] > 0


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~50 s to embed the 4,800 passages on two cores, once per cache
def test_scripted_rag_systems_index_and_search_the_text_columns_of_dabs_databases(tmp_path, cache, scripted_model):
    """DAB's bookreview keeps its evidence as text in rows (1,833 review texts in SQLite, book descriptions in
    PostgreSQL): every RAG system indexes them, reads the schema with list_db and queries with query_db."""
    postgres_bin_dir_or_skip()
    dataset = tmp_path / "query_bookreview"  # a copy: loading builds the review SQLite next to the dump
    shutil.copytree(FIXTURES / "dab" / "query_bookreview", dataset)
    benchmark = create_benchmark("dab", dataset)
    task = next(t for t in benchmark.load() if t.id == "bookreview/query1")
    query = {"db_name": "review_dataset", "query": "SELECT COUNT(*) AS reviews FROM review"}
    respond, calls = rag_model(entities=["Navy SEAL"], query=query)
    plan = make_plan(tmp_path / "run", [task], fresh(scripted_model(respond)), RAG_SYSTEMS, benchmark, tools=cache)
    with no_network() as attempts:
        manifest = execute(plan)
    assert attempts == []
    records, run_dir = read_records(plan.run_dir), plan.run_dir
    retrieval = {"rag_naive": "search_text_columns", "rag_graph": "graph_search", "rag_hippo": "ppr_search"}
    for record in records:
        tools = steps(run_dir, record, "tool_call")
        names = [t["tool"] for t in tools]
        assert names == ["list_db", "list_db", retrieval[record.system], "query_db", "return_answer"], names
        assert all(t["success"] for t in tools) and tools[3]["arguments"] == query
        assert tools[2]["result_summary"] and "nothing found" not in tools[2]["result_summary"]
        if record.system == "rag_naive":  # passages name their column and row: "[id] db.table.column — keys"
            first = r"\[\d+\] (review_dataset\.review\.text|books_dataset\.books_info\.\w+) — "
            assert re.match(first, tools[2]["result_summary"])
        assert record.status == "completed"

    vectors = manifest.systems["rag_naive"]["indexing"]
    assert [v["index"] for v in vectors] == ["vectors"] and vectors[0]["model_calls"] == 0
    columns = {c["source"]: c for c in vectors[0]["text_columns"]}
    assert columns["review_dataset.review.text"]["rows"] == 1833  # every review, none sampled
    assert {"books_dataset.books_info.description", "books_dataset.books_info.features"} <= set(columns)
    assert vectors[0]["indexed_passages"] == sum(c["passages"] for c in columns.values())

    graph = manifest.systems["rag_graph"]["indexing"]
    restored = benchmark.prepare([task])[0]  # the PostgreSQL source as the run saw it (already restored)
    units = text_units(task_corpus(restored).passages)
    assert calls["extract"] == len(units) == graph[0]["model_calls"]  # built once, read again by rag_hippo
    assert manifest.systems["rag_hippo"]["indexing"][0]["cached"] is True
    benchmark.close()
