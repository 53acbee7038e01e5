// spotrun's dashboard: plain JS, no library, nothing fetched from outside this server.
// Every request carries the token; pages poll their JSON every POLL_MS while open.
"use strict";

const TOKEN = document.body.dataset.token;
const POLL_MS = 2000;
const COLORS = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#1b7c83", "#e16f24", "#6e7781"];
const SVG_NS = "http://www.w3.org/2000/svg";
const page = document.getElementById("page");
let timer = null;

// ------------------------------------------------------------------ helpers
function withToken(path) {
  const url = new URL(path, location.origin);
  url.searchParams.set("token", TOKEN);
  return url.pathname + url.search;
}

async function api(path, options = {}) {
  const response = await fetch(path, {
    ...options,
    headers: { "X-Spotrun-Token": TOKEN, ...(options.headers || {}) },
    cache: "no-store",
  });
  const data = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined) continue;
    if (key === "class") node.className = value;
    else if (key === "style") node.style.cssText = value; // CSSOM: allowed by the page's CSP
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  return node;
}

function link(path, text) {
  return el("a", { href: withToken(path) }, text);
}

function usd(value) { // spotrun/core/money.py's rule, as every view of spotrun shows money:
  // to the cent; an amount under a cent keeps two significant digits; $0.00 only for zero
  if (value === null || value === undefined) return "-";
  const sign = value < 0 ? "-$" : "$";
  const magnitude = Math.abs(value);
  if (magnitude === 0 || magnitude >= 0.01) {
    return sign + magnitude.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  }
  const small = Number(magnitude.toPrecision(2));
  if (small >= 0.01) return sign + "0.01";
  const places = 1 - Math.floor(Math.log10(small));
  return sign + small.toFixed(places).replace(/0+$/, "");
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  const s = Math.round(seconds);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}

function clock(unix) {
  return new Date(unix * 1000).toISOString().slice(11, 19);
}

function best(b) {
  if (!b) return "-";
  return b.metric === "test_acc" ? (100 * b.value).toFixed(1) + "% acc" : b.value.toFixed(4) + " loss";
}

function table(headers, rows, rowAttrs = () => ({})) {
  const head = el("tr", {}, headers.map((h) => el("th", { class: h.num ? "num" : null }, h.label)));
  const body = rows.map((row, i) =>
    el("tr", rowAttrs(row, i), headers.map((h) => el("td", { class: h.num ? "num" : null }, h.cell(row)))),
  );
  return el("table", {}, el("thead", {}, head), el("tbody", {}, body));
}

function setStatus(text, isError = false) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.className = isError ? "error" : "muted";
}

function poll(work) {
  const tick = async () => {
    try {
      await work();
      setStatus("updated " + new Date().toLocaleTimeString());
    } catch (error) {
      setStatus(error.message, true);
    }
    timer = setTimeout(tick, POLL_MS);
  };
  tick();
}

// ------------------------------------------------------------------ chart
// series: [{name, x: [], y: []}]; marks: [{x, kind, text}]; xFormat: how x ticks read
function drawChart(target, series, options = {}) {
  const width = target.clientWidth || 900;
  const height = options.height || 340;
  const pad = { left: 64, right: 16, top: 14, bottom: 36 };
  const chart = svg("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, id: options.id || "" });
  chart.style.height = height + "px";
  const xs = series.flatMap((s) => s.x).concat((options.marks || []).map((m) => m.x));
  const ys = series.flatMap((s) => s.y);
  if (!ys.length) {
    target.replaceChildren(el("p", { class: "muted" }, options.empty || "no points yet"));
    return;
  }
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (options.yFromZero) y0 = Math.min(0, y0);
  if (x0 === x1) [x0, x1] = [x0 - 1, x1 + 1];
  if (y0 === y1) { const room = Math.abs(y0) * 0.1 || 1; [y0, y1] = [y0 - room, y1 + room]; }
  const sx = (x) => pad.left + ((x - x0) / (x1 - x0)) * (width - pad.left - pad.right);
  const sy = (y) => height - pad.bottom - ((y - y0) / (y1 - y0)) * (height - pad.top - pad.bottom);
  const xFormat = options.xFormat || ((x) => +x.toPrecision(4));
  for (let i = 0; i <= 5; i++) {
    const yv = y0 + ((y1 - y0) * i) / 5;
    const xv = x0 + ((x1 - x0) * i) / 5;
    chart.append(svg("line", { class: "grid", x1: pad.left, x2: width - pad.right, y1: sy(yv), y2: sy(yv) }));
    const yl = svg("text", { x: pad.left - 6, y: sy(yv) + 4, "text-anchor": "end" });
    yl.textContent = options.yFormat ? options.yFormat(yv) : +yv.toPrecision(4);
    const xl = svg("text", { x: sx(xv), y: height - pad.bottom + 16, "text-anchor": "middle" });
    xl.textContent = xFormat(xv);
    chart.append(yl, xl);
  }
  chart.append(svg("line", { class: "axis", x1: pad.left, x2: pad.left, y1: pad.top, y2: height - pad.bottom }));
  chart.append(svg("line", { class: "axis", x1: pad.left, x2: width - pad.right, y1: height - pad.bottom, y2: height - pad.bottom }));
  if (options.xLabel) {
    const label = svg("text", { x: width / 2, y: height - 4, "text-anchor": "middle" });
    label.textContent = options.xLabel;
    chart.append(label);
  }
  series.forEach((s, i) => {
    const color = s.color || COLORS[i % COLORS.length];
    const points = s.x.map((x, k) => `${sx(x).toFixed(1)},${sy(s.y[k]).toFixed(1)}`).join(" ");
    const line = svg(s.step ? "polyline" : "polyline", {
      class: "curve " + (s.className || ""), points, stroke: color,
      "data-name": s.name, "data-points": s.x.length,
    });
    const title = svg("title");
    title.textContent = s.name;
    line.append(title);
    chart.append(line);
    if (!s.noDots) { // each evaluation as a dot: a run's first one shows before it is a line
      s.x.forEach((x, k) => chart.append(svg("circle", { cx: sx(x), cy: sy(s.y[k]), r: 2.5, fill: color })));
    }
  });
  for (const mark of options.marks || []) {
    const line = svg("line", {
      class: "mark mark-" + mark.kind, x1: sx(mark.x), x2: sx(mark.x), y1: pad.top, y2: height - pad.bottom,
      "data-kind": mark.kind,
    });
    const title = svg("title");
    title.textContent = `${mark.kind}: ${mark.text}`;
    line.append(title);
    chart.append(line);
  }
  const legend = el("div", { class: "legend" },
    series.map((s, i) => el("span", {}, el("i", { style: `background:${s.color || COLORS[i % COLORS.length]}` }), s.name)),
    [...new Set((options.marks || []).map((m) => m.kind))].map((k) => el("span", { class: "mark-key" }, "┆ " + k)),
  );
  target.replaceChildren(chart, legend);
}

// ------------------------------------------------------------------ runs
async function runsPage() {
  const params = new URLSearchParams(location.search);
  const filters = el("div", { class: "filters" });
  const holder = el("div", { id: "runs" });
  const selected = new Set();
  const compare = el("button", { id: "compare", onclick: () => {
    location.href = withToken("/compare?runs=" + [...selected].join(","));
  } }, "compare selected");
  page.replaceChildren(el("h1", {}, "Runs"), filters, holder);
  const state = el("select", { id: "filter-state" }, el("option", { value: "" }, "any state"));
  const sweep = el("select", { id: "filter-sweep" }, el("option", { value: "" }, "any sweep"));
  const since = el("input", { id: "filter-since", type: "date", value: params.get("since") || "" });
  filters.append(el("label", {}, "state ", state), el("label", {}, "sweep ", sweep),
    el("label", {}, "since ", since), compare);
  for (const input of [state, sweep, since]) input.addEventListener("change", () => refresh());
  let first = true;
  let shownChoices = "";
  let shownRuns = "";
  async function refresh() {
    const query = new URLSearchParams();
    if (state.value) query.set("state", state.value);
    if (sweep.value) query.set("sweep", sweep.value);
    if (since.value) query.set("since", since.value);
    const data = await api("/api/runs?" + query);
    const choices = JSON.stringify([data.states, data.sweeps]);
    if (choices !== shownChoices) { // new states or sweeps: the filters offer them too
      const [chosenState, chosenSweep] = [state.value || (first ? params.get("state") || "" : ""), sweep.value];
      state.replaceChildren(el("option", { value: "" }, "any state"), ...data.states.map((s) => el("option", { value: s }, s)));
      sweep.replaceChildren(el("option", { value: "" }, "any sweep"), ...data.sweeps.map((s) => el("option", { value: s.id }, s.name)));
      [state.value, sweep.value] = [chosenState, chosenSweep];
      shownChoices = choices;
      first = false;
    }
    const shown = JSON.stringify(data.runs);
    if (shown === shownRuns) return; // unchanged: the table (and what is ticked) stays
    shownRuns = shown;
    holder.replaceChildren(table([
      { label: "", cell: (r) => el("input", { type: "checkbox", class: "pick", "data-run": r.id,
        ...(selected.has(r.id) ? { checked: "" } : {}),
        onchange: (e) => { e.target.checked ? selected.add(r.id) : selected.delete(r.id); } }) },
      { label: "run", cell: (r) => link("/run/" + r.id, r.name) },
      { label: "recipe / command", cell: (r) => r.what },
      { label: "state", cell: (r) => el("span", { class: "state-" + r.state }, r.state) },
      { label: "cloud", cell: (r) => r.cloud },
      { label: "type / zone", cell: (r) => [r.type, r.zone].filter(Boolean).join(" ") || "-" },
      { label: "elapsed", num: true, cell: (r) => duration(r.elapsed_s) },
      { label: "ETA", num: true, cell: (r) => duration(r.eta_s) },
      { label: "cost", num: true, cell: (r) => usd(r.cost_usd) },
      { label: "projected", num: true, cell: (r) => usd(r.projected_usd) },
      { label: "best", num: true, cell: (r) => best(r.best) },
      { label: "sweep", cell: (r) => r.sweep ? link("/sweep/" + r.sweep, r.sweep) : "" },
    ], data.runs, (r) => ({ class: "run-row", "data-run": r.id, "data-state": r.state })));
  }
  poll(refresh);
}

// ------------------------------------------------------------------ curves (run, compare)
function curveControls(metrics, onChange) {
  const metric = el("select", { id: "metric" }, metrics.map((m) => el("option", { value: m }, m)));
  const axis = el("select", { id: "x-axis" }, ["step", "time", "cost"].map((x) => el("option", { value: x }, x)));
  metric.addEventListener("change", onChange);
  axis.addEventListener("change", onChange);
  return { metric, axis, box: el("div", { class: "filters" }, el("label", {}, "metric ", metric), el("label", {}, "x ", axis)) };
}

const X_LABELS = { step: "step", time: "training time (s)", cost: "cost so far (USD)" };

async function drawCurves(target, runs, metric, axis) {
  const query = new URLSearchParams({ runs: runs.join(","), x: axis });
  if (metric) query.set("metric", metric);
  const data = await api("/api/curves?" + query);
  const series = data.curves.map((c) => ({ name: c.name, x: c.x, y: c.y }));
  const marks = data.curves.flatMap((c) => c.marks);
  drawChart(target, series, { marks, id: "curves", xLabel: X_LABELS[data.x] + " / " + data.metric,
    empty: data.notes.join("; ") || "no evaluations yet" });
  return data;
}

async function runPage(ref) {
  const head = el("div");
  const controlsHolder = el("div");
  const chart = el("div", { id: "chart" });
  const timeline = el("div", { id: "timeline" });
  const instances = el("div", { id: "instances" });
  const costLines = el("div", { id: "cost-lines" });
  const log = el("pre", { id: "log" });
  const recipe = el("pre", { id: "recipe" });
  const buttons = el("div", { class: "filters" });
  page.replaceChildren(head, buttons, controlsHolder, chart,
    el("h2", {}, "State timeline"), timeline,
    el("div", { class: "grid2" },
      el("div", {}, el("h2", {}, "Instances"), instances),
      el("div", {}, el("h2", {}, "Cost lines"), costLines)),
    el("div", { class: "grid2" },
      el("div", {}, el("h2", {}, "job.log (tail)"), log),
      el("div", {}, el("h2", {}, "Recipe"), recipe)));
  let controls = null;
  async function refresh() {
    const data = await api("/api/run/" + encodeURIComponent(ref));
    const s = data.summary;
    head.replaceChildren(el("h1", {}, s.name, " ", el("span", { class: "state-" + s.state, id: "run-state" }, s.state)),
      el("p", { class: "muted" }, `${s.what} · ${s.cloud} ${s.type} ${s.zone} · elapsed ${duration(s.elapsed_s)}`
        + ` · ETA ${duration(s.eta_s)} · cost ${usd(s.cost_usd)} (projected ${usd(s.projected_usd)}) · best ${best(s.best)}`),
      s.message ? el("p", {}, s.message) : "",
      data.tensorboard ? link(data.tensorboard, "TensorBoard view") : "");
    buttons.replaceChildren(actionButton("stop", s), actionButton("resume", s));
    if (!controls && data.metrics.length) {
      controls = curveControls(data.metrics, () => drawCurves(chart, [s.id], controls.metric.value, controls.axis.value));
      controls.metric.value = data.metrics.includes("test_acc") ? "test_acc" : data.metrics[0];
      controlsHolder.replaceChildren(controls.box);
    }
    if (controls) await drawCurves(chart, [s.id], controls.metric.value, controls.axis.value);
    else chart.replaceChildren(el("p", { class: "muted" }, "no evaluations yet"));
    timeline.replaceChildren(table([
      { label: "at (UTC)", cell: (t) => clock(t.at) },
      { label: "state", cell: (t) => el("span", { class: "state-" + t.to }, t.to) },
      { label: "why", cell: (t) => t.reason },
    ], [...data.transitions, ...data.events.map((e) => ({ at: e.at, to: e.kind, reason: e.message }))]
      .sort((a, b) => a.at - b.at), (t) => ({ class: "timeline-row" })));
    instances.replaceChildren(table([
      { label: "instance", cell: (i) => i.id },
      { label: "type", cell: (i) => i.type },
      { label: "market", cell: (i) => i.market },
      { label: "zone", cell: (i) => i.zone },
      { label: "USD/h", num: true, cell: (i) => i.price === null ? "-" : i.price.toFixed(4) },
      { label: "state", cell: (i) => i.state },
      { label: "end", cell: (i) => i.end_reason },
    ], data.instances));
    costLines.replaceChildren(table([
      { label: "kind", cell: (c) => c.kind },
      { label: "instance", cell: (c) => c.instance },
      { label: "quantity", num: true, cell: (c) => `${+c.quantity.toPrecision(6)} ${c.unit}` },
      { label: "USD", num: true, cell: (c) => usd(c.usd) },
      { label: "on-demand", num: true, cell: (c) => usd(c.on_demand_usd) },
    ], data.cost_lines));
    const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.textContent = data.log;
    if (atBottom) log.scrollTop = log.scrollHeight;
    recipe.textContent = data.recipe || s.what;
  }
  poll(refresh);
}

function actionButton(action, run) {
  const live = !["succeeded", "failed", "stopped"].includes(run.state);
  const wanted = action === "stop" ? live : ["stopped", "failed"].includes(run.state);
  return el("button", { id: action + "-run", ...(wanted ? {} : { disabled: "" }), onclick: async (e) => {
    if (!confirm(`${action} run ${run.name}?`)) return;
    e.target.disabled = true;
    try {
      await api(`/api/run/${run.id}/${action}`, { method: "POST" });
      setStatus(`${action}: done`);
    } catch (error) {
      setStatus(`${action}: ${error.message}`, true);
    }
  } }, action);
}

async function comparePage() {
  const runs = (new URLSearchParams(location.search).get("runs") || "").split(",").filter(Boolean);
  const chart = el("div", { id: "chart" });
  page.replaceChildren(el("h1", {}, "Compare runs"), chart);
  if (!runs.length) {
    chart.replaceChildren(el("p", { class: "muted" }, "select runs on the runs page, then compare them"));
    return;
  }
  const first = await api("/api/curves?" + new URLSearchParams({ runs: runs.join(",") }));
  const metrics = [first.metric];
  for (const ref of runs) {
    const detail = await api("/api/run/" + encodeURIComponent(ref)).catch(() => ({ metrics: [] }));
    detail.metrics.forEach((m) => metrics.includes(m) || metrics.push(m));
  }
  const controls = curveControls(metrics, () => drawCurves(chart, runs, controls.metric.value, controls.axis.value));
  page.insertBefore(controls.box, chart);
  poll(() => drawCurves(chart, runs, controls.metric.value, controls.axis.value));
}

// ------------------------------------------------------------------ sweep
async function sweepPage(ref) {
  const head = el("div");
  const board = el("div", { id: "leaderboard" });
  const coords = el("div", { id: "parallel" });
  page.replaceChildren(head, el("h2", {}, "Hyperparameters against the metric"), coords,
    el("h2", {}, "Leaderboard"), board);
  async function refresh() {
    const data = await api("/api/sweep/" + encodeURIComponent(ref));
    head.replaceChildren(el("h1", {}, "Sweep ", data.name, " ", el("span", { class: "muted" }, data.state)),
      el("p", { class: "muted" }, `${data.recipe} · ${data.metric} (${data.mode}) · ${data.trials.length} trials `,
        link("/compare?runs=" + data.trials.filter((t) => t.run_id).map((t) => t.run_id).join(","), "compare all")));
    board.replaceChildren(table([
      { label: "rank", num: true, cell: (t) => t.rank ?? "-" },
      { label: "trial", num: true, cell: (t) => t.trial },
      { label: "run", cell: (t) => t.run_id ? link("/run/" + t.run_id, t.run) : "-" },
      { label: "status", cell: (t) => t.status },
      ...data.params.map((p) => ({ label: p, cell: (t) => t.params[p] ?? "" })),
      { label: data.metric, num: true, cell: (t) => t.best === null ? "-" : +t.best.toPrecision(4) },
      { label: "epochs", num: true, cell: (t) => t.epochs },
      { label: "cost", num: true, cell: (t) => usd(t.cost_usd) },
      { label: "cost to target", num: true, cell: (t) => usd(t.cost_to_target_usd) },
      { label: "why", cell: (t) => t.status === "pruned" ? t.reason || "pruned" : "" },
    ], data.trials, (t) => ({ class: "trial-row" + (t.status === "pruned" ? " pruned" : ""),
      "data-status": t.status, title: t.reason || "" })));
    drawParallel(coords, data);
  }
  poll(refresh);
}

function drawParallel(target, data) {
  const axes = [...data.params, data.metric];
  const width = target.clientWidth || 900;
  const height = 300;
  const pad = { left: 50, right: 50, top: 24, bottom: 24 };
  const chart = svg("svg", { class: "chart", id: "parallel-chart", viewBox: `0 0 ${width} ${height}` });
  chart.style.height = height + "px";
  const value = (t, axis) => (axis === data.metric ? t.best : t.params[axis]);
  const scales = axes.map((axis) => {
    const raw = data.trials.map((t) => value(t, axis)).filter((v) => v !== null && v !== undefined);
    const numeric = raw.every((v) => !isNaN(parseFloat(v)));
    if (numeric) {
      const nums = raw.map(Number);
      const [lo, hi] = [Math.min(...nums), Math.max(...nums)];
      return { pos: (v) => (hi === lo ? 0.5 : (Number(v) - lo) / (hi - lo)), lo, hi };
    }
    const levels = [...new Set(raw.map(String))];
    return { pos: (v) => (levels.length < 2 ? 0.5 : levels.indexOf(String(v)) / (levels.length - 1)), lo: levels[0], hi: levels.at(-1) };
  });
  const ax = (i) => pad.left + (i * (width - pad.left - pad.right)) / Math.max(1, axes.length - 1);
  const ay = (p) => height - pad.bottom - p * (height - pad.top - pad.bottom);
  axes.forEach((axis, i) => {
    chart.append(svg("line", { class: "axis", x1: ax(i), x2: ax(i), y1: pad.top, y2: height - pad.bottom }));
    const label = svg("text", { x: ax(i), y: 14, "text-anchor": "middle" });
    label.textContent = axis;
    const lo = svg("text", { x: ax(i) + 4, y: height - pad.bottom + 14 });
    lo.textContent = scales[i].lo ?? "";
    const hi = svg("text", { x: ax(i) + 4, y: pad.top + 10 });
    hi.textContent = scales[i].hi ?? "";
    chart.append(label, lo, hi);
  });
  data.trials.forEach((t, k) => {
    const points = axes.map((axis, i) => {
      const v = value(t, axis);
      return v === null || v === undefined ? null : `${ax(i).toFixed(1)},${ay(scales[i].pos(v)).toFixed(1)}`;
    }).filter(Boolean).join(" ");
    const pruned = t.status === "pruned";
    const line = svg("polyline", { class: "pc-line" + (pruned ? " pruned" : ""), points,
      stroke: COLORS[k % COLORS.length], "data-trial": t.trial, "data-status": t.status });
    const title = svg("title");
    title.textContent = `trial ${t.trial}: ${t.status}${pruned && t.reason ? " (" + t.reason + ")" : ""}`;
    line.append(title);
    chart.append(line);
  });
  target.replaceChildren(chart);
}

// ------------------------------------------------------------------ cost
async function costPage() {
  const by = el("select", { id: "cost-by" }, ["run", "day", "instance-type"].map((b) => el("option", { value: b }, b)));
  const sweep = el("select", { id: "cost-sweep" }, el("option", { value: "" }, "every run"));
  const head = el("div", { id: "cost-head" });
  const spend = el("div", { id: "spend" });
  const prices = el("div", { id: "prices" });
  const daily = el("div", { id: "daily" });
  const rows = el("div", { id: "cost-rows" });
  page.replaceChildren(el("h1", {}, "Cost"),
    el("div", { class: "filters" }, el("label", {}, "rows per ", by), el("label", {}, "sweep ", sweep)),
    head, el("h2", {}, "Cumulative spend over time"), spend,
    el("h2", {}, "Spot prices behind it (USD/h)"), prices,
    el("h2", {}, "Spend per day (UTC)"), daily, el("h2", {}, "Rows"), rows);
  (await api("/api/sweeps")).forEach((s) => sweep.append(el("option", { value: s.id }, s.name)));
  by.addEventListener("change", () => refresh());
  sweep.addEventListener("change", () => refresh());
  async function refresh() {
    const query = new URLSearchParams({ by: by.value });
    if (sweep.value) query.set("sweep", sweep.value);
    const data = await api("/api/cost?" + query);
    const t = data.total;
    head.replaceChildren(
      el("p", {}, "total ", el("span", { class: "big", id: "cost-total", title: String(t.cost_usd) }, usd(t.cost_usd)),
        "  · on-demand would have cost ", el("span", { id: "cost-on-demand", title: String(t.on_demand_usd) }, usd(t.on_demand_usd)),
        "  · saving ", el("span", { id: "cost-saving" }, t.saving_pct === null ? "-" : t.saving_pct + "%")),
      ...data.errors.map((e) => el("p", { class: "error" }, "cannot price " + e)));
    const timeAxis = { xFormat: clock, xLabel: "time (UTC)" };
    drawChart(spend, data.spend.map((s) => ({ name: s.name, x: s.points.map((p) => p[0]), y: s.points.map((p) => p[1]) })),
      { ...timeAxis, id: "spend-chart", yFromZero: true, yFormat: (v) => "$" + v.toPrecision(3), empty: "no priced instance time yet" });
    drawChart(prices, data.prices.map((p) => {
      const x = [], y = [];
      p.steps.forEach(([at, price], i) => { if (i) { x.push(at); y.push(p.steps[i - 1][1]); } x.push(at); y.push(price); });
      return { name: p.name, x, y, noDots: true };
    }), { ...timeAxis, id: "price-chart", height: 200, empty: "no spot prices (local runs are free)" });
    daily.replaceChildren(table([
      { label: "day", cell: (d) => d.day }, { label: "USD", num: true, cell: (d) => usd(d.usd) },
    ], data.days));
    const key = data.by.replace("-", "_");
    rows.replaceChildren(table([
      { label: data.by, cell: (r) => data.by === "run" && r.id ? link("/run/" + r.id, r[key]) : r[key] },
      { label: "instance-h", num: true, cell: (r) => r.instance_hours.toFixed(3) },
      { label: "spot", num: true, cell: (r) => usd(r.spot_usd) },
      { label: "storage", num: true, cell: (r) => usd(r.storage_usd) },
      { label: "total", num: true, cell: (r) => usd(r.cost_usd) },
      { label: "on-demand", num: true, cell: (r) => usd(r.on_demand_usd) },
      { label: "saving", num: true, cell: (r) => r.saving_pct === null ? "-" : r.saving_pct + "%" },
    ], data.rows, () => ({ class: "cost-row" })));
  }
  poll(refresh);
}

// ------------------------------------------------------------------ routing
async function sweepNav() {
  const sweeps = await api("/api/sweeps").catch(() => []);
  document.getElementById("sweep-nav").replaceChildren(...sweeps.slice(-5).map((s) => link("/sweep/" + s.id, "sweep " + s.name)));
}

function route() {
  document.querySelectorAll("a[data-nav]").forEach((a) => { a.href = withToken(a.getAttribute("href")); });
  sweepNav();
  const path = location.pathname;
  const arg = decodeURIComponent(path.split("/")[2] || "");
  if (path.startsWith("/run/")) return runPage(arg);
  if (path.startsWith("/sweep/")) return sweepPage(arg);
  if (path === "/compare") return comparePage();
  if (path === "/cost") return costPage();
  return runsPage();
}

route().catch((error) => setStatus(error.message, true));
