// memhost console: small progressive enhancements. Every page works
// without this file.
(function () {
  "use strict";
  // "Select all" boxes tick every checkbox of the named field.
  document.querySelectorAll("[data-select-all]").forEach(function (box) {
    box.addEventListener("change", function () {
      var name = box.getAttribute("data-select-all");
      box.form.querySelectorAll('input[type=checkbox][name="' + name + '"]').forEach(function (b) {
        b.checked = box.checked;
      });
    });
  });
  // Destructive buttons ask first.
  document.querySelectorAll("[data-confirm]").forEach(function (btn) {
    btn.addEventListener("click", function (ev) {
      if (!window.confirm(btn.getAttribute("data-confirm"))) {
        ev.preventDefault();
      }
    });
  });
  // The realm picker follows the selection.
  document.querySelectorAll("select[data-autosubmit]").forEach(function (sel) {
    sel.addEventListener("change", function () { sel.form.submit(); });
  });
  // A key focuses the search box ("/"), unless one is typing already.
  document.addEventListener("keydown", function (ev) {
    var t = ev.target;
    if (ev.ctrlKey || ev.metaKey || ev.altKey || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)) {
      return;
    }
    // The key is quoted for the selector: a quote or a backslash is a key too.
    var field = document.querySelector('[data-focus-key="' + CSS.escape(ev.key) + '"]');
    if (field) {
      ev.preventDefault();
      field.focus();
      field.select();
    }
  });
})();
