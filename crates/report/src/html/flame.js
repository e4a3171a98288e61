// Flame graphs and sortable call-site tables (docs/reports.md, "Call sites"). Each div.flame is drawn
// from the page's JSON block: frames as positioned boxes, root ("all") at the top, callees below; a
// click zooms into a frame (click "all" or Reset to come back), the search box highlights every frame
// whose name matches a regular expression and says which share of the total they cover. A site table's
// headings sort it; a click on a site searches for it in the linked flame graphs. The page's address
// may carry "#find=REGEX&sort=COLUMN" (a shareable view, also used by the browser tests).
(function () {
  "use strict";
  var status = window.__alloclensStatus || { errors: [], blocked: [] };
  status.flames = 0;
  status.flames_drawn = 0;
  status.flame_frames = 0;
  status.flame_search = {};
  status.sites = {};
  var ROW = 18;
  var graphs = {};

  function human(unit, v) {
    if (unit === "bytes") {
      var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
      while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
      return (i === 0 ? v.toFixed(0) : v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)) + " " + u[i];
    }
    return v >= 1e6 ? (v / 1e6).toFixed(2) + "M" : v >= 1e4 ? (v / 1e3).toFixed(1) + "k" : String(v);
  }
  function color(name) {
    var h = 0;
    for (var i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    // Warm colours as flamegraph.pl: red to yellow, a little lightness variation.
    return "hsl(" + (h % 55) + ",80%," + (55 + (h >> 8) % 15) + "%)";
  }
  function escapeRegex(s) { return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }

  function Graph(data, el) {
    var n = data.name.length, x = new Array(n), parent = new Array(n), next = [], path = [];
    this.maxDepth = 0;
    for (var i = 0; i < n; i++) {
      var d = data.depth[i];
      x[i] = d === 0 ? 0 : next[d];
      parent[i] = d === 0 ? -1 : path[d - 1];
      next[d] = x[i] + data.value[i];
      next[d + 1] = x[i];
      path[d] = i;
      if (d > this.maxDepth) this.maxDepth = d;
    }
    this.data = data; this.x = x; this.parent = parent; this.el = el; this.zoom = 0; this.re = null;
    var bar = document.createElement("div");
    bar.className = "flame-bar";
    this.input = document.createElement("input");
    this.input.type = "search";
    this.input.placeholder = "Search frames (regular expression)";
    this.matched = document.createElement("span");
    this.matched.className = "flame-matched";
    var reset = document.createElement("button");
    reset.type = "button";
    reset.textContent = "Reset zoom";
    bar.appendChild(this.input); bar.appendChild(reset); bar.appendChild(this.matched);
    var note = document.createElement("span");
    note.className = "flame-note";
    note.textContent = "total " + human(data.unit, data.value[0]) +
      (data.omitted ? "; " + data.omitted + " frames too narrow to see left out" : "");
    bar.appendChild(note);
    this.body = document.createElement("div");
    this.body.className = "flame-body";
    el.appendChild(bar);
    el.appendChild(this.body);
    var self = this;
    this.input.addEventListener("input", function () { self.search(self.input.value); });
    reset.addEventListener("click", function () { self.zoom = 0; self.draw(); });
    this.body.addEventListener("click", function (e) {
      var i = e.target.getAttribute && e.target.getAttribute("data-i");
      if (i !== null && i !== undefined) { self.zoom = Number(i); self.draw(); }
    });
  }

  Graph.prototype.isAncestorOfZoom = function (i) {
    for (var j = this.zoom; j >= 0; j = this.parent[j]) if (j === i) return true;
    return false;
  };

  Graph.prototype.draw = function () {
    var d = this.data, z = this.zoom, width = Math.max(400, this.body.clientWidth || 1200);
    var x0 = this.x[z], span = d.value[z], scale = width / span, zd = d.depth[z];
    var html = [], drawn = 0;
    for (var i = 0; i < d.name.length; i++) {
      var left, w;
      if (d.depth[i] <= zd) {
        if (!this.isAncestorOfZoom(i)) continue;
        left = 0; w = width;
      } else {
        if (this.x[i] + d.value[i] <= x0 || this.x[i] >= x0 + span) continue;
        left = (this.x[i] - x0) * scale; w = d.value[i] * scale;
      }
      if (w < 1) continue;
      var name = d.names[d.name[i]], hit = this.re && this.re.test(name);
      var tip = name + "\n" + human(d.unit, d.value[i]) + " (" + (100 * d.value[i] / d.value[0]).toFixed(2) + " %)";
      html.push('<div class="fr' + (hit ? " hit" : "") + '" data-i="' + i + '" style="left:' + left.toFixed(1) +
        "px;width:" + Math.max(0, w - 1).toFixed(1) + "px;top:" + d.depth[i] * ROW + "px;background:" +
        (hit ? "#d13ad1" : color(name)) + '" title="' + escapeHtml(tip) + '">' + (w > 28 ? escapeHtml(name) : "") + "</div>");
      drawn++;
    }
    this.body.style.height = (this.maxDepth + 1) * ROW + "px";
    this.body.innerHTML = html.join("");
    this.drawn = drawn;
  };

  // Share of the total under frames matching the search (a match inside a match counts once).
  Graph.prototype.search = function (text) {
    var d = this.data;
    this.re = null;
    if (text) {
      try { this.re = new RegExp(text, "i"); } catch (e) { this.re = new RegExp(escapeRegex(text), "i"); }
    }
    var total = 0, frames = 0;
    for (var i = 1; this.re && i < d.name.length; i++) {
      if (!this.re.test(d.names[d.name[i]])) continue;
      frames++;
      total += d.value[i];
      // Skip the rest of this subtree: its frames are inside the match.
      var depth = d.depth[i];
      while (i + 1 < d.name.length && d.depth[i + 1] > depth) i++;
    }
    this.matched.textContent = this.re ? "matched: " + frames + " frames, " + human(d.unit, total) + " (" +
      (100 * total / d.value[0]).toFixed(1) + " % of the total)" : "";
    status.flame_search[d.id] = { frames: frames, value: total };
    this.draw();
  };

  function escapeHtml(s) {
    return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }

  function sortTable(table, col, descending) {
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var va = Number(a.cells[col].getAttribute("data-v")), vb = Number(b.cells[col].getAttribute("data-v"));
      return descending ? vb - va : va - vb;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    table.setAttribute("data-sorted", col + (descending ? " desc" : " asc"));
    status.sites[table.id] = {
      rows: rows.length,
      sorted: col,
      first: rows.length ? rows[0].cells[1].querySelector("button").textContent : null,
    };
  }

  function findInFlames(table, name) {
    var first = null;
    (table.getAttribute("data-flames") || "").split(" ").forEach(function (id) {
      var g = graphs[id];
      if (!g) return;
      g.input.value = "^" + escapeRegex(name) + "$";
      g.search(g.input.value);
      if (!first) first = g.el;
    });
    if (first && first.scrollIntoView) first.scrollIntoView({ behavior: "smooth" });
  }

  try {
    var data = JSON.parse(document.getElementById("report-data").textContent);
    var byId = {};
    (data.flames || []).forEach(function (f) { byId[f.id] = f; });
    document.querySelectorAll("div.flame[data-flame]").forEach(function (el) {
      status.flames++;
      var f = byId[el.getAttribute("data-flame")];
      if (!f) { status.errors.push("no data for flame graph " + el.getAttribute("data-flame")); return; }
      try {
        var g = new Graph(f, el);
        g.draw();
        graphs[f.id] = g;
        status.flames_drawn++;
        status.flame_frames += g.drawn;
      } catch (e) {
        status.errors.push("flame graph " + f.id + ": " + e);
      }
    });
    document.querySelectorAll("table.sites").forEach(function (table) {
      status.sites[table.id] = { rows: table.tBodies[0].rows.length, sorted: null, first: null };
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
        if (!th.classList.contains("sortable")) return;
        th.addEventListener("click", function () {
          sortTable(table, col, table.getAttribute("data-sorted") !== col + " desc");
        });
      });
      table.addEventListener("click", function (e) {
        var name = e.target.getAttribute && e.target.getAttribute("data-find");
        if (name !== null && name !== undefined) findInFlames(table, name);
      });
    });
    var params = {};
    (location.hash || "").replace(/^#/, "").split("&").forEach(function (kv) {
      var p = kv.indexOf("=");
      if (p > 0) params[kv.slice(0, p)] = decodeURIComponent(kv.slice(p + 1));
    });
    if (params.find) Object.keys(graphs).forEach(function (id) {
      graphs[id].input.value = params.find;
      graphs[id].search(params.find);
    });
    if (params.sort) document.querySelectorAll("table.sites").forEach(function (t) {
      sortTable(t, Number(params.sort), true);
    });
  } catch (e) {
    status.errors.push(String(e));
  }
})();
