"""The two SQL tools an agent gets: `execute_sql` and `get_schema_info`."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ...core.tool import Tool, ToolError, ToolResult, ToolSettings
from ..parameters import Parameters, parameters_schema, with_fields
from .database import Database, TableInfo
from .databases import Databases
from .render import jsonable, render_table

SAMPLE_ROWS = 2
SAMPLE_CELL_CHARS = 60


class SqlParameters(Parameters):
    sql: str = Field(description="One SQL query.")
    database: str | None = None  # one of the task's databases, required when there are several: `database_field`


class SchemaParameters(Parameters):
    database: str | None = None  # one of the task's databases: `database_field`
    table: str | None = Field(None, description="One table to describe (default: all).")


class SqlTool(Tool):
    name = "execute_sql"

    def __init__(self, databases: Databases, settings: ToolSettings) -> None:
        self.databases = databases
        self.settings = settings
        self.description = (
            "Run one read-only SQL query (SELECT/WITH) and get the result as CSV. "
            f"At most {settings.sql_max_rows} rows are returned; aggregate or add LIMIT for large results. "
            'Quote identifiers with spaces in double quotes, e.g. "Sales Orders".'
        )
        database = databases.database_field(required=len(databases.names) > 1)
        self.parameters = parameters_schema(with_fields(SqlParameters, database=database))

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        database = self.databases.get(arguments.get("database"))
        result = database.query(arguments["sql"], self.settings.sql_max_rows)
        if not result.columns:
            raise ToolError("the statement returned no result set; send one SELECT query")
        text, shown = render_table(result.columns, result.rows, self.settings.sql_max_bytes)
        truncated = result.more or shown < len(result.rows)
        if truncated:
            more = f"at least {len(result.rows) + 1}" if result.more else str(len(result.rows))
            text += f"[truncated: showing {shown} of {more} rows; more rows exist — aggregate or add LIMIT]\n"
        elif not result.rows:
            text += "(0 rows)\n"
        rows = [[jsonable(v) for v in row] for row in result.rows[:shown]]
        return ToolResult(
            success=True, content=text, data={"columns": result.columns, "rows": rows}, truncated=truncated
        )

    def close(self) -> None:
        self.databases.close()


class SchemaTool(Tool):
    name = "get_schema_info"

    def __init__(self, databases: Databases, settings: ToolSettings) -> None:
        self.databases = databases
        self.settings = settings
        self.description = (
            "Describe the databases: tables with quoted names as SQL needs them, columns and types, "
            "row counts and sample rows. Pass `table` to describe one table."
        )
        database = databases.database_field(required=False)
        self.parameters = parameters_schema(with_fields(SchemaParameters, database=database))

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        name = arguments.get("database")
        databases = [self.databases.get(name)] if name else list(self.databases.by_name.values())
        sections, data = [], {}
        for database in databases:
            tables = _select_tables(database, arguments.get("table"))
            infos = [self._describe(database, table) for table in tables]
            sections.append(_render_database(database, infos))
            data[database.name] = {"kind": str(database.kind), "tables": infos}
        return ToolResult(success=True, content="\n\n".join(sections), data=data)

    def _describe(self, database: Database, table: TableInfo) -> dict[str, Any]:
        count = database.query(f"SELECT COUNT(*) FROM {table.sql_name}", 1).rows[0][0]
        sample = database.query(f"SELECT * FROM {table.sql_name} LIMIT {SAMPLE_ROWS}", SAMPLE_ROWS)
        return {
            "name": table.sql_name,
            "view": table.is_view,
            "row_count": count,
            "columns": [{"name": database.quote(n), "type": t} for n, t in database.columns(table)],
            "sample_columns": sample.columns,
            "sample_rows": [[jsonable(v) for v in row] for row in sample.rows],
        }

    def close(self) -> None:
        self.databases.close()


def _select_tables(database: Database, wanted: str | None) -> list[TableInfo]:
    tables = database.tables()
    if wanted is None:
        return tables
    key = wanted.strip().lower()
    found = [t for t in tables if key in (t.name.lower(), t.sql_name.lower())]
    if not found:
        names = ", ".join(t.sql_name for t in tables)
        raise ToolError(f"no table {wanted!r} in database {database.name!r}; tables: {names}")
    return found


def _render_database(database: Database, infos: list[dict[str, Any]]) -> str:
    lines = [f"database {database.name} ({database.kind}): {len(infos)} table(s)"]
    for info in infos:
        kind = "view" if info["view"] else "table"
        lines.append(f"\n{kind} {info['name']} — {info['row_count']} rows")
        lines.append("  columns: " + ", ".join(f"{c['name']} {c['type']}" for c in info["columns"]))
        if info["sample_rows"]:
            short = [[_short(v) for v in row] for row in info["sample_rows"]]
            text, _ = render_table(info["sample_columns"], short, 10_000)
            lines.append("  sample rows:\n" + "\n".join("    " + line for line in text.splitlines()))
    return "\n".join(lines)


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > SAMPLE_CELL_CHARS:
        return value[: SAMPLE_CELL_CHARS - 1] + "…"
    return value
