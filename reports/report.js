// ami-auditor report: sortable, filterable, paginated tables; everything opens for printing. No data, no network.
(function () {
  "use strict";
  function cellKey(row, col) {
    var cell = row.cells[col];
    if (!cell) { return ""; }
    var v = cell.getAttribute("data-sort");
    return v !== null ? v : cell.textContent.trim().toLowerCase();
  }
  function compare(a, b) {
    var x = parseFloat(a), y = parseFloat(b);
    if (!isNaN(x) && !isNaN(y) && String(x) === a.trim() && String(y) === b.trim()) { return x - y; }
    return a < b ? -1 : a > b ? 1 : 0;
  }
  function enhance(table) {
    var body = table.tBodies[0];
    if (!body) { return; }
    var size = parseInt(table.getAttribute("data-page") || "25", 10);
    var rows = Array.prototype.slice.call(body.rows);
    var shown = rows, page = 0;
    var bar = document.createElement("div");
    bar.className = "controls";
    var filter = document.createElement("input");
    filter.type = "search";
    filter.placeholder = "filter " + (table.getAttribute("data-name") || "rows");
    filter.setAttribute("aria-label", filter.placeholder);
    var info = document.createElement("span");
    info.className = "info";
    var prev = document.createElement("button");
    prev.type = "button"; prev.textContent = "\u2039 prev";
    var next = document.createElement("button");
    next.type = "button"; next.textContent = "next \u203a";
    bar.appendChild(filter); bar.appendChild(prev); bar.appendChild(info); bar.appendChild(next);
    var box = table.parentNode.classList.contains("scroll") ? table.parentNode : table;  // controls stay outside
    box.parentNode.insertBefore(bar, box);
    function draw() {
      var pages = Math.max(1, Math.ceil(shown.length / size));
      page = Math.min(Math.max(page, 0), pages - 1);
      rows.forEach(function (r) { r.hidden = true; });
      shown.forEach(function (r, i) {
        r.hidden = i < page * size || i >= (page + 1) * size;
        body.appendChild(r);
      });
      var first = shown.length ? page * size + 1 : 0;
      info.textContent = first + "\u2013" + Math.min(shown.length, (page + 1) * size) + " of " + shown.length +
        (shown.length !== rows.length ? " (" + rows.length + " in all)" : "");
      prev.disabled = page === 0;
      next.disabled = page >= pages - 1;
    }
    filter.addEventListener("input", function () {
      var q = filter.value.trim().toLowerCase();
      shown = rows.filter(function (r) { return !q || r.textContent.toLowerCase().indexOf(q) >= 0; });
      page = 0; draw();
    });
    prev.addEventListener("click", function () { page -= 1; draw(); });
    next.addEventListener("click", function () { page += 1; draw(); });
    Array.prototype.forEach.call(table.tHead ? table.tHead.rows[0].cells : [], function (th, col) {
      if (th.classList.contains("nosort")) { return; }
      th.tabIndex = 0;
      th.classList.add("sortable");
      function sort() {
        var asc = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(th.parentNode.cells, function (c) { c.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var order = function (a, b) { return (asc ? 1 : -1) * compare(cellKey(a, col), cellKey(b, col)); };
        rows.sort(order); shown.sort(order); page = 0; draw();
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") { sort(); } });
    });
    draw();
    table.showAll = function (all) {
      shown.forEach(function (r) { r.hidden = false; });
      if (!all) { draw(); }
    };
  }
  var tables = document.querySelectorAll("table.data");
  Array.prototype.forEach.call(tables, enhance);
  var opened = [];
  window.addEventListener("beforeprint", function () {
    Array.prototype.forEach.call(tables, function (t) { if (t.showAll) { t.showAll(true); } });
    opened = Array.prototype.filter.call(document.querySelectorAll("details"), function (d) { return !d.open; });
    opened.forEach(function (d) { d.open = true; });
  });
  window.addEventListener("afterprint", function () {
    Array.prototype.forEach.call(tables, function (t) { if (t.showAll) { t.showAll(false); } });
    opened.forEach(function (d) { d.open = false; });
  });
  document.documentElement.setAttribute("data-ready", "1");
})();
