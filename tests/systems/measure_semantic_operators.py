"""Measure the semantic-operator systems beside tool_use and planning on the bundled benchmark with a
scripted model.

    .venv/bin/python tests/systems/measure_semantic_operators.py [OUT_DIR] [--limit N]

Every system gets the same scripted model and the same budgets (max_steps 400, max_tokens 2,000,000). The
agents read the schema, search the documents for the question, run the task's gold SQL and answer with the
first option (tool_use one tool call per model call, planning by a plan of those three steps). LOTUS, DocETL
and Palimpzest plan the gold SQL and two operators over the document chunks: a filter ("the {text} helps
answer the question"; the scripted model keeps every third chunk), then an aggregation of what it kept
(sem_agg / reduce) or, for Palimpzest, which has none, a map. The model costs no time, so wall time is the
systems' own work plus the gateway's HTTP round trips (the libraries are imported in `System.prepare`,
before any task's clock; Palimpzest runs in its worker process). Prints, per system, model calls, tokens
and wall time per task, and their ratio to tool_use and planning.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import zlib
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS)]

from data_agent_compare.core import Budgets, CallContext, Message, ModelRequest, ToolSettings  # noqa: E402
from data_agent_compare.providers.scripted import tool_call_message  # noqa: E402

from helpers import load_tasks, make_plan, read_records, scripted_provider, steps_taken  # noqa: E402

SYSTEMS = ["tool_use", "planning", "lotus", "docetl", "palimpzest"]
OPERATORS = {
    "lotus": [("sem_filter", {}), ("sem_agg", {})],
    "docetl": [("filter", {}), ("reduce", {"output_column": "summary"})],
    "palimpzest": [("sem_filter", {}), ("sem_map", {"column": "summary"})],  # it has no aggregate
}


def first_option(request: ModelRequest) -> object:
    schema = next(t.parameters for t in request.tools if t.name == "answer")["properties"]["answer"]
    if schema.get("type") == "array":
        return [schema["items"]["enum"][0]]
    return (schema.get("enum") or ["42"])[0]


def operator_plan(system: str, sql: str) -> Message:
    instruction = "the {text} helps answer the question"
    operators = [
        {"operator": name, "input": "documents", "instruction": instruction, **extra}
        for name, extra in OPERATORS[system]
    ]
    plan = {"queries": [{"tool": "execute_sql", "arguments": {"sql": sql}}], "operators": operators}
    return Message(role="assistant", content=json.dumps(plan))


def operator_reply(request: ModelRequest) -> Message:
    """A row's verdict (every third chunk passes) or an aggregate, as LOTUS (text), DocETL (send_output) or
    Palimpzest (its REASONING / ANSWER format) asks for it."""
    prompt = request.messages[-1].content or ""
    keep = zlib.crc32(prompt.encode()) % 3 == 0
    text = "\n".join(m.content or "" for m in request.messages)
    if "FILTER CONDITION" in text:
        return Message(role="assistant", content=f"REASONING: scripted.\nANSWER: {str(keep).upper()}\n---")
    if "OUTPUT FIELDS" in text:
        return Message(role="assistant", content='REASONING: scripted.\nANSWER: {"summary": "a short summary"}\n---')
    if not request.tools:
        return Message(role="assistant", content="True" if keep else "False")
    properties = request.tools[0].parameters.get("properties", {})
    values = {k: keep if v.get("type") == "boolean" else "a short summary" for k, v in properties.items()}
    return tool_call_message(request.tools[0].name, values)


def scripted(gold_sql: dict[str, str]):
    def respond(request: ModelRequest, context: CallContext) -> Message:
        text = "\n".join(m.content or "" for m in request.messages)
        sql = next((s for q, s in gold_sql.items() if q in text), "SELECT 1")
        if any(t.name == "answer" for t in request.tools) and (len(request.tools) == 1 or steps_taken(request) >= 3):
            return tool_call_message("answer", {"answer": first_option(request)})
        if context.system in OPERATORS:
            schema = request.response_schema or {}
            if "operators" in schema.get("properties", {}):
                return operator_plan(context.system, sql)
            return operator_reply(request)
        question = next((q for q in gold_sql if q in text), "")
        steps = [
            ("get_schema_info", {}),
            ("search_documents", {"query": question[:150]}),
            ("execute_sql", {"sql": sql}),
        ]
        if request.response_schema is not None:  # the planning workflow's plan
            plan = [{"purpose": name, "tool": name, "arguments": args} for name, args in steps]
            return Message(role="assistant", content=json.dumps({"steps": plan}))
        taken = steps_taken(request)
        return tool_call_message(steps[taken][0], steps[taken][1], f"call_{taken}")

    return respond


def main(out: Path, limit: int | None) -> None:
    from data_agent_compare.engine.runner import execute

    tasks = [t for t in load_tasks("bundled") if t.question_type != "report"][:limit]
    gold = {t.question: t.gold.sql or "SELECT 1" for t in tasks}
    with scripted_provider() as install:
        model = install(scripted(gold))
        settings = ToolSettings(cache_dir=str(out / "cache"))
        budgets = Budgets(max_steps=400, max_tokens=2_000_000)
        plan = make_plan(out, tasks, model, SYSTEMS, tools=settings, budgets=budgets)
        execute(plan)
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
            "median_wall_s": statistics.median(r.latency_s for r in mine),
            "tool_calls": sum(len(r.tool_calls) for r in mine) / n,
        }
    print(f"{len(tasks)} bundled tasks; run directory {plan.run_dir}")
    header = f"{'system':<9} {'done':>6} {'calls':>7} {'tokens':>8} {'wall s':>7} {'median':>7} {'tools':>6}"
    print(f"{header}  ratios calls/tokens/wall/median to tool_use | planning")
    for system, row in rows.items():
        ratios = [
            "/".join(f"{row[k] / rows[base][k]:.1f}" for k in ("model_calls", "tokens", "wall_s", "median_wall_s"))
            for base in ("tool_use", "planning")
        ]
        print(
            f"{system:<9} {row['completed']:>3}/{row['tasks']:<2} {row['model_calls']:>7.1f} {row['tokens']:>8.0f} "
            f"{row['wall_s']:>7.2f} {row['median_wall_s']:>7.2f} {row['tool_calls']:>6.1f}  {ratios[0]} | {ratios[1]}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=None)
    arguments = parser.parse_args()
    main(arguments.out or Path(tempfile.mkdtemp(prefix="measure-semantic-")), arguments.limit)
