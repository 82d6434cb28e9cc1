// Sortable tables: click a header of a <table class="sortable"> to order its rows by that
// column (again to reverse). A cell's data-sort attribute, if any, is its key; numbers
// sort as numbers. The order is kept in the URL's fragment (#sort=<table id>.<column>.<asc|desc>),
// so a sorted table is a link. No dependencies, no network.
(function () {
  "use strict";
  var SCALE = { "µs": 1e-6, "ms": 1e-3, "s": 1, "%": 1 };
  function key(cell) {
    var v = !cell ? "" : cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent.trim();
    var m = /^(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)\s*(µs|ms|s|%)?$/i.exec(v);
    return { num: m ? parseFloat(m[1]) * (m[2] ? SCALE[m[2]] : 1) : NaN, text: v.toLowerCase() };
  }
  function headerRow(table) { return table.tHead ? table.tHead.rows[0] : table.rows[0]; }
  function bodyRows(table) {
    var head = headerRow(table);
    return Array.prototype.filter.call(table.rows, function (r) { return r !== head && r.parentNode.tagName !== "THEAD"; });
  }
  function sort(table, col, dir) {
    var rows = bodyRows(table);
    if (!rows.length) return;
    var keyed = rows.map(function (r, i) { return { row: r, k: key(r.cells[col]), i: i }; });
    var numeric = keyed.every(function (x) { return !isNaN(x.k.num) || x.k.text === ""; });
    keyed.sort(function (a, b) {
      var c;
      if (numeric) {
        var an = isNaN(a.k.num) ? -Infinity : a.k.num, bn = isNaN(b.k.num) ? -Infinity : b.k.num;
        c = an < bn ? -1 : an > bn ? 1 : 0;
      } else {
        c = a.k.text < b.k.text ? -1 : a.k.text > b.k.text ? 1 : 0;
      }
      return (dir === "desc" ? -c : c) || a.i - b.i;
    });
    var parent = rows[0].parentNode;
    keyed.forEach(function (x) { parent.appendChild(x.row); });
    Array.prototype.forEach.call(headerRow(table).cells, function (th, i) {
      th.setAttribute("aria-sort", i === col ? (dir === "desc" ? "descending" : "ascending") : "none");
    });
  }
  function remember(table, col, dir) {
    if (!table.id) return;
    history.replaceState(null, "", location.pathname + location.search + "#sort=" + table.id + "." + col + "." + dir);
  }
  function setup(table) {
    Array.prototype.forEach.call(headerRow(table).cells, function (th, col) {
      if (th.querySelector("a")) return;  // a header that is a link sorts on the server
      th.classList.add("sorter");
      th.setAttribute("tabindex", "0");
      th.setAttribute("role", "button");
      th.setAttribute("aria-sort", "none");
      function go() {
        var dir = th.getAttribute("aria-sort") === "ascending" ? "desc" : "asc";
        sort(table, col, dir);
        remember(table, col, dir);
      }
      th.addEventListener("click", go);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); go(); } });
    });
  }
  function fromHash() {
    var m = /(?:^#|&)sort=([\w-]+)\.(\d+)\.(asc|desc)/.exec(location.hash);
    if (!m) return;
    var table = document.getElementById(m[1]);
    if (table && table.classList.contains("sortable")) sort(table, parseInt(m[2], 10), m[3]);
  }
  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), setup);
    fromHash();
  });
})();
