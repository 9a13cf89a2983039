// The suite editor: a plain <textarea> with line numbers, two-space Tab, Ctrl/Cmd+S to save,
// Ctrl/Cmd+Enter to save and run, and problems that jump to their line and column when clicked.
(function () {
  "use strict";

  var INDENT = "  ";

  function init() {
    var form = document.querySelector("[data-editor-form]");
    if (!form) return;
    var text = form.querySelector("textarea[name=source]");
    var gutter = form.querySelector("[data-editor-gutter]");
    var position = form.querySelector("[data-editor-pos]");
    // null: what the page shows is not saved yet (a new suite, a copy of an old version, a failed save).
    var saved = form.hasAttribute("data-dirty") ? null : text.value;
    var escaped = false; // after Esc, Tab moves focus out of the editor as usual
    var submitting = false;

    function lineHeight() {
      return parseFloat(getComputedStyle(text).lineHeight) || 20;
    }

    function renderGutter() {
      var count = text.value.split("\n").length;
      if (gutter.dataset.count === String(count)) return;
      var lines = [];
      for (var i = 1; i <= count; i++) lines.push(i);
      gutter.textContent = lines.join("\n");
      gutter.dataset.count = String(count);
    }

    function renderPosition() {
      var before = text.value.slice(0, text.selectionStart);
      var line = before.split("\n").length;
      var column = before.length - before.lastIndexOf("\n");
      var dirty = text.value !== saved;
      position.textContent = (dirty ? "● unsaved · " : "") + "Ln " + line + ", Col " + column;
    }

    // Insert through execCommand where it exists so Ctrl+Z undoes it; fall back to setRangeText.
    function replaceRange(start, end, replacement) {
      text.setSelectionRange(start, end);
      if (!document.execCommand || !document.execCommand("insertText", false, replacement)) {
        text.setRangeText(replacement, start, end, "end");
        text.dispatchEvent(new Event("input", { bubbles: true }));
      }
    }

    function lineStart(offset) {
      return text.value.lastIndexOf("\n", offset - 1) + 1;
    }

    function indent(outdent) {
      var start = text.selectionStart;
      var end = text.selectionEnd;
      var value = text.value;
      var multiline = value.slice(start, end).indexOf("\n") !== -1;
      if (!outdent && !multiline) {
        replaceRange(start, end, INDENT);
        return;
      }
      var from = lineStart(start);
      var to = end > start && value[end - 1] === "\n" ? end - 1 : end;
      var block = value.slice(from, to);
      var changed = block.split("\n").map(function (line) {
        if (!outdent) return INDENT + line;
        return line.replace(/^ {1,2}/, "");
      }).join("\n");
      if (changed === block) return;
      replaceRange(from, to, changed);
      text.setSelectionRange(from, from + changed.length);
    }

    function goTo(line, column) {
      var lines = text.value.split("\n");
      line = Math.max(1, Math.min(line || 1, lines.length));
      var offset = 0;
      for (var i = 0; i < line - 1; i++) offset += lines[i].length + 1;
      offset += Math.max(0, Math.min((column || 1) - 1, lines[line - 1].length));
      text.focus();
      text.setSelectionRange(offset, offset);
      text.scrollTop = Math.max(0, (line - 1) * lineHeight() - text.clientHeight / 3);
      renderPosition();
    }

    function submitWith(selector) {
      var button = form.querySelector(selector);
      if (!button || button.disabled) return; // a role that may not save: the button says which it needs
      submitting = true;
      if (form.requestSubmit) form.requestSubmit(button);
      else button.click();
    }

    text.addEventListener("keydown", function (event) {
      if (event.key === "Escape") {
        escaped = true;
        return;
      }
      if (event.key === "Tab" && !escaped && !event.ctrlKey && !event.metaKey && !event.altKey) {
        event.preventDefault();
        indent(event.shiftKey);
      }
      escaped = false;
    });

    document.addEventListener("keydown", function (event) {
      if (!(event.ctrlKey || event.metaKey)) return;
      if (event.key === "s" || event.key === "S") {
        event.preventDefault();
        submitWith("[data-save]");
      } else if (event.key === "Enter") {
        event.preventDefault();
        submitWith("[data-save-launch]");
      }
    });

    document.addEventListener("click", function (event) {
      var problem = event.target.closest("a.problem[data-line]");
      if (!problem) return;
      event.preventDefault();
      goTo(parseInt(problem.dataset.line, 10), parseInt(problem.dataset.column, 10));
    });

    text.addEventListener("input", function () { renderGutter(); renderPosition(); });
    text.addEventListener("scroll", function () { gutter.scrollTop = text.scrollTop; });
    ["keyup", "click", "select", "focus"].forEach(function (name) { text.addEventListener(name, renderPosition); });
    form.addEventListener("submit", function () { submitting = true; });
    window.addEventListener("beforeunload", function (event) {
      if (!submitting && text.value !== saved) {
        event.preventDefault();
        event.returnValue = "";
      }
    });

    // Keep the gutter as tall as the textarea when the user resizes it.
    if (window.ResizeObserver) {
      new ResizeObserver(function () { gutter.style.height = text.offsetHeight + "px"; }).observe(text);
    }
    renderGutter();
    renderPosition();
    // Typed or pasted before the scripts ran (a slow first load): htmx never saw that input, so the
    // problems panel would wait for the next keystroke. Validate it now, as if just typed.
    if (text.value !== text.defaultValue) {
      setTimeout(function () { text.dispatchEvent(new Event("input", { bubbles: true })); }, 0);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
