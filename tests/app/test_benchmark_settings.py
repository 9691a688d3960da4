"""A benchmark's own settings in the run configuration (engine/benchmark_settings.py): DAB's hints and
PostgreSQL settings live under `dab:`, the old keys and flags still set them, a setting for another
benchmark is refused with exit 2 before any model call, and no password reaches the manifest."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql

from data_agent_compare.core import BenchmarkError, Message
from data_agent_compare.engine.config import ConfigError, RunConfig, load_run_config
from data_agent_compare.engine.runner import execute
from data_agent_compare.tasks.dab import DabSettings, DataAgentBench, load_dab
from data_agent_compare.tools.postgres import PostgresCluster

from helpers import FIXTURES, compare_command, make_plan, postgres_bin_dir_or_skip, run_files_as_text, scripted_provider

DAB_FLAGS = {"benchmark": "dab", "tasks_path": "dab-tasks"}


def test_dab_settings_live_under_dab_and_the_old_keys_and_flags_still_set_them(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("benchmark: dab\ntasks_path: x\ndab:\n  hints: true\n  postgres_connection_limit: 4\n")
    run = load_run_config(config, {"postgres_url": "postgresql://u:pw@127.0.0.1:5432/postgres"})
    options = run.benchmark_options()
    assert options["hints"] is True and options["postgres_connection_limit"] == 4
    assert options["postgres_url"] == "postgresql://u:pw@127.0.0.1:5432/postgres"  # the benchmark gets it whole
    old_style = RunConfig.model_validate({**DAB_FLAGS, "hints": True, "dab_validator_cpu_s": 30})
    assert old_style.benchmark_options()["validator_cpu_s"] == 30.0 and old_style.benchmark_options()["hints"]
    assert load_run_config(None, {}).benchmark_options() == {}  # the bundled benchmark declares none


def test_the_manifest_records_the_run_benchmarks_settings_with_its_defaults() -> None:
    recorded = load_run_config(None, DAB_FLAGS).model_dump(mode="json")
    assert recorded["benchmark_settings"] == {"dab": DabSettings().model_dump(mode="json")}
    assert "hints" not in recorded and "postgres_url" not in recorded
    assert RunConfig.model_validate(recorded).benchmark_options() == dict(DabSettings())  # a resume reads it back


@pytest.mark.parametrize(
    ("flags", "refusal"),
    [
        ({"hints": True}, "--hints (dab.hints) applies only to --benchmark dab, and this run's benchmark is 'bundled'"),
        (
            {"benchmark": "dabstep", "postgres_url": "postgresql://h/db"},
            "--postgres-url (dab.postgres_url) applies only to --benchmark dab, and this run's benchmark is 'dabstep'",
        ),
        (
            {**DAB_FLAGS, "postgres_reader_url": "postgresql://reader@h/db"},
            "--postgres-reader-url (postgres_reader_url) names a role on the server of --postgres-url",
        ),
    ],
)
def test_a_setting_the_run_has_no_use_for_is_refused(flags: dict[str, object], refusal: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_run_config(None, flags)
    assert refusal in str(refused.value) and "\n" not in str(refused.value)


def test_the_cli_refuses_hints_for_the_bundled_benchmark_with_exit_2(tmp_path: Path) -> None:
    done = subprocess.run(
        compare_command("--hints", "--out", str(tmp_path / "run")), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "--hints (dab.hints) applies only to --benchmark dab" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "run" / "manifest.json").exists()


def test_a_resumed_run_asks_again_for_the_password_the_manifest_masked(tmp_path: Path) -> None:
    url = "postgresql://owner:s3cret@127.0.0.1:5432/postgres"
    recorded = load_run_config(None, {**DAB_FLAGS, "postgres_url": url}).model_dump(mode="json")
    assert "s3cret" not in json.dumps(recorded)
    masked = RunConfig.model_validate(recorded)  # a rescore reads it: it needs no server
    tasks = tmp_path / "query_bookreview"
    shutil.copytree(FIXTURES / "dab" / "query_bookreview", tasks)
    benchmark = DataAgentBench(tasks, **masked.benchmark_options())
    with pytest.raises(BenchmarkError, match=r"the run's --postgres-url had a password.*give --postgres-url again"):
        benchmark.prepare(benchmark.load())  # a resume restores: it does
    assert RunConfig.model_validate({**recorded, "postgres_url": url}).benchmark_options()["postgres_url"] == url


QUOTED_PASSWORD = "ab'cd\"ef\\gh@ij%kl:mn/op"


def test_a_password_with_quotes_reaches_no_file_of_the_run(tmp_path: Path) -> None:
    """The probe: `ab'cd…` in --postgres-url was written verbatim into manifest.json."""
    tasks = tmp_path / "query_bookreview"
    shutil.copytree(FIXTURES / "dab" / "query_bookreview", tasks)
    with PostgresCluster(postgres_bin_dir_or_skip()) as server, scripted_provider() as install:
        with psycopg.connect(server.admin_url(), autocommit=True) as con:
            con.execute(sql.SQL("CREATE ROLE quoted SUPERUSER LOGIN PASSWORD {}").format(sql.Literal(QUOTED_PASSWORD)))
        url = f"postgresql://quoted:{quote(QUOTED_PASSWORD, safe='')}@127.0.0.1:{server.port}/postgres"
        model = install(lambda request, context: Message(role="assistant", content="2020"))
        given = {"benchmark": "dab", "tasks_path": str(tasks), "postgres_url": url, "concurrency": 1}
        config = RunConfig.model_validate(given)
        benchmark = DataAgentBench(tasks, **config.benchmark_options())
        plan = make_plan(tmp_path, load_dab(tasks, build_missing=True)[:1], model, ["tool_use"], benchmark)
        plan.config = config.model_copy(update={"out": plan.config.out, "models": plan.config.models})
        try:
            execute(plan)
        finally:
            benchmark.close()
    written = run_files_as_text(plan.run_dir)
    assert {"manifest.json", "results.jsonl", "conversations.sqlite"} <= set(written)
    manifest = json.loads(written["manifest.json"])
    assert manifest["config"]["benchmark_settings"]["dab"]["postgres_url"].startswith("postgresql://quoted:***@")
    forms = {QUOTED_PASSWORD, quote(QUOTED_PASSWORD, safe=""), json.dumps(QUOTED_PASSWORD)[1:-1], "ab'cd", "ab%27cd"}
    leaks = {(name, form) for name, text in written.items() for form in forms if form in text}
    assert not leaks
