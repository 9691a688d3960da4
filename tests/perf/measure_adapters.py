"""Harness overhead per model call of each framework adapter against the `tool_use` workflow.

    .venv/bin/python tests/perf/measure_adapters.py [--repeats 5]

Every system plays the same tool sequence (schema, SQL, answer) with a scripted test model on the same
bundled task, through the real runner (and, for the adapters, the real HTTP gateway). Overhead is the
wall time the trace does not spend inside a model call (the scripted model answers at once) or a tool
call: the framework's own work, its HTTP round trips and our bridge. Medians over the repeats, all
systems interleaved in one run so that the machine's noise falls on all of them alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' helpers

from data_agent_compare.core import CallContext, Message, ModelRequest, QuestionType
from data_agent_compare.providers.scripted import tool_call_message

from helpers import load_tasks, run_task, scripted_provider, steps_taken

SYSTEMS = [
    "tool_use",
    "planning",
    "multi_agent",
    "langgraph_react",
    "langchain_agent",
    "langgraph_plan_execute",
    "autogen_assistant",
    "autogen_team",
    "llamaindex_agent",
    "llamaindex_rag_sql",
]
SQL = {"sql": "SELECT COUNT(*) FROM Customers"}
SEQUENCE = [("get_schema_info", {}), ("execute_sql", SQL), ("answer", {"answer": "A"})]


def respond(request: ModelRequest, context: CallContext) -> Message:
    """The same work for every system: look at the schema, run the SQL, answer. Planners get it as a plan,
    teams route it to their SQL analyst and writer, the LlamaIndex query engine gets a one-line reply."""
    if request.response_schema is not None and "steps" in json.dumps(request.response_schema):
        steps = [{"purpose": name, "tool": name, "arguments": args} for name, args in SEQUENCE[:2]]
        return Message(role="assistant", content=json.dumps({"steps": steps}))
    if request.response_schema is not None:  # the multi-agent coordinator: SQL analyst first, then finish
        done = any("customers" in (m.content or "") for m in request.messages if m.role == "user")
        choice = {"next": "finish" if done else "sql_analyst", "instruction": "count the customers"}
        return Message(role="assistant", content=json.dumps(choice))
    if context.agent == "selector":
        done = any(m.role != "system" and "customers" in (m.content or "") for m in request.messages)
        return Message(role="assistant", content="report_writer" if done else "sql_analyst")
    if context.agent == "query_engine":
        return Message(role="assistant", content="Key accounts are defined by revenue.")
    offered = {tool.name for tool in request.tools}
    if context.agent == "sql_analyst" and steps_taken(request) >= 2:
        return Message(role="assistant", content="There are 50 customers.")
    for name, arguments in SEQUENCE[steps_taken(request) :]:
        if name in offered:
            return tool_call_message(name, arguments, call_id=f"call_{name}")
    return Message(role="assistant", content="There are 50 customers.")


def overhead_per_call(trace: dict) -> float:
    busy = sum(s["duration_s"] for s in trace["steps"] if s["kind"] in ("model_call", "tool_call"))
    calls = sum(s["kind"] == "model_call" for s in trace["steps"])
    return (trace["wall_time_s"] - busy) / calls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
    task = next(t for t in load_tasks("bundled") if t.question_type == QuestionType.SINGLE_CHOICE)
    samples: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    usage: dict[str, tuple[int, int]] = {}
    with scripted_provider() as install, tempfile.TemporaryDirectory() as folder:
        model = install(respond)
        for repeat in range(repeats + 1):  # the first round warms imports and caches and is not counted
            for name in SYSTEMS:
                record, trace, _ = run_task(Path(folder) / f"{name}-{repeat}", model, task, name)
                assert record["status"] == "completed", (name, record["error"])
                if repeat:
                    samples[name].append(overhead_per_call(trace))
                tokens = record["usage"]["input_tokens"] + record["usage"]["output_tokens"]
                usage[name] = (record["model_calls"], tokens)
    base = statistics.median(samples["tool_use"])
    print("| system | model calls | tokens | overhead per model call (median ms) | ratio to tool_use |")
    print("|---|---|---|---|---|")
    for name in SYSTEMS:
        median = statistics.median(samples[name])
        calls, tokens = usage[name]
        print(f"| {name} | {calls} | {tokens} | {median * 1e3:.1f} | {median / base:.1f}× |")


if __name__ == "__main__":
    main()
