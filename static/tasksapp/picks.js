// Ticked checkboxes of a bulk form (inbox answers, task list actions) survive the live updates that
// replace their rows: what was ticked is remembered and put back whenever the page changes. A
// "select all" box (data-select-all="FORM-ID") ticks or clears every box of that form on the page
// and shows whether all, some or none are ticked. Without JavaScript there are no live updates, and
// "select all" is a link that reloads the page with every box ticked (?picked=all).
(function () {
  "use strict";
  var picked = {};
  var SELECTOR = "input[type=checkbox][form][name]";
  function key(box) { return box.getAttribute("form") + ":" + box.name + ":" + box.value; }
  function boxesOf(form) {
    return Array.prototype.filter.call(document.querySelectorAll(SELECTOR), function (box) {
      return box.getAttribute("form") === form && !box.disabled;
    });
  }
  function remember(box) { picked[key(box)] = box.checked; }
  // Every "select all" box and count says how many of its form's boxes are ticked.
  function summarise() {
    document.querySelectorAll("input[data-select-all]").forEach(function (all) {
      var boxes = boxesOf(all.dataset.selectAll);
      var ticked = boxes.filter(function (box) { return box.checked; }).length;
      all.checked = boxes.length > 0 && ticked === boxes.length;
      all.indeterminate = ticked > 0 && ticked < boxes.length;
      all.disabled = boxes.length === 0;
    });
    document.querySelectorAll("[data-picked-count]").forEach(function (count) {
      var ticked = boxesOf(count.dataset.pickedCount).filter(function (box) { return box.checked; }).length;
      var text = window.uiString ? window.uiString("picked", { count: ticked }) : String(ticked);
      count.hidden = ticked === 0;
      if (count.textContent !== text) { count.textContent = text; }  // (a change would wake the observer)
    });
  }
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box.matches) { return; }
    if (box.matches("input[data-select-all]")) {
      boxesOf(box.dataset.selectAll).forEach(function (one) { one.checked = box.checked; remember(one); });
    } else if (box.matches(SELECTOR)) {
      remember(box);
    }
    summarise();
  });
  function restore() {
    document.querySelectorAll(SELECTOR).forEach(function (box) {
      var k = key(box);
      if (Object.prototype.hasOwnProperty.call(picked, k) && box.checked !== picked[k]) { box.checked = picked[k]; }
    });
    summarise();
  }
  document.addEventListener("DOMContentLoaded", function () {
    // Boxes the server rendered ticked (?picked=all) are picks like any other.
    document.querySelectorAll(SELECTOR).forEach(function (box) { if (box.checked) { remember(box); } });
    summarise();
    new MutationObserver(restore).observe(document.body, { subtree: true, childList: true });
  });
})();
