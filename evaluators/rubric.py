"""FDABench rubric score (RS) of a report: SQL_ACC from the gold SQL result's values, the other
three dimensions from an LLM judge.

RS = Σ w·s / Σ w over the active dimensions, every one of which must have a score. Active: the dimensions the
task's rubric lists (all four at 0.25 when it has none) with a weight above 0; SQL_ACCURACY
also needs a gold SQL result with at least one value.

SQL_ACC by values (`sql_accuracy_by_values`):
- The gold result is CSV; its header holds column names, its cells the values. Only the first
  `MAX_ROWS` (20) rows count: a report summarises a long result, it does not reprint it.
  Empty cells and null / none / nan are skipped.
- A cell that is a plain number (`-295007.41`, `1e-05`) must appear as a number in the report.
  Report numbers may use thousands commas (`3,481,010.29`), a `$` (`$-295,007.41`) and a
  trailing `%` / `percent`. A number glued to a letter, a dot or a comma-digit is not read
  (`FY2012`, `WARE-NBV1002`, `12.5`, `2012` hold no `12`). Scale words and suffixes (`$3.48M`,
  `3.5 million`) are not read: they round the value away; the semantic fallback judges them.
- A report number matches a gold number when the gold value, rounded to the decimals the
  report shows, equals it and that rounding is within `rel_tol` (default 0.5 %) of the gold
  value: `105.5` and `105` show 105.49, `20` does not show 20.36, `0` does not show 0.4.
  Signs are ignored (reports state direction in words: "a shortfall of $295,007.41").
  A percentage also matches as a fraction (`12.35 %` shows 0.1235).
- Any other cell is text and must appear case-insensitively as a whole phrase (`West` is not
  found in `Midwest` or `Western`; runs of whitespace are equivalent).
- 1.0 when every value appears, else 0.0; None without values.

The judge (`RubricJudge`):
- SQL_ACC: 1.0 from the values when all appear. Only when some are missing is the judge asked
  whether the report states the same result in another form (units, wording, "yes" for 1):
  exact values need no model call, and a miss may still be a correct result written differently.
- EXT_INTEG, LOG_REASON, COMPLETE: one judge call per dimension, score in {0, 0.5, 1}. Separate
  calls keep each verdict free of the others (no halo effect), let one failed or malformed reply
  cost one dimension rather than all, and give every call the same small closed schema.
- Every call: temperature 0, a strict JSON schema (`score`, `justification`; both required, no
  other keys), the task's criteria for the dimension, the reference report when there is one,
  and the full report. A report over `MAX_REPORT_CHARS` is never truncated: the dimensions
  that need it are left unscored with an error.
- A call that fails or returns anything but a valid verdict leaves its dimension None with the
  error recorded. RS is never taken over the remaining dimensions (a shrunken, easier average):
  the scorer raises `ScoringError` naming the unscored dimensions, so the record has a
  `scoring_error`, RS has no value (out of RS's mean, counted beside it: a judge that failed
  said nothing about the report) and the dimensions that were scored are kept.
- An empty report scores 0 on every active dimension without a model call (source "no_report").
- The judge is a MeteredModel with its own TraceRecorder, so its calls are metered and reported
  apart from the system under test.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Literal

from pydantic import BaseModel, Field, computed_field

from ..core.model import Message, MeteredModel, ModelError
from ..core.safe_load import load_json
from ..core.scorer import ScoreResult, ScoringError, reports, versioned
from ..core.task import Answer, QuestionType, Task
from ..core.trace import BudgetExceeded, Trace

MAX_ROWS = 20
DEFAULT_REL_TOL = 0.005
MAX_REPORT_CHARS = 60_000  # ~15k tokens; a judge whose window is smaller refuses the call, recorded as an error
JUDGE_AGENT = "rubric_judge"

# Canonical dimension name -> result key of `score_rubric`.
DIMENSIONS: dict[str, str] = {
    "SQL_ACCURACY": "sql_acc",
    "EXTERNAL_INTEGRATION": "ext_integ",
    "LOGICAL_REASONING": "log_reason",
    "COMPLETENESS": "complete",
}

# ---------------------------------------------------------------- judge prompts (bump the version on every edit)

JUDGE_VERSION = "1"
JUDGE_SYSTEM = """You are a strict, consistent grader of data-analysis reports. You grade one dimension of one \
report at a time against the task's criteria, and only that dimension. Reply with a JSON object: "score" and a \
one- or two-sentence "justification" that names what is met and what is missing or wrong."""

DIMENSION_GUIDES: dict[str, str] = {
    "EXTERNAL_INTEGRATION": "Does the report bring in the external knowledge the task needs (definitions, "
    "periods, thresholds, targets, policies from documents or search results) and apply it correctly to the data?",
    "LOGICAL_REASONING": "Do the report's comparisons, rankings and conclusions follow correctly from its numbers, "
    "without contradictions or unsupported claims?",
    "COMPLETENESS": "Does the report answer every part of the question for every entity asked about, with the "
    "requested sections?",
}
THREE_LEVEL_SCALE = """Score 1 if every criterion is met, 0.5 if some are met or all are met with minor errors, \
0 if none is met or the report is wrong on this dimension."""

DIMENSION_PROMPT = """Task question:
{question}

Dimension: {dimension}
{guide}

Criteria of this task for the dimension:
{criteria}

{reference}Report to grade (complete):
<report>
{report}
</report>

{scale}"""

SQL_EQUIVALENCE_PROMPT = """Task question:
{question}

Dimension: SQL_ACCURACY
The correct result of the task's SQL query ({rows}) is:
<sql_result>
{sql_result}
</sql_result>
These values of it were not found written out in the report: {missing}.

Criteria of this task for the dimension:
{criteria}

Report to grade (complete):
<report>
{report}
</report>

Does the report state this result correctly in another form (other units or wording such as "$3.48 million", \
sensible rounding, a percentage for a fraction, "yes" for 1)? Score 1 only if every value is stated correctly in \
substance; score 0 if any is missing or wrong."""

REFERENCE_BLOCK = """Reference report (correct, but the graded report need not follow its wording):
<reference>
{reference}
</reference>

"""


def _prompt_hash(*texts: str) -> str:
    # Not workflows.common.prompt_hash: that mixes in the agents' answer formats, which the judge does not use.
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


JUDGE_PROMPT_HASH = _prompt_hash(
    JUDGE_SYSTEM,
    *DIMENSION_GUIDES.values(),
    THREE_LEVEL_SCALE,
    DIMENSION_PROMPT,
    SQL_EQUIVALENCE_PROMPT,
    REFERENCE_BLOCK,
)

# ---------------------------------------------------------------- SQL_ACC by values

_GOLD_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?", re.I)
_REPORT_NUMBER = re.compile(
    r"(?<![\w.,])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?!\w|[.,]\d)(\s?(?:%|percent\b))?", re.I
)
_NULLS = {"", "null", "none", "nan"}
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'"})


def _csv_rows(sql_result_csv: str) -> list[list[str]]:
    """Header and data rows, blank lines dropped."""
    return [row for row in csv.reader(io.StringIO(sql_result_csv.strip())) if any(c.strip() for c in row)]


@dataclass
class GoldValues:
    numbers: dict[str, Decimal] = field(default_factory=dict)  # cell text -> magnitude
    texts: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.numbers or self.texts)


def gold_values(sql_result_csv: str, max_rows: int = MAX_ROWS) -> GoldValues:
    """The cells of the first `max_rows` data rows, split into numbers and text."""
    values = GoldValues()
    for cell in (c.strip() for row in _csv_rows(sql_result_csv)[1 : max_rows + 1] for c in row):
        if cell.casefold() in _NULLS:
            continue
        if _GOLD_NUMBER.fullmatch(cell):
            values.numbers[cell] = abs(Decimal(cell))
        else:
            values.texts.add(cell)
    return values


def _report_numbers(report: str) -> list[Decimal]:
    """Every number the report shows (magnitude, as written), plus each percentage as a fraction."""
    numbers = []
    for match in _REPORT_NUMBER.finditer(report):
        shown = Decimal(match.group(1).replace(",", ""))
        numbers.append(shown)
        if match.group(2):
            numbers.append(shown.scaleb(-2))
    return numbers


def _shows(shown: Decimal, gold: Decimal, rel_tol: Decimal) -> bool:
    """Whether `shown` is `gold` rounded to the decimals `shown` has, within rel_tol of it."""
    try:
        rounded = gold.quantize(Decimal(1).scaleb(int(shown.as_tuple().exponent)), rounding=ROUND_HALF_UP)
    except InvalidOperation:  # more digits than the decimal context holds: cannot be a rounding of it
        return False
    return rounded == shown and abs(shown - gold) <= rel_tol * gold


def _has_phrase(text: str, phrase: str) -> bool:
    pattern = r"(?<!\w)" + r"\s+".join(map(re.escape, phrase.split())) + r"(?!\w)"
    return re.search(pattern, text, re.I) is not None


def missing_values(
    sql_result_csv: str, report: str, *, rel_tol: float = DEFAULT_REL_TOL, max_rows: int = MAX_ROWS
) -> list[str] | None:
    """The gold values (as in the CSV) the report does not show; None when the result has no values."""
    values = gold_values(sql_result_csv, max_rows)
    if not values:
        return None
    shown, tolerance, text = _report_numbers(report), Decimal(str(rel_tol)), report.translate(_QUOTES)
    missing = [cell for cell, gold in values.numbers.items() if not any(_shows(s, gold, tolerance) for s in shown)]
    return missing + sorted(t for t in values.texts if not _has_phrase(text, t.translate(_QUOTES)))


def sql_accuracy_by_values(
    sql_result_csv: str, report: str, *, rel_tol: float = DEFAULT_REL_TOL, max_rows: int = MAX_ROWS
) -> float | None:
    """1.0 when the report shows every gold value (rules in the module docstring), else 0.0; None
    when there is no SQL result or it holds no values."""
    missing = missing_values(sql_result_csv, report, rel_tol=rel_tol, max_rows=max_rows)
    return None if missing is None else float(not missing)


# ---------------------------------------------------------------- scores


class DimensionScore(BaseModel):
    name: str
    weight: float
    score: float | None = None  # None: not scored (see RubricScores.errors)
    justification: str = ""
    source: Literal["values", "judge", "no_report"] | None = None


class RubricScores(BaseModel):
    dimensions: list[DimensionScore]  # the active ones, in canonical order
    errors: list[str] = Field(default_factory=list)

    @computed_field
    @property
    def rs(self) -> float | None:
        """Σ w·s / Σ w over the active dimensions; None when any of them (or all: none active) has no score."""
        scored = [(d.weight, d.score) for d in self.dimensions if d.score is not None]
        total = sum(w for w, _ in scored)
        return sum(w * s for w, s in scored) / total if total and len(scored) == len(self.dimensions) else None

    def score_of(self, name: str) -> float | None:
        return next((d.score for d in self.dimensions if d.name == name), None)


def active_weights(task: Task) -> dict[str, float]:
    """Weight of each active dimension: the task's rubric, else 0.25 each; SQL_ACCURACY needs gold values."""
    gold = task.gold
    if gold and gold.rubric:
        weights = {d.name.upper(): d.weight for d in gold.rubric.dimensions if d.name.upper() in DIMENSIONS}
    else:
        weights = dict.fromkeys(DIMENSIONS, 0.25)
    if not gold_values(_sql_result(task)):
        weights.pop("SQL_ACCURACY", None)
    return {name: weights[name] for name in DIMENSIONS if weights.get(name, 0) > 0}


def _sql_result(task: Task) -> str:
    return (task.gold.sql_result if task.gold else None) or ""


def _criteria(task: Task, dimension: str) -> str:
    rubric = task.gold.rubric if task.gold else None
    criteria = [c for d in (rubric.dimensions if rubric else []) if d.name.upper() == dimension for c in d.criteria]
    return "\n".join(f"- {c}" for c in criteria) or "(none given: judge by the dimension's description)"


def _verdict_schema(levels: list[float]) -> dict:
    return {
        "type": "object",
        "properties": {"score": {"type": "number", "enum": levels}, "justification": {"type": "string"}},
        "required": ["score", "justification"],
        "additionalProperties": False,
    }


def _parse_verdict(content: str | None, levels: list[float]) -> tuple[float, str]:
    """Score and justification of a reply that must be exactly the verdict schema; ValueError otherwise."""
    data = load_json(content or "")
    if not isinstance(data, dict) or set(data) != {"score", "justification"}:
        raise ValueError("expected an object with exactly 'score' and 'justification'")
    score, justification = data["score"], data["justification"]
    if isinstance(score, bool) or score not in levels or not isinstance(justification, str):
        raise ValueError(f"score must be one of {levels} and justification a string")
    return float(score), justification


def _sql_prompt(task: Task, report: str, missing: list[str]) -> str:
    rows = _csv_rows(_sql_result(task))
    shown = io.StringIO()
    csv.writer(shown, lineterminator="\n").writerows(rows[: MAX_ROWS + 1])
    return SQL_EQUIVALENCE_PROMPT.format(
        question=task.question,
        rows=f"first {MAX_ROWS} of {len(rows) - 1} rows" if len(rows) - 1 > MAX_ROWS else "all rows",
        sql_result=shown.getvalue().strip(),
        missing=", ".join(missing),
        criteria=_criteria(task, "SQL_ACCURACY"),
        report=report,
    )


def _dimension_prompt(task: Task, name: str, report: str) -> str:
    reference = task.gold.report if task.gold else None
    return DIMENSION_PROMPT.format(
        question=task.question,
        dimension=name,
        guide=DIMENSION_GUIDES[name],
        criteria=_criteria(task, name),
        reference=REFERENCE_BLOCK.format(reference=reference) if reference else "",
        report=report,
        scale=THREE_LEVEL_SCALE,
    )


class RubricJudge:
    """Scores a report on the four rubric dimensions (rules in the module docstring)."""

    def __init__(
        self, model: MeteredModel, *, max_report_chars: int = MAX_REPORT_CHARS, rel_tol: float = DEFAULT_REL_TOL
    ) -> None:
        self.model = model
        self.max_report_chars = max_report_chars
        self.rel_tol = rel_tol

    def describe(self) -> dict[str, str]:
        return {"model": self.model.alias, "prompt_version": JUDGE_VERSION, "prompt_hash": JUDGE_PROMPT_HASH}

    def score(self, task: Task, answer: Answer) -> RubricScores:
        report = answer.report or answer.text
        scores = RubricScores(dimensions=[DimensionScore(name=n, weight=w) for n, w in active_weights(task).items()])
        for dimension in scores.dimensions:
            error = self._score_dimension(dimension, task, report)
            if error:
                scores.errors.append(f"{dimension.name}: {error}")
        return scores

    def _score_dimension(self, dimension: DimensionScore, task: Task, report: str) -> str | None:
        """Fill in one dimension; return the error that left it unscored, if any."""
        if not report.strip():
            dimension.score, dimension.source, dimension.justification = 0.0, "no_report", "the answer has no report"
            return None
        if dimension.name == "SQL_ACCURACY":
            return self._score_sql(dimension, task, report)
        return self._judge(dimension, _dimension_prompt(task, dimension.name, report), len(report), [0, 0.5, 1])

    def _score_sql(self, dimension: DimensionScore, task: Task, report: str) -> str | None:
        missing = missing_values(_sql_result(task), report, rel_tol=self.rel_tol) or []
        if not missing:
            dimension.score, dimension.source = 1.0, "values"
            dimension.justification = "every value of the gold SQL result appears in the report"
            return None
        return self._judge(dimension, _sql_prompt(task, report, missing), len(report), [0, 1])

    def _judge(self, dimension: DimensionScore, prompt: str, report_chars: int, levels: list[float]) -> str | None:
        if report_chars > self.max_report_chars:  # never cut the report: a truncated one would be misjudged
            return f"report of {report_chars} characters is over the judge's limit of {self.max_report_chars}"
        messages = [Message(role="system", content=JUDGE_SYSTEM), Message(role="user", content=prompt)]
        try:
            reply = self.model.generate(
                messages,
                response_schema=_verdict_schema(levels),
                temperature=0.0,
                agent=JUDGE_AGENT,
            )
        except (ModelError, BudgetExceeded) as error:
            return f"judge call failed: {error}"
        content = reply.message.content
        try:
            dimension.score, dimension.justification = _parse_verdict(content, levels)
        except ValueError as error:
            return f"invalid judge reply ({error}): {(content or '')[:200]!r}"
        dimension.source = "judge"
        return None


def score_rubric(task: Task, answer: Answer, judge: RubricJudge | None) -> dict[str, float | None]:
    """RS and the four dimension scores of a report task ({} for other tasks; None = not scored).

    Without a judge only sql_acc is filled, by values alone (no semantic fallback, so a 0.0 may
    be a correct result written differently), and rs is None: an RS over SQL_ACC alone would not
    be comparable with the paper's."""
    if task.question_type != QuestionType.REPORT:
        return {}
    if judge is None:
        sql_acc = sql_accuracy_by_values(_sql_result(task), answer.report or answer.text)
        return {"rs": None, **dict.fromkeys(DIMENSIONS.values()), "sql_acc": sql_acc}
    scores = judge.score(task, answer)
    result = {"rs": scores.rs, **{key: scores.score_of(name) for name, key in DIMENSIONS.items()}}
    if scores.errors:  # a dimension without a verdict: never an RS over the others
        raise ScoringError("RS not scored: " + "; ".join(scores.errors), {k: v for k, v in result.items() if k != "rs"})
    return result


# 2: a dimension without a verdict is a scoring error, never a smaller average; 3: such an RS has no value
# (out of the mean, counted beside it), no longer 0.0
@versioned("3")
@reports("rs")
def rubric_scorer(task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> ScoreResult:
    """Scorer `rubric`: RS and its dimensions for report tasks, judged by the run's judge model."""
    return ScoreResult(score_rubric(task, answer, RubricJudge(judge) if judge is not None else None))
