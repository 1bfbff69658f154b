// Opt-in browser notifications (docs/notifications.md). The worker queues a
// "browser" message for each event a user chose (input needed, a task failed, a server unhealthy;
// their servers and tools) and sends it to that user's open pages over their sockets, as a hidden
// #notify-push element (tasksapp/consumers.py). Here it becomes a Notification when the person
// allowed them. The same key in several tabs is one notification (its tag). No inline script (CSP).
(function () {
  "use strict";
  function say(key, values) { return window.uiString ? window.uiString(key, values) : key; }
  var box = document.getElementById("notify-browser");
  if (box) {
    // The settings page: say what the browser allows, and ask for permission on a click.
    var state = document.getElementById("notify-state");
    var show = function () { state.textContent = ("Notification" in window) ? say("permission_" + Notification.permission) : say("unsupported"); };
    show();
    document.getElementById("notify-permission").addEventListener("click", function () {
      if ("Notification" in window) { Notification.requestPermission().then(show); }
    });
  }
  if (!("Notification" in window) || !document.body) { return; }
  var shown = {};
  function notify() {
    var push = document.getElementById("notify-push");
    if (!push || !push.dataset.key || shown[push.dataset.key]) { return; }
    shown[push.dataset.key] = true;
    if (Notification.permission !== "granted") { return; }
    var url = push.dataset.url || "";
    var note = new Notification("MCP Tasks", { body: push.dataset.text || "", tag: "mcp-" + push.dataset.key });
    note.onclick = function () {
      window.focus();
      if (url.charAt(0) === "/" && url.charAt(1) !== "/") { window.location.assign(url); }
      note.close();
    };
  }
  // The push replaces #notify-push, a child of <body>: an out-of-band swap.
  new MutationObserver(notify).observe(document.body, { childList: true });
})();
