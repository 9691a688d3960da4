"""Hostile DAB datasets (issue 26): a dataset names only its own files, and restoring its dump runs
no command, refused with exit 2 naming the file and line before any model call."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from data_agent_compare.core import TaskLoadError
from data_agent_compare.tasks.dab import load_dab

from helpers import FIXTURES, postgres_bin_dir_or_skip

BOOKREVIEW = FIXTURES / "dab" / "query_bookreview"
DUMP = "query_dataset/books_info.sql"


@pytest.fixture
def bookreview(tmp_path: Path) -> Path:
    folder = tmp_path / "query_bookreview"
    shutil.copytree(BOOKREVIEW, folder)
    return folder


def point(folder: Path, old: str, new: str) -> Path:
    config = folder / "db_config.yaml"
    config.write_text(config.read_text().replace(old, new))
    return config


@pytest.mark.parametrize(
    "location", ["/etc/passwd", "../../etc/passwd", "query_dataset/../../query_bookreview_elsewhere/x.db"]
)
def test_a_db_path_outside_the_dataset_folder_is_refused_when_the_tasks_load(bookreview: Path, location: str) -> None:
    config = point(bookreview, "db_path: query_dataset/review_query.db", f"db_path: {location}")
    with pytest.raises(TaskLoadError) as refused:
        load_dab(bookreview)
    assert (refused.value.file, refused.value.field) == (str(config), "db_clients.review_dataset.db_path")
    assert "outside the dataset folder" in str(refused.value)


def test_a_sql_file_linked_to_outside_the_dataset_folder_is_refused(bookreview: Path, tmp_path: Path) -> None:
    (bookreview / DUMP).unlink()
    (bookreview / DUMP).symlink_to(tmp_path / "elsewhere.sql")
    with pytest.raises(TaskLoadError, match=r"field 'db_clients.books_dataset.sql_file': .* outside the dataset"):
        load_dab(bookreview)


def test_the_published_layout_still_loads(bookreview: Path) -> None:
    assert [task.id for task in load_dab(bookreview)] == [f"bookreview/query{n}" for n in (1, 2, 3)]


def run_compare(tasks: Path, out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "data_agent_compare.cli", "--benchmark", "dab", "--tasks-path", str(tasks)]
    command += ["--workflows", "tool_use", "--models", "local", "--limit", "1", "--out", str(out), *flags]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})


@pytest.mark.slow
def test_a_dump_with_a_shell_command_exits_2_naming_its_line_and_the_command_never_runs(
    bookreview: Path, tmp_path: Path
) -> None:
    postgres_bin_dir_or_skip()
    ran = tmp_path / "ran-as-root"
    dump = bookreview / DUMP
    dump.write_text(f"CREATE TABLE t (a int);\n\\! id > {ran}\n" + dump.read_text())
    done = run_compare(bookreview, tmp_path / "run")
    print(done.stderr)
    assert done.returncode == 2
    assert f"{dump.resolve()}:2: a psql meta-command" in done.stderr
    assert "Traceback" not in done.stderr
    assert not ran.exists()
    assert not (tmp_path / "run" / "results.jsonl").exists()  # before any unit, so before any model call
