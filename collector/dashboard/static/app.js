// app.js: reads the server's JSON API and draws the dashboard.
//
// The roles the server plays come from dashboard/roles.json; the page asks
// only for the endpoints of those roles, so it makes no failing request.
// It redraws every 10 s while "refresh" is checked, keeping the categories
// selected in each metric's series. After each draw body[data-renders]
// counts the draws (browser tests wait for it).
"use strict";

const state = {
  // selected maps a metric name to the Set of series names shown: a Map,
  // as a plain object would answer names like "toString" or "constructor"
  // (valid metric names) with its prototype's functions.
  selected: new Map(),
  renders: 0,
  timer: null,
  busy: false,
};

// maxBars and maxLegend bound the bars of the latest period's chart and
// the categories offered in a series' legend.
const maxBars = 60;
const maxLegend = 40;

function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined) continue;
    e.appendChild(typeof k === "string" ? document.createTextNode(k) : k);
  }
  return e;
}

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store", headers: { Accept: "application/json" } });
  if (!r.ok) {
    let msg = "";
    try {
      msg = (await r.json()).error || "";
    } catch (_) {
      /* not JSON */
    }
    throw new Error(`GET /${path}: ${r.status} ${r.statusText}${msg ? ": " + msg : ""}`);
  }
  return r.json();
}

// metricPath is the API path of a metric (names may contain slashes).
function metricPath(name, horizon) {
  return "v1/metrics/" + name.split("/").map(encodeURIComponent).join("/") + (horizon ? "" : "?horizon=0");
}

async function load() {
  const roles = await getJSON("dashboard/roles.json");
  const data = { roles, plan: null, pools: null, list: null, details: {} };
  data.plan = await getJSON("v1/plan");
  if (roles.shuffler) data.pools = await getJSON("v1/pools");
  if (roles.collector) {
    data.list = await getJSON("v1/metrics");
    let horizonAsked = false;
    for (const m of data.list.metrics) {
      // The horizon covers every metric of the plan: ask for it once.
      const ask = m.in_plan && !horizonAsked;
      // One metric that fails (a plugin gone, an estimate the server
      // cannot encode) shows its error; the others still draw.
      try {
        data.details[m.name] = await getJSON(metricPath(m.name, ask));
      } catch (e) {
        data.details[m.name] = { error: e.message };
        continue;
      }
      if (ask && data.details[m.name].horizon) horizonAsked = true;
    }
  }
  return data;
}

async function refresh() {
  if (state.busy) return;
  state.busy = true;
  const status = document.getElementById("status");
  const errBox = document.getElementById("error");
  try {
    const data = await load();
    render(data);
    errBox.hidden = true;
    status.textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    errBox.hidden = false;
    errBox.textContent = "Could not read the server: " + e.message + " (the page keeps its last data and retries)";
    status.textContent = "update failed " + new Date().toLocaleTimeString();
  } finally {
    state.busy = false;
    state.renders++;
    document.body.dataset.renders = String(state.renders);
  }
}

function render(data) {
  const roles = [];
  if (data.roles.shuffler) roles.push("shuffler");
  if (data.roles.collector) roles.push("collector");
  document.getElementById("roles").textContent = roles.join(" + ") + (data.list ? " · epoch " + data.list.epoch : "");
  renderPlan(data.plan);
  renderPools(data.pools);
  renderIngest(data.list);
  const horizon = Object.values(data.details).map((d) => d.horizon).find((x) => x);
  renderPrivacy(data.plan, horizon, !!data.list, data.list && data.list.scope);
  renderMetrics(data);
  document.body.dataset.ready = "true";
}

function kv(rows) {
  return h("table", { class: "kv" }, rows.map(([k, v]) => h("tr", {}, h("td", { text: k }), h("td", { class: "num" }, v))));
}

function renderPlan(plan) {
  const box = document.getElementById("plan");
  const body = document.getElementById("plan-body");
  body.replaceChildren();
  if (!plan) return;
  box.hidden = false;
  body.appendChild(
    kv([
      ["target", `(ε, δ) = (${fmt.eps(plan.target.eps)}, ${fmt.delta(plan.target.delta)}) per user over ${plan.horizon || 1} period(s)`],
      ["n_min", fmt.int(plan.n_min)],
      ["max fake fraction", plan.max_fake_fraction
        ? `${plan.max_fake_fraction} of a batch's valid reports may be fake: every guarantee counts its honest floor, n − ⌊${plan.max_fake_fraction} n⌋`
        : "0: every valid report assumed honest"],
      ["floor", plan.floor
        ? `the shuffler adds ${fmt.int(plan.floor)} blanket draws to every batch: every guarantee is stated with them, and from them alone`
        : "0: no blanket draws"],
      ["travel", plan.travel || "separate"],
      ["period", plan.period ? fmt.duration(plan.period) : "none"],
      ["horizon", plan.horizon ? `${plan.horizon} periods` : "–"],
    ]),
  );
  const t = h("table", { class: "plan-metrics" }, h("tr", {}, ["metric", "plugin", "ε0", "δ", "categories"].map((s, i) => h("th", { class: i >= 2 ? "num" : null, text: s }))));
  for (const m of plan.metrics) {
    t.appendChild(
      h("tr", { "data-metric": m.name },
        h("td", { text: m.name }),
        h("td", { text: m.plugin + (m.version ? " v" + m.version : "") }),
        h("td", { class: "num eps0", text: m.eps0 ? fmt.eps(m.eps0) : "uncalibrated" }),
        h("td", { class: "num", text: m.delta ? fmt.delta(m.delta) : "–" }),
        h("td", { class: "num", text: m.categories ? String(m.categories.length) : "–" }),
      ),
    );
  }
  body.appendChild(h("h3", { text: "Metrics" }));
  body.appendChild(t);
}

function meter(frac, over) {
  const m = h("div", { class: "meter" });
  m.appendChild(h("span", { class: over ? "over" : null, style: `width:${Math.max(0, Math.min(1, frac)) * 100}%` }));
  return m;
}

// scopeNote says against whom the stated guarantees hold (the API's
// scope; docs/threat-model.md).
function scopeNote(scope) {
  if (!scope) return null;
  return h("div", { class: "scope" },
    h("p", { class: "scope-against", text: `Holds against ${scope.against}, provided that:` }),
    h("ul", {}, (scope.provided || []).map((p) => h("li", { text: p }))),
    h("p", { class: scope.same_operator ? "warn scope-local" : "muted scope-local", text: `Not against ${scope.local_only}.` }),
  );
}

function renderPrivacy(plan, hz, isCollector, scope) {
  const box = document.getElementById("privacy");
  const body = document.getElementById("privacy-body");
  body.replaceChildren();
  if (!isCollector || !plan) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  if (!hz) {
    body.appendChild(h("p", { class: "muted", text: "No reporting period has data yet." }));
    const note = scopeNote(scope);
    if (note) body.appendChild(note);
    return;
  }
  const known = hz.eps !== null && hz.eps !== undefined;
  body.appendChild(
    h("p", {},
      h("span", { class: "big horizon-eps", text: known ? `ε = ${fmt.eps(hz.eps)}` : "ε unknown" }),
      ` of target ${fmt.eps(hz.target_eps)}, δ = ${fmt.delta(hz.delta)} (target ${fmt.delta(hz.target_delta)})`,
    ),
  );
  if (known) body.appendChild(meter(hz.eps / hz.target_eps, hz.eps > hz.target_eps));
  body.appendChild(
    kv([
      ["covers", `every user, any ${hz.periods} consecutive periods of ${fmt.duration(hz.period)}`],
      ["weakest window", hz.window ? `${fmt.day(hz.window.start)} to ${fmt.day(hz.window.end)}` : "–"],
      ["reports composed", `${hz.reports} per user`],
      ["max fake fraction", hz.max_fake_fraction ? `${hz.max_fake_fraction}: each batch at its honest floor` : "0"],
    ]),
  );
  if (hz.note) body.appendChild(h("p", { class: "muted", text: hz.note }));
  if (hz.floor) body.appendChild(floorCard(hz.floor, hz.target_eps));
  const note = scopeNote(scope);
  if (note) body.appendChild(note);
}

// floorCard shows the horizon's guarantee from the shuffler's blanket
// draws alone: it holds whatever the other reports are, fakes included.
function floorCard(fl, target) {
  const known = fl.eps !== null && fl.eps !== undefined;
  const box = h("div", { class: "floor" });
  box.appendChild(h("h3", { text: "From the floor alone" }));
  box.appendChild(
    h("p", {},
      h("span", { class: "big floor-eps", text: known ? `ε = ${fmt.eps(fl.eps)}` : "ε unknown" }),
      `, δ = ${fmt.delta(fl.delta)}: each report among its batch's ${fmt.int(fl.draws)} blanket draws, whatever the other reports are`,
    ),
  );
  if (known) box.appendChild(meter(fl.eps / target, fl.eps > target));
  if (fl.note) box.appendChild(h("p", { class: "muted", text: fl.note }));
  return box;
}

function renderPools(pools) {
  const box = document.getElementById("shuffler");
  const body = document.getElementById("shuffler-body");
  body.replaceChildren();
  if (!pools) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  body.appendChild(
    kv([
      ["n_min", fmt.int(pools.n_min)],
      ["awaiting the collector's acknowledgement (every replica)", `${fmt.int(pools.outgoing)} batches`],
      ["released by this process since it started", `${fmt.int(pools.batches_released)} batches, ${fmt.int(pools.reports_released)} reports`],
    ]),
  );
  if (!pools.pools.length) {
    body.appendChild(h("p", { class: "muted", text: "No reports waiting: every pool has been released." }));
    return;
  }
  const t = h("table", { class: "pools" }, h("tr", {}, ["pool", "period", "reports", "", "fill"].map((s) => h("th", { text: s }))));
  for (const p of pools.pools) {
    const frac = p.reports / pools.n_min;
    t.appendChild(
      h("tr", { "data-pool": p.pool },
        h("td", { text: p.pool }),
        h("td", { text: p.period ? fmt.day(p.period.start) : "–" }),
        h("td", { class: "num", text: fmt.int(p.reports) }),
        h("td", { style: "width:220px" }, meter(frac, false)),
        h("td", { class: "num" }, h("span", { class: "pill" + (frac >= 1 ? "" : " warn"), text: frac >= 1 ? "ready" : `${Math.floor(frac * 100)}% of n_min` })),
      ),
    );
  }
  body.appendChild(t);
}

// storedPeriodsShown is how many of the latest periods the ingest card
// lists from the shared store.
const storedPeriodsShown = 8;

function renderIngest(list) {
  const box = document.getElementById("ingest");
  const body = document.getElementById("ingest-body");
  body.replaceChildren();
  if (!list) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  const st = list.stored;
  if (st) {
    body.appendChild(h("h3", { text: "Stored: every replica (the shared store)" }));
    body.appendChild(
      kv([
        ["batches", fmt.int(st.batches)],
        ["valid reports", fmt.int(st.reports)],
        ["malformed reports", fmt.int(st.malformed)],
      ]),
    );
    const recent = st.periods.slice(-storedPeriodsShown).reverse();
    if (recent.length) {
      const t = h("table", { class: "stored" }, h("tr", {}, ["period", "batches", "held", "valid reports", "malformed"].map((s) => h("th", { text: s }))));
      for (const p of recent) {
        t.appendChild(
          h("tr", { "data-period": p.start },
            h("td", { text: fmt.day(p.start) }),
            h("td", { class: "num", text: fmt.int(p.batches) }),
            h("td", { class: "num", text: fmt.int(p.held) }),
            h("td", { class: "num", text: fmt.int(p.reports) }),
            h("td", { class: "num", text: fmt.int(p.malformed) }),
          ),
        );
      }
      body.appendChild(t);
    }
  }
  const s = list.ingest;
  body.appendChild(h("h3", { text: "This process, since it started" }));
  body.appendChild(
    kv([
      ["batches ingested", fmt.int(s.batches)],
      ["duplicates acknowledged", fmt.int(s.duplicates)],
      ["undecodable / refused batches", `${fmt.int(s.bad)} / ${fmt.int(s.refused)}`],
      ["valid reports", fmt.int(s.reports)],
      ["malformed reports", fmt.int(s.malformed)],
    ]),
  );
}

// periodsOf returns a metric's periods with data, one per period start:
// where two epochs share a period, the one with more reports.
function periodsOf(detail) {
  const by = new Map();
  for (const p of detail.periods) {
    const k = p.start || "";
    const cur = by.get(k);
    if (!cur || p.n > cur.n) by.set(k, p);
  }
  return [...by.values()].sort((a, b) => (a.start || "").localeCompare(b.start || ""));
}

function isNumeric(p) {
  return p.estimates && p.estimates.length > 0 && p.estimates.every((e) => e.label === "sum" || e.label === "mean");
}

function renderMetrics(data) {
  const root = document.getElementById("metrics");
  root.replaceChildren();
  if (!data.list) return;
  for (const m of data.list.metrics) {
    const detail = data.details[m.name];
    let sec;
    try {
      if (detail.error) throw new Error(detail.error);
      sec = renderMetric(m, detail, data.plan);
    } catch (e) {
      sec = h("section", { class: "card metric", "data-metric": m.name },
        h("div", { class: "metric-head" }, h("h2", { text: m.name }), h("span", { class: "pill", text: m.plugin })),
        h("p", { class: "error", text: "Could not draw this metric: " + e.message }));
    }
    root.appendChild(sec);
  }
}

function renderMetric(summary, detail, plan) {
  const sec = h("section", { class: "card metric", "data-metric": summary.name });
  const periods = periodsOf(detail);
  const latest = periods[periods.length - 1];
  sec.appendChild(
    h("div", { class: "metric-head" },
      h("h2", { text: summary.name }),
      h("span", { class: "pill", text: summary.plugin }),
      summary.in_plan ? null : h("span", { class: "pill warn", text: "not in the current plan" }),
      latest ? h("span", { class: "muted", text: `ε0 = ${fmt.eps(latest.eps0)} · ${periods.length} period(s) with data · ${fmt.int(summary.n)} valid reports, ${fmt.int(summary.malformed)} malformed` }) : null,
    ),
  );
  if (!latest) {
    sec.appendChild(h("p", { class: "muted", text: "No batch ingested yet." }));
    return sec;
  }
  const grid = h("div", { class: "grid" });
  sec.appendChild(grid);
  grid.appendChild(latestPanel(summary.name, latest));
  grid.appendChild(seriesPanel(summary.name, periods, latest));
  grid.appendChild(countsPanel(periods, plan));
  grid.appendChild(epsPanel(periods));
  return sec;
}

function latestPanel(name, p) {
  const box = h("div", { class: "latest" });
  const conf = p.confidence ? Math.round(p.confidence * 100) + "%" : "";
  box.appendChild(h("h3", { text: `Latest period ${fmt.day(p.start)}: estimates with ${conf} intervals (n = ${fmt.int(p.n)})` }));
  if (!p.estimates) {
    box.appendChild(h("p", { class: "error", text: "No estimate: " + (p.estimate_error || "unknown reason") }));
    return box;
  }
  if (isNumeric(p)) {
    for (const e of p.estimates) {
      box.appendChild(h("p", {}, h("span", { class: "big", text: `${e.label} ${fmt.num(e.value)}` }), ` [${fmt.num(e.lo)}, ${fmt.num(e.hi)}]`));
    }
  } else {
    // Past maxBars categories the chart shows the largest (the table has
    // them all).
    let shown = p.estimates;
    if (shown.length > maxBars) {
      shown = shown.slice().sort((a, b) => b.value - a.value).slice(0, maxBars);
      box.appendChild(h("p", { class: "muted", text: `the ${maxBars} largest of ${p.estimates.length} categories; all are in the numbers below` }));
    }
    box.appendChild(
      charts.barChart({
        title: `${name}, ${fmt.day(p.start)}`,
        labels: shown.map((e) => e.label),
        values: shown.map((e) => e.value),
        lo: shown.map((e) => e.lo),
        hi: shown.map((e) => e.hi),
        rotate: shown.length > 6,
        yLabel: "users",
      }),
    );
  }
  const t = h("table", { class: "estimates" }, h("tr", {}, ["", "estimate", "interval low", "interval high"].map((s, i) => h("th", { class: i ? "num" : null, text: s }))));
  for (const e of p.estimates) {
    t.appendChild(
      h("tr", { "data-label": e.label },
        h("td", { text: e.label }),
        h("td", { class: "num value", text: fmt.num(e.value) }),
        h("td", { class: "num lo", text: fmt.num(e.lo) }),
        h("td", { class: "num hi", text: fmt.num(e.hi) }),
      ),
    );
  }
  box.appendChild(h("details", {}, h("summary", { text: "numbers" }), t));
  return box;
}

function seriesPanel(name, periods, latest) {
  const box = h("div", { class: "series-panel" });
  box.appendChild(h("h3", { text: "Over periods (band: interval)" }));
  const labels = (latest.estimates || []).map((e) => e.label);
  if (!labels.length) return box;
  if (!state.selected.has(name)) {
    // Default: the five largest categories of the latest period, or the sum.
    const order = latest.estimates.slice().sort((a, b) => b.value - a.value).map((e) => e.label);
    state.selected.set(name, new Set(isNumeric(latest) ? ["sum"] : order.slice(0, 5)));
  }
  const sel = state.selected.get(name);
  const color = (l) => charts.palette[labels.indexOf(l) % charts.palette.length];
  const legend = h("div", { class: "legend" });
  const holder = h("div", {});
  const draw = () => {
    const shown = labels.filter((l) => sel.has(l));
    const pick = (l, f) => periods.map((p) => {
      const e = (p.estimates || []).find((x) => x.label === l);
      return e ? e[f] : null;
    });
    holder.replaceChildren(
      charts.lineChart({
        title: `${name} over periods`,
        labels: periods.map((p) => fmt.short(p.start)),
        series: shown.map((l) => ({ name: l, color: color(l), values: pick(l, "value"), lo: pick(l, "lo"), hi: pick(l, "hi") })),
      }),
    );
  };
  // Past maxLegend categories the legend offers the largest of the latest
  // period and those already selected.
  let offered = labels;
  if (labels.length > maxLegend) {
    const top = new Set(latest.estimates.slice().sort((a, b) => b.value - a.value).slice(0, maxLegend).map((e) => e.label));
    offered = labels.filter((l) => top.has(l) || sel.has(l));
  }
  for (const l of offered) {
    const cb = h("input", { type: "checkbox", "data-series": l });
    cb.checked = sel.has(l);
    cb.addEventListener("change", () => {
      if (cb.checked) sel.add(l);
      else sel.delete(l);
      draw();
    });
    legend.appendChild(h("label", {}, cb, h("span", { class: "swatch", style: `background:${color(l)}` }), l));
  }
  box.appendChild(legend);
  box.appendChild(holder);
  draw();
  return box;
}

function countsPanel(periods, plan) {
  const box = h("div", { class: "counts" });
  const nMin = plan ? plan.n_min : null;
  box.appendChild(h("h3", { text: "Valid reports per period against n_min" }));
  box.appendChild(
    charts.barChart({
      title: "valid reports per period",
      labels: periods.map((p) => fmt.short(p.start)),
      values: periods.map((p) => p.n),
      ref: nMin ? { value: nMin, label: `n_min ${fmt.int(nMin)}` } : null,
      barClass: (i) => (nMin && periods[i].n < nMin ? "below" : ""),
      height: 200,
    }),
  );
  const bad = periods.filter((p) => p.malformed > 0);
  box.appendChild(
    h("p", { class: "muted malformed" },
      bad.length ? "malformed reports: " + bad.map((p) => `${fmt.day(p.start)}: ${fmt.int(p.malformed)}`).join(", ") : "no malformed reports in these periods",
    ),
  );
  return box;
}

function epsPanel(periods) {
  const box = h("div", { class: "eps-panel" });
  box.appendChild(h("h3", { text: "Central ε per period (weakest batch)" }));
  const vals = periods.map((p) => (p.guarantee ? p.guarantee.eps : null));
  const series = [{ name: "ε", color: "#067647", values: vals }];
  if (periods.some((p) => p.floor)) {
    series.push({ name: "ε, floor alone", color: "#b54708", values: periods.map((p) => (p.floor && p.floor.eps !== null ? p.floor.eps : null)) });
  }
  box.appendChild(
    charts.lineChart({
      title: "central eps per period",
      labels: periods.map((p) => fmt.short(p.start)),
      series,
      height: 200,
    }),
  );
  const last = periods[periods.length - 1];
  if (last.guarantee) {
    const honest = last.guarantee.honest ? `, counted as ${fmt.int(last.guarantee.honest)} honest (max fake fraction ${last.max_fake_fraction})` : "";
    const draws = last.guarantee.draws ? ` and ${fmt.int(last.guarantee.draws)} blanket draws` : "";
    box.appendChild(h("p", { class: "muted", text: `latest: (ε, δ) = (${fmt.eps(last.guarantee.eps)}, ${fmt.delta(last.guarantee.delta)}) for its batch of ${fmt.int(last.guarantee.messages)} messages${honest}${draws}` }));
  }
  if (last.floor) {
    const known = last.floor.eps !== null && last.floor.eps !== undefined;
    box.appendChild(h("p", { class: "muted floor-latest", text: `floor alone: ${known ? `(ε, δ) = (${fmt.eps(last.floor.eps)}, ${fmt.delta(last.floor.delta)})` : "ε unknown"} among ${fmt.int(last.floor.draws)} blanket draws, whatever the other reports are` }));
  }
  return box;
}

function schedule() {
  clearInterval(state.timer);
  if (document.getElementById("auto").checked) state.timer = setInterval(refresh, 10000);
}

document.getElementById("auto").addEventListener("change", schedule);
refresh();
schedule();
