// Sort the trials table by a clicked column (numbers as numbers, by each cell's data-sort)
// and filter its rows by free text and by state. Inline: the report works offline.
(function () {
  var table = document.getElementById("trials-table");
  if (!table) { return; }
  var body = table.tBodies[0];
  var heads = table.tHead.rows[0].cells;
  var text = document.getElementById("trials-filter");
  var state = document.getElementById("trials-status-filter");
  var count = document.getElementById("trials-count");
  function key(row, i, numeric) {
    var raw = row.cells[i].getAttribute("data-sort");
    if (!numeric) { return raw.toLowerCase(); }
    return raw === "" ? null : parseFloat(raw);
  }
  function sortBy(i) {
    var numeric = heads[i].getAttribute("data-type") === "num";
    var ascending = heads[i].getAttribute("aria-sort") !== "ascending";
    for (var h = 0; h < heads.length; h++) { heads[h].removeAttribute("aria-sort"); }
    heads[i].setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a, i, numeric), y = key(b, i, numeric);
      if (x === y) { return 0; }
      if (x === null) { return 1; }  // missing values last either way
      if (y === null) { return -1; }
      return (x < y ? -1 : 1) * (ascending ? 1 : -1);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  function filter() {
    var words = text.value.toLowerCase().trim();
    var wanted = state.value;
    var shown = 0;
    Array.prototype.forEach.call(body.rows, function (r) {
      var ok = (!wanted || r.getAttribute("data-status") === wanted) &&
               (!words || r.textContent.toLowerCase().indexOf(words) >= 0);
      r.style.display = ok ? "" : "none";
      if (ok) { shown++; }
    });
    count.textContent = shown + " of " + body.rows.length + " trials";
  }
  Array.prototype.forEach.call(heads, function (h, i) {
    h.addEventListener("click", function () { sortBy(i); });
  });
  text.addEventListener("input", filter);
  state.addEventListener("change", filter);
})();
