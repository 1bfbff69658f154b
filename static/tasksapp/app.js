// Live updates, TTL countdowns, copy buttons. Everything works without this file; it only helps.
// No eval and no inline code anywhere: the Content-Security-Policy allows scripts from this
// origin only (docs/live.md).
(function () {
  "use strict";
  var SIGNED_OUT = 4401, LIFETIME = 4408, POLL_MS = 5000;

  // The page's words in its language: base.html's JSON block (tasksapp/templatetags/ui_strings.py).
  var strings = null;
  function uiString(key, values) {
    if (strings === null) {
      var block = document.getElementById("ui-strings");
      try { strings = block ? JSON.parse(block.textContent) : {}; } catch (e) { strings = {}; }
    }
    var text = strings[key] || key;
    return text.replace(/%\((\w+)\)s/g, function (all, name) { return values && name in values ? values[name] : all; });
  }
  window.uiString = uiString;

  function setLive(state, text) {
    document.body.dataset.live = state;
    var el = document.getElementById("live-indicator");
    if (el) { el.textContent = text; el.className = "live " + state; }
  }

  // The session ended (logout elsewhere, deactivation, password change): say so, stop trying.
  function signedOut() {
    if (document.body.dataset.live === "signed-out") { return; }
    setLive("signed-out", uiString("signed_out"));
    var notice = document.getElementById("signed-out");
    if (notice) { notice.hidden = false; }
    if (window.htmx) { htmx.config.wsReconnectDelay = function () { return 2147483647; }; }
  }

  function loginPath() {
    var link = document.querySelector("#signed-out a");
    return link ? new URL(link.href).pathname : "/login/";
  }

  // This page again, as HTML; null (and the notice) when the session has ended.
  function fetchPage() {
    return fetch(window.location.href, { credentials: "same-origin", headers: { "HX-Request": "true" } })
      .then(function (response) {
        if (new URL(response.url).pathname === loginPath()) { signedOut(); return null; }
        return response.ok ? response.text() : null;
      })
      .catch(function () { return null; });
  }

  // Replace one element with its current version from the page's own URL.
  function reloadElement(id) {
    if (!/^[A-Za-z0-9_-]+$/.test(id) || !document.getElementById(id)) { return; }
    fetchPage().then(function (html) {
      if (html && document.getElementById(id)) {
        htmx.swap("#" + id, html, { swapStyle: "outerHTML", ignoreTitle: true }, { select: "#" + id });
      }
    });
  }

  if (window.htmx) {
    // A reconnecting socket asks for what changed since the server last said the page was in step.
    var create = htmx.createWebSocket || function (url) { return new WebSocket(url, []); };
    htmx.createWebSocket = function (url) {
      var sync = document.getElementById("live-sync");
      var since = sync ? sync.dataset.since : "";
      var full = since ? url.replace(/([?&])since=[^&]*&?/, "$1").replace(/[?&]$/, "") : url;
      if (since) { full += (full.indexOf("?") < 0 ? "?" : "&") + "since=" + encodeURIComponent(since); }
      return create(full);
    };
  }

  // What an out-of-band part swaps into: the selector after "style:", else the element's own id.
  function oobTarget(element) {
    var spec = element.getAttribute("hx-swap-oob") || "";
    var colon = spec.indexOf(":");
    if (colon >= 0) { return spec.slice(colon + 1).trim(); }
    return element.id ? "#" + CSS.escape(element.id) : "";
  }

  // A frame serves every page of its kind, so some of its parts target what this page does not
  // show (a row on another page of the list, a question filtered out, an entry to delete before
  // adding it): those are left out rather than handed to htmx, which reports each as an error.
  function presentOnly(message) {
    var holder = document.createElement("template");
    holder.innerHTML = message;
    var prune = function (parent) {
      Array.prototype.slice.call(parent.children).forEach(function (part) {
        if (part.tagName === "TEMPLATE") {
          prune(part.content);
          if (!part.content.children.length) { part.remove(); }
          return;
        }
        if (!part.hasAttribute("hx-swap-oob")) { return; }
        var found = null;
        try { found = document.querySelector(oobTarget(part) || ":not(*)"); } catch (error) { found = null; }
        if (!found) { part.remove(); }
      });
    };
    prune(holder.content);
    return holder.innerHTML;
  }

  // Frames are out-of-band swaps; htmx's own swap also unwraps <template> (table rows travel in one).
  document.addEventListener("htmx:wsBeforeMessage", function (event) {
    event.preventDefault();
    var message = presentOnly(event.detail.message);
    if (message.trim()) { htmx.swap(document.body, message, { swapStyle: "none", ignoreTitle: true }); }
    var hint = document.getElementById("live-reload");
    if (hint && hint.dataset.reload) {
      var ids = hint.dataset.reload.split(" ");
      hint.dataset.reload = "";
      ids.forEach(reloadElement);
    }
  });
  document.addEventListener("htmx:wsOpen", function () { setLive("up", uiString("live")); });
  document.addEventListener("htmx:wsClose", function (event) {
    var code = event.detail.event ? event.detail.event.code : 0;
    if (code === SIGNED_OUT) { signedOut(); return; }
    if (document.body.dataset.live === "signed-out") { return; }
    setLive("down", uiString("reconnecting"));
    if (code === LIFETIME) {
      var socket = event.detail.socketWrapper;
      setTimeout(function () { socket.reconnect(); }, Math.random() * 1000);
    }
  });
  document.addEventListener("htmx:wsError", function () {
    if (document.body.dataset.live !== "signed-out") { setLive("down", uiString("reconnecting")); }
  });

  // While the socket is down, fetch the page every 5 s and swap in its live region.
  setInterval(function () {
    var live = document.body.dataset.live;
    if (live !== "down" && live !== "connecting") { return; }
    if (!document.getElementById("live-region")) { return; }
    fetchPage().then(function (html) {
      if (html && document.body.dataset.live !== "up" && document.getElementById("live-region")) {
        htmx.swap("#live-region", html, { swapStyle: "outerHTML", ignoreTitle: true }, { select: "#live-region" });
      }
    });
  }, POLL_MS);

  // Forms that arrived over the socket carry no CSRF token (fragments hold nothing per user):
  // they get this page's own token when submitted.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.method.toLowerCase() !== "post" || form.querySelector("input[name=csrfmiddlewaretoken]")) { return; }
    var headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
    if (!headers["X-CSRFToken"]) { return; }
    var input = document.createElement("input");
    input.type = "hidden";
    input.name = "csrfmiddlewaretoken";
    input.value = headers["X-CSRFToken"];
    form.appendChild(input);
  }, true);

  // '4s', '3m 12s', '2h 5m', '3d 4h': the same units as the pages the server renders
  // (seconds_text in tasksapp/templatetags/dashboard.py), so a live update never changes the format.
  function duration(secs) {
    var d = Math.floor(secs / 86400), h = Math.floor((secs % 86400) / 3600);
    var m = Math.floor((secs % 3600) / 60), s = secs % 60;
    if (d) { return d + "d " + h + "h"; }
    if (h) { return h + "h " + m + "m"; }
    return m ? m + "m " + s + "s" : s + "s";
  }
  window.durationText = duration;

  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-deadline]").forEach(function (el) {
      var left = Math.round((Date.parse(el.dataset.deadline) - now) / 1000);
      if (isNaN(left)) { return; }
      el.textContent = left > 0 ? uiString("ttl_left", { time: duration(left) }) : uiString("ttl_passed");
    });
    document.querySelectorAll("[data-since]:not(#live-sync)").forEach(function (el) {
      var since = Date.parse(el.dataset.since);
      if (isNaN(since)) { return; }
      el.textContent = duration(Math.max(0, Math.round((now - since) / 1000)));
    });
  }
  setInterval(tick, 1000);
  document.addEventListener("DOMContentLoaded", function () {
    tick();
    if (document.body.dataset.live === "connecting") { setLive("connecting", uiString("connecting")); }
  });

  // Run: say what is happening while the server works on the call (the page waits for its answer).
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.id !== "run-form" || form.dataset.running) { return; }
    form.dataset.running = "1";
    var button = document.getElementById("run-button"), status = document.getElementById("run-status");
    var started = Date.now(), limit = form.dataset.callTimeout, server = form.dataset.server;
    if (button) { button.textContent = uiString("running"); button.setAttribute("aria-disabled", "true"); }
    function show() {
      var secs = Math.round((Date.now() - started) / 1000);
      if (status) {
        status.textContent = uiString("waiting", { server: server, secs: secs, limit: limit });
      }
    }
    show();
    var timer = setInterval(show, 1000);
    // Back to this page from the next one (the browser's page cache): it is not running any more.
    window.addEventListener("pageshow", function (shown) {
      if (!shown.persisted) { return; }
      clearInterval(timer);
      delete form.dataset.running;
      if (button) { button.textContent = uiString("run"); button.removeAttribute("aria-disabled"); }
    }, { once: true });
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy-target]");
    if (!button) { return; }
    var source = document.getElementById(button.dataset.copyTarget);
    if (source && navigator.clipboard) {
      navigator.clipboard.writeText(source.textContent).then(function () { button.textContent = uiString("copied"); });
    }
  });

  // --- shell: time zone, theme, keyboard shortcuts ------------------------------------------

  // The browser's time zone, for the server to render times in when the user chose none
  // (tasksapp/prefs.py reads the cookie; without JavaScript the server's zone is used).
  try {
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    var cookie = document.cookie.split("; ").filter(function (c) { return c.indexOf("tz=") === 0; })[0];
    // Zone names (Area/City_Name, Etc/GMT+3) need no escaping in a cookie; anything else is not sent.
    if (zone && /^[A-Za-z0-9_+\/-]{1,64}$/.test(zone) && (!cookie || cookie.slice(3) !== zone)) {
      document.cookie = "tz=" + zone + "; path=/; max-age=31536000; samesite=lax";
    }
  } catch (ignored) { /* no Intl: the server's zone */ }

  // The theme buttons post in the background and switch at once: no reload (the form works without this).
  function themeNow() {
    var forced = document.documentElement.dataset.theme;
    if (forced) { return forced; }
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  function setTheme(choice) {
    var form = document.getElementById("theme-form");
    if (!form) { return; }
    document.documentElement.dataset.theme = choice;
    var body = new FormData(form);
    body.set("theme", choice);
    fetch(form.action, { method: "POST", body: body, credentials: "same-origin", headers: { "HX-Request": "true" } });
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest("#theme-form button[name=theme]");
    if (!button) { return; }
    event.preventDefault();
    setTheme(button.value);
  });

  // Keyboard shortcuts: "?" shows them (templates/tasksapp/_shortcuts.html), "g" then a letter goes.
  var GO = { o: "/", t: "/tasks/", i: "/inbox/", s: "/servers/", a: "/audit/", p: "/preferences/" };
  var pendingG = 0;
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) { return; }
    var target = event.target;
    // Typing in a field, or in an open dialog's form, is not a shortcut (a closed dialog's button can keep
    // the focus until the next rendering: it must not swallow the keys that follow).
    if (target.closest && target.closest("input, textarea, select, [contenteditable], [contenteditable=''], dialog[open] form")) {
      if (event.key !== "Escape") { return; }
    }
    var dialog = document.getElementById("shortcuts-dialog");
    if (event.key === "?" && dialog) {
      event.preventDefault();
      if (dialog.open) { dialog.close(); } else { dialog.showModal(); }
      return;
    }
    if (pendingG && Date.now() - pendingG < 1500 && GO[event.key]) {
      pendingG = 0;
      window.location.assign(GO[event.key]);
      return;
    }
    pendingG = event.key === "g" ? Date.now() : 0;
    if (event.key === "/") {
      var search = document.getElementById("f-q");
      if (search) { event.preventDefault(); search.focus(); } else { window.location.assign("/tasks/#f-q"); }
    } else if (event.key === "d" && document.getElementById("theme-form")) {
      setTheme(themeNow() === "dark" ? "light" : "dark");
    }
  });
})();
