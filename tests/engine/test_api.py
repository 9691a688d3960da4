"""`data_agent_compare.run(...)`, the one Python entry point, against `compare run` with the same settings; the
engine's events as a listener receives them; and the engine package free of any terminal library."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from helpers import ROOT, compare_command, quiz_questions, write_quiz_run

SETTINGS = "systems: [tool_use, planning]\nconcurrency: 1\n"
VOLATILE = {"attempt"}  # a random id per attempt (what ties its spend in calls.jsonl to its record)


def comparable(run_dir: Path) -> dict[tuple, dict]:
    """Each record by its unit, without its attempt id."""
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line]
    return {
        (r["task_id"], r["system"], r["model"], r["epoch"]): {k: v for k, v in r.items() if k not in VOLATILE}
        for r in records
    }


def without_timings(value):
    """A record with every key naming a time or a duration left out, however deep."""
    if isinstance(value, dict):
        timed = ("_s", "_at", "_ms", "latency", "seconds")
        return {k: without_timings(v) for k, v in value.items() if not any(t in k for t in timed)}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def test_the_cli_and_run_give_identical_records_for_the_same_settings_scripted(tmp_path) -> None:
    files = write_quiz_run(tmp_path, quiz_questions(3), SETTINGS)
    by_cli, by_api = tmp_path / "cli", tmp_path / "api"
    cli = subprocess.run(
        compare_command("run", "--config", str(files["config"]), "--out", str(by_cli)),
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    program = (
        "import json, sys, data_agent_compare as dac\n"
        f"result = dac.run(config_file={str(files['config'])!r}, out={str(by_api)!r})\n"
        "print(json.dumps({'status': result.status, 'dir': str(result.run_dir), 'records': len(result.records),"
        " 'rows': [[r.system, r.model, r.accuracy] for r in result.rows], 'summary': str(result.summary),"
        " 'report': str(result.report)}))\n"
    )
    api = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert api.returncode == 0, api.stderr
    assert "executor:" not in api.stderr and "run:" not in api.stderr  # the engine printed nothing of its own
    result = json.loads(api.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed" and result["records"] == 6 and result["dir"] == str(by_api)
    assert sorted(row[:2] for row in result["rows"]) == [["planning", "scripted"], ["tool_use", "scripted"]]
    assert Path(result["summary"]).is_file() and Path(result["report"]).is_file()
    assert without_timings(comparable(by_api)) == without_timings(comparable(by_cli))
    cli_manifest = json.loads((by_cli / "manifest.json").read_text())
    api_manifest = json.loads((by_api / "manifest.json").read_text())
    assert without_timings(api_manifest["identity"]) == without_timings(
        cli_manifest["identity"]
    )  # the same run, as resume and replay judge it


def test_the_engine_package_imports_no_terminal_library_and_prints_nothing() -> None:
    """Read from the source: at run time rich and click are loaded anyway, by httpx (its own command line)."""
    terminal = ("rich", "typer", "click")
    for path in sorted((ROOT / "engine").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] in terminal for a in node.names), path
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert (node.module or "").split(".")[0] not in terminal, path
            if isinstance(node, ast.ImportFrom) and node.level:
                assert not (node.module or "").startswith("cli"), f"{path}: the engine imports the command line"
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "print":
                raise AssertionError(f"{path}:{node.lineno}: the engine prints; give a listener an event")
