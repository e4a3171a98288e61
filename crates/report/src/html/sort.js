// Sortable tables, shared by every table of a report (self-contained, no library).
// Use: give a table the class "sortable" (render::html does for every Table block) with a <thead> row
// of header cells and its rows in <tbody>; a click (or Enter) on a header sorts the rows by that column,
// again reverses. A cell sorts by its data-sort attribute when it has one, else by its text read as a
// figure as the report prints them: "1.5 MiB", "250 ms", "2 min 3 s", "12.3 k/s", "4.56M", "0.78×",
// "45.1%", "12 KiB in 3" (the first figure counts), "1.2…3.4" (the first); cells that hold no figure
// ("—", names) sort as text, after the figures. Tables added after load: window.alloclensSortable(table).
(function () {
  "use strict";
  var UNITS = {
    B: 1, KiB: 1024, MiB: 1048576, GiB: 1073741824, TiB: 1099511627776,
    ns: 1e-9, us: 1e-6, "µs": 1e-6, ms: 1e-3, s: 1, min: 60, h: 3600,
    k: 1e3, M: 1e6, G: 1e9, "%": 1, "×": 1, "": 1,
  };
  // A cell's key: [0, number] for a figure, [1, text] otherwise.
  function key(cell) {
    var raw = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent;
    var m = /^\s*(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)\s*([A-Za-zµ%×]*)/.exec(raw);
    if (m) {
      var unit = m[2].replace(/\/s$/, "");
      if (Object.prototype.hasOwnProperty.call(UNITS, unit)) return [0, parseFloat(m[1]) * UNITS[unit]];
      if (/^\d/.test(raw.trim()) && /^\s*-?\d+(\.\d+)?\s*$/.test(raw)) return [0, parseFloat(m[1])];
    }
    return [1, raw.trim().toLowerCase()];
  }
  function compare(a, b) {
    if (a[0] !== b[0]) return a[0] - b[0];
    if (a[0] === 0) return a[1] - b[1];
    return a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0;
  }
  function sortBy(table, col, th) {
    var body = table.tBodies[0];
    if (!body) return;
    var descending = th.getAttribute("aria-sort") === "ascending";
    var rows = Array.prototype.slice.call(body.rows).map(function (r, i) {
      return { row: r, key: r.cells[col] ? key(r.cells[col]) : [1, ""], at: i };
    });
    rows.sort(function (x, y) {
      var c = compare(x.key, y.key);
      // Text after figures in both directions; ties keep their order.
      if (x.key[0] === y.key[0] && descending) c = -c;
      return c || x.at - y.at;
    });
    rows.forEach(function (r) { body.appendChild(r.row); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }
  function sortable(table) {
    if (!table.tHead || !table.tHead.rows.length || table.__sortable) return;
    table.__sortable = true;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.tabIndex = 0;
      th.title = "sort by this column";
      th.addEventListener("click", function () { sortBy(table, col, th); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sortBy(table, col, th); });
    });
  }
  window.alloclensSortable = sortable;
  window.alloclensSortKey = key;
  document.querySelectorAll("table.sortable").forEach(sortable);
})();
