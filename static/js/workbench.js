/* The episode workbench: step viewer (filmstrip, arrows, zoom) and keyboard shortcuts. Our own code, no CDN.
   Everything shown comes from data-* attributes and is set with textContent or src, never as HTML. */
(function () {
  "use strict";
  var strip = document.getElementById("filmstrip");
  var frames = strip ? Array.prototype.slice.call(strip.querySelectorAll("figure[data-step]")) : [];
  var current = 0;

  function show(n) {
    if (!frames.length) return;
    current = Math.max(0, Math.min(frames.length - 1, n));
    var f = frames[current];
    frames.forEach(function (x) { x.classList.toggle("current", x === f); });
    document.getElementById("step-image").src = f.dataset.url;
    document.getElementById("step-image").alt = f.dataset.name;
    document.getElementById("step-zoom").href = f.dataset.url;
    document.getElementById("step-name").textContent = f.dataset.name + " (" + (current + 1) + "/" + frames.length + ")";
    document.getElementById("step-caption").textContent = f.dataset.caption || "";
    var reasoning = document.getElementById("step-reasoning");
    if (reasoning) {
      document.getElementById("step-reasoning-text").textContent = f.dataset.reasoning || "";
      reasoning.hidden = !f.dataset.reasoning;
    }
    drawTarget(f);
    f.scrollIntoView({block: "nearest", inline: "nearest"});
  }

  // The click target's box, drawn over the screenshot in the screenshot's own pixels (an SVG, so no inline style).
  function drawTarget(f) {
    var svg = document.getElementById("step-target");
    if (!svg) return;
    var box = (f.dataset.box || "").split(" ").map(Number);
    var size = (f.dataset.size || "").split(" ").map(Number);
    if (box.length !== 4 || !(size[0] > 0 && size[1] > 0)) { svg.setAttribute("hidden", ""); return; }
    svg.setAttribute("viewBox", "0 0 " + size[0] + " " + size[1]);
    var rect = svg.querySelector("rect");
    ["x", "y", "width", "height"].forEach(function (k, i) { rect.setAttribute(k, String(box[i])); });
    svg.removeAttribute("hidden");
  }

  // A link to #step-N (a judge's citation, an action's "from step_N.png") shows that step in the viewer.
  function showFromHash() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var i = frames.findIndex(function (x) { return x.id === id; });
    if (i >= 0) { show(i); document.getElementById("steps").scrollIntoView({block: "start"}); }
  }
  window.addEventListener("hashchange", showFromHash);

  function toggleZoom(force) {
    var big = document.querySelector(".step-large");
    if (big) big.classList.toggle("zoomed", force);
  }

  frames.forEach(function (f, i) {
    f.addEventListener("click", function (e) { e.preventDefault(); show(i); });
  });
  var zoom = document.getElementById("step-zoom");
  if (zoom) zoom.addEventListener("click", function (e) { e.preventDefault(); toggleZoom(); });
  if (frames.length) { show(0); showFromHash(); }

  // Long answers open clamped; the button shows the rest (without JS the box scrolls).
  document.querySelectorAll("[data-expand]").forEach(function (button) {
    var box = document.getElementById(button.dataset.expand);
    if (!box || box.scrollHeight <= box.clientHeight + 4) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      var open = box.classList.toggle("clamped") === false;
      button.textContent = open ? "Show less" : "Show the whole answer";
    });
  });

  function label(n) {
    var form = document.getElementById("label-form");
    var radio = form && form.querySelector('input[name="verdict"][data-key="' + n + '"]');
    if (!radio) return;
    radio.checked = true;
    form.requestSubmit();   // htmx handles the submit event; without htmx it is a normal post
  }

  function toggleShortcuts() {
    var d = document.getElementById("shortcuts");
    if (!d) return;
    if (d.open) d.close(); else d.showModal();
  }
  document.querySelectorAll("[data-shortcuts-open]").forEach(function (b) { b.addEventListener("click", toggleShortcuts); });

  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.target.closest && e.target.closest("input[type=text], input:not([type]), textarea, select")) return;
    var key = e.key;
    if (key === "?") { e.preventDefault(); toggleShortcuts(); return; }
    if (key === "Escape") { toggleZoom(false); return; }
    if (key === "ArrowRight") { e.preventDefault(); show(current + 1); return; }
    if (key === "ArrowLeft") { e.preventDefault(); show(current - 1); return; }
    if (key === "z" || key === "Z") { toggleZoom(); return; }
    if (key === "1" || key === "2" || key === "3") { e.preventDefault(); label(key); return; }
    if (key === "n" || key === "N") {
      var next = document.getElementById("queue-next");
      if (next) { e.preventDefault(); next.submit(); }
      return;
    }
    if (key === "p" || key === "P") {
      var prev = document.getElementById("queue-previous");
      if (prev) { e.preventDefault(); window.location.href = prev.href; }
    }
  });
})();
