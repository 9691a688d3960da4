"""The `palimpzest` system: palimpzest 0.9.0 in its own environment (`.venv-palimpzest`), driven through
the worker protocol, its model calls through the real gateway.

Tests that need the environment skip without it, except in CI, where `setup.sh` must have made it.
"""

import json
import os
from pathlib import Path

import pytest

from data_agent_compare.core import SYSTEMS, create_system
from data_agent_compare.core.model import CallContext, Message, ModelError, ModelRequest
from data_agent_compare.engine.config import load_model_table
from data_agent_compare.providers.scripted import tool_call_message
from data_agent_compare.systems.palimpzest_system import (
    PYTHON_VARIABLE,
    PalimpzestSystem,
    refusal,
    worker_environment,
    worker_python,
)
from data_agent_compare.tools.documents import chunk_markdown, corpus_files

from helpers import ROOT, load_tasks, no_network, run_task

# The embedded model, slow on a shared CPU: few rows, so that an operator on the SQL result fits the steps.
EMBEDDED = {
    "budgets": {"max_steps": 8, "wall_time_s": 1800},
    "retries": {"attempt_timeout_s": 1200, "call_timeout_s": 1500},
    "tools": {"sql_max_rows": 3},
}
STORES_SQL = 'SELECT "City Name", "State", "Type" FROM "Store Locations" ORDER BY "StoreID" LIMIT 40'
PLAN = {
    "queries": [{"tool": "execute_sql", "arguments": {"sql": STORES_SQL}}],
    "operators": [
        {"operator": "sem_filter", "input": "table_1", "instruction": "The {Type} of the store is City"},
        {"operator": "sem_map", "input": "table_1", "column": "coast", "instruction": "The coast of the {State}"},
        {"operator": "sem_filter", "input": "documents", "instruction": "The passage defines a star store"},
    ],
}


def needs_environment() -> None:
    problem = refusal(worker_python())
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI runs setup.sh, which makes the palimpzest environment, yet: {problem}")
        pytest.skip(problem)


def stores_task():
    """BND009: which state has the most store locations (the SQLite database and the company documents)."""
    return next(t for t in load_tasks("bundled") if t.id == "BND009")


def store_rows() -> list[tuple]:
    import sqlite3

    with sqlite3.connect(ROOT / "tasks/bundled/data/regional_sales.sqlite") as db:
        return db.execute(STORES_SQL).fetchall()


def document_chunks() -> list[dict]:
    """The corpus's chunks, as `search_documents` indexes them (the table `documents`)."""
    task = stores_task()
    files = corpus_files([s for s in task.data if s.kind == "documents"], task.data_dir)
    return [vars(c) for name, path in files for c in chunk_markdown(name, path.read_text("utf-8"))]


def prompt_text(request: ModelRequest) -> str:
    return "\n".join(m.content or "" for m in request.messages)


class ScriptedPalimpzest:
    """Plans PLAN, answers palimpzest's filter and map prompts (keeps City stores and passages about
    star stores), and answers the task; records every operator prompt it was sent."""

    def __init__(self) -> None:
        self.filter_prompts: list[str] = []
        self.map_prompts: list[str] = []
        self.answer_prompt = ""

    def __call__(self, request: ModelRequest, context: CallContext) -> Message:
        text = prompt_text(request)
        if request.response_schema is not None:
            return Message(role="assistant", content=json.dumps(PLAN))
        if "FILTER CONDITION" in text:
            self.filter_prompts.append(text)
            context_block = text.rsplit("CONTEXT:", 1)[-1].split("FILTER CONDITION:")[0]  # the item itself
            keep = '"Type": "City"' in context_block or "star store" in context_block.lower()
            return Message(role="assistant", content=f"REASONING: scripted.\nANSWER: {str(keep).upper()}\n---")
        if "OUTPUT FIELDS" in text:
            self.map_prompts.append(text)
            return Message(role="assistant", content='REASONING: scripted.\nANSWER: {"coast": "none"}\n---')
        self.answer_prompt = text
        return tool_call_message("answer", {"answer": "C"})


def steps(trace: dict, kind: str) -> list[dict]:
    return [s for s in trace["steps"] if s["kind"] == kind]


def test_palimpzest_worker_with_scripted_model_receives_every_row_and_its_calls_are_traced(tmp_path, scripted_model):
    needs_environment()
    model = ScriptedPalimpzest()
    system = PalimpzestSystem()
    budgets = {"max_steps": 500, "max_tokens": 10_000_000}  # one model call per row and per chunk
    record, trace, manifest = run_task(
        tmp_path, scripted_model(model), stores_task(), "palimpzest", system, budgets=budgets
    )

    assert record["status"] == "completed", record["error"]
    rows, cities = store_rows(), [r for r in store_rows() if r[2] == "City"]
    chunks = document_chunks()
    # Every row and every chunk reached palimpzest: one filter prompt each, one map prompt per row kept.
    record_filters = [p for p in model.filter_prompts if '"State"' in p.rsplit("CONTEXT:", 1)[-1]]
    assert len(record_filters) == len(rows) == 40
    assert len(model.filter_prompts) == len(rows) + len(chunks)
    assert len(model.map_prompts) == len(cities) > 0
    # Each operator is a tool call of its own name, in order, with the worker's counts.
    tools = [(s["tool"], s["arguments"].get("input")) for s in steps(trace, "tool_call")]
    assert tools == [
        ("get_schema_info", None),
        ("execute_sql", None),
        ("sem_filter", "table_1"),
        ("sem_map", "table_1"),
        ("sem_filter", "documents"),
        ("answer", None),
    ]
    operators = [s for s in steps(trace, "tool_call") if s["tool"].startswith("sem_")]
    assert all(s["success"] and s["duration_s"] > 0 for s in operators)
    assert [(s["arguments"]["rows"], s["arguments"]["truncated"]) for s in operators] == [
        (40, False),
        (len(cities), False),
        (len(chunks), False),
    ]
    assert operators[0]["result_summary"].startswith(f"40 rows in, {len(cities)} out")
    assert operators[1]["result_summary"].startswith(f"{len(cities)} rows in, {len(cities)} out")
    starred = [c for c in chunks if "star store" in c["text"].lower() or "star store" in c["heading"].lower()]
    assert operators[2]["result_summary"].startswith(f"{len(chunks)} rows in, {len(starred)} out")
    # The answer step read the operators' output: the map's column on the kept rows.
    assert "table_1: " + str(len(cities)) + " rows" in model.answer_prompt and "coast" in model.answer_prompt
    # The worker's model calls came through the gateway: metered, traced, counted in the record.
    calls = steps(trace, "model_call")
    worker_calls = [c for c in calls if c["via_http"]]
    assert len(worker_calls) == len(model.filter_prompts) + len(model.map_prompts)
    assert len(calls) == len(worker_calls) + 2 == record["model_calls"]  # + the plan and the answer
    assert all(c["usage"]["input_tokens"] > 0 and c["success"] for c in calls)
    assert record["usage"]["input_tokens"] == sum(c["usage"]["input_tokens"] for c in calls)
    # Worker calls fall inside their operator's step on the task's clock.
    first = operators[0]
    inside = [c for c in worker_calls if first["start_s"] <= c["start_s"] <= first["start_s"] + first["duration_s"]]
    assert len(inside) == 40
    assert system.network_attempts == []
    described = manifest["systems"]["palimpzest"]
    assert described["kind"] == "semantic-operator" and described["policy"] == "max_quality"
    assert described["palimpzest"] == "0.9.0"


def test_palimpzest_with_scripted_model_stops_with_the_budget_status_when_the_gateway_refuses(tmp_path, scripted_model):
    needs_environment()
    model = ScriptedPalimpzest()
    budgets = {"max_steps": 500, "max_tokens": 6_000}  # the plan and a few filter prompts
    record, trace, _ = run_task(tmp_path, scripted_model(model), stores_task(), "palimpzest", budgets=budgets)

    assert record["status"] == "max_tokens", record["error"]
    operator = next(s for s in steps(trace, "tool_call") if s["tool"] == "sem_filter")
    assert not operator["success"] and "budget" in operator["error"]
    # The worker stopped its query at the first refusal: most rows were never sent.
    assert 0 < len(model.filter_prompts) < 20
    assert record["model_calls"] == len(model.filter_prompts) + 1  # and the plan
    assert "answer" not in [s["tool"] for s in steps(trace, "tool_call")]


def test_palimpzest_with_scripted_model_does_not_start_an_operator_that_cannot_finish_in_the_steps_left(
    tmp_path, scripted_model
):
    needs_environment()
    model = ScriptedPalimpzest()
    record, trace, _ = run_task(tmp_path, scripted_model(model), stores_task(), "palimpzest", budgets={"max_steps": 30})

    assert record["status"] == "max_steps" and "needs 40 model calls" in record["error"]
    assert model.filter_prompts == [] and record["model_calls"] == 1  # the plan only
    assert [s["tool"] for s in steps(trace, "tool_call")] == ["get_schema_info", "execute_sql", "sem_filter"]
    refused = steps(trace, "tool_call")[-1]  # in the trace, refused before it started
    assert not refused["success"] and "needs 40" in refused["error"] and refused["arguments"]["rows"] == 40


class FailingProvider(ScriptedPalimpzest):
    """The provider fails (after its retries) on the third filter prompt."""

    def __call__(self, request: ModelRequest, context: CallContext) -> Message:
        if "FILTER CONDITION" in prompt_text(request) and len(self.filter_prompts) == 2:
            self.filter_prompts.append("failed")
            raise ModelError("provider unavailable", status_code=503)
        return super().__call__(request, context)


def test_palimpzest_with_scripted_model_fails_an_operator_whose_model_call_failed_and_the_unit_is_an_infra_error(
    tmp_path, scripted_model
):
    """Palimpzest answers a failed call with "no": the operator fails, its table keeps every row, and the
    answer step reads why; a provider failure inside a tool step is the infrastructure's, so the unit ends
    infra_error (issue 25), kept out of accuracy and retried by --retry-errors."""
    needs_environment()
    model = FailingProvider()
    budgets = {"max_steps": 500, "max_tokens": 10_000_000}
    record, trace, _ = run_task(tmp_path, scripted_model(model), stores_task(), "palimpzest", budgets=budgets)

    assert record["status"] == "infra_error", record["error"]
    operator = next(s for s in steps(trace, "tool_call") if s["tool"] == "sem_filter")
    assert not operator["success"] and "ModelError: 1 model calls of sem_filter failed" in operator["error"]
    assert [c["success"] for c in steps(trace, "model_call")].count(False) == 1
    mapped = next(s for s in steps(trace, "tool_call") if s["tool"] == "sem_map")
    assert mapped["arguments"]["rows"] == 40  # the failed filter dropped nothing
    assert "operator 1 (sem_filter) failed" in model.answer_prompt


def test_palimpzest_worker_environment_is_its_own_offline_and_without_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-users-own")
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-users-own")
    environment = worker_environment(tmp_path, worker_python())

    assert not [name for name in environment if "KEY" in name or "TOKEN" in name.split("_")]
    assert "sk-" not in json.dumps(environment)
    assert environment["HOME"] == str(tmp_path) and environment["DAC_WORKER_NETWORK_GUARD"] == "1"
    assert environment["LITELLM_LOCAL_MODEL_COST_MAP"] == "True" and environment["HF_HUB_OFFLINE"] == "1"
    if refusal(worker_python()) is None:  # litellm's encodings of that environment, so tiktoken downloads nothing
        assert Path(environment["TIKTOKEN_CACHE_DIR"], "9b5ad71b2ce5302211f9c61530b329a4922fc6a4").is_file()


def test_palimpzest_policy_is_a_setting_recorded_in_the_manifest():
    assert PalimpzestSystem().describe()["policy"] == "max_quality"
    assert PalimpzestSystem(policy="min_cost").describe()["policy"] == "min_cost"
    with pytest.raises(ValueError, match="unknown palimpzest policy 'cheapest'"):
        PalimpzestSystem(policy="cheapest")


def test_palimpzest_refuses_without_its_environment_and_names_the_fix(tmp_path, scripted_model, monkeypatch):
    monkeypatch.setenv(PYTHON_VARIABLE, str(tmp_path / "no-venv" / "bin" / "python"))
    model = ScriptedPalimpzest()
    record, trace, manifest = run_task(tmp_path, scripted_model(model), stores_task(), "palimpzest")

    assert record["status"] == "error"
    assert "./setup.sh" in record["error"] and "no-venv" in record["error"]
    assert record["model_calls"] == 0 and trace["steps"] == []
    assert manifest["systems"]["palimpzest"]["refused"] == record["error"]
    # Still listed, with its kind.
    assert SYSTEMS.load("palimpzest").kind == "semantic-operator"
    assert create_system("palimpzest").describe()["refused"] is not None


@pytest.mark.slow
def test_palimpzest_end_to_end_with_the_embedded_model_offline(tmp_path):
    """A bundled task with the embedded model: an answer or an explicit budget status, operator calls in
    the trace, model calls metered, and no network attempt by this process or by the worker."""
    needs_environment()
    system = PalimpzestSystem()
    local = load_model_table()["local"]
    with no_network() as attempts:
        record, trace, _ = run_task(tmp_path, local, stores_task(), "palimpzest", system, **EMBEDDED)

    assert record["status"] in {"completed", "no_answer", "max_steps", "max_tokens", "time_limit"}, record["error"]
    assert attempts == [] and system.network_attempts == []
    calls = steps(trace, "model_call")
    assert calls and all(c["provider"] == "local" and c["usage"]["input_tokens"] > 0 for c in calls)
    assert record["model_calls"] == len(calls) and record["usage"]["input_tokens"] > 0
    operators = [s for s in steps(trace, "tool_call") if s["tool"] in ("sem_filter", "sem_map")]
    assert operators, [s["tool"] for s in steps(trace, "tool_call")]
    ran = [s for s in operators if s["success"] and s["arguments"]["items"] > 0]
    assert not ran or any(c["via_http"] for c in calls), "an operator ran, yet no model call of the worker"
