"""Credentials only where they belong (issue 19): a base URL carrying a user name, a password or a key in its
query string is refused before anything runs, and a server that echoes the Authorization header back puts
neither the password, its base64, nor the API key into any file of the run, its report or the terminal."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.core import redaction

from helpers import FIXTURES, FakeOpenAIServer, FakeResponse, RecordedRequest, tool_call_response

runner = CliRunner()
PASSWORD = "pw-S3cret-99"
KEY = "sk-echo-0123456789abcdef"


@pytest.mark.parametrize(
    ("base_url", "hidden"),
    [
        (f"http://alice:{PASSWORD}@127.0.0.1:9/v1", PASSWORD),
        ("http://127.0.0.1:9/v1?api_key=zz-query-key-77", "zz-query-key-77"),
        ("http://127.0.0.1:9/v1?token=zz-query-key-77", "zz-query-key-77"),
    ],
    ids=["user info", "api_key in the query", "token in the query"],
)
def test_a_base_url_with_a_credential_is_refused_pointing_to_api_key_env(tmp_path, base_url, hidden):
    flags = ["--models", "openai-compatible:m", "--base-url", base_url, "--out", str(tmp_path / "run")]
    result = runner.invoke(app, flags)
    assert result.exit_code == 2 and "--base-url" in result.output and "api_key_env" in result.output
    assert hidden not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "run").exists()


def test_an_alias_or_openrouter_base_url_with_a_password_is_refused_unless_basic_auth_is_meant(tmp_path, monkeypatch):
    table = tmp_path / "models.yaml"
    table.write_text(
        f"models:\n  proxy: {{provider: openai-compatible, model_id: m, base_url: 'http://al:{PASSWORD}@h/v1'}}\n"
    )
    config = tmp_path / "run.yaml"
    config.write_text(f"models_file: {table}\nmodels: [proxy]\n")
    result = runner.invoke(app, ["--config", str(config), "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "'proxy'" in result.output and "basic_auth: true" in result.output
    assert PASSWORD not in result.output

    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    monkeypatch.setenv("OPENROUTER_BASE_URL", f"http://al:{PASSWORD}@127.0.0.1:9/api/v1")
    result = runner.invoke(app, ["--models", "gpt-5", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "OPENROUTER_BASE_URL" in result.output and PASSWORD not in result.output
    prices = runner.invoke(app, ["models", "--prices-from-openrouter", "--models-file", str(table)])
    assert prices.exit_code == 2 and "OPENROUTER_BASE_URL" in prices.output and PASSWORD not in prices.output


@pytest.fixture(autouse=True)
def no_secrets_registered(monkeypatch):
    """Each test starts with no secret registered (the registry is the process's)."""
    monkeypatch.setattr(redaction, "_secrets", ())
    monkeypatch.setattr(redaction, "_prefixes", ())


def echo_authorization(request: RecordedRequest) -> FakeResponse:
    """A server (or a proxy) that answers with the Authorization header it was sent."""
    header = request.headers.get("authorization", "(none)")
    echoed = f"the server saw Authorization: {header}"
    arguments = json.dumps({"collection_name": "Restaurants", "search_query": echoed})
    response = tool_call_response([("c1", "query_database", arguments)])
    response.body["choices"][0]["message"]["content"] = f"echo: {header}"  # type: ignore[index]
    return response


def secret_forms() -> list[str]:
    basic = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    return [PASSWORD, basic, basic.rstrip("="), KEY, base64.b64encode(KEY.encode()).decode().rstrip("=")]


def text_of(path: Path) -> str:
    if path.suffix == ".parquet":  # compressed: search its values, not its bytes
        import duckdb

        return str(duckdb.connect().execute(f"SELECT * FROM read_parquet('{path}')").fetchall())
    return path.read_bytes().decode("utf-8", "replace")


def test_an_echoed_authorization_header_reaches_no_file_report_or_terminal_with_an_echoing_server(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("ECHO_KEY", KEY)
    with FakeOpenAIServer() as fake:
        fake.responder = echo_authorization
        basic_url = fake.base_url.replace("http://", f"http://alice:{PASSWORD}@")
        table = tmp_path / "models.yaml"
        table.write_text(
            "models:\n"
            f"  basic: {{provider: openai-compatible, model_id: m, base_url: '{basic_url}', basic_auth: true}}\n"
            f"  bearer: {{provider: openai-compatible, model_id: m, base_url: '{fake.base_url}',"
            " api_key_env: ECHO_KEY}\n"
        )
        config = tmp_path / "run.yaml"
        config.write_text(
            f"models_file: {table}\nmodels: [basic, bearer]\nbenchmark: dbgorilla\n"
            f"tasks_path: {FIXTURES / 'dbgorilla/queries-sample.json'}\nlimit: 1\n"
        )
        run = tmp_path / "run"
        ran = runner.invoke(app, ["--config", str(config), "--out", str(run)])
        reported = runner.invoke(app, ["report", str(run)])
        sent = [request.headers.get("authorization", "") for request in fake.requests]
    assert any(header.startswith("Basic ") for header in sent) and f"Bearer {KEY}" in sent  # what was echoed
    assert ran.exit_code in (0, 1), ran.output
    assert reported.exit_code == 0, reported.output
    results = (run / "results.jsonl").read_text()
    assert "the server saw Authorization: Basic ***" in results and "Authorization: Bearer ***" in results
    files = [path for path in run.rglob("*") if path.is_file()]
    assert {"results.csv", "results.parquet", "report.html", "summary.md"} <= {path.name for path in files}
    for path in files:
        text = text_of(path)
        for secret in secret_forms():
            assert secret not in text, (path.name, secret)
    for secret in secret_forms():
        assert secret not in ran.output + reported.output


# ---------------------------------------------------------------- issue 26: every form, every refusal

QUOTED_KEY = 'sk-zz-Qw7Er9Ty2Ui4O"p\\l-0123456789abcdef'  # a quote and a backslash: escaped in JSON and CSV


@pytest.mark.parametrize(
    ("base_url", "hidden"),
    [
        ("http://127.0.0.1:9/v1;password=zz-path-secret-77", "zz-path-secret-77"),
        ("http://127.0.0.1:9/v1;apikey=zz-path-secret-77/x", "zz-path-secret-77"),
        ("http://:zz-bare-pw-77@127.0.0.1:9/v1", "zz-bare-pw-77"),
        ("http://127.0.0.1:9/v1#token=zz-fragment-77", "zz-fragment-77"),
    ],
    ids=["password path parameter", "apikey path parameter", "password without user", "token in the fragment"],
)
def test_credentials_in_path_parameters_are_refused_and_no_refusal_prints_a_secret(tmp_path, base_url, hidden):
    flags = ["--models", "openai-compatible:m", "--base-url", base_url, "--out", str(tmp_path / "run")]
    result = runner.invoke(app, flags)
    assert result.exit_code == 2 and "--base-url" in result.output, result.output
    assert hidden not in result.output and hidden[:8] not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "run").exists()


def echo_key_in_answer(request: RecordedRequest) -> FakeResponse:
    key = request.headers.get("authorization", "").removeprefix("Bearer ")
    return FakeResponse({"choices": [{"message": {"role": "assistant", "content": f"the key is {key} !"}}]})


def test_an_escaped_key_echoed_by_a_server_reaches_no_file_in_any_form(tmp_path, monkeypatch):
    monkeypatch.setenv("QUOTED_KEY", QUOTED_KEY)
    with FakeOpenAIServer() as fake:
        fake.responder = echo_key_in_answer
        table = tmp_path / "models.yaml"
        table.write_text(
            f"models:\n  echo: {{provider: openai-compatible, model_id: m, base_url: '{fake.base_url}',"
            " api_key_env: QUOTED_KEY}\n"
        )
        config = tmp_path / "run.yaml"
        config.write_text(
            f"models_file: {table}\nmodels: [echo]\nworkflows: [tool_use]\nbenchmark: dbgorilla\n"
            f"tasks_path: {FIXTURES / 'dbgorilla/queries-sample.json'}\nlimit: 1\n"
        )
        run = tmp_path / "run"
        ran = runner.invoke(app, ["--config", str(config), "--out", str(run)])
        reported = runner.invoke(app, ["report", str(run)])
    assert ran.exit_code in (0, 1) and reported.exit_code == 0, ran.output + reported.output
    assert "the key is *** !" in (run / "results.jsonl").read_text()
    files = [path for path in run.rglob("*") if path.is_file()]
    assert {"results.csv", "results.parquet", "report.html"} <= {path.name for path in files}
    for path in files:
        text = text_of(path)
        assert "Qw7Er9Ty" not in text, path.name  # raw, JSON- or CSV-escaped, or cut: none of it
