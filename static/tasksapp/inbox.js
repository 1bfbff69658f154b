// The inbox's keyboard: j/k move between questions, Enter opens (the browser
// toggles a focused <summary>), Esc closes, x ticks the question for a bulk answer. No inline
// script anywhere (CSP); the page works the same without this file. docs/operator.md.
(function () {
  "use strict";
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("#inbox-items details.inbox-item > summary")); }
  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(target.tagName));
  }
  function move(step) {
    var all = rows();
    if (!all.length) { return; }
    var active = document.activeElement && document.activeElement.closest ? document.activeElement.closest("details.inbox-item") : null;
    var index = active ? all.indexOf(active.querySelector("summary")) : -1;
    var next = all[Math.max(0, Math.min(all.length - 1, index + step))];
    next.focus();
    next.scrollIntoView({ block: "nearest" });
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (event.key === "Escape") {
      var open = document.activeElement && document.activeElement.closest ? document.activeElement.closest("details.inbox-item[open]") : null;
      if (open) { open.open = false; open.querySelector("summary").focus(); event.preventDefault(); }
      return;
    }
    if (typing(event.target)) { return; }
    if (event.key === "j") { move(1); event.preventDefault(); }
    else if (event.key === "k") { move(-1); event.preventDefault(); }
    else if (event.key === "x") {
      var row = document.activeElement && document.activeElement.closest ? document.activeElement.closest(".inbox-row") : null;
      var pick = row ? row.querySelector("input.inbox-pick") : null;
      if (pick) { pick.click(); event.preventDefault(); }
    }
  });
  // An opened question: focus its first field, so Enter, type, Enter answers it.
  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (!details.classList || !details.classList.contains("inbox-item") || !details.open) { return; }
    var field = details.querySelector("form input:not([type=hidden]), form select, form textarea, form button");
    if (field && document.activeElement === details.querySelector("summary")) { field.focus({ preventScroll: true }); }
  }, true);
  // After an in-place answer, keep the keyboard where it was: on the next question. The answer's
  // outcome lands in #inbox-status, which names the task; its rows may already be gone (the live
  // socket can remove them before the answer's response arrives).
  document.body.addEventListener("htmx:afterSwap", function (event) {
    var swapped = event.detail && event.detail.target;
    if (!swapped || swapped.id !== "inbox-status") { return; }
    var status = document.getElementById("inbox-status");  // the new one (outerHTML)
    if (!status) { return; }
    var task = document.getElementById("inbox-task-" + (status.getAttribute("data-task") || ""));
    var summary = task ? task.querySelector("details.inbox-item > summary") : null;
    if (!summary) {
      var all = rows();
      var after = task ? all.filter(function (s) { return task.compareDocumentPosition(s) & Node.DOCUMENT_POSITION_FOLLOWING; }) : [];
      summary = after[0] || all[all.length - 1];
    }
    if (summary) { summary.focus({ preventScroll: true }); }
  });
})();
