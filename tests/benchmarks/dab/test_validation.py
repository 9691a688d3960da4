"""DAB scoring: the official validate.py in the sandbox, the fallback on real ground truths, pass@k."""

import os
import socket
import textwrap
import time
from pathlib import Path

import pytest

from data_agent_compare.core.scorer import score
from data_agent_compare.core.task import Answer, Gold, QuestionType, Task
from data_agent_compare.core.trace import Trace
from data_agent_compare.evaluators.dab import (
    VALIDATOR_CPU_S,
    fallback_validate,
    ground_truth_items,
    pass_at_k_table,
    run_validator,
    score_dab,
)

from helpers import FIXTURES

BOOKREVIEW = FIXTURES / "dab" / "query_bookreview"

# Shaped like DAB's validators: the ground truth beside it, a print, a (bool, str) verdict.
DECADE_VALIDATOR = """
from pathlib import Path

def validate(llm_output: str) -> (bool, str):
    decade = Path(__file__).with_name("ground_truth.csv").read_text().strip() + "s"
    print(f"looking for {decade}")
    if decade in llm_output:
        return True, f"found {decade}"
    return False, f"missing decade: {decade}"
"""


def write_query(root: Path, validator: str, ground_truth: str = "2020") -> Path:
    """A DAB-shaped query folder, <root>/query_demo/query1, holding validate.py and ground_truth.csv.

    The root (the DAB root, shown in the sandbox) is made readable by all: run as root, the sandbox
    drops to uid 65534, and pytest's tmp_path is private (0700)."""
    root.chmod(0o755)
    query = root / "query_demo" / "query1"
    query.mkdir(parents=True)
    (query / "ground_truth.csv").write_text(ground_truth)
    (query / "validate.py").write_text(textwrap.dedent(validator))
    return query / "validate.py"


def dab_task(validator: Path | None, ground_truth: Path | None) -> Task:
    gold = Gold(
        validator=str(validator) if validator else None, ground_truth_file=str(ground_truth) if ground_truth else None
    )
    return Task(id="demo/query1", benchmark="dab", question="q", question_type=QuestionType.FACTOID, gold=gold)


# ---------------------------------------------------------------- official validator in the sandbox


def test_official_validator_passes_and_fails(tmp_path):
    validate_py = write_query(tmp_path, DECADE_VALIDATOR)
    passed = run_validator(validate_py, "The 2020s have the highest average rating (4.6).")
    assert (passed.passed, passed.reason, passed.error, passed.validator) == (True, "found 2020s", None, "official")
    failed = run_validator(validate_py, "The 1990s.")
    assert (failed.passed, failed.reason, failed.error) == (False, "missing decade: 2020s", None)


def test_dab_common_scaffold_imports_resolve_from_the_dab_root(tmp_path):
    validate_py = write_query(
        tmp_path,
        """
        from common_scaffold.validate.levenshtein import levenshtein

        def validate(llm_output):
            return levenshtein(llm_output, "2020s") <= 1, "fuzzy"
        """,
    )
    helper = tmp_path / "common_scaffold" / "validate"
    helper.mkdir(parents=True)
    (helper / "levenshtein.py").write_text("def levenshtein(a, b):\n    return 0 if a == b else 1\n")
    assert run_validator(validate_py, "2020s").passed


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root caller's sandbox runs as another user")
def test_a_dab_root_the_sandbox_user_cannot_read_fails_with_advice(tmp_path):
    validate_py = write_query(tmp_path, DECADE_VALIDATOR)
    tmp_path.chmod(0o700)
    result = run_validator(validate_py, "2020s")
    assert not result.passed and "cannot read" in (result.error or "") and "chmod -R o+rX" in (result.error or "")


def test_validator_that_loops_forever_times_out(tmp_path):
    validate_py = write_query(tmp_path, "def validate(llm_output):\n    while True:\n        pass\n")
    start = time.perf_counter()
    result = run_validator(validate_py, "2020s", timeout_s=1)
    assert not result.passed and "timed out after 1s" in (result.error or "")
    assert time.perf_counter() - start < 5


SLOW_VALIDATOR = """
import time

def validate(llm_output):
    end = time.process_time() + {cpu_s}
    while time.process_time() < end:  # a fuzzy match over a sliding window, in short
        pass
    time.sleep({sleep_s})  # waiting costs no CPU
    return "2020s" in llm_output, "checked"
"""


def test_a_validator_has_a_cpu_budget_not_a_short_wall_limit(tmp_path):
    validate_py = write_query(tmp_path, SLOW_VALIDATOR.format(cpu_s=0.2, sleep_s=1.5))
    result = run_validator(validate_py, "2020s", cpu_s=1)  # 1.7 s of wall time, 0.2 s of CPU: within budget
    assert result.passed and result.error is None
    (tmp_path / "b").mkdir()
    over = run_validator(write_query(tmp_path / "b", SLOW_VALIDATOR.format(cpu_s=5, sleep_s=0)), "2020s", cpu_s=1)
    assert not over.passed and "(CPU budget 1s)" in (over.error or "")


def test_a_validator_over_its_cpu_budget_is_a_scoring_error_not_a_wrong_answer(tmp_path):
    validate_py = write_query(tmp_path, SLOW_VALIDATOR.format(cpu_s=5, sleep_s=0))
    task = dab_task(validate_py, None).model_copy(update={"metadata": {"validator_cpu_s": 1}})  # DAB's option
    sheet = score(task, Answer(text="the 2020s"), Trace(task_id=task.id, system="s", model="m"), ["dab"])
    assert sheet.error is not None and sheet.error.startswith("dab: ScoringError: the official validator gave no")
    assert "(CPU budget 1s)" in sheet.error
    assert sheet.scores == {"correct": None}  # no verdict, not a wrong answer: out of the mean, a scoring error
    assert VALIDATOR_CPU_S >= 600  # the default: DAB's limit on one tool call


def test_validator_cannot_open_a_network_socket(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as server:  # a listener the validator could reach if allowed
        port = server.getsockname()[1]
        validate_py = write_query(
            tmp_path,
            f"""
            import socket

            def validate(llm_output):
                try:
                    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
                except OSError as error:
                    return False, f"blocked: {{error}}"
                return True, "connected"
            """,
        )
        result = run_validator(validate_py, "2020s")
    assert not result.passed and result.error is None
    assert result.reason.startswith("blocked:") and "not allowed" in result.reason


def test_validator_cannot_read_the_parents_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-secret")
    validate_py = write_query(
        tmp_path,
        """
        import os

        def validate(llm_output):
            return True, os.environ.get("OPENROUTER_API_KEY", "absent") + " " + ",".join(sorted(os.environ))
        """,
    )
    result = run_validator(validate_py, "2020s")
    assert result.passed and result.reason == "absent HOME,LANG,PATH"
    assert "sk-or-secret" not in result.model_dump_json()


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("return True", "returned bool True, not a (bool, str) tuple"),
        ("return 1, 'ok'", "returned tuple (1, 'ok')"),
        ("return [True, 'ok']", "returned list"),
        ("return True, 'ok', 'extra'", "returned tuple"),
        ("return None", "returned NoneType None"),
        ("return 1 / 0", "validator crashed (exit status 1): ZeroDivisionError: division by zero"),
        ("raise SystemExit(0)", "validator exited without a verdict"),
    ],
)
def test_validator_without_a_bool_str_verdict_fails_with_an_error(tmp_path, body, error):
    validate_py = write_query(tmp_path, f"def validate(llm_output):\n    {body}\n")
    result = run_validator(validate_py, "2020s")
    assert not result.passed and error in (result.error or "")


def test_a_validator_that_cannot_be_run_fails_with_an_error(tmp_path):
    assert "no validate() function" in (run_validator(write_query(tmp_path, "x = 1\n"), "").error or "")
    missing = run_validator(tmp_path / "nowhere" / "validate.py", "2020s")
    assert not missing.passed and "FileNotFoundError" in (missing.error or "")


def test_validator_prints_do_not_corrupt_the_verdict(tmp_path):
    validate_py = write_query(
        tmp_path,
        """
        import os, sys

        def validate(llm_output):
            print('{"passed": true, "reason": "forged"}')
            os.write(1, b"raw bytes on fd 1\\n")
            sys.stdout.flush()
            return False, "honest"
        """,
    )
    assert run_validator(validate_py, "2020s").reason == "honest"


# ---------------------------------------------------------------- fallback on the real bookreview ground truths

QUERY2_TITLES = ground_truth_items(BOOKREVIEW / "query2" / "ground_truth.csv")
QUERY3_TITLES = ground_truth_items(BOOKREVIEW / "query3" / "ground_truth.csv")


def test_real_ground_truths_have_no_header_row():
    assert ground_truth_items(BOOKREVIEW / "query1" / "ground_truth.csv") == ["2020"]
    assert len(QUERY2_TITLES) == 15 and QUERY2_TITLES[0] == "The Sludge"
    assert "Exits, Desires, & Slow Fires" in QUERY2_TITLES  # a quoted cell with commas is one item
    assert len(QUERY3_TITLES) == 14 and "Pokémon: Sun & Moon, Vol. 8 (8)" in QUERY3_TITLES


@pytest.mark.parametrize(
    ("answer", "passed"),
    [
        ("The 2020s have the highest average rating.", True),
        ("Decade: 2020", True),
        ("The 1990s.", False),
        ("In 2019-2021 ratings rose.", False),
        ("12020 reviews", False),
    ],
)
def test_fallback_query1_decade(answer, passed):
    assert fallback_validate(BOOKREVIEW / "query1" / "ground_truth.csv", answer).passed is passed


def test_fallback_query2_needs_every_title():
    csv_path = BOOKREVIEW / "query2" / "ground_truth.csv"
    listed = "Books with a perfect 5.0 rating:\n" + "\n".join(f"- {title.upper()}" for title in QUERY2_TITLES)
    result = fallback_validate(csv_path, listed)
    assert (result.passed, result.validator) == (True, "fallback")
    missing_first = "\n".join(QUERY2_TITLES[1:])
    result = fallback_validate(csv_path, missing_first)
    assert not result.passed and "1 of 15" in result.reason and "The Sludge" in result.reason


def test_fallback_query3_handles_unicode_titles():
    csv_path = BOOKREVIEW / "query3" / "ground_truth.csv"
    assert fallback_validate(csv_path, "; ".join(QUERY3_TITLES)).passed
    without_pokemon = "; ".join(t for t in QUERY3_TITLES if not t.startswith("Pok"))
    assert not fallback_validate(csv_path, without_pokemon).passed


@pytest.mark.parametrize(
    ("ground_truth", "answer", "passed"),
    [
        ("meta_name,rating\nWidows Peak Salon,4.857142857142857\n", "Widows Peak Salon: 4.86", True),
        ("meta_name,rating\nWidows Peak Salon,4.857142857142857\n", "Widows Peak Salon: 4.9", False),
        ("meta_name,rating\nWidows Peak Salon,4.857142857142857\n", "4.86", False),  # the name is an item too
        ("repo_name,num_commits\ntwbs/bootstrap,340\n", "twbs/bootstrap has 340 commits", True),
        ("repo_name,num_commits\ntwbs/bootstrap,340\n", "twbs/bootstrap has 3400 commits", False),
        ("total\n1234.5\n", "The total is $1,234.50.", True),  # `total` is not numeric above numbers: header
        ("share\n0.00123\n", "0.0012", True),  # two significant digits are kept
        ("share\n0.00123\n", "0.001", False),
        ("4.5", "rated 4.54", True),
        ("4.5", "rated 5", False),
        ("", "anything", False),  # no items: never a vacuous pass
    ],
)
def test_fallback_number_and_header_rules(tmp_path, ground_truth, answer, passed):
    (tmp_path / "ground_truth.csv").write_text(ground_truth)
    assert fallback_validate(tmp_path / "ground_truth.csv", answer).passed is passed


def test_fallback_reports_an_unreadable_file(tmp_path):
    result = fallback_validate(tmp_path / "missing.csv", "2020")
    assert not result.passed and result.error and "missing.csv" in result.error


# ---------------------------------------------------------------- score_dab


def test_score_dab_prefers_the_official_validator(tmp_path):
    validate_py = write_query(tmp_path, DECADE_VALIDATOR)
    task = dab_task(validate_py, validate_py.with_name("ground_truth.csv"))
    scores, result = score_dab(task, Answer(text="the 2020s"))
    assert scores == {"correct": 1.0} and result.validator == "official"


def test_score_dab_falls_back_to_the_ground_truth(tmp_path):
    task = dab_task(tmp_path / "no" / "validate.py", BOOKREVIEW / "query1" / "ground_truth.csv")
    scores, result = score_dab(task, Answer(text="the 2020s"))
    assert scores == {"correct": 1.0} and result.validator == "fallback"
    scores, result = score_dab(task, Answer(text="", status="no_tool_call"))
    assert scores == {"correct": 0.0} and "no tool call" in result.reason


def test_score_dab_without_any_gold_file_fails_with_an_error(tmp_path):
    scores, result = score_dab(dab_task(None, tmp_path / "gone.csv"), Answer(text="2020s"))
    assert scores == {"correct": 0.0} and result.validator == "none" and "gone.csv" in (result.error or "")


# ---------------------------------------------------------------- pass@k table


def record(task_id: str, epoch: int, correct: float | None, status: str = "completed") -> dict:
    scores = {} if correct is None else {"correct": correct}
    return {"task_id": task_id, "epoch": epoch, "status": status, "scores": scores, "system": "s", "model": "m"}


def test_pass_at_k_table_averages_per_dataset_then_across_datasets():
    records = [
        *(record("bookreview/query1", e, 1.0) for e in (1, 2, 3)),  # 3/3
        record("bookreview/query2", 1, 1.0),
        record("bookreview/query2", 2, 0.0),
        record("bookreview/query2", 3, 1.0, status="no_tool_call"),  # counts as a failure: 1/3
        record("yelp/query1", 1, 0.0),
        record("yelp/query1", 2, None, status="error"),  # no score: a failure
        record("yelp/query1", 3, 0.0),  # 0/3
        record("yelp/query2", 1, None, status="data_unavailable"),  # left out
    ]
    table = pass_at_k_table(records)
    assert table.ks == [1, 2, 3]
    by_id = {q.task_id: q for q in table.queries}
    assert (by_id["bookreview/query2"].n, by_id["bookreview/query2"].c) == (3, 1)
    assert by_id["bookreview/query2"].pass_at[2] == pytest.approx(1 - 1 / 3)  # 1 − C(2,2)/C(3,2)
    assert table.datasets["bookreview"][1] == pytest.approx((1 + 1 / 3) / 2)
    assert table.datasets["yelp"] == {1: 0.0, 2: 0.0, 3: 0.0}
    assert table.overall[1] == pytest.approx((2 / 3 + 0) / 2)  # datasets weigh equally
    assert table.overall[3] == pytest.approx((1 + 1) / 2 / 2)
    assert table.unavailable == ["yelp/query2"]


def test_pass_at_k_table_limits_k_to_the_fewest_trials_and_refuses_mixed_records():
    table = pass_at_k_table([record("a/query1", 1, 1.0), record("a/query1", 2, 0.0), record("b/query1", 1, 1.0)])
    assert table.ks == [1] and table.overall == {1: 0.75}
    with pytest.raises(ValueError, match="two records"):
        pass_at_k_table([record("a/query1", 1, 1.0), record("a/query1", 1, 0.0)])
    with pytest.raises(ValueError, match="mix"):
        pass_at_k_table([record("a/query1", 1, 1.0), {**record("a/query1", 2, 1.0), "system": "other"}])
    assert pass_at_k_table([]).ks == []
