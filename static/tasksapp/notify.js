// Opt-in browser notifications (issue 12 item 7). The page's live socket keeps the nav's inbox
// badge current (tasksapp/live/inbox_badge.py); when its count rises and this user turned browser
// notifications on (settings page: stored as data-notify on the badge's page via localStorage),
// the Notification API says so. No inline script (CSP). docs/notifications.md.
(function () {
  "use strict";
  var KEY = "mcpTasksNotify";
  function say(key, values) { return window.uiString ? window.uiString(key, values) : key; }
  var box = document.getElementById("notify-browser");
  if (box) {
    // The settings page: remember the user's choice for the other pages, and ask for permission.
    try { localStorage.setItem(KEY, box.dataset.enabled === "1" ? "1" : "0"); } catch (e) { /* private mode */ }
    var state = document.getElementById("notify-state");
    var show = function () { state.textContent = ("Notification" in window) ? Notification.permission : say("unsupported"); };
    show();
    document.getElementById("notify-permission").addEventListener("click", function () {
      if ("Notification" in window) { Notification.requestPermission().then(show); }
    });
  }
  var wanted = false;
  try { wanted = localStorage.getItem(KEY) === "1"; } catch (e) { wanted = false; }
  if (!wanted || !("Notification" in window)) { return; }
  var last = null;
  function count() {
    var badge = document.getElementById("inbox-badge");
    return badge ? parseInt(badge.dataset.count || "0", 10) : 0;
  }
  last = count();
  new MutationObserver(function () {
    var now = count();
    if (last !== null && now > last && Notification.permission === "granted") {
      new Notification("MCP Tasks", { body: say("questions_waiting", { count: now }), tag: "mcp-inbox" });
    }
    last = now;
  }).observe(document.querySelector("header.top") || document.body, { subtree: true, childList: true, attributes: true });
})();
