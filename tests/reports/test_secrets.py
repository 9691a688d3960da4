"""Nothing secret in a run directory or its report: fake keys in the environment and a password in an
alias's base URL (HTTP Basic auth, `basic_auth: true`) appear in no file, the Parquet table's cells included."""

import duckdb
from typer.testing import CliRunner

from data_agent_compare.cli.main import app

from helpers import FakeOpenAIServer, tool_call_response, usage

runner = CliRunner()
PROXY_KEY = "sk-proxy-fake-0123456789abcdef"
OPENROUTER_KEY = "sk-or-v1-fake-fedcba9876543210"
PASSWORD = "hunter2-report-password"


def leaks(folder, secrets):
    """(file, secret) for every secret found in any file under `folder`, Parquet cells read back as text."""
    found = []
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        texts = [path.read_bytes().decode("utf-8", errors="replace")]
        if path.suffix == ".parquet":
            texts += [str(row) for row in duckdb.sql(f"SELECT * FROM read_parquet('{path}')").fetchall()]
        found += [(path, secret) for secret in secrets for text in texts if secret in text]
    return found


def test_no_key_or_password_reaches_the_run_directory_or_the_report(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_PROXY_KEY", PROXY_KEY)
    monkeypatch.setenv("OPENROUTER_API_KEY", OPENROUTER_KEY)
    out = tmp_path / "run"
    answer = tool_call_response([("c1", "answer", '{"answer": "A"}')], usage_body=usage(100, 10, cost=0.002))
    with FakeOpenAIServer(default=answer) as fake:
        base_url = fake.base_url.replace("http://", f"http://reporter:{PASSWORD}@")  # Basic auth, said so (issue 19)
        table = tmp_path / "models.yaml"
        table.write_text(
            f"models:\n  proxy: {{provider: openai-compatible, model_id: fake-model, base_url: '{base_url}',"
            " basic_auth: true, api_key_env: FAKE_PROXY_KEY}\n"
        )
        config = tmp_path / "run.yaml"
        config.write_text(f"models_file: {table}\nmodels: [proxy]\n")
        result = runner.invoke(app, ["--config", str(config), "--limit", "2", "--out", str(out)])
        assert fake.requests, "the run never reached the fake server"
    assert result.exit_code == 0, result.output
    assert (out / "report.html").exists() and (out / "results.parquet").exists()
    again = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "report")])
    assert again.exit_code == 0, again.output
    secrets = [PROXY_KEY, OPENROUTER_KEY, PASSWORD]
    assert leaks(out, secrets) == [] and leaks(tmp_path / "report", secrets) == []
    assert "reporter:***@" in (out / "manifest.json").read_text()  # the URL is kept, its password masked
    for text in (result.output, again.output):
        assert not any(secret in text for secret in secrets)
