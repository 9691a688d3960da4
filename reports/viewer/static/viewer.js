// compare view: the runs list, a run's overview (live while it runs) and a task's units. Plain JavaScript, no
// build step. Every text that comes from a run reaches the page through textContent, never as markup.
// One function scope: the charts' script, loaded later, defines globals of its own.
(function () {
"use strict";

const app = document.getElementById("app");
const UNITS_SHOWN = 500; // rows of the units table drawn at once (a 16,000-unit run filters fast, draws little)

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function getJSON(url) {
  const response = await fetch(url, { credentials: "same-origin" });
  const body = await response.json().catch(() => ({ error: `${response.status} ${response.statusText}` }));
  if (!response.ok) {
    const error = new Error(body.error || `${response.status} ${response.statusText}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

function showError(where, error) {
  where.replaceChildren(el("p", { class: "error", id: "error", text: String(error.message || error) }));
}

function crumbs(...parts) {
  const bar = document.getElementById("crumbs");
  bar.replaceChildren(...parts.flatMap((part) => [" › ", part]));
}

const runPath = (key) => `/runs/${encodeURIComponent(key)}`;
const taskPath = (key, task) => `${runPath(key)}/tasks/${task.split("/").map(encodeURIComponent).join("/")}`;
const money = (value) => (value === null || value === undefined ? "unknown" : `$${Number(value).toFixed(5)}`);
const seconds = (value) => (value === null || value === undefined ? "–" : `${Number(value).toFixed(2)} s`);

function table(id, columns, rows) {
  return el(
    "table",
    { id },
    el("thead", {}, el("tr", {}, columns.map((c) => el("th", { scope: "col", text: c })))),
    el("tbody", {}, rows)
  );
}

// ------------------------------------------------------------------ the runs list

async function runsPage() {
  document.title = "compare view: runs";
  crumbs(el("span", { text: "runs" }));
  const listing = await getJSON("/api/runs");
  const rows = listing.runs.map((run) =>
    el(
      "tr",
      { "data-run": run.key },
      el("td", {}, el("a", { href: runPath(run.key), text: run.label || run.name })),
      el("td", { text: run.benchmark || "–" }),
      el("td", {}, el("span", { class: `status ${run.status}`, text: run.status })),
      el("td", { text: run.systems.join(", ") }),
      el("td", { text: run.models.join(", ") }),
      el("td", { class: "num", text: `${run.done} / ${run.units ?? "?"}` }),
      el("td", { text: (run.started_at || "").replace("T", " ").slice(0, 19) }),
      el("td", { class: "headline" }, run.problem ? el("span", { class: "error", text: run.problem }) : run.headline === null ? el("span", { class: "muted", text: "computing its overview…" }) : run.headline.slice(1, 4).map((line) => el("div", { text: line })))
    )
  );
  const where = listing.folders.join(", ");
  app.replaceChildren(
    el("h1", { text: "Runs" }),
    el("p", { class: "muted", text: `${listing.runs.length} run(s) under ${where}` }),
    listing.runs.length
      ? table("runs-table", ["run", "benchmark", "status", "systems", "models", "units done", "started", "headline"], rows)
      : el("p", { text: `No run directory under ${where} yet: compare run --out ${listing.folders[0]}/NAME makes one.` })
  );
  if (listing.runs.some((run) => run.status === "running" || run.headline === null)) setTimeout(() => runsPage().catch((e) => showError(app, e)), 5000);
}

// ------------------------------------------------------------------ a run's overview

const FILTERS = [
  ["system", "system"],
  ["model", "model"],
  ["status", "status"],
  ["verdict", "verdict"],
  ["failure", "failure mode"],
  ["warning", "warning"],
  ["level", "level"],
];

function filterValues(units, key) {
  const values = new Set();
  for (const unit of units) {
    if (key === "warning") unit.warnings.forEach((w) => values.add(w));
    else if (unit[key] !== null && unit[key] !== undefined) values.add(String(unit[key]));
  }
  return [...values].sort();
}

function matches(unit, chosen) {
  for (const [key] of FILTERS) {
    const want = chosen[key];
    if (!want) continue;
    if (key === "warning" ? !unit.warnings.includes(want) : String(unit[key]) !== want) return false;
  }
  return !chosen.task || unit.task.toLowerCase().includes(chosen.task.toLowerCase());
}

function readFilters() {
  const chosen = {};
  for (const [key] of FILTERS) chosen[key] = document.getElementById(`filter-${key}`).value;
  chosen.task = document.getElementById("filter-task").value.trim();
  return chosen;
}

function reportTable(spec, id) {
  const rows = spec.rows.map((row) =>
    el(
      "tr",
      { "data-system": row.system, "data-model": row.model },
      row.cells.map((text, i) => el("td", { class: /^[-$0-9.]/.test(text) && i > 1 ? "num" : null, text }))
    )
  );
  return el(
    "section",
    { class: "report-table", id: `section-${spec.key}` },
    el("h3", { text: spec.title }),
    el("div", { class: "scroll" }, table(id || `table-${spec.key}`, spec.columns, rows)),
    spec.note ? el("p", { class: "note", text: spec.note }) : null
  );
}

let vegaLoading = null;
function loadVega() {
  vegaLoading = vegaLoading || new Promise((resolve, reject) => {
    const script = el("script", { src: "/static/vega.js" });
    script.onload = resolve;
    script.onerror = () => reject(new Error("the charts' script did not load"));
    document.head.append(script);
  });
  return vegaLoading;
}

function drawCharts(figures, where) {
  if (!figures.length) return;
  loadVega()
    .then(() => {
      for (const figure of figures) {
        const holder = el("figure", { class: "chart", id: `chart-${figure.key}`, "aria-label": figure.title });
        where.append(holder);
        window.vegaEmbed(holder, figure.spec, { actions: false, renderer: "svg" }).catch((e) => holder.append(el("p", { class: "error", text: String(e) })));
      }
    })
    .catch((e) => where.append(el("p", { class: "error", text: e.message })));
}

function unitRow(key, unit) {
  return el(
    "tr",
    {},
    el("td", {}, el("a", { href: taskPath(key, unit.task), text: unit.task })),
    el("td", { text: unit.system }),
    el("td", { text: unit.model }),
    el("td", { class: "num", text: unit.epoch }),
    el("td", {}, el("span", { class: `status ${unit.status}`, text: unit.status })),
    el("td", {}, el("span", { class: `verdict ${unit.verdict}`, text: unit.verdict })),
    el("td", { text: unit.failure }),
    el("td", { text: unit.warnings.join(", ") }),
    el("td", { class: "num", text: seconds(unit.latency_s) }),
    el("td", { class: "num", text: money(unit.cost_usd) }),
    el("td", { class: "answer", text: unit.answer })
  );
}

class RunPage {
  constructor(key) {
    this.key = key;
    this.data = null;
    this.refreshing = false;
    this.lastRefresh = 0;
  }

  async start() {
    crumbs(el("a", { href: "/", text: "runs" }), el("span", { text: this.key }));
    app.replaceChildren(el("p", { class: "muted", id: "loading", text: "loading the overview… (a large run's first one is computed once, then kept)" }));
    this.data = await this.overviewWhenThere();
    this.render();
    if (this.data.run.status === "running") this.follow();
  }

  // A run started with `compare run --view` has no manifest for its first moments: wait for it (2 minutes).
  async overviewWhenThere() {
    const url = `/api/runs/${encodeURIComponent(this.key)}/overview`;
    for (let tries = 0; ; tries += 1) {
      try {
        return await getJSON(url);
      } catch (error) {
        if (error.status !== 404 || tries >= 120) throw error;
        document.getElementById("loading").textContent = `waiting for the run ${this.key} to start… (${error.message})`;
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
  }

  render() {
    const data = this.data;
    const run = data.run;
    document.title = `compare view: ${run.name}`;
    const search = new URLSearchParams(location.search);
    const filters = el(
      "form",
      { id: "filters", class: "filters", onsubmit: (e) => e.preventDefault() },
      FILTERS.map(([key, label]) =>
        el(
          "label",
          {},
          `${label} `,
          el(
            "select",
            { id: `filter-${key}`, onchange: () => this.applyFilters() },
            el("option", { value: "", text: "all" }),
            filterValues(data.units, key).map((v) => el("option", { value: v, text: v, selected: search.get(key) === v }))
          )
        )
      ),
      el("label", {}, "task ", el("input", { id: "filter-task", type: "search", placeholder: "contains…", value: search.get("task") || "", oninput: () => this.applyFilters() })),
      el("button", { type: "button", id: "filter-reset", onclick: () => this.resetFilters() }, "show all")
    );
    const links = [el("a", { href: "/", text: "all runs" })];
    if (run.has_report) links.push(el("a", { id: "report-link", href: `${runPath(this.key)}/report.html`, text: "report.html" }));
    this.charts = el("div", { class: "charts", id: "charts" });
    app.replaceChildren(
      el("h1", { id: "run-title", text: data.title }),
      el("p", { class: "meta" }, el("span", { id: "run-status", class: `status ${run.status}`, text: run.status }), ` · ${run.path} · `, ...links.flatMap((a, i) => (i ? [" · ", a] : [a]))),
      el("ul", { class: "headline", id: "headline" }, data.headline.map((line) => el("li", { text: line }))),
      this.live || this.livePanel(),
      filters,
      el("section", { id: "summary" }, el("h2", { text: "Overview" }), data.main ? reportTable(data.main, "main-table") : el("p", { text: "no results yet" })),
      el("section", {}, el("h2", { text: "Units" }), el("p", { id: "match-count", class: "muted" }), el("div", { class: "scroll" }, table("units-table", ["task", "system", "model", "epoch", "status", "verdict", "failure mode", "warnings", "latency", "cost", "answer"], []))),
      el("section", {}, el("h2", { text: "Charts" }), this.charts),
      ...data.sections.map((section) =>
        el("details", { class: "section", id: section.anchor }, el("summary", { text: section.heading }), section.tables.map((t) => reportTable(t)))
      ),
      el("details", { class: "section" }, el("summary", { text: "Notes" }), el("ul", { id: "notes" }, data.notes.map((n) => el("li", { text: n }))))
    );
    drawCharts(data.figures, this.charts);
    this.applyFilters();
  }

  resetFilters() {
    for (const [key] of FILTERS) document.getElementById(`filter-${key}`).value = "";
    document.getElementById("filter-task").value = "";
    this.applyFilters();
  }

  applyFilters() {
    const chosen = readFilters();
    const query = new URLSearchParams(Object.entries(chosen).filter(([, v]) => v));
    history.replaceState(null, "", `${location.pathname}${query.toString() ? "?" + query : ""}`);
    const units = this.data.units;
    const found = units.filter((unit) => matches(unit, chosen));
    const body = document.querySelector("#units-table tbody");
    body.replaceChildren(...found.slice(0, UNITS_SHOWN).map((unit) => unitRow(this.key, unit)));
    const drawn = found.length > UNITS_SHOWN ? ` (the first ${UNITS_SHOWN} shown)` : "";
    document.getElementById("match-count").textContent = `${found.length} of ${units.length} units match${drawn}`;
    for (const row of document.querySelectorAll("#main-table tbody tr, .report-table tbody tr")) {
      const hidden = (chosen.system && row.dataset.system && row.dataset.system !== chosen.system) || (chosen.model && row.dataset.model && row.dataset.model !== chosen.model);
      row.hidden = Boolean(hidden);
    }
  }

  livePanel() {
    this.live = el(
      "section",
      { id: "live", hidden: this.data.run.status !== "running" },
      el("h2", { text: "Live" }),
      el("p", { id: "live-progress" }),
      el("progress", { id: "live-bar", max: 1, value: 0 }),
      el("h3", { text: "In flight" }),
      el("div", { class: "scroll" }, table("live-in-flight", ["task", "system", "model", "epoch", "step", "quiet for"], [])),
      el("h3", { text: "Failures as they happen" }),
      el("ul", { id: "live-failures" }),
      el("h3", { text: "Just finished" }),
      el("ul", { id: "live-done" })
    );
    return this.live;
  }

  follow() {
    const source = new EventSource(`/api/runs/${encodeURIComponent(this.key)}/live`);
    source.addEventListener("progress", (event) => this.showProgress(JSON.parse(event.data)));
    source.addEventListener("end", (event) => {
      source.close();
      const status = JSON.parse(event.data).status;
      document.getElementById("live-progress").textContent += ` · the run ended: ${status}`;
      this.refresh(true);
    });
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) document.getElementById("live-progress").textContent += " · the viewer stopped answering";
    };
  }

  showProgress(state) {
    const planned = state.planned ?? "?";
    document.getElementById("live-progress").textContent = `${state.done} of ${planned} units done · ${state.in_flight.length} in flight · ${state.failed} failed · ${state.status}`;
    const bar = document.getElementById("live-bar");
    bar.max = state.planned || 1;
    bar.value = state.done;
    document.querySelector("#live-in-flight tbody").replaceChildren(
      ...state.in_flight.map((unit) =>
        el("tr", {}, el("td", {}, el("a", { href: taskPath(this.key, unit.task), text: unit.task })), el("td", { text: unit.system }), el("td", { text: unit.model }), el("td", { class: "num", text: unit.epoch }), el("td", { text: unit.step }), el("td", { class: "num", text: `${unit.quiet_s} s` }))
      )
    );
    const line = (unit) => el("li", {}, el("a", { href: taskPath(this.key, unit.task), text: unit.task }), ` ${unit.system}/${unit.model} epoch ${unit.epoch}: ${unit.status}`, unit.error ? ` (${unit.error})` : "");
    document.getElementById("live-failures").replaceChildren(...state.failures.map(line));
    document.getElementById("live-done").replaceChildren(...state.recent.map(line));
    document.getElementById("run-status").textContent = state.status;
    if (state.done !== this.data.units.length) this.refresh(false);
  }

  // The tables and charts again from the overview (at most every 3 s while the run goes on), filters kept.
  async refresh(final) {
    const now = Date.now();
    if (this.refreshing) {
      this.finalPending = this.finalPending || final; // the run ended during a refresh: one more after it
      return;
    }
    if (!final && now - this.lastRefresh < 3000) return;
    this.refreshing = true;
    this.lastRefresh = now;
    try {
      const fresh = await getJSON(`/api/runs/${encodeURIComponent(this.key)}/overview`);
      const chosen = readFilters();
      this.data = fresh;
      this.render(); // the live panel is kept as it is, moved into the new page
      for (const [key, value] of Object.entries(chosen)) {
        const input = document.getElementById(`filter-${key}`);
        if (input) input.value = value;
      }
      this.applyFilters();
    } finally {
      this.refreshing = false;
      if (this.finalPending) {
        this.finalPending = false;
        this.refresh(true);
      }
    }
  }
}

// ------------------------------------------------------------------ a task's units

function pre(text, cls) {
  return el("pre", { class: cls || null, text: text ?? "" });
}

function messageView(message) {
  const body = [];
  if (message.content !== undefined && message.content !== null) body.push(pre(typeof message.content === "string" ? message.content : JSON.stringify(message.content, null, 1)));
  for (const call of message.tool_calls || []) body.push(pre(`→ ${call.name}(${JSON.stringify(call.arguments)})`, "call"));
  const who = message.role === "tool" ? `tool result${message.name ? ": " + message.name : ""}` : message.role;
  return el("div", { class: `message ${message.role}` }, el("div", { class: "who", text: who }), body);
}

function usageText(usage) {
  if (!usage) return "";
  const count = (v) => (v === null || v === undefined ? "?" : v);
  return `${count(usage.input_tokens)} in / ${count(usage.output_tokens)} out · ${money(usage.cost_usd)}`;
}

function entryView(entry) {
  const head = (title) => el("div", { class: "entry-head" }, el("span", { class: "kind", text: title }), ` step ${entry.step} · ${entry.phase}${entry.agent ? " · " + entry.agent : ""} · ${seconds(entry.duration_s)}`, entry.role === "judge" ? " · judge" : "", entry.success ? "" : el("span", { class: "error", text: ` · failed: ${entry.error || ""}` }));
  if (entry.kind === "tool_call") {
    return el("div", { class: "entry tool_call" }, head(`tool ${entry.tool}`), pre(JSON.stringify(entry.arguments, null, 1), "arguments"), pre(entry.result ?? entry.error ?? "", "result"), entry.truncated ? el("p", { class: "muted", text: "result cut as the model saw it" }) : null);
  }
  if (entry.kind === "message") {
    return el("div", { class: "entry message-step" }, head(`message → ${entry.recipient || ""}`), pre(entry.content));
  }
  const parts = [head("model call"), el("div", { class: "usage", text: usageText(entry.usage) + (entry.cached ? " · from the cache" : "") })];
  if (entry.earlier_messages) parts.push(el("p", { class: "muted", text: `${entry.earlier_messages} earlier message(s) as in the previous call` }));
  parts.push(...entry.messages.map(messageView));
  if (entry.tool_specs) parts.push(el("details", { class: "tools" }, el("summary", { text: `tools offered: ${entry.tools.join(", ") || "none"}` }), pre(JSON.stringify(entry.tool_specs, null, 1))));
  else if (!entry.tools_recorded) parts.push(el("p", { class: "muted", text: "tools offered: not recorded" }));
  if (entry.settings && Object.keys(entry.settings).length) parts.push(el("div", { class: "settings muted", text: `settings: ${JSON.stringify(entry.settings)}` }));
  const reply = entry.reply || {};
  const said = [];
  if (reply.content) said.push(pre(reply.content));
  for (const call of reply.tool_calls || []) said.push(pre(`→ ${call.name}(${JSON.stringify(call.arguments)})`, "call"));
  parts.push(el("div", { class: "message reply" }, el("div", { class: "who", text: "reply" }), said.length ? said : el("span", { class: "muted", text: "(empty)" })));
  return el("div", { class: "entry model_call" }, parts);
}

function unitView(unit) {
  const label = `${unit.system} / ${unit.model} · epoch ${unit.epoch}`;
  return el(
    "article",
    { class: "unit", "data-unit": unit.id },
    el("h3", { text: label }),
    el("p", {}, el("span", { class: `status ${unit.status}`, text: unit.status }), " ", el("span", { class: `verdict ${unit.verdict}`, text: unit.verdict }), ` · ${seconds(unit.latency_s)} · ${usageText(unit.usage)}`),
    unit.error ? el("p", { class: "error", text: unit.error }) : null,
    el("div", { class: "answer" }, el("strong", { text: "answer " }), pre(JSON.stringify(unit.answer))),
    unit.stored ? null : el("p", { class: "muted", text: "this run kept no requests: model calls without the messages sent" }),
    el("div", { class: "conversation" }, unit.entries.map(entryView))
  );
}

async function taskPage(key, task) {
  crumbs(el("a", { href: "/", text: "runs" }), el("a", { href: runPath(key), text: key }), el("span", { text: task }));
  document.title = `compare view: ${task}`;
  const data = await getJSON(`/api/runs/${encodeURIComponent(key)}/tasks/${task.split("/").map(encodeURIComponent).join("/")}`);
  const gold = Array.isArray(data.gold) ? data.gold.join(" | ") : data.gold ?? "(none)";
  const options = (chosen) => data.units.map((unit, i) => el("option", { value: unit.id, selected: i === chosen, text: `${unit.system} / ${unit.model} · epoch ${unit.epoch}` }));
  const diffArea = el("div", { id: "diff" });
  const picker = el(
    "form",
    { class: "filters", id: "diff-form", onsubmit: (e) => e.preventDefault() },
    el("label", {}, "diff ", el("select", { id: "diff-a" }, options(0))),
    el("label", {}, " with ", el("select", { id: "diff-b" }, options(Math.min(1, data.units.length - 1)))),
    el("button", { type: "button", id: "diff-show", onclick: () => showDiff(key, task, diffArea) }, "show the differences")
  );
  app.replaceChildren(
    el("h1", { text: `Task ${task}` }),
    el("p", { class: "meta", text: `${data.benchmark}${data.level ? " · level " + data.level : ""} · ${data.units.length} unit(s)${data.data_sources.length ? " · data: " + data.data_sources.join(", ") : ""}` }),
    el("section", { class: "task-head" }, el("h2", { text: "Question" }), pre(data.question ?? "(not recorded)", "question"), el("h2", { text: "Gold" }), el("pre", { id: "gold", text: gold })),
    picker,
    diffArea,
    el("div", { id: "task-units", class: "units" }, data.units.map(unitView))
  );
  document.querySelector("pre.question").id = "question";
}

async function showDiff(key, task, where) {
  const a = document.getElementById("diff-a").value;
  const b = document.getElementById("diff-b").value;
  const url = `/api/runs/${encodeURIComponent(key)}/diff/${task.split("/").map(encodeURIComponent).join("/")}?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`;
  try {
    const found = await getJSON(url);
    const rows = found.rows.map((row) => el("tr", { class: row.op }, el("td", { class: "side", text: row.a ?? "" }), el("td", { class: "side", text: row.b ?? "" })));
    const names = [a, b].map((id) => JSON.parse(id).join(" / "));
    where.replaceChildren(el("p", { class: "muted", text: `${Math.round(found.same * 100)}% of the lines alike` }), el("table", { class: "diff" }, el("thead", {}, el("tr", {}, names.map((n) => el("th", { text: n })))), el("tbody", {}, rows)));
  } catch (error) {
    showError(where, error);
  }
}

// ------------------------------------------------------------------ routing

function route() {
  const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "runs" && parts.length === 2) return new RunPage(parts[1]).start();
  if (parts[0] === "runs" && parts[2] === "tasks" && parts.length > 3) return taskPage(parts[1], parts.slice(3).join("/"));
  return runsPage();
}

route().catch((error) => showError(app, error));
})();
