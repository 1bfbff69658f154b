// Live indicator, TTL countdowns, copy buttons. Everything works without this file; it only helps.
(function () {
  "use strict";
  function setLive(state, text) {
    document.body.dataset.live = state;
    var el = document.getElementById("live-indicator");
    if (el) { el.textContent = text; el.className = "live " + state; }
  }
  document.addEventListener("htmx:wsOpen", function () { setLive("up", "live"); });
  document.addEventListener("htmx:wsClose", function () { setLive("down", "reconnecting…"); });
  document.addEventListener("htmx:wsError", function () { setLive("down", "reconnecting…"); });

  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-deadline]").forEach(function (el) {
      var left = Math.round((Date.parse(el.dataset.deadline) - now) / 1000);
      if (isNaN(left)) { return; }
      if (left <= 0) { el.textContent = "TTL passed"; return; }
      var h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
      el.textContent = (h ? h + "h " : "") + (h || m ? m + "m " : "") + s + "s left";
    });
    document.querySelectorAll("[data-since]").forEach(function (el) {
      var secs = Math.max(0, Math.round((now - Date.parse(el.dataset.since)) / 1000));
      var h = Math.floor(secs / 3600), m = Math.floor((secs % 3600) / 60), s = secs % 60;
      el.textContent = (h ? h + "h " : "") + (h || m ? m + "m " : "") + s + "s";
    });
  }
  setInterval(tick, 1000);
  document.addEventListener("DOMContentLoaded", function () {
    tick();
    if (document.body.dataset.live === "connecting") { setLive("connecting", "connecting…"); }
  });

  // Run: say what is happening while the server works on the call (the page waits for its answer).
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.id !== "run-form" || form.dataset.running) { return; }
    form.dataset.running = "1";
    var button = document.getElementById("run-button"), status = document.getElementById("run-status");
    var started = Date.now(), limit = form.dataset.callTimeout, server = form.dataset.server;
    if (button) { button.textContent = "Running…"; button.setAttribute("aria-disabled", "true"); }
    function show() {
      var secs = Math.round((Date.now() - started) / 1000);
      if (status) {
        status.textContent = "Waiting for " + server + " to answer: " + secs + " s so far, at most " + limit +
          " s. The tool runs on the server; leaving this page does not stop it.";
      }
    }
    show();
    var timer = setInterval(show, 1000);
    // Back to this page from the next one (the browser's page cache): it is not running any more.
    window.addEventListener("pageshow", function (shown) {
      if (!shown.persisted) { return; }
      clearInterval(timer);
      delete form.dataset.running;
      if (button) { button.textContent = "Run"; button.removeAttribute("aria-disabled"); }
    }, { once: true });
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy-target]");
    if (!button) { return; }
    var source = document.getElementById(button.dataset.copyTarget);
    if (source && navigator.clipboard) {
      navigator.clipboard.writeText(source.textContent).then(function () { button.textContent = "Copied"; });
    }
  });
})();
