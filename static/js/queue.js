/* A queue's page: N starts reviewing. A static file, so a strict Content-Security-Policy allows it. */
(function () {
  "use strict";
  document.addEventListener("keydown", function (e) {
    if (e.target.closest("input, textarea, select") || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "n" || e.key === "N") {
      var f = document.getElementById("queue-start");
      if (f) { e.preventDefault(); f.submit(); }
    }
  });
})();
