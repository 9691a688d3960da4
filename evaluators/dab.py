"""DataAgentBench (DAB) scoring: the query's own validate.py, a fallback check, and pass@k.

Official check. Each DAB query ships `validate.py` with `validate(llm_output) -> (bool, str)`.
It is benchmark code we did not write, so it runs in the same bubblewrap sandbox as the
`execute_python` tool (`tools/python_sandbox.py`, `run_sandboxed`: empty environment, no network,
uid 65534, its own PID namespace, only the Python runtime visible, CPU/memory/file-size/process
limits). DAB's official harness runs validate.py with no time limit, and some validators are slow
(stockmarket/query3's fuzzy name match over a sliding window can need a minute on a busy machine), so
there is no short wall limit: a CPU budget, `VALIDATOR_CPU_S` (600 s, DAB's limit on one tool call;
the DAB benchmark's option `validator_cpu_s`, config `dab_validator_cpu_s`), and only a wall-clock
backstop of `VALIDATOR_WALL_FACTOR` times that budget (at least a minute more) for a validator that
waits without computing.
The validator's folder and the DAB root (two levels up, where the official harness finds
`common_scaffold`) are shown read-only at their own paths (as root they must be readable by
uid 65534) and put on its import path. The answer goes in on stdin as JSON;
the verdict comes back as JSON on the original stdout, while the validator's own prints are sent
to stderr (DAB validators print). A validator that cannot be read, crashes, times out, exits
without a verdict or returns anything but a (bool, str) tuple gives `passed=False` with `error` set,
and the `dab` scorer then records a `scoring_error` and no `correct` (counted and named in the summary): the
answer was not judged wrong, the check failed.
Where bubblewrap cannot run, the validator still runs, in the unsandboxed fallback (rlimits,
audit hook, temporary folder; a warning is logged once): it is published benchmark code, not
model output, and scoring must not depend on the sandbox. Model-written code never takes
that path unless the user passed `--unsafe-python`.

Fallback, for queries without validate.py: every ground-truth item must appear in the answer.
- Items are the non-empty cells of ground_truth.csv (UTF-8, optional BOM). Published files
  come both with and without a header row (bookreview: none — its query1 file is the single
  cell `2020`; googlelocal: `meta_name,rating`), so the first row is taken as a header only
  when more rows follow and either some column is numeric in every later row but not in the
  first, or every first-row cell is a snake_case name with at least one containing `_`.
- Text items and the answer are NFKC-normalised, case-folded and whitespace-collapsed; the
  item must be a substring of the answer.
- A number item (after removing `$`, `%`, spaces and thousands commas) matches a number in the
  answer (`1,234.5`, `-3`, the `2020` of `2020s`; not digits glued to letters before them, as
  in `Q3`) when both are equal after rounding half-up to the item's decimals as written, capped
  at 2 (float artefacts such as 4.857142857142857 would otherwise demand every digit) but never
  fewer than needed to keep two significant digits (0.00123 keeps 4).
- A file without items fails: an empty list must not pass vacuously.

pass@k (`pass_at_k_table`) follows FORMATS.md: unbiased pass@k per query over its trials,
averaged per dataset, then across datasets; a `no_tool_call` trial is a failure.
"""

from __future__ import annotations

import csv
import functools
import json
import logging
import re
import signal
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from ..core.model import MeteredModel
from ..core.scorer import ScoreResult, ScoringError, reports, versioned
from ..core.task import Answer, Gold, QuestionType, Task
from ..core.trace import Trace
from ..tools.python_sandbox import SandboxRun, run_sandboxed, sandbox_problem
from .hedging import flag_hedged
from .statistics import BootstrapCI, pass_at_k, stratified_bootstrap_ci, stratified_mean

VALIDATOR_CPU_S = 600.0  # CPU seconds per validation (module docstring); the wall backstop is a multiple
VALIDATOR_WALL_FACTOR = 4  # a validator sharing a busy machine still gets its CPU budget within this
VALIDATOR_WALL_MIN_EXTRA_S = 60.0  # and at least this much wall time beyond its budget
VALIDATOR_MEMORY_MB = 1024
MAX_DECIMALS = 2  # fallback: decimals compared at most (unless two significant digits need more)

# main.py of the sandbox. The verdict channel is a copy of the original stdout; fd 1 itself is
# pointed at stderr, so whatever the validator prints (even from C code) cannot corrupt the JSON.
_HARNESS = r"""
import json, os, sys

request = json.load(sys.stdin)
verdict = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
sys.path[:0] = request["paths"]
namespace = {"__name__": "validate", "__file__": request["file"]}
exec(compile(request["source"], request["file"], "exec"), namespace)
if not callable(namespace.get("validate")):
    reply = {"error": "validate.py defines no validate() function"}
else:
    result = namespace["validate"](request["llm_output"])
    if isinstance(result, tuple) and len(result) == 2 and type(result[0]) is bool and isinstance(result[1], str):
        reply = {"passed": result[0], "reason": result[1][:4000]}  # the verdict must fit the captured stdout
    else:
        reply = {"error": f"validate() returned {type(result).__name__} {result!r:.200}, not a (bool, str) tuple"}
sys.stdout.flush()
verdict.write(json.dumps(reply))
verdict.close()
"""

_HEADER_NAME = re.compile(r"[a-z][a-z0-9_]*")
_ANSWER_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?")
_ITEM_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)")


class ValidationResult(BaseModel):
    """The verdict on one answer. `validator` says which check gave it."""

    passed: bool
    reason: str
    error: str | None = None  # set when the check itself failed (then passed is False)
    validator: Literal["official", "fallback", "none"] = "official"


# ---------------------------------------------------------------- official validate.py


def _official_failure(error: str) -> ValidationResult:
    return ValidationResult(passed=False, reason="the official validator gave no verdict", error=error)


def _import_paths(validate_py: Path) -> list[Path]:
    folders = [validate_py.parent, *validate_py.parents[2:3]]  # the query folder, the DAB root
    return [folder for folder in folders if folder.is_dir() and folder != folder.parent]  # never all of /


SCAFFOLD = "common_scaffold"  # the official helpers some validators import, at the DAB root
_IMPORTS_SCAFFOLD = re.compile(rf"^\s*(?:from|import)\s+{SCAFFOLD}\b", re.M)


def missing_scaffold(validators: Iterable[Path]) -> str | None:
    """One message naming the missing `common_scaffold/` and the validators that import it, when a DAB root
    lacks it (up front: each of those validators would otherwise crash on its own); None when nothing is
    missing. A validator that cannot be read is left to fail when it runs, with its own message."""
    needing: dict[Path, list[str]] = {}
    for validate_py in validators:
        try:
            imports = _IMPORTS_SCAFFOLD.search(validate_py.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        root = validate_py.parents[2]
        if imports and not (root / SCAFFOLD).is_dir():
            needing.setdefault(root, []).append(f"{validate_py.parents[1].name}/{validate_py.parent.name}")
    if not needing:
        return None
    root, queries = next(iter(needing.items()))
    shown = ", ".join(queries[:5]) + (f" and {len(queries) - 5} more" if len(queries) > 5 else "")
    return (
        f"{root / SCAFFOLD} is missing: {len(queries)} validate.py file(s) import it ({shown}); copy "
        f"{SCAFFOLD}/ from your DAB checkout beside the query_* folders, as the official harness has it"
    )


@functools.cache
def _warn_unsandboxed(problem: str) -> None:
    logging.getLogger(__name__).warning("DAB validators run WITHOUT the bubblewrap sandbox: %s", problem)


def _verdict(run: SandboxRun, timeout_s: float, cpu_s: float) -> ValidationResult:
    if run.timed_out:
        return _official_failure(f"validator timed out after {timeout_s:g}s of wall time; the process was killed")
    if run.exit_status < 0:  # the CPU limit kills with SIGKILL (or SIGXCPU)
        return _official_failure(f"validator killed by {signal.Signals(-run.exit_status).name} (CPU budget {cpu_s:g}s)")
    if run.exit_status > 0:
        last = (run.stderr.strip().splitlines() or ["no error output"])[-1]
        return _official_failure(f"validator crashed (exit status {run.exit_status}): {last}")
    try:
        reply = json.loads(run.stdout)
    except json.JSONDecodeError:
        return _official_failure(f"validator exited without a verdict; stdout was {run.stdout[:200]!r}")
    if not isinstance(reply, dict):
        return _official_failure(f"malformed verdict {reply!r:.200}")
    if "error" in reply:
        return _official_failure(str(reply["error"]))
    passed, reason = reply.get("passed"), reply.get("reason")
    if not isinstance(passed, bool) or not isinstance(reason, str):
        return _official_failure(f"malformed verdict {reply!r:.200}")
    return ValidationResult(passed=passed, reason=reason)


def run_validator(
    validate_py: Path, llm_output: str, *, cpu_s: float = VALIDATOR_CPU_S, timeout_s: float | None = None
) -> ValidationResult:
    """Run the query's validate.py on `llm_output` in the sandbox with `cpu_s` CPU seconds and
    `timeout_s` of wall time (default: VALIDATOR_WALL_FACTOR × cpu_s, at least cpu_s + VALIDATOR_WALL_MIN_EXTRA_S);
    never raises."""
    if timeout_s is None:
        timeout_s = max(cpu_s * VALIDATOR_WALL_FACTOR, cpu_s + VALIDATOR_WALL_MIN_EXTRA_S)
    validate_py = Path(validate_py).resolve()
    try:
        source = validate_py.read_text(encoding="utf-8")
        paths = _import_paths(validate_py)
        request = {"source": source, "file": str(validate_py), "paths": [str(path) for path in paths]}
        stdin = json.dumps({**request, "llm_output": llm_output}).encode()
        problem = sandbox_problem()
        if problem is not None:
            _warn_unsandboxed(problem)
        run = run_sandboxed(
            _HARNESS,
            timeout_s=timeout_s,
            memory_mb=VALIDATOR_MEMORY_MB,
            read_only=paths,
            stdin=stdin,
            allow_unsandboxed=True,  # benchmark code, not model output (module docstring)
            cpu_s=cpu_s,
        )
    except (OSError, ValueError) as error:  # unreadable file or folder, undecodable text, sandbox failed to start
        return _official_failure(f"{type(error).__name__}: {error}")
    return _verdict(run, timeout_s, cpu_s)


# ---------------------------------------------------------------- fallback


def _normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _item_number(cell: str) -> Decimal | None:
    cleaned = re.sub(r"[\s$%]", "", cell).replace(",", "")
    return Decimal(cleaned) if _ITEM_NUMBER.fullmatch(cleaned) else None


def _is_header(rows: list[list[str]]) -> bool:
    first, rest = rows[0], rows[1:]
    if not rest:
        return False
    numeric_below = any(
        _item_number(first[col]) is None and all(col < len(row) and _item_number(row[col]) is not None for row in rest)
        for col in range(len(first))
    )
    names = all(_HEADER_NAME.fullmatch(cell) for cell in first) and any("_" in cell for cell in first)
    return numeric_below or names


def gold_items(task: Task) -> list[str] | None:
    """The query's ground_truth.csv items, for the hedge check; None (the gold answer's) without a readable file."""
    file = task.gold.ground_truth_file if task.gold else None
    if task.question_type in (QuestionType.SINGLE_CHOICE, QuestionType.MULTIPLE_CHOICE) or not file:
        return None
    try:
        return ground_truth_items(Path(file))
    except (OSError, UnicodeDecodeError, ValueError, csv.Error):
        return None


def ground_truth_items(ground_truth_csv: Path) -> list[str]:
    """The items of a DAB ground_truth.csv, in file order, without duplicates (header rule above)."""
    with Path(ground_truth_csv).open(encoding="utf-8-sig", newline="") as file:
        rows = [[cell.strip() for cell in row] for row in csv.reader(file)]
        rows = [row for row in rows if any(row)]
    if rows and _is_header(rows):
        rows = rows[1:]
    return list(dict.fromkeys(cell for row in rows for cell in row if cell))


def _decimals(number: Decimal) -> int:
    exponent = number.as_tuple().exponent
    written = max(0, -exponent) if isinstance(exponent, int) else 0
    two_significant = 1 - number.adjusted() if number else 0
    return min(written, max(MAX_DECIMALS, two_significant))


def _rounded(number: Decimal, quantum: Decimal) -> Decimal | None:
    try:
        return number.quantize(quantum, rounding=ROUND_HALF_UP)
    except InvalidOperation:  # too many digits for the decimal context: matches nothing
        return None


def _number_appears(item: Decimal, answer: str) -> bool:
    quantum = Decimal(1).scaleb(-_decimals(item))
    expected = _rounded(item, quantum)
    found = (_rounded(Decimal(text.replace(",", "")), quantum) for text in _ANSWER_NUMBER.findall(answer))
    return expected is not None and any(number == expected for number in found)


def _item_appears(item: str, answer: str) -> bool:
    number = _item_number(item)
    if number is not None:
        return _number_appears(number, answer)
    return _normalize(item) in _normalize(answer)


def fallback_validate(ground_truth_csv: Path, llm_output: str) -> ValidationResult:
    """Every ground-truth item appears in `llm_output` (rules in the module docstring); never raises."""
    try:
        items = ground_truth_items(ground_truth_csv)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        return ValidationResult(
            passed=False, reason="ground truth unreadable", error=f"{ground_truth_csv}: {error}", validator="fallback"
        )
    if not items:
        return ValidationResult(
            passed=False, reason="ground truth has no items", error=f"{ground_truth_csv} is empty", validator="fallback"
        )
    missing = [item for item in items if not _item_appears(item, llm_output)]
    if missing:
        reason = f"{len(missing)} of {len(items)} ground-truth items missing, e.g. {missing[0]!r}"
        return ValidationResult(passed=False, reason=reason, validator="fallback")
    return ValidationResult(passed=True, reason=f"all {len(items)} ground-truth items found", validator="fallback")


# ---------------------------------------------------------------- scoring one answer


def _validate(gold: Gold | None, text: str, cpu_s: float) -> ValidationResult:
    validator = Path(gold.validator) if gold and gold.validator else None
    ground_truth = Path(gold.ground_truth_file) if gold and gold.ground_truth_file else None
    if validator is not None and validator.is_file():
        return run_validator(validator, text, cpu_s=cpu_s)
    if ground_truth is not None and ground_truth.is_file():
        return fallback_validate(ground_truth, text)
    error = f"neither validate.py ({validator}) nor ground_truth.csv ({ground_truth}) exists"
    return ValidationResult(passed=False, reason="nothing to check the answer against", error=error, validator="none")


def score_dab(task: Task, answer: Answer) -> tuple[dict[str, float], ValidationResult]:
    """({"correct": 1.0 or 0.0}, the verdict to log).

    The official validate.py when its file exists, else the fallback on ground_truth.csv.
    A `no_tool_call` answer fails without being checked (FORMATS.md counts it as a failure), and
    so does an empty answer (DAB's leaderboard rule).
    """
    if answer.status == "no_tool_call":
        result = ValidationResult(passed=False, reason="no tool call: counts as a failure", validator="none")
    elif not answer.text.strip():
        result = ValidationResult(passed=False, reason="empty answer: counts as a failure", validator="none")
    else:
        result = _validate(task.gold, answer.text, float(task.metadata.get("validator_cpu_s") or VALIDATOR_CPU_S))
    return {"correct": float(result.passed)}, result


# ---------------------------------------------------------------- pass@k over result records


@dataclass(frozen=True)
class QueryPassAtK:
    task_id: str
    dataset: str
    n: int  # trials
    c: int  # passing trials
    pass_at: dict[int, float]  # k -> pass@k, for every k in 1..n


@dataclass(frozen=True)
class PassAtKTable:
    """pass@k per query, per dataset (mean over its queries) and overall (mean over datasets).

    `ks` is 1..the smallest trial count of any query, so every average covers every query.
    `unavailable` lists the task ids skipped because their data was unavailable here.
    """

    ks: list[int]
    queries: list[QueryPassAtK]
    datasets: dict[str, dict[int, float]]
    overall: dict[int, float]
    unavailable: list[str]

    def overall_ci(self, k: int) -> BootstrapCI:
        """The stratified pass@k with its 95% interval, queries resampled within their dataset."""
        by_dataset: dict[str, list[float]] = defaultdict(list)
        for query in self.queries:
            by_dataset[query.dataset].append(query.pass_at[k])
        return stratified_bootstrap_ci(by_dataset)


def _passed(record: Mapping[str, Any]) -> bool:
    if record.get("status") == "no_tool_call":
        return False
    return (record.get("scores") or {}).get("correct") == 1.0  # a missing score (e.g. an error) is a failure


def _trials(records: Iterable[Mapping[str, Any]]) -> tuple[dict[str, list[bool]], list[str]]:
    trials: dict[str, list[bool]] = defaultdict(list)
    unavailable: set[str] = set()
    seen_runs: set[tuple[Any, Any]] = set()
    seen_trials: set[tuple[str, Any]] = set()
    for record in records:
        task_id, epoch = record["task_id"], record.get("epoch", 1)
        seen_runs.add((record.get("system"), record.get("model")))
        if len(seen_runs) > 1:
            raise ValueError(f"records mix systems/models {sorted(map(str, seen_runs))}; group them first")
        if (task_id, epoch) in seen_trials:
            raise ValueError(f"two records for {task_id} epoch {epoch}")
        seen_trials.add((task_id, epoch))
        if record.get("status") == "data_unavailable":  # not the system's failure: left out of pass@k
            unavailable.add(task_id)
        else:
            trials[task_id].append(_passed(record))
    return dict(trials), sorted(unavailable - trials.keys())


def pass_at_k_table(records: Iterable[Mapping[str, Any]]) -> PassAtKTable:
    """pass@k from the result records of one system × model on DAB.

    A record needs `task_id` (`<dataset>/query<N>`; the dataset is everything before the last
    `/`), `epoch`, `status` and `scores.correct`. Trials with status `data_unavailable` are left
    out. Records of several systems or models, or two records of one trial, are a ValueError.
    """
    trials, unavailable = _trials(records)
    queries = []
    for task_id, outcomes in sorted(trials.items()):
        n, c = len(outcomes), sum(outcomes)
        pass_at = {k: pass_at_k(n, c, k) for k in range(1, n + 1)}
        queries.append(QueryPassAtK(task_id, task_id.rpartition("/")[0] or task_id, n, c, pass_at))
    ks = list(range(1, min((q.n for q in queries), default=0) + 1))
    by_dataset: dict[str, list[QueryPassAtK]] = defaultdict(list)
    for query in queries:
        by_dataset[query.dataset].append(query)
    datasets = {
        name: {k: sum(q.pass_at[k] for q in group) / len(group) for k in ks} for name, group in by_dataset.items()
    }
    overall = {
        k: stratified_mean({name: [q.pass_at[k] for q in group] for name, group in by_dataset.items()}) for k in ks
    }
    return PassAtKTable(ks, queries, datasets, overall, unavailable)


# ---------------------------------------------------------------- the leaderboard's figure of a submission

LEADERBOARD_KS = (1, 5, 10, 15, 20, 30, 40, 50)  # common_scaffold/validate/pass_k.py K_LIST


@dataclass(frozen=True)
class LeaderboardScore:
    """DAB's stats logic (`stats_scripts/avg_pass_k.py`) over a submission: pass@k per query from its
    runs, the mean over a dataset's queries that have runs, then the mean over the datasets that have
    any. `ks` are the K_LIST values every query with runs reaches (pass@5 of 5 runs, not pass@50).
    Queries and datasets without runs are listed: the official logic leaves them out of its means."""

    ks: list[int]
    overall: dict[int, float]
    datasets: dict[str, dict[int, float]]
    queries: dict[str, tuple[int, int]]  # task id -> (runs n, correct c)
    queries_without_runs: list[str]
    datasets_without_runs: list[str]


def leaderboard_pass_at_k(outcomes: Mapping[str, list[bool]], task_ids: Iterable[str]) -> LeaderboardScore:
    """The site's figure from each query's run outcomes (`outcomes`: task id -> pass per run; an empty
    or failed answer is False) over the queries `task_ids` of the task files."""
    every = sorted(set(task_ids) | set(outcomes))
    queries = {q: (len(outcomes[q]), sum(outcomes[q])) for q in every if outcomes.get(q)}
    ks = [k for k in LEADERBOARD_KS if k <= min((n for n, _ in queries.values()), default=0)]
    groups: dict[str, list[str]] = defaultdict(list)
    for query in queries:
        groups[query.rpartition("/")[0]].append(query)
    datasets = {
        name: {k: sum(pass_at_k(*queries[q], k) for q in group) / len(group) for k in ks}
        for name, group in sorted(groups.items())
    }
    overall = {k: sum(d[k] for d in datasets.values()) / len(datasets) for k in ks} if datasets else {}
    all_datasets = {q.rpartition("/")[0] for q in every}
    return LeaderboardScore(
        ks, overall, datasets, queries, [q for q in every if q not in queries], sorted(all_datasets - datasets.keys())
    )


@versioned("2")  # 2: a CPU budget instead of a 30 s wall limit; a failed check is a scoring error
@reports("correct", verdict=True)
def dab_scorer(task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> ScoreResult:
    """Scorer `dab`: `correct` by the query's validate.py (or the ground-truth fallback); a check that
    gave no verdict (a validator that crashed or ran out of time) is a scoring error, not a wrong answer.
    An answer listing many candidates is flagged `hedged` beside the verdict (`hedging.py`)."""
    flag_hedged(task, answer, trace, gold_items(task))
    scores, result = score_dab(task, answer)
    if result.error:
        raise ScoringError(f"{result.reason}: {result.error}", undecided=True)
    return ScoreResult(scores)
