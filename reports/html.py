"""report.html: one self-contained page that works offline.

Styles, the report's data, Vega/Vega-Lite/vega-embed (from vl-convert) and the page's own plain JavaScript
are inlined; a Content-Security-Policy forbids every network request, so nothing leaves the file. Text
from the runs (questions, answers, model output) reaches the page only as JSON and is inserted with
`textContent`, never as markup.
"""

from __future__ import annotations

import html
import json
from importlib.resources import files
from typing import Any

from .cells import Cell, ReportTable
from .plots import Figure

CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:"
)


def _asset(name: str) -> str:
    return (files(__package__) / "assets" / name).read_text(encoding="utf-8")


def script_json(value: Any) -> str:
    """JSON safe inside a <script> element (no `</script>`, no HTML comment openers)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _cell(cell: Cell, header: str) -> str:
    text = html.escape(cell.text)
    numeric = cell.value is not None and header not in ("system", "model", "workflow")
    attributes = ' class="num"' if numeric else ""
    if cell.link:
        link = html.escape(json.dumps(cell.link, ensure_ascii=False), quote=True)
        text = f'<a href="#drilldown" class="drill" data-filter="{link}" title="show these tasks">{text}</a>'
    return f"<td{attributes}>{text}</td>"


def table_html(table: ReportTable, element_id: str | None = None) -> str:
    identifier = html.escape(element_id or f"table-{table.key}")
    head = "".join(f'<th scope="col">{html.escape(c)}</th>' for c in table.columns)
    body = "".join(
        "<tr>" + "".join(_cell(cell, header) for cell, header in zip(row, table.columns, strict=True)) + "</tr>"
        for row in table.rows
    )
    note = f'<p class="note">{html.escape(table.note)}</p>' if table.note else ""
    return (
        f'<section class="table" id="section-{html.escape(table.key)}"><h3>{html.escape(table.title)}</h3>'
        f'<div class="scroll"><table id="{identifier}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
        f"</div>{note}</section>"
    )


def _list(items: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in items) + "</ul>" if items else ""


def page(
    *,
    title: str,
    headline: list[str],
    notes: list[str],
    sources: list[str],
    main: ReportTable,
    sections: list[tuple[str, str, list[ReportTable]]],
    figures: list[Figure],
    tasks: list[dict[str, Any]],
    vega_js: str,
) -> str:
    """The whole page; `sections` are (anchor, heading, tables) after the charts."""
    charts = "".join(
        f'<figure class="chart"><div id="chart-{html.escape(f.key)}" class="vega" role="img" '
        f'aria-label="{html.escape(f.title)}"></div></figure>'
        for f in figures
    )
    nav = [("summary", "Summary"), ("charts", "Charts"), *[(a, h) for a, h, _ in sections], ("drilldown", "Tasks")]
    body = [
        f"<header><h1>{html.escape(title)}</h1>",
        '<ul class="headline">' + "".join(f"<li>{html.escape(line)}</li>" for line in headline) + "</ul>",
        "<nav>"
        + " · ".join(f'<a href="#{a}">{html.escape(h)}</a>' for a, h in nav)
        + ' <a id="viewer-link" href="#" hidden>· open in compare view</a></nav></header>',  # shown when served by it
        f'<main><section id="summary"><h2>Summary</h2>{_list(notes)}{table_html(main, "main-table")}',
        f"<details><summary>Run directories</summary>{_list(sources)}</details></section>",
        f'<section id="charts"><h2>Charts</h2><div class="charts">{charts}</div></section>',
    ]
    for anchor, heading, tables in sections:
        body.append(f'<section id="{html.escape(anchor)}"><h2>{html.escape(heading)}</h2>')
        body += [table_html(table) for table in tables]
        body.append("</section>")
    body.append(_asset("drilldown.html"))
    data = {"figures": [{"key": f.key, "spec": f.spec} for f in figures], "tasks": tasks}
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_asset('report.css')}</style></head><body>"
        + "".join(body)
        + f'</main><script type="application/json" id="report-data">{script_json(data)}</script>'
        + f"<script>{vega_js}</script><script>{_asset('report.js')}</script></body></html>"
    )
