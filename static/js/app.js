// evalsite: small behaviours every page shares. Pages work without this file; it adds keyboard navigation,
// live elapsed clocks and copy buttons.
(function () {
  "use strict";

  function typing(target) {
    return target.closest("input, textarea, select, [contenteditable=''], [contenteditable='true']");
  }

  // ---- Elapsed clocks: <span data-since="ISO 8601"> ticks every second while a run is live. ----
  function formatDuration(seconds) {
    if (seconds < 1) return Math.round(seconds * 1000) + " ms";
    if (seconds < 60) return seconds.toFixed(1) + " s";
    var whole = Math.floor(seconds);
    if (whole < 3600) return Math.floor(whole / 60) + "m " + String(whole % 60).padStart(2, "0") + "s";
    return Math.floor(whole / 3600) + "h " + String(Math.floor((whole % 3600) / 60)).padStart(2, "0") + "m";
  }
  function tick() {
    document.querySelectorAll("[data-since]").forEach(function (el) {
      var since = Date.parse(el.dataset.since);
      if (!isNaN(since)) el.textContent = formatDuration(Math.max(0, (Date.now() - since) / 1000));
    });
  }
  setInterval(tick, 1000);

  // ---- Copy buttons: <button data-copy="#input-id">. ----
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (!button) return;
    var input = document.querySelector(button.dataset.copy);
    if (!input) return;
    var done = function () {
      var label = button.textContent;
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = label; }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(input.value).then(done);
    } else {
      input.select();
      document.execCommand("copy");
      done();
    }
  });
  document.addEventListener("focusin", function (event) {
    if (event.target.matches("[data-select-on-focus]")) event.target.select();
  });

  // ---- Tables you can walk with j / k and open with Enter: <table data-keynav>. ----
  var selectedHref = null;

  function rows(table) {
    return Array.prototype.slice.call(table.querySelectorAll("tbody tr")).filter(function (row) {
      return row.querySelector("a[href]");
    });
  }
  function select(table, row) {
    rows(table).forEach(function (r) { r.classList.toggle("is-selected", r === row); });
    if (!row) return;
    selectedHref = row.querySelector("a[href]").getAttribute("href");
    row.scrollIntoView({ block: "nearest" });
  }
  function moveSelection(table, step) {
    var all = rows(table);
    if (!all.length) return;
    var current = all.findIndex(function (r) { return r.classList.contains("is-selected"); });
    var next = current === -1 ? (step > 0 ? 0 : all.length - 1) : Math.min(all.length - 1, Math.max(0, current + step));
    select(table, all[next]);
  }
  // A polled table is replaced every few seconds; keep the row the user was on.
  document.addEventListener("htmx:afterSettle", function () {
    if (!selectedHref) return;
    var table = document.querySelector("table[data-keynav]");
    if (!table) return;
    var row = rows(table).find(function (r) { return r.querySelector("a[href]").getAttribute("href") === selectedHref; });
    if (row) row.classList.add("is-selected");
  });

  // ---- Hotkeys: any element with data-hotkey="j ArrowRight" is clicked by those keys. ----
  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    var key = event.key;
    var target = Array.prototype.find.call(document.querySelectorAll("[data-hotkey]"), function (el) {
      return el.dataset.hotkey.split(" ").indexOf(key) !== -1;
    });
    if (target) {
      event.preventDefault();
      target.click();
      return;
    }
    var table = document.querySelector("table[data-keynav]");
    if (!table) return;
    if (key === "j" || key === "ArrowDown") {
      event.preventDefault();
      moveSelection(table, 1);
    } else if (key === "k" || key === "ArrowUp") {
      event.preventDefault();
      moveSelection(table, -1);
    } else if (key === "Enter" || key === "o") {
      var row = table.querySelector("tr.is-selected");
      if (row) {
        event.preventDefault();
        row.querySelector("a[href]").click();
      }
    }
  });
})();
