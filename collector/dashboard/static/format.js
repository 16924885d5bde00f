// format.js: number and date formatting shared by the charts and tables.
"use strict";

const fmt = {
  // num shows a number with 4 significant digits: plain between 1e-3 and
  // 1e6, in exponent form (5.315e+8) outside.
  num(v) {
    if (v === null || v === undefined || !isFinite(v)) return "–";
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1e6 || a < 1e-3) return v.toExponential(3);
    return String(Number(v.toPrecision(4)));
  },
  // axis shows a tick value: round numbers, exponent form from 1e6.
  axis(v) {
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1e6 || a < 1e-3) return v.toExponential(1);
    return String(Number(v.toPrecision(3)));
  },
  // duration shows a Go duration without its zero units: 24h0m0s is 24h.
  duration(s) {
    if (!s) return s;
    return s.replace(/([hm])0s$/, "$1").replace(/h0m$/, "h");
  },
  // int shows a count.
  int(v) {
    if (v === null || v === undefined) return "–";
    return String(Math.round(v));
  },
  // eps shows a privacy parameter.
  eps(v) {
    if (v === null || v === undefined || !isFinite(v)) return "–";
    return Number(v.toPrecision(3)).toString();
  },
  delta(v) {
    if (v === null || v === undefined || !isFinite(v)) return "–";
    return v.toExponential(1).replace("e-", "e−");
  },
  // day shows a period start (an ISO time) as YYYY-MM-DD, with the time
  // when the period does not start at midnight UTC.
  day(iso) {
    if (!iso) return "–";
    const s = iso.replace("Z", "");
    return s.endsWith("T00:00:00") ? s.slice(0, 10) : s.slice(0, 16).replace("T", " ");
  },
  // short shows a period start on an axis: MM-DD or HH:MM.
  short(iso) {
    if (!iso) return "·";
    const s = iso.replace("Z", "");
    return s.endsWith("T00:00:00") ? s.slice(5, 10) : s.slice(11, 16);
  },
};
