"""Measure the RAG systems beside tool_use and planning on the bundled benchmark with a scripted model.

    .venv/bin/python tests/systems/measure_rag.py [OUT_DIR]
    .venv/bin/python tests/systems/measure_rag.py --dab [OUT_DIR]

With --dab: the index-building cost of DAB bookreview's corpus (its databases' text columns, the copy in
tests/fixtures; needs PostgreSQL) for the three RAG systems on its first query, same scripted model.

Every system gets the same scripted model: it reads the schema, searches the documents for the question,
runs the task's gold SQL and answers with the first option (the agents by tool calls, the planner by a
plan of those three steps, the RAG systems by their plan). The model costs no time, so wall time is the
systems' own work (tools, retrieval, index reads). Prints, per system, model calls, tokens and wall
time per task with their ratio to tool_use and planning, and the index-building cost per corpus.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS), str(TESTS / "systems")]

from test_rag import answer_value, rag_model  # noqa: E402 - found through sys.path above

from data_agent_compare.core import CallContext, Message, ModelRequest, ToolSettings  # noqa: E402
from data_agent_compare.providers.scripted import tool_call_message  # noqa: E402

from helpers import load_tasks, make_plan, read_records, scripted_provider, steps_taken  # noqa: E402

SYSTEMS = ["tool_use", "planning", "rag_naive", "rag_graph", "rag_hippo"]


def scripted(gold_sql: dict[str, str]):
    """One responder for every system (module docstring)."""
    rag, _ = rag_model()

    def question_of(request: ModelRequest) -> str:
        return next((q for q in gold_sql if q in "\n".join(m.content or "" for m in request.messages)), "")

    def respond(request: ModelRequest, context: CallContext) -> Message:
        question = question_of(request)
        sql = gold_sql.get(question, "SELECT 1")
        if context.system.startswith(("rag", "index:")):
            reply = rag(request, context)
            if request.response_schema is not None and "sql" in request.response_schema["properties"]:
                plan = json.loads(reply.content or "{}")
                return Message(role="assistant", content=json.dumps({**plan, "sql": [{"sql": sql}]}))
            return reply
        steps = [
            ("get_schema_info", {}),
            ("search_documents", {"query": question[:150]}),
            ("execute_sql", {"sql": sql}),
        ]
        if request.response_schema is not None:  # the planning workflow's plan
            plan = [{"purpose": name, "tool": name, "arguments": args} for name, args in steps]
            return Message(role="assistant", content=json.dumps({"steps": plan}))
        taken = steps_taken(request)
        if len(request.tools) > 1 and taken < len(steps):  # tool_use: one step per call
            return tool_call_message(steps[taken][0], steps[taken][1], f"call_{taken}")
        answer = [t for t in request.tools if t.name == "answer"]
        return tool_call_message("answer", {"answer": answer_value(request.model_copy(update={"tools": answer}))})

    return respond


def main(out: Path) -> None:
    from data_agent_compare.engine.runner import execute

    tasks = load_tasks("bundled")
    gold = {t.question: t.gold.sql or "SELECT 1" for t in tasks}
    with scripted_provider() as install:
        model = install(scripted(gold))
        plan = make_plan(out, tasks, model, SYSTEMS, tools=ToolSettings(cache_dir=str(out / "cache")))
        manifest = execute(plan)
    records = read_records(plan.run_dir)
    rows = {}
    for system in SYSTEMS:
        mine = [r for r in records if r.system == system]
        n = len(mine)
        rows[system] = {
            "tasks": n,
            "completed": sum(r.status == "completed" for r in mine),
            "model_calls": sum(r.model_calls for r in mine) / n,
            "tokens": sum(r.usage.input_tokens + r.usage.output_tokens for r in mine) / n,
            "wall_s": sum(r.latency_s for r in mine) / n,
            "tool_calls": sum(len(r.tool_calls) for r in mine) / n,
        }
    header = f"{'system':<11} {'done':>5} {'calls':>6} {'tokens':>8} {'wall s':>7} {'tools':>6}"
    print(f"{header}  ratios to tool_use | planning")
    for system, row in rows.items():
        ratios = [
            "/".join(f"{row[k] / rows[base][k]:.2f}" for k in ("model_calls", "tokens", "wall_s"))
            for base in ("tool_use", "planning")
        ]
        print(
            f"{system:<11} {row['completed']:>3}/{row['tasks']:<2}{row['model_calls']:>6.2f} {row['tokens']:>8.0f} "
            f"{row['wall_s']:>7.3f} {row['tool_calls']:>6.2f}  calls/tokens/wall {ratios[0]} | {ratios[1]}"
        )
    print_index_builds(manifest, SYSTEMS)


def print_index_builds(manifest, systems: list[str]) -> None:
    print("\nindex building (per corpus, metered apart from the tasks):")
    for system in systems:
        for build in manifest.systems[system].get("indexing", []):
            fields = ("index", "corpus", "cached", "model_calls", "input_tokens", "output_tokens", "seconds")
            extra = {"passages": build.get("passages"), "indexed": build.get("indexed_passages")}
            shown = "  ".join(f"{k}={build.get(k)}" for k in fields)
            print(f"  {system:<10} {shown}  " + "  ".join(f"{k}={v}" for k, v in extra.items() if v is not None))


def main_dab(out: Path) -> None:
    import shutil

    from data_agent_compare.core import create_benchmark
    from data_agent_compare.engine.runner import execute

    from helpers import FIXTURES

    dataset = out / "query_bookreview"
    shutil.copytree(FIXTURES / "dab" / "query_bookreview", dataset)
    benchmark = create_benchmark("dab", dataset)
    task = next(t for t in benchmark.load() if t.id == "bookreview/query1")
    systems = ["rag_naive", "rag_graph", "rag_hippo"]
    respond, _ = rag_model(query={"db_name": "review_dataset", "query": "SELECT COUNT(*) FROM review"})
    with scripted_provider() as install:
        model = install(respond)
        tools = ToolSettings(cache_dir=str(out / "cache"))
        manifest = execute(make_plan(out, [task], model, systems, benchmark, tools=tools))
    builds = manifest.systems["rag_naive"]["indexing"]
    for column in builds[0].get("text_columns", []):
        print(f"  text column {column['source']}: {column['rows']} rows, {column['passages']} passages")
    print_index_builds(manifest, systems)


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--dab"]
    folder = Path(arguments[0]) if arguments else Path(tempfile.mkdtemp(prefix="measure-rag-"))
    (main_dab if "--dab" in sys.argv else main)(folder)
