/* A site's Tasks page, for admins: j/k move, x selects, a/d/r approve/drop/restore the selected tasks (or the
   current one), e edits. A static file, so a strict Content-Security-Policy allows it. */
(function () {
  "use strict";
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.task-row"));
  var form = document.getElementById("tasks-bulk");
  var current = -1;
  var all = document.getElementById("select-all");
  if (all) {
    all.addEventListener("change", function () {
      rows.forEach(function (r) { var b = r.querySelector("input[name=task]"); if (b) b.checked = all.checked; });
    });
  }
  function move(to) {
    if (!rows.length) return;
    if (current >= 0) rows[current].classList.remove("current");
    current = Math.max(0, Math.min(rows.length - 1, to));
    rows[current].classList.add("current");
    rows[current].scrollIntoView({block: "nearest"});
  }
  function box(row) { return row.querySelector("input[name=task]"); }
  function submit(action) {
    var chosen = rows.filter(function (r) { return box(r) && box(r).checked; });
    if (!chosen.length && current >= 0 && box(rows[current])) box(rows[current]).checked = true;
    var button = form && form.querySelector("button[name=action][value=" + action + "]");
    if (button) button.click();
  }
  document.addEventListener("keydown", function (e) {
    if (e.target.closest("input, textarea, select") || e.ctrlKey || e.metaKey || e.altKey) return;
    var keys = {j: function () { move(current + 1); }, k: function () { move(current - 1); },
      x: function () { if (current >= 0 && box(rows[current])) box(rows[current]).checked = !box(rows[current]).checked; },
      a: function () { submit("approve"); }, d: function () { submit("drop"); }, r: function () { submit("restore"); },
      e: function () { if (current >= 0 && rows[current].dataset.edit) window.location = rows[current].dataset.edit; }};
    if (keys[e.key]) { e.preventDefault(); keys[e.key](); }
  });
})();
