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
  function fmt(unit, v) {
    if (v == null || !isFinite(v)) return "—";
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

  function alpha(color, emphasis) { return emphasis === "faint" ? color + "59" : color; }
  function width(emphasis) { return emphasis === "bold" ? 2.5 : emphasis === "faint" ? 1 : 1.5; }

  function build(chart, el) {
    var labels = chart.x_labels;
    var xfmt = function (v) {
      if (labels) return Number.isInteger(v) && labels[v] !== undefined ? labels[v] : "";
      return fmt(chart.x_axis.unit, v);
    };
    var positive = function (vals, log) {
      return log ? vals.map(function (v) { return v != null && v > 0 ? v : null; }) : vals;
    };
    var data = [chart.x].concat(chart.series.map(function (s) { return positive(s.values, chart.y_axis.log); }));
    var series = [{ label: chart.x_axis.label, value: function (u, v) { return v == null ? "—" : xfmt(v); } }];
    chart.series.forEach(function (s) {
      var opts = {
        label: s.label,
        stroke: alpha(s.color, s.emphasis),
        width: width(s.emphasis),
        spanGaps: true,
        points: { show: chart.points, size: 6, fill: s.color },
        value: function (u, v) { return fmt(chart.y_axis.unit, v); },
      };
      // Histograms: points only, no line between buckets.
      if (!chart.connect) opts.paths = function () { return null; };
      series.push(opts);
    });
    var bands = chart.bands || [];
    var opts = {
      title: chart.title,
      width: Math.max(480, Math.min(1300, (el.clientWidth || 900))),
      height: 380,
      series: series,
      scales: {
        x: { time: false, distr: chart.x_axis.log ? 3 : 1 },
        y: { distr: chart.y_axis.log ? 3 : 1 },
      },
      axes: [
        { label: chart.x_axis.label, values: function (u, splits) { return splits.map(xfmt); } },
        { label: chart.y_axis.label, size: 80, values: function (u, splits) { return splits.map(function (v) { return fmt(chart.y_axis.unit, v); }); } },
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
      },
    };
    if (labels) opts.scales.x.range = function () { return [-0.5, labels.length - 0.5]; };
    return new uPlot(opts, data, el);
  }

  function nonEmpty(canvas) {
    if (!canvas || canvas.width === 0 || canvas.height === 0) return false;
    var d = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
    for (var i = 3; i < d.length; i += 4 * 7) if (d[i] !== 0) return true;
    return false;
  }

  var plots = [];
  try {
    var data = JSON.parse(document.getElementById("report-data").textContent);
    var byId = {};
    data.charts.forEach(function (c) { byId[c.id] = c; });
    document.querySelectorAll("div.chart[data-chart]").forEach(function (el) {
      status.charts++;
      var chart = byId[el.getAttribute("data-chart")];
      if (!chart) { status.errors.push("no data for chart " + el.getAttribute("data-chart")); return; }
      try {
        plots.push([build(chart, el), el]);
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
    var el = document.getElementById("render-status");
    el.textContent = JSON.stringify(status);
    document.documentElement.setAttribute("data-rendered", "1");
  }
  setTimeout(report, 200);
})();
