/* The report page: charts through vega-embed, and the per-task drill-down with its filters.
   Text from the runs is inserted with textContent only. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var PAGE = 50; // tasks rendered at once; "show more" adds the next ones
  var shown = PAGE;

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === "text") node.textContent = attrs[key];
      else if (key === "className") node.className = attrs[key];
      else node.setAttribute(key, attrs[key]);
    });
    (children || []).forEach(function (child) { if (child) node.appendChild(child); });
    return node;
  }

  function fmt(value, digits) {
    if (value === null || value === undefined) return "–";
    if (typeof value !== "number") return String(value);
    return value.toFixed(digits === undefined ? 3 : digits);
  }

  // ------------------------------------------------------------------ served by compare view: a link back
  var served = /^\/runs\/([^/]+)\/report\.html$/.exec(window.location.pathname);
  var back = document.getElementById("viewer-link");
  if (served && back && window.location.protocol.indexOf("http") === 0) {
    back.href = "/runs/" + served[1];
    back.hidden = false;
  }

  // ------------------------------------------------------------------ charts
  data.figures.forEach(function (figure) {
    var target = document.getElementById("chart-" + figure.key);
    window.vegaEmbed(target, figure.spec, { actions: false, renderer: "svg", padding: { left: 12, top: 4, right: 4, bottom: 4 } }).catch(function (error) {
      console.error("chart " + figure.key + ": " + error);
    });
  });

  // ------------------------------------------------------------------ filters
  var selects = Array.prototype.slice.call(document.querySelectorAll("#filters select"));
  var taskInput = document.getElementById("filter-task");

  function values(key) {
    var seen = {};
    data.tasks.forEach(function (task) {
      if (key === "level") { if (task.level) seen[task.level] = true; return; }
      task.entries.forEach(function (entry) { if (entry[key] !== null && entry[key] !== undefined) seen[entry[key]] = true; });
    });
    var order = { easy: 0, medium: 1, hard: 2 };
    return Object.keys(seen).sort(function (a, b) {
      return ((order[a] === undefined ? 9 : order[a]) - (order[b] === undefined ? 9 : order[b])) || (a < b ? -1 : a > b ? 1 : 0);
    });
  }

  selects.forEach(function (select) {
    select.appendChild(el("option", { value: "", text: "all" }));
    values(select.dataset.key).forEach(function (value) {
      select.appendChild(el("option", { value: value, text: value }));
    });
    select.addEventListener("change", function () { shown = PAGE; render(); });
  });
  taskInput.addEventListener("input", function () { shown = PAGE; render(); });
  document.getElementById("filter-reset").addEventListener("click", function () { setFilter({}); });
  document.getElementById("show-more").addEventListener("click", function () { shown += PAGE; render(); });

  function current() {
    var filter = {};
    selects.forEach(function (select) { if (select.value) filter[select.dataset.key] = select.value; });
    if (taskInput.value) filter.task = taskInput.value;
    return filter;
  }

  function setFilter(filter) {
    selects.forEach(function (select) {
      var wanted = filter[select.dataset.key] || "";
      if (wanted && !Array.prototype.some.call(select.options, function (o) { return o.value === wanted; })) {
        select.appendChild(el("option", { value: wanted, text: wanted }));
      }
      select.value = wanted;
    });
    taskInput.value = filter.task || "";
    shown = PAGE;
    render();
  }

  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("a.drill") : null;
    if (!link) return;
    event.preventDefault();
    setFilter(JSON.parse(link.getAttribute("data-filter")));
    document.getElementById("drilldown").scrollIntoView();
  });

  function entryMatches(entry, filter) {
    return ["system", "model", "status", "failure", "judged"].every(function (key) {
      return !filter[key] || entry[key] === filter[key];
    });
  }

  function taskMatches(task, filter) {
    if (filter.level && task.level !== filter.level) return false;
    if (filter.task && task.id.indexOf(filter.task) !== 0) return false;
    return true;
  }

  // ------------------------------------------------------------------ rendering
  function badge(entry) {
    var neutral = ["unscored", "unavailable", "no verdict"].indexOf(entry.failure) >= 0;
    var kind = entry.failure === "correct" ? "ok" : neutral ? "other" : "fail";
    return el("span", { className: "badge " + kind, text: entry.system + "/" + entry.model + (entry.epoch > 1 ? " e" + entry.epoch : "") + ": " + entry.failure });
  }

  function field(name, value) {
    return el("div", {}, [el("strong", { text: name + ": " }), el("span", { text: value })]);
  }

  function scores(entry) {
    return Object.keys(entry.scores).sort().map(function (key) { return key + " " + fmt(entry.scores[key]); }).join(", ");
  }

  function entriesTable(entries, matching) {
    var head = ["system", "model", "epoch", "status", "failure mode", "answer", "scores", "cost $", "tokens in/out/reasoning", "latency s", "model / tool calls", "error"];
    var rows = entries.map(function (entry) {
      var failure = entry.failure + (entry.judged ? " → " + entry.judged + (entry.judged_why ? " (" + entry.judged_why + ")" : "") : "");
      var cells = [entry.system, entry.model, String(entry.epoch), entry.status, failure, entry.answer, scores(entry),
        fmt(entry.cost, 5), entry.tokens.map(function (t) { return fmt(t, 0); }).join(" / "), fmt(entry.latency, 3), entry.model_calls + " / " + entry.tool_calls,
        [entry.error, entry.scoring_error].filter(Boolean).join("; ")];
      var classes = (entry.failure === "correct" ? "" : "failed") + (matching.indexOf(entry) < 0 ? " other-entry" : "");
      return el("tr", { className: classes }, cells.map(function (text, i) {
        return el("td", {}, [i === 5 ? el("pre", { text: text }) : document.createTextNode(text)]);
      }));
    });
    return el("div", { className: "scroll" }, [el("table", { className: "entries" }, [
      el("thead", {}, [el("tr", {}, head.map(function (h) { return el("th", { text: h }); }))]),
      el("tbody", {}, rows)])]);
  }

  function stepDetail(step) {
    if (step.kind === "model_call") {
      var parts = ["tokens " + fmt(step["in"], 0) + " in / " + fmt(step.out, 0) + " out" + (step.reasoning ? " (" + step.reasoning + " reasoning)" : ""),
        "$" + fmt(step.cost, 6)];
      if (step.attempts > 1) parts.push(step.attempts + " attempts (retried)");
      if (step.queue) parts.push("queued " + fmt(step.queue, 3) + " s");
      var text = parts.join(" · ");
      if (step.calls.length) text += "\ncalls: " + step.calls.join("; ");
      if (step.text) text += "\n" + step.text;
      return text;
    }
    if (step.kind === "message") return "to " + step.to + ": " + step.text;
    return "arguments: " + step.args + "\nresult: " + step.result + (step.truncated ? " (truncated for the model)" : "");
  }

  function timeline(entry) {
    if (!entry.steps) return el("p", { className: "note", text: "no trace" });
    var wall = Math.max(entry.wall || 0, 1e-9);
    var cursor = 0;
    var rows = entry.steps.map(function (step) {
      var start = step.start === null || step.start === undefined ? cursor : step.start;
      cursor = start + step.dur;
      var bar = el("div", { className: "bar" }, [el("span", {})]);
      bar.firstChild.style.left = Math.min(100, 100 * start / wall) + "%";
      bar.firstChild.style.width = Math.min(100, 100 * step.dur / wall) + "%";
      var what = step.kind === "model_call" ? "model " + step.model : step.kind === "tool_call" ? "tool " + step.tool : "message";
      var status = step.ok ? "ok" : "failed" + (step.error ? ": " + step.error : "");
      return el("tr", { className: "phase-" + step.phase + (step.ok ? "" : " failed") }, [
        el("td", { text: String(step.i) }), el("td", { text: what }), el("td", { text: step.phase }),
        el("td", { text: step.agent || "" }), el("td", { className: "num", text: fmt(start, 3) }),
        el("td", { className: "num", text: fmt(step.dur, 3) }), el("td", {}, [bar]), el("td", { text: status }),
        el("td", {}, [el("pre", { text: stepDetail(step) })])]);
    });
    var head = ["#", "step", "phase", "agent", "start s", "duration s", "timeline", "outcome", "detail"];
    var parts = [el("div", { className: "scroll" }, [el("table", { className: "timeline" }, [
      el("thead", {}, [el("tr", {}, head.map(function (h) { return el("th", { text: h }); }))]), el("tbody", {}, rows)])])];
    if (entry.trace_error) parts.unshift(el("pre", { text: "error: " + entry.trace_error }));
    return el("div", {}, parts);
  }

  function traces(entries) {
    return el("div", {}, entries.map(function (entry) {
      var box = el("details", { className: "trace" }, [el("summary", {
        text: "trace: " + entry.system + "/" + entry.model + " epoch " + entry.epoch + " — " + entry.status + ", " + fmt(entry.latency, 3) + " s, " + (entry.steps ? entry.steps.length : 0) + " steps" })]);
      box.addEventListener("toggle", function () {
        if (box.open && box.childNodes.length === 1) box.appendChild(timeline(entry));
      });
      return box;
    }));
  }

  // Every system's entry side by side; those the filter does not select are dimmed.
  function taskItem(task, entries) {
    var summary = el("summary", {}, [el("strong", { text: task.id }), el("span", { text: " · " + (task.level || "no level") + " · " + task.type + " " })]
      .concat(entries.map(badge)));
    var box = el("details", { className: "task", "data-task": task.id }, [summary]);
    box.addEventListener("toggle", function () {
      if (!box.open || box.childNodes.length > 1) return;
      box.appendChild(field("question", task.question || "(not recorded in this run)"));
      box.appendChild(field("data sources", task.sources.length ? task.sources.join(", ") : "–"));
      box.appendChild(field("gold", task.gold === null || task.gold === undefined ? "–" : Array.isArray(task.gold) ? task.gold.join(", ") : String(task.gold)));
      box.appendChild(entriesTable(task.entries, entries));
      box.appendChild(traces(task.entries));
    });
    return box;
  }

  function render() {
    var filter = current();
    var list = document.getElementById("task-list");
    var matching = [];
    data.tasks.forEach(function (task) {
      if (!taskMatches(task, filter)) return;
      var entries = task.entries.filter(function (entry) { return entryMatches(entry, filter); });
      if (entries.length) matching.push([task, entries]);
    });
    var runs = matching.reduce(function (sum, item) { return sum + item[1].length; }, 0);
    list.textContent = "";
    matching.slice(0, shown).forEach(function (item) { list.appendChild(taskItem(item[0], item[1])); });
    document.getElementById("match-count").textContent = matching.length + " of " + data.tasks.length + " tasks, " + runs + " runs match" +
      (matching.length > shown ? " (showing the first " + shown + ")" : "");
    document.getElementById("show-more").hidden = matching.length <= shown;
  }

  render();
})();
