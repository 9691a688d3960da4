"""A DAB root without the official `common_scaffold/` (issue 25 item 8): when its validators import it, the
tasks are refused up front with one message naming the missing folder and the validators that need it
(`compare score` exits 2), instead of every answer's validator crashing on its own (45 per-entry crashes)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from data_agent_compare.core.benchmark import BenchmarkError, create_benchmark

from helpers import FIXTURES, ROOT, compare_command

IMPORTS_SCAFFOLD = (
    "from common_scaffold.validate.levenshtein import levenshtein\n\n"
    "def validate(llm_output):\n    return levenshtein(llm_output, '2020s') <= 1, 'fuzzy'\n"
)


@pytest.fixture
def dab_root(tmp_path):
    root = tmp_path / "dab"
    shutil.copytree(FIXTURES / "dab", root)
    for query in ("query1", "query2"):
        (root / "query_bookreview" / query / "validate.py").write_text(IMPORTS_SCAFFOLD)
    return root


def test_validators_importing_a_missing_common_scaffold_are_named_once_when_the_tasks_load(dab_root):
    with pytest.raises(BenchmarkError) as refused:
        create_benchmark("dab", dab_root).load()
    message = str(refused.value)
    assert message.startswith(f"{dab_root / 'common_scaffold'} is missing: 2 validate.py file(s) import it")
    assert "query_bookreview/query1, query_bookreview/query2" in message and "DAB checkout" in message
    (dab_root / "common_scaffold" / "validate").mkdir(parents=True)
    assert len(create_benchmark("dab", dab_root).load()) == 3  # with the helpers beside the queries


def test_compare_score_exits_2_with_the_one_message(dab_root, tmp_path):
    entries = [{"dataset": "bookreview", "query": str(q), "run": "0", "answer": "2020s"} for q in (1, 2, 3)]
    submission = tmp_path / "submission.json"
    submission.write_text(json.dumps(entries))
    flags = ["score", "--benchmark", "dab", "--tasks-path", str(dab_root), "--predictions", str(submission)]
    done = subprocess.run(compare_command(*flags), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    output = done.stdout + done.stderr
    assert output.count("common_scaffold is missing") == 1 and "Traceback" not in output
