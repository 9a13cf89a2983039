// evalsite: small behaviours every page shares. Pages work without this file; it adds keyboard navigation,
// live elapsed clocks, copy buttons, confirmations, the share panel and the platform's key names.
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
  // Retry countdowns: <span data-until="ISO 8601" data-prefix="retry in"> says "retry in 7 s", then "retrying".
  function countDown() {
    document.querySelectorAll("[data-until]").forEach(function (el) {
      var until = Date.parse(el.dataset.until);
      if (isNaN(until)) return;
      var seconds = Math.ceil((until - Date.now()) / 1000);
      el.textContent = seconds > 0 ? el.dataset.prefix + " " + seconds + " s" : "retrying";
    });
  }
  // Ages in whole seconds: <span data-age-since="ISO 8601"> says "45 s" ("3 calls waiting on the model for 45 s").
  function countUp() {
    document.querySelectorAll("[data-age-since]").forEach(function (el) {
      var since = Date.parse(el.dataset.ageSince);
      if (!isNaN(since)) el.textContent = Math.max(0, Math.floor((Date.now() - since) / 1000)) + " s";
    });
  }
  setInterval(function () { tick(); countDown(); countUp(); }, 1000);

  // ---- Copy buttons: <button data-copy="#element-id"> copies an input's or textarea's value. ----
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    // Plain-HTTP pages have no clipboard API: copy from a temporary, visible-to-the-browser textarea.
    var scratch = document.createElement("textarea");
    scratch.value = text;
    scratch.setAttribute("readonly", "");
    scratch.style.position = "fixed";
    scratch.style.opacity = "0";
    document.body.appendChild(scratch);
    scratch.select();
    var ok = document.execCommand("copy");
    document.body.removeChild(scratch);
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.querySelector(button.dataset.copy);
    if (!source) return;
    var label = button.dataset.label || button.textContent;
    button.dataset.label = label;
    var show = function (text) {
      button.textContent = text;
      setTimeout(function () { button.textContent = label; }, 1500);
    };
    copyText("value" in source ? source.value : source.textContent).then(
      function () { show("Copied"); },
      function () { show("Copy failed"); }
    );
  });
  document.addEventListener("focusin", function (event) {
    if (event.target.matches("[data-select-on-focus]")) event.target.select();
  });

  // ---- Key hints: <kbd data-keys="mod+S">Ctrl+S</kbd> names the platform's modifier (⌘ on macOS). ----
  var platform = (navigator.userAgentData && navigator.userAgentData.platform) || navigator.platform || "";
  var mac = /mac|iphone|ipad|ipod/i.test(platform);
  function keyHints(root) {
    if (!mac) return; // the server already wrote Ctrl
    root.querySelectorAll("[data-keys]").forEach(function (el) {
      el.textContent = el.dataset.keys.replace(/^mod\+/, "⌘").replace("Enter", "↵");
    });
  }
  document.addEventListener("DOMContentLoaded", function () { keyHints(document); });
  document.addEventListener("htmx:load", function (event) { keyHints(event.target); });

  // ---- Disclosures: <a href="#panel" data-disclose="panel"> opens and closes #panel (class is-open).
  // Without JS the link's #panel anchor opens it (CSS :target) and a plain href="#" closes it. ----
  function setOpen(panel, open) {
    panel.classList.toggle("is-open", open);
    panel.classList.toggle("is-closed", !open);
    document.querySelectorAll('[data-disclose="' + panel.id + '"][aria-expanded]').forEach(function (el) {
      el.setAttribute("aria-expanded", String(open));
    });
  }
  function isOpen(panel) {
    return panel.classList.contains("is-open") || (panel.matches(":target") && !panel.classList.contains("is-closed"));
  }
  document.addEventListener("click", function (event) {
    var toggle = event.target.closest("[data-disclose]");
    if (!toggle) return;
    var panel = document.getElementById(toggle.dataset.disclose);
    if (!panel) return;
    event.preventDefault();
    var open = !isOpen(panel);
    setOpen(panel, open);
    if (open) {
      panel.scrollIntoView({ block: "nearest" });
      panel.focus({ preventScroll: true });
    } else {
      var opener = document.querySelector('[data-disclose="' + panel.id + '"][aria-expanded]');
      if (opener) opener.focus();
    }
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    // The panel the focus is in, or with the focus nowhere in particular, the one open.
    var panel = event.target === document.body ? document.querySelector(".is-open[id]") : event.target.closest(".is-open[id]");
    if (panel && document.querySelector('[data-disclose="' + panel.id + '"]')) {
      setOpen(panel, false);
      var opener = document.querySelector('[data-disclose="' + panel.id + '"][aria-expanded]');
      if (opener) opener.focus();
    }
  });
  // A polled header is swapped in with aria-expanded="false": say again what is open.
  document.addEventListener("htmx:afterSettle", function () {
    document.querySelectorAll("[data-disclose][aria-expanded]").forEach(function (el) {
      var panel = document.getElementById(el.dataset.disclose);
      if (panel) el.setAttribute("aria-expanded", String(isOpen(panel)));
    });
  });

  // ---- Forms that ask first: <form data-confirm="Question?"> sends confirm=yes once the user agrees.
  // Without JS the server asks on a page of its own instead. ----
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches("form[data-confirm]")) return;
    if (!window.confirm(form.dataset.confirm)) {
      event.preventDefault();
      return;
    }
    if (!form.querySelector("input[name=confirm]")) {
      var input = document.createElement("input");
      input.type = "hidden";
      input.name = "confirm";
      input.value = "yes";
      form.appendChild(input);
    }
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

  // A row named in the address (the `n` key's next page) is the selected one.
  function selectNamed() {
    var match = /^#conv-\d+$/.exec(window.location.hash);
    var table = document.querySelector("table[data-keynav]");
    var row = match && table && document.getElementById(match[0].slice(1));
    if (row && table.contains(row)) select(table, row);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", selectNamed);
  else selectNamed();
  // A short note beside the table, in a live region: what a key could not do.
  function say(table, text) {
    var note = document.getElementById("keynav-note");
    if (!note) {
      note = document.createElement("p");
      note.id = "keynav-note";
      note.className = "filter-note";
      note.setAttribute("role", "status");
      table.parentNode.insertBefore(note, table);
    }
    note.textContent = text;
  }

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
    if (key === "n") {  // the next failed or errored conversation below the selected row
      var all = rows(table);
      var from = all.findIndex(function (r) { return r.classList.contains("is-selected"); });
      var next = all.slice(from + 1).find(function (r) {
        return r.classList.contains("row-failed") || r.classList.contains("row-error");
      });
      event.preventDefault();
      if (next) {
        select(table, next);
      } else if (table.dataset.nextFailure) {
        // The table's later pages: the server names the page of the next failure and its row.
        window.location.assign(table.dataset.nextFailure);
      } else {
        say(table, "No more failures.");
      }
    } else if (key === "j" || key === "ArrowDown") {
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

  // ---- The review queue: number keys pick a score, r writes a reason, Enter (or Ctrl/Cmd+Enter) saves and
  // goes on. In the reason box the keys type: Enter saves, Shift+Enter is a new line and Esc hands the keys
  // back to the queue. A radio button keeps the queue's keys: only a field that takes text holds them. ----
  function takesText(target) {
    return target.closest("textarea, select, input:not([type=radio]):not([type=checkbox]), [contenteditable=''], [contenteditable='true']");
  }
  function saveLabel(form) {
    if (form.querySelector("input[name=score]:checked")) {
      form.requestSubmit();
      return;
    }
    var note = form.querySelector("[data-label-note]");
    if (!note) {
      note = document.createElement("span");
      note.className = "v-failed";
      note.setAttribute("role", "alert");
      note.dataset.labelNote = "";
      form.querySelector(".label-actions").appendChild(note);
    }
    note.textContent = "Choose a score first (a number key).";
  }
  document.addEventListener("keydown", function (event) {
    var form = document.querySelector("[data-review] form[data-label-form]");
    if (!form || event.defaultPrevented || event.altKey) return;
    var reason = form.querySelector("[data-label-reason]");
    if (event.target === reason) {
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        saveLabel(form);
      } else if (event.key === "Escape") {
        event.preventDefault();
        document.querySelector("[data-review]").focus();
      }
      return;
    }
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      saveLabel(form);
      return;
    }
    if (event.ctrlKey || event.metaKey || takesText(event.target)) return;
    var scores = form.querySelectorAll("input[name=score]");
    var number = parseInt(event.key, 10);
    if (number >= 1 && number <= scores.length) {
      event.preventDefault();
      scores[number - 1].checked = true;
    } else if (event.key === "r") {
      event.preventDefault();
      reason.focus();
    } else if (event.key === "Enter") {
      event.preventDefault();
      saveLabel(form);
    }
  });

  // A label's scale decides the scores offered: choosing another one reloads the page with it.
  document.addEventListener("change", function (event) {
    if (!event.target.matches("[data-label-scale]")) return;
    var url = new URL(window.location.href);
    url.searchParams.set("scale", event.target.value);
    window.location.assign(url.toString());
  });

  // ---- A database that is away answers 503 (evalsite.middleware.DatabaseUnavailable). htmx swaps nothing
  // for an error and its polls go on, so the page keeps what it showed and says why it stands still, until a
  // request gets through again. ----
  var AWAY_ID = "database-away";
  document.addEventListener("htmx:responseError", function (event) {
    if (event.detail.xhr.status !== 503 || document.getElementById(AWAY_ID)) return;
    var note = document.createElement("div");
    note.id = AWAY_ID;
    note.className = "flash flash-warning";
    note.setAttribute("role", "status");
    note.textContent = "Database unavailable, retrying…";
    var main = document.getElementById("main") || document.body;
    main.insertBefore(note, main.firstChild);
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var note = document.getElementById(AWAY_ID);
    if (note && event.detail.successful) note.remove();
  });
})();
