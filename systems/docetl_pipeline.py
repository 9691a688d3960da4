"""`docetl`: a DocETL pipeline generated from a planning step, run by DocETL over the task's rows and documents.

The plan (`semantic_operators.py`) fetches rows with the task's own SQL tool and names the operations;
each becomes a DocETL operation whose Jinja prompt is the plan's instruction over the row's named
columns — `map` (a new column), `filter` (a boolean `keep`), `reduce` (all rows into one, `reduce_key:
_all`), `resolve` (canonical values of one column) — and DocETL's `DSLRunner` runs it over every row
of the table (an in-memory dataset). The operations run one at a time, each as its own one-operation
pipeline, so that each is one tool call in the trace (`docetl_map`, `docetl_filter`, ...) around exactly
its own model calls, which go through the metered gateway (`default_model: openai/<alias>`,
`default_lm_api_base`: the gateway, the session key in `litellm_completion_kwargs`).

- `bypass_cache: True`: DocETL reads no cached answer. It still writes its LLM cache under
  `$DOCETL_HOME_DIR/.cache/docetl`, a folder it fixes when it is imported: `import_docetl` points it at
  a temporary folder of this process (removed at exit) unless the user set one. Each task's outputs
  and intermediates go to the task's scratch folder.
- `resolve` compares at most `MAX_COMPARISONS` pairs of rows (DocETL's `limit_comparisons`, which picks
  them at random when there are more; no row is dropped): without a blocking setting DocETL would
  compute OpenAI embeddings for inputs over 10 rows, which the gateway does not serve.
- `import docetl` (and LiteLLM's own import) loads a `.env` (python-dotenv searches the working
  directory, or the folders above the package) into `os.environ`, and DocETL sets `litellm.drop_params
  = True` for every LiteLLM user in the process. `import_docetl` (called by `prepare`, before any task's
  clock) imports it inside `isolated_import`, which restores the environment and `litellm.drop_params`
  afterwards; it does not change the working directory for the import: that is process state, and
  other tasks' threads resolve relative paths (the index cache) against it.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from .semantic_operators import (
    OperatorRun,
    SemanticOperatorSystem,
    Table,
    isolated_import,
    operator_branch,
    referenced_columns,
)

# imported on first use, and before units run on threads (core/registry.py `import_lazy_dependencies`)
LAZY_IMPORTS = ("docetl", "docetl.runner", "pandas", "rich.console")


MAX_COMPARISONS = 200  # resolve: pairs compared at most
KEEP = "keep"  # the filter's boolean output


def import_docetl() -> ModuleType:
    """`import docetl`, offline, its home in a temporary folder, its global changes undone (`isolated_import`)."""
    with isolated_import():
        if "docetl" not in sys.modules and "DOCETL_HOME_DIR" not in os.environ:
            os.environ["DOCETL_HOME_DIR"] = temporary_home()  # read once, at import
        home = os.environ.get("DOCETL_HOME_DIR")
        import docetl

    if home is not None:
        os.environ.setdefault("DOCETL_HOME_DIR", home)  # kept: DocETL's optimizer reads it again
    return docetl


def temporary_home() -> str:
    home = tempfile.mkdtemp(prefix="dac-docetl-home-")
    atexit.register(shutil.rmtree, home, True)
    return home


def row_block(columns: list[str], variable: str = "input") -> str:
    """The named columns of one row as a Jinja block."""
    return "\n".join(f"{column}: {{{{ {variable}[{column!r}] }}}}" for column in columns)


def plain(instruction: str) -> str:
    """The instruction with its {column} braces removed (DocETL prompts are Jinja)."""
    return instruction.replace("{", "").replace("}", "")


class DocEtlSystem(SemanticOperatorSystem):
    """A DocETL pipeline (map, filter, reduce, resolve) over SQL rows and document chunks, planned."""

    name = "docetl"
    engine = "DocETL"
    framework_packages: ClassVar[tuple[str, ...]] = ("docetl", "litellm")
    operators: ClassVar[dict[str, str]] = {
        "map": "write a new column `output_column` for every row from the instruction (one model call per row)",
        "filter": "keep the rows for which the instruction holds (one model call per row)",
        "reduce": "combine all rows into one row with `output_column` answering the instruction",
        "resolve": "give the values of `column` that name the same thing one canonical spelling (pairwise)",
    }

    def import_library(self) -> None:
        import_docetl()

    def operator_schemas(self, tables: list[str]) -> list[dict[str, Any]]:
        text = {"type": "string"}
        return [
            operator_branch("map", tables, {"instruction": text, "output_column": text}),
            operator_branch("filter", tables, {"instruction": text}),
            operator_branch("reduce", tables, {"instruction": text, "output_column": text}),
            operator_branch("resolve", tables, {"column": text, "instruction": text}),
        ]

    def trace_name(self, operator: str) -> str:
        return f"docetl_{operator}"

    def expected_calls(self, run: OperatorRun, operator: dict[str, Any]) -> int | None:
        if operator.get("operator") in ("map", "filter"):
            return len(run.tables[operator["input"]].frame)
        return None  # reduce folds in batches; resolve compares pairs, then resolves clusters

    def apply(self, run: OperatorRun, operator: dict[str, Any]) -> Table:
        import pandas as pd

        table = run.tables[operator["input"]]
        config = self.pipeline(run, table, self.operation(table, operator))
        output = self.execute(config)
        frame = pd.DataFrame(output).drop(columns=[KEEP], errors="ignore")
        return Table(table.name, frame, table.source, table.truncated)

    def operation(self, table: Table, operator: dict[str, Any]) -> dict[str, Any]:
        """The DocETL operation for one operator of the plan."""
        columns = [str(c) for c in table.frame.columns]
        name, instruction = operator["operator"], str(operator.get("instruction") or "")
        named = referenced_columns(instruction, columns)
        output = str(operator.get("output_column") or "output")
        if name == "map":
            prompt = f"{plain(instruction)}\n\n{row_block(named)}"
            return {"type": "map", "prompt": prompt, "output": {"schema": {output: "string"}}}
        if name == "filter":
            prompt = f"Does this hold for the row: {plain(instruction)}\n\n{row_block(named)}"
            return {"type": "filter", "prompt": prompt, "output": {"schema": {KEEP: "boolean"}}}
        if name == "reduce":
            rows = "{% for input in inputs %}\n" + row_block(named) + "\n---\n{% endfor %}"
            prompt = f"{plain(instruction)}\n\nRows:\n{rows}"
            return {"type": "reduce", "reduce_key": "_all", "prompt": prompt, "output": {"schema": {output: "string"}}}
        return self.resolve(table, operator, instruction)

    def resolve(self, table: Table, operator: dict[str, Any], instruction: str) -> dict[str, Any]:
        column = next(iter(referenced_columns("{" + str(operator.get("column")) + "}", list(table.frame.columns))))
        compare = (
            f"{plain(instruction)}\nDo these two values of {column} name the same thing?\n"
            f"1: {{{{ input1[{column!r}] }}}}\n2: {{{{ input2[{column!r}] }}}}"
        )
        canonical = (
            f"These values of {column} name the same thing. Give its one canonical spelling.\n"
            f"{{% for input in inputs %}}- {{{{ input[{column!r}] }}}}\n{{% endfor %}}"
        )
        return {
            "type": "resolve",
            "comparison_prompt": compare,
            "resolution_prompt": canonical,
            "blocking_keys": [column],
            "limit_comparisons": MAX_COMPARISONS,
            "output": {"schema": {column: "string"}},
        }

    def pipeline(self, run: OperatorRun, table: Table, operation: dict[str, Any]) -> dict[str, Any]:
        """A one-operation DocETL pipeline over every row of the table, its files in the scratch folder."""
        endpoint, folder = run.endpoint, Path(run.workdir)
        number = run.state["operations"] = run.state.get("operations", 0) + 1
        name = f"op{number}_{operation['type']}"
        operation = {**operation, "name": name, "litellm_completion_kwargs": {"api_key": endpoint.api_key}}
        rows = table.frame.astype(object).where(table.frame.notna(), None).to_dict("records")
        return {
            "default_model": f"openai/{endpoint.model}",
            "default_lm_api_base": endpoint.base_url,
            "bypass_cache": True,
            "datasets": {table.name: {"type": "memory", "path": rows}},
            "operations": [operation],
            "pipeline": {
                "steps": [{"name": name, "input": table.name, "operations": [name]}],
                "output": {
                    "type": "file",
                    "path": str(folder / f"{name}.json"),
                    "intermediate_dir": str(folder / "intermediate"),
                },
            },
        }

    def open(self, run: OperatorRun) -> contextlib.AbstractContextManager[Any]:
        import_docetl()  # before the first operator's step: the import is not the operator's time
        return contextlib.nullcontext()

    def execute(self, config: dict[str, Any]) -> list[dict[str, Any]]:
        from docetl.runner import DSLRunner
        from rich.console import Console

        quiet = Console(file=io.StringIO(), quiet=True)  # DocETL logs every step to the console
        runner = DSLRunner(config, console=quiet)  # DocETL's own concurrency (4 threads per CPU)
        output, _ = runner.run()
        return list(output)
