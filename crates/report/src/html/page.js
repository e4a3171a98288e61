// Draws every chart of the JSON block with uPlot, then writes a render status into #render-status
// (charts drawn, non-empty canvases, errors, blocked requests) for the browser tests.
(function () {
  "use strict";
  // Filled from the start of the page by the watcher in <head> (html/watch.js).
  var status = window.__alloclensStatus || { errors: [], blocked: [] };
  status.charts = 0;
  status.rendered = 0;
  status.nonempty = 0;
  var origError = console.error;
  console.error = function () {
    status.errors.push(Array.prototype.map.call(arguments, String).join(" "));
    return origError.apply(console, arguments);
  };

  var BIN = ["B", "KiB", "MiB", "GiB", "TiB"];
  function num(v, digits) {
    var a = Math.abs(v);
    return v.toFixed(a >= 100 ? 0 : a >= 10 ? Math.min(digits, 1) : Math.min(digits, 2));
  }
  // A value under the cursor (legend); nothing where the line has no point.
  function fmt(unit, v) {
    if (v == null || !isFinite(v)) return "";
    switch (unit) {
      case "bytes": {
        var i = 0, x = v;
        while (Math.abs(x) >= 1024 && i < BIN.length - 1) { x /= 1024; i++; }
        return (i === 0 ? x.toFixed(0) : num(x, 2)) + " " + BIN[i];
      }
      case "seconds": return Math.abs(v) < 1 && v !== 0 ? (v * 1000).toFixed(0) + " ms" : num(v, 3) + " s";
      case "rate": {
        var p = Math.abs(v) >= 1e9 ? [1e9, "G"] : Math.abs(v) >= 1e6 ? [1e6, "M"] : Math.abs(v) >= 1e3 ? [1e3, "k"] : [1, ""];
        return num(v / p[0], 2) + " " + p[1] + "/s";
      }
      case "count": {
        var q = Math.abs(v) >= 1e9 ? [1e9, "G"] : Math.abs(v) >= 1e6 ? [1e6, "M"] : Math.abs(v) >= 1e3 ? [1e3, "k"] : [1, ""];
        return q[0] === 1 ? String(Math.round(v * 100) / 100) : num(v / q[0], 2) + q[1];
      }
      default: return String(Math.round(v * 1000) / 1000);
    }
  }

  // Round ticks for a zoomed range: the rules of crates/report/src/document/ticks.rs, which computes
  // the ticks of the full view (embedded as x_scale / y_scale).
  function scaled(m, e) { return e >= 0 ? m * Math.pow(10, e) : m / Math.pow(10, -e); }
  function decimalStep(raw) {
    var e = Math.floor(Math.log10(raw)), ms = [1, 2, 5, 10];
    for (var i = 0; i < ms.length; i++) { var s = scaled(ms[i], e); if (s >= raw * (1 - 1e-9)) return s; }
    return scaled(10, e);
  }
  function tickStep(unit, span, target, whole) {
    var raw = Math.max(span / target, Number.MIN_VALUE), step;
    if (unit === "bytes") step = Math.max(1, Math.pow(2, Math.ceil(Math.log2(raw))));
    else if (unit === "seconds" && raw > 30) {
      step = [60, 120, 300, 600, 900, 1800, 3600].find(function (s) { return s >= raw; }) || 3600 * decimalStep(raw / 3600);
    } else step = decimalStep(raw);
    return whole || unit === "count" ? Math.max(1, step) : step;
  }
  function clean(v) {
    if (v === 0) return 0;
    var d = 12 - Math.floor(Math.log10(Math.abs(v)));
    if (d <= 0) return v;
    var f = Math.pow(10, Math.min(d, 300));
    return Math.round(v * f) / f;
  }
  function linearTicks(unit, lo, hi, target, whole) {
    var s = tickStep(unit, hi - lo, target, whole), out = [];
    for (var k = Math.ceil(lo / s - 1e-9); k <= Math.floor(hi / s + 1e-9); k++) out.push(clean(k * s));
    return out;
  }
  function logTicks(unit, lo, hi, target) {
    var base = unit === "bytes" ? 2 : 10, lg = function (v) { return Math.log(v) / Math.log(base); };
    var e0 = Math.floor(lg(lo) + 1e-9), e1 = Math.ceil(lg(hi) - 1e-9), out = [];
    if (e1 <= e0) e1 = e0 + 1;
    var every = [1, 2, 5, 10, 20].find(function (n) { return Math.ceil((e1 - e0) / n) <= target; }) || 20;
    for (var e = e0; e <= e1; e++) if (((e % every) + every) % every === 0) out.push(Math.pow(base, e));
    return out;
  }
  function trim(v, digits) {
    var s = v.toFixed(digits);
    if (s.indexOf(".") >= 0) s = s.replace(/0+$/, "").replace(/\.$/, "");
    return s === "-0" ? "0" : s;
  }
  function si(v, sep) {
    var a = Math.abs(v), p = a >= 1e9 ? [1e9, "G"] : a >= 1e6 ? [1e6, "M"] : a >= 1e3 ? [1e3, "k"] : [1, ""];
    return trim(v / p[0], 3) + sep + p[1];
  }
  // A tick's label (ticks::label).
  function tickLabel(unit, v) {
    switch (unit) {
      case "bytes": {
        var units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], i = 0, x = v;
        while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i++; }
        return trim(x, 3) + " " + units[i];
      }
      case "seconds":
        if (v === 0) return "0 s";
        if (Math.abs(v) < 1) return trim(v * 1000, 3) + " ms";
        if (Math.abs(v) >= 60 && Math.abs(v % 60) < 1e-9) {
          return Math.abs(v) >= 3600 && Math.abs(v % 3600) < 1e-9 ? trim(v / 3600, 2) + " h" : trim(v / 60, 2) + " min";
        }
        return trim(v, 3) + " s";
      case "rate": return v === 0 ? "0/s" : si(v, " ") + "/s";
      case "count": return si(v, "");
      default: return trim(v, 6);
    }
  }

  function alpha(color, emphasis) { return emphasis === "faint" ? color + "59" : color; }
  function width(emphasis) { return emphasis === "bold" ? 2.5 : emphasis === "faint" ? 1 : 1.5; }

  // The ticks of an axis: the embedded ones for the full view, the same rules for a zoomed one.
  function splitsOf(chart, axis, scale) {
    var full = chart[axis + "_scale"], def = chart[axis + "_axis"];
    return function (u) {
      var sc = u.scales[scale], lo = sc.min, hi = sc.max;
      if (chart.x_labels || axis === "y" || (Math.abs(lo - full.min) < 1e-9 * Math.abs(full.max - full.min || 1) &&
          Math.abs(hi - full.max) < 1e-9 * Math.abs(full.max - full.min || 1))) {
        return full.ticks.filter(function (t) { return t >= lo - 1e-12 && t <= hi + 1e-12; });
      }
      if (def.log) return logTicks(def.unit, lo, hi, 10);
      var whole = chart.x.length <= 64 && chart.x.every(function (v) { return v % 1 === 0; });
      return linearTicks(def.unit, lo, hi, 10, whole);
    };
  }
  function labelsOf(chart, axis) {
    var full = chart[axis + "_scale"], def = chart[axis + "_axis"];
    return function (u, splits) {
      return splits.map(function (v) {
        var i = full.ticks.indexOf(v);
        if (i >= 0) return full.labels[i];
        return chart.x_labels ? "" : tickLabel(def.unit, v);
      });
    };
  }

  // Bars of a category chart (one series per bar, whiskers for the spread) and histogram bars (from
  // x to bar_to), drawn on the canvas after the grid.
  function drawBars(chart) {
    return function (u) {
      var ctx = u.ctx, bottom = u.bbox.top + u.bbox.height;
      ctx.save();
      chart.series.forEach(function (s, si) {
        if (!u.series[si + 1].show) return;
        s.values.forEach(function (v, i) {
          if (v == null) return;
          var x0, x1;
          if (chart.bars) {
            var c = u.valToPos(chart.x[i], "x", true), half = Math.abs(u.valToPos(0.35, "x", true) - u.valToPos(0, "x", true));
            x0 = c - half; x1 = c + half;
          } else {
            var from = chart.x[i] > 0 || !chart.x_axis.log ? chart.x[i] : u.scales.x.min;
            x0 = u.valToPos(Math.max(from, u.scales.x.min), "x", true);
            x1 = u.valToPos(Math.min(chart.bar_to[i], u.scales.x.max), "x", true);
            if (x1 <= x0) return;
          }
          var y = u.valToPos(v, "y", true);
          ctx.fillStyle = chart.series.length > 1 && !chart.bars ? s.color + "99" : s.color + (chart.bars ? "cc" : "");
          ctx.fillRect(x0, y, Math.max(1, x1 - x0), bottom - y);
          if (s.low && s.high && s.low[i] != null && s.high[i] != null) {
            var c2 = (x0 + x1) / 2, lo = u.valToPos(s.low[i], "y", true), hi = u.valToPos(s.high[i], "y", true), w = (x1 - x0) / 4;
            ctx.strokeStyle = "#222";
            ctx.lineWidth = 1.5 * devicePixelRatio;
            ctx.beginPath();
            ctx.moveTo(c2, lo); ctx.lineTo(c2, hi);
            ctx.moveTo(c2 - w, lo); ctx.lineTo(c2 + w, lo);
            ctx.moveTo(c2 - w, hi); ctx.lineTo(c2 + w, hi);
            ctx.stroke();
          }
        });
      });
      ctx.restore();
    };
  }

  // The spread of repeats around the points of a line chart (a sweep): a whisker at each point.
  function drawWhiskers(chart) {
    return function (u) {
      var ctx = u.ctx;
      ctx.save();
      ctx.lineWidth = 1.5 * devicePixelRatio;
      chart.series.forEach(function (s, si) {
        if (!s.low || !s.high || !u.series[si + 1].show) return;
        ctx.strokeStyle = s.color;
        chart.x.forEach(function (x, i) {
          if (s.low[i] == null || s.high[i] == null) return;
          var c = u.valToPos(x, "x", true), lo = u.valToPos(s.low[i], "y", true), hi = u.valToPos(s.high[i], "y", true), w = 5 * devicePixelRatio;
          ctx.beginPath();
          ctx.moveTo(c, lo); ctx.lineTo(c, hi);
          ctx.moveTo(c - w, lo); ctx.lineTo(c + w, lo);
          ctx.moveTo(c - w, hi); ctx.lineTo(c + w, hi);
          ctx.stroke();
        });
      });
      ctx.restore();
    };
  }

  // One legend entry per group (the repeats of a variant): the group's first series holds it, named
  // after the group; the others' entries are hidden, and they follow its show/hide.
  function groupLegend(u, chart) {
    var rows = u.root.querySelectorAll(".u-legend .u-series");
    var first = {};
    chart.series.forEach(function (s, i) {
      if (!s.group) return;
      var row = rows[i + 1];
      if (first[s.group] === undefined) {
        first[s.group] = i + 1;
        var label = row && row.querySelector(".u-label");
        if (label) label.textContent = s.group;
      } else if (row) {
        row.style.display = "none";
      }
    });
    return first;
  }

  function build(chart, el) {
    var labels = chart.x_labels;
    var xfmt = function (v) {
      if (labels) return Number.isInteger(v) && labels[v] !== undefined ? labels[v] : "";
      return fmt(chart.x_axis.unit, v);
    };
    var log = chart.y_axis.log;
    var data = [chart.x].concat(chart.series.map(function (s) {
      // undefined: no point here, the line goes on; null: a break (a stretch without samples).
      var vals = s.values.map(function (v) { return v == null || (log && v <= 0) ? undefined : v; });
      (s.breaks || []).forEach(function (i) { vals[i] = null; });
      return vals;
    }));
    var drawn = chart.bars || chart.bar_to;
    var scatter = chart.points && !chart.connect && !drawn;
    var series = [{ label: chart.x_axis.label || " ", value: function (u, v) { return v == null ? "" : xfmt(v); } }];
    chart.series.forEach(function (s) {
      var opts = {
        label: s.label,
        stroke: alpha(s.color, s.emphasis),
        fill: drawn ? s.color + "99" : undefined,
        width: width(s.emphasis),
        spanGaps: false,
        points: { show: chart.points && !drawn, size: 6, fill: s.color },
        value: function (u, v) { return fmt(chart.y_axis.unit, v); },
      };
      // Bars and histograms are drawn by drawBars; points only: no line between them.
      if (!chart.connect || drawn) opts.paths = function () { return null; };
      series.push(opts);
    });
    var bands = chart.bands || [];
    var xs = chart.x_scale, ys = chart.y_scale;
    // 0 is not on a log axis: the first histogram bucket [0, w) starts at the axis' left end.
    if (chart.x_axis.log) data[0] = chart.x.map(function (v) { return v > 0 ? v : xs.min; });
    // The data's extent: a range covering it is the full view (with its embedded ticks).
    var xFirst = data[0][0], xLast = data[0][data[0].length - 1];
    var grouping = false, groups = {};
    var opts = {
      title: chart.title,
      width: Math.max(480, Math.min(1350, (el.clientWidth || 900))),
      height: 380,
      series: series,
      // Bars are named on the x axis; a legend would repeat the names. A scatter's legend names its
      // groups of points: no value under the cursor (a point's x is no other point's), no x entry.
      legend: { show: !chart.bars, live: !scatter },
      scales: {
        x: { time: false, distr: chart.x_axis.log ? 3 : 1, log: chart.x_axis.unit === "bytes" ? 2 : 10,
             range: function (u, lo, hi) { return labels || lo == null || (lo <= xFirst && hi >= xLast) ? [xs.min, xs.max] : [lo, hi]; } },
        y: { distr: log ? 3 : 1, log: chart.y_axis.unit === "bytes" ? 2 : 10, range: function () { return [ys.min, ys.max]; } },
      },
      axes: [
        { label: chart.x_axis.label, splits: splitsOf(chart, "x", "x"), values: labelsOf(chart, "x") },
        { label: chart.y_axis.label, size: 80, splits: splitsOf(chart, "y", "y"), values: labelsOf(chart, "y") },
      ],
      hooks: {
        drawClear: [function (u) {
          var ctx = u.ctx;
          bands.forEach(function (b, i) {
            var x0 = u.valToPos(b.from, "x", true), x1 = u.valToPos(b.to, "x", true);
            ctx.save();
            ctx.fillStyle = i % 2 ? "rgba(120,120,200,0.10)" : "rgba(120,200,120,0.10)";
            ctx.fillRect(x0, u.bbox.top, Math.max(1, x1 - x0), u.bbox.height);
            ctx.restore();
          });
        }],
        draw: drawn ? [drawBars(chart)] : chart.series.some(function (s) { return s.low; }) ? [drawWhiskers(chart)] : [],
        setSeries: [function (u, i, o) {
          // A group's legend entry shows or hides all its lines.
          if (grouping || i == null || !o || o.show === undefined) return;
          var g = chart.series[i - 1] && chart.series[i - 1].group;
          if (!g || groups[g] !== i) return;
          grouping = true;
          chart.series.forEach(function (s, j) { if (s.group === g && j + 1 !== i) u.setSeries(j + 1, { show: o.show }); });
          grouping = false;
        }],
      },
    };
    var plot = new uPlot(opts, data, el);
    groups = groupLegend(plot, chart);

    return plot;
  }

  function nonEmpty(canvas) {
    if (!canvas || canvas.width === 0 || canvas.height === 0) return false;
    var d = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
    for (var i = 3; i < d.length; i += 4 * 7) if (d[i] !== 0) return true;
    return false;
  }

  var plots = [];
  window.alloclensPlots = {};
  try {
    var data = JSON.parse(document.getElementById("report-data").textContent);
    var byId = {};
    data.charts.forEach(function (c) { byId[c.id] = c; });
    document.querySelectorAll("div.chart[data-chart]").forEach(function (el) {
      status.charts++;
      var chart = byId[el.getAttribute("data-chart")];
      if (!chart) { status.errors.push("no data for chart " + el.getAttribute("data-chart")); return; }
      try {
        var plot = build(chart, el);
        plots.push([plot, el]);
        // By id, for the browser tests (zooming) and for a reader's console.
        window.alloclensPlots[chart.id] = plot;
        status.rendered++;
      } catch (e) {
        status.errors.push("chart " + chart.id + ": " + e);
      }
    });
  } catch (e) {
    status.errors.push(String(e));
  }
  function report() {
    status.nonempty = plots.filter(function (p) { return nonEmpty(p[1].querySelector("canvas")); }).length;
    // Tables wider than the page (they would need horizontal scrolling), by caption or position.
    status.wide_tables = Array.prototype.map.call(document.querySelectorAll("table"), function (t, i) {
      return t.scrollWidth > t.clientWidth + 1 ? (t.caption ? t.caption.textContent : "table " + i) : null;
    }).filter(function (x) { return x !== null; });
    // The tick labels drawn and the legend entries shown, per chart, for the tests.
    status.axes = {};
    plots.forEach(function (p) {
      var u = p[0], id = p[1].getAttribute("data-chart");
      // A live legend's first entry is the x axis' (its value under the cursor); a scatter's has none.
      var live = u.root.querySelector(".u-legend.u-live") ? 1 : 0;
      var legend = Array.prototype.slice.call(u.root.querySelectorAll(".u-legend .u-series"), live)
        .filter(function (r) { return r.style.display !== "none"; })
        .map(function (r) { var l = r.querySelector(".u-label"); return l ? l.textContent : ""; });
      status.axes[id] = { x: u.axes[0]._values || [], y: u.axes[1]._values || [], legend: legend };
    });
    var el = document.getElementById("render-status");
    el.textContent = JSON.stringify(status);
    document.documentElement.setAttribute("data-rendered", "1");
  }
  setTimeout(report, 200);
})();
