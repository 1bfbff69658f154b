// Ticked checkboxes of a bulk form (inbox answers, task list actions: issue 12 items 1 and 5)
// survive the live updates that replace their rows: what was ticked is remembered and put back
// whenever the page changes. Without JavaScript there are no live updates, so nothing to keep.
(function () {
  "use strict";
  var picked = {};
  var SELECTOR = "input[type=checkbox][form][name]";
  function key(box) { return box.getAttribute("form") + ":" + box.name + ":" + box.value; }
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (box.matches && box.matches(SELECTOR)) { picked[key(box)] = box.checked; }
  });
  function restore() {
    document.querySelectorAll(SELECTOR).forEach(function (box) {
      var k = key(box);
      if (Object.prototype.hasOwnProperty.call(picked, k) && box.checked !== picked[k]) { box.checked = picked[k]; }
    });
  }
  new MutationObserver(restore).observe(document.body, { subtree: true, childList: true });
})();
