// charts.js: the two SVG charts the dashboard draws, without a library.
//
// barChart: one bar per label, optional error bars [lo, hi] and a dashed
// reference line (n_min). lineChart: one line per series over the same x
// labels, optional band [lo, hi] per series and a reference line.
"use strict";

const charts = (() => {
  const NS = "http://www.w3.org/2000/svg";

  function el(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (parent) parent.appendChild(e);
    return e;
  }

  function text(parent, x, y, s, attrs) {
    const t = el("text", Object.assign({ x, y }, attrs || {}), parent);
    t.textContent = s;
    return t;
  }

  // ticks returns about n round values covering [lo, hi].
  function ticks(lo, hi, n) {
    if (!(hi > lo)) hi = lo + 1;
    const raw = (hi - lo) / n;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw);
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
      out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    }
    return out;
  }

  // extent returns [lo, hi] over the finite values of the arrays, with 0
  // included when zero is true.
  function extent(arrays, zero) {
    let lo = zero ? 0 : Infinity;
    let hi = zero ? 0 : -Infinity;
    for (const a of arrays) {
      for (const v of a || []) {
        if (v === null || v === undefined || !isFinite(v)) continue;
        lo = Math.min(lo, v);
        hi = Math.max(hi, v);
      }
    }
    if (!isFinite(lo)) return [0, 1];
    if (hi === lo) hi = lo + (lo === 0 ? 1 : Math.abs(lo) * 0.1);
    return [lo, hi];
  }

  // frame draws the y axis with grid lines and returns the plot geometry.
  function frame(svg, o, lo, hi) {
    const m = { left: 58, right: 12, top: 12, bottom: o.rotate ? 62 : 28 };
    const w = o.width - m.left - m.right;
    const h = o.height - m.top - m.bottom;
    const ts = ticks(lo, hi, 5);
    lo = Math.min(lo, ts[0]);
    hi = Math.max(hi, ts[ts.length - 1]);
    const y = (v) => m.top + h - ((v - lo) / (hi - lo)) * h;
    for (const t of ts) {
      el("line", { class: "grid-line", x1: m.left, x2: m.left + w, y1: y(t), y2: y(t) }, svg);
      text(svg, m.left - 6, y(t) + 4, fmt.axis(t), { "text-anchor": "end" });
    }
    el("line", { class: "axis", x1: m.left, x2: m.left, y1: m.top, y2: m.top + h }, svg);
    el("line", { class: "axis", x1: m.left, x2: m.left + w, y1: y(Math.max(lo, Math.min(0, hi))), y2: y(Math.max(lo, Math.min(0, hi))) }, svg);
    if (o.yLabel) {
      text(svg, 12, m.top + h / 2, o.yLabel, { transform: `rotate(-90 12 ${m.top + h / 2})`, "text-anchor": "middle" });
    }
    return { m, w, h, y, lo, hi };
  }

  // xLabels writes the x labels under slots of width step starting at x0,
  // thinning them to fit.
  function xLabels(svg, f, labels, x, rotate) {
    const every = Math.max(1, Math.ceil(labels.length / (rotate ? 40 : 12)));
    labels.forEach((s, i) => {
      if (i % every !== 0 && i !== labels.length - 1) return;
      const yy = f.m.top + f.h + 14;
      if (rotate) {
        text(svg, x(i), yy, s, { "text-anchor": "end", transform: `rotate(-40 ${x(i)} ${yy})` });
      } else {
        text(svg, x(i), yy, s, { "text-anchor": "middle" });
      }
    });
  }

  function refLine(svg, f, ref) {
    if (!ref || !isFinite(ref.value)) return;
    const yy = f.y(ref.value);
    el("line", { class: "ref", x1: f.m.left, x2: f.m.left + f.w, y1: yy, y2: yy }, svg);
    text(svg, f.m.left + f.w, yy - 4, ref.label, { class: "ref-label", "text-anchor": "end" });
  }

  function tip(node, s) {
    el("title", {}, node).textContent = s;
  }

  // barChart draws o.values over o.labels, with error bars from o.lo and
  // o.hi when given, a reference line o.ref ({value, label}) and a class
  // per bar from o.barClass(i).
  function barChart(o) {
    o = Object.assign({ width: 560, height: 260 }, o);
    const svg = el("svg", { class: "chart bars", viewBox: `0 0 ${o.width} ${o.height}`, role: "img" });
    if (o.title) el("title", {}, svg).textContent = o.title;
    const [lo, hi] = extent([o.values, o.lo, o.hi, o.ref ? [o.ref.value] : []], true);
    const f = frame(svg, o, lo, hi * 1.04);
    const n = o.labels.length;
    const slot = f.w / Math.max(n, 1);
    const x = (i) => f.m.left + slot * (i + 0.5);
    const bw = Math.max(2, Math.min(40, slot * 0.7));
    const y0 = f.y(Math.max(f.lo, Math.min(0, f.hi)));
    o.values.forEach((v, i) => {
      if (v === null || !isFinite(v)) return;
      const yv = f.y(v);
      const cls = "bar" + (o.barClass ? " " + o.barClass(i) : "");
      const r = el("rect", { class: cls, x: x(i) - bw / 2, y: Math.min(yv, y0), width: bw, height: Math.max(1, Math.abs(y0 - yv)), "data-label": o.labels[i], "data-value": v }, svg);
      let t = `${o.labels[i]}: ${fmt.num(v)}`;
      if (o.lo && o.hi) t += ` [${fmt.num(o.lo[i])}, ${fmt.num(o.hi[i])}]`;
      tip(r, t);
      if (o.lo && o.hi && isFinite(o.lo[i]) && isFinite(o.hi[i])) {
        const g = el("g", { class: "err" }, svg);
        const a = f.y(o.hi[i]);
        const b = f.y(o.lo[i]);
        el("line", { class: "err", x1: x(i), x2: x(i), y1: a, y2: b }, g);
        el("line", { class: "err", x1: x(i) - bw / 4, x2: x(i) + bw / 4, y1: a, y2: a }, g);
        el("line", { class: "err", x1: x(i) - bw / 4, x2: x(i) + bw / 4, y1: b, y2: b }, g);
      }
    });
    refLine(svg, f, o.ref);
    xLabels(svg, f, o.labels, x, o.rotate);
    return svg;
  }

  // lineChart draws o.series ([{name, color, values, lo, hi}]) over o.labels,
  // each with a band [lo, hi] when given, and a reference line o.ref.
  function lineChart(o) {
    o = Object.assign({ width: 560, height: 260 }, o);
    const svg = el("svg", { class: "chart lines", viewBox: `0 0 ${o.width} ${o.height}`, role: "img" });
    if (o.title) el("title", {}, svg).textContent = o.title;
    const arrays = [];
    for (const s of o.series) arrays.push(s.values, s.lo, s.hi);
    if (o.ref) arrays.push([o.ref.value]);
    const [lo, hi] = extent(arrays, o.zero !== false);
    const f = frame(svg, o, lo, hi);
    const n = o.labels.length;
    const x = (i) => f.m.left + (n <= 1 ? f.w / 2 : (f.w * i) / (n - 1));
    const segments = (vals) => {
      // Split at missing values so a gap shows as a gap.
      const out = [];
      let cur = [];
      vals.forEach((v, i) => {
        if (v === null || v === undefined || !isFinite(v)) {
          if (cur.length) out.push(cur);
          cur = [];
        } else cur.push(i);
      });
      if (cur.length) out.push(cur);
      return out;
    };
    for (const s of o.series) {
      const g = el("g", { class: "series-group", "data-series": s.name }, svg);
      if (s.lo && s.hi) {
        for (const seg of segments(s.values)) {
          const up = seg.map((i) => `${x(i)},${f.y(s.hi[i])}`);
          const down = seg.slice().reverse().map((i) => `${x(i)},${f.y(s.lo[i])}`);
          el("polygon", { class: "band", fill: s.color, points: up.concat(down).join(" ") }, g);
        }
      }
      for (const seg of segments(s.values)) {
        if (seg.length === 1 && s.lo && s.hi) {
          // A lone point has no band: its interval is a vertical line.
          const i = seg[0];
          el("line", { class: "err", stroke: s.color, x1: x(i), x2: x(i), y1: f.y(s.lo[i]), y2: f.y(s.hi[i]) }, g);
        }
        el("polyline", { class: "series", stroke: s.color, points: seg.map((i) => `${x(i)},${f.y(s.values[i])}`).join(" ") }, g);
      }
      s.values.forEach((v, i) => {
        if (v === null || v === undefined || !isFinite(v)) return;
        const d = el("circle", { class: "dot", cx: x(i), cy: f.y(v), r: 3, fill: s.color }, g);
        let t = `${s.name}, ${o.labels[i]}: ${fmt.num(v)}`;
        if (s.lo && s.hi) t += ` [${fmt.num(s.lo[i])}, ${fmt.num(s.hi[i])}]`;
        tip(d, t);
      });
    }
    refLine(svg, f, o.ref);
    xLabels(svg, f, o.labels, x, false);
    return svg;
  }

  const palette = ["#2f6fdb", "#e8590c", "#2b8a3e", "#c2255c", "#7048e8", "#0b7285", "#a61e4d", "#5c940d", "#d9480f", "#364fc7", "#862e9c", "#087f5b"];

  return { barChart, lineChart, palette, ticks };
})();
