"""Query results as the agent reads them: CSV text cut at a byte cap, cells as JSON can carry them."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from decimal import Decimal
from typing import Any


def jsonable(value: Any) -> Any:
    """A cell value as JSON can carry it (Decimal -> float, bytes/dates -> text)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(bytes(value))} bytes>"
    return str(value)


def _cell(value: Any) -> str:
    return "NULL" if value is None else str(jsonable(value))


def render_table(columns: list[str], rows: Sequence[Sequence[Any]], max_bytes: int) -> tuple[str, int]:
    """CSV text with a header, cut before max_bytes; returns the text and how many rows it holds."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    size, shown = len(out.getvalue().encode()), 0
    for row in rows:
        line = io.StringIO()
        csv.writer(line, lineterminator="\n").writerow([_cell(v) for v in row])
        encoded = len(line.getvalue().encode())
        if size + encoded > max_bytes:
            break
        out.write(line.getvalue())
        size += encoded
        shown += 1
    return out.getvalue(), shown
