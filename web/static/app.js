// The little the UI does in the browser; every page works without it.
// Loaded in the head (it is small), so that the menu folds before the
// page is drawn; what touches the page waits for it.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  // Copy buttons: a button with data-copy="ID" copies the text of the
  // element with that id.
  document.addEventListener("click", function (ev) {
    var button = ev.target.closest("button[data-copy]");
    if (!button) return;
    var el = document.getElementById(button.getAttribute("data-copy"));
    var status = document.getElementById("copy-status");
    if (!el) return;
    var say = function (msg) { if (status) status.textContent = msg; };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(el.textContent).then(
        function () { say("Copied."); },
        function () { selectText(el); say("Press Ctrl+C (or ⌘C) to copy the selected text."); });
    } else {
      selectText(el);
      say("Press Ctrl+C (or ⌘C) to copy the selected text.");
    }
  });

  function selectText(el) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  // The menu button folds the header's links on a narrow screen.
  document.addEventListener("click", function (ev) {
    var button = ev.target.closest(".menu-toggle");
    if (!button) return;
    var menu = document.getElementById(button.getAttribute("aria-controls"));
    var open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", String(open));
    menu.classList.toggle("open", open);
  });

  // Times: <time data-ago> says how long ago, kept current; <time
  // data-when> says when, in the reader's time zone.
  function ago(t) {
    var s = Math.max(0, Math.round((Date.now() - t) / 1000));
    if (s < 5) return "just now";
    if (s < 60) return s + " s ago";
    if (s < 3600) return Math.floor(s / 60) + " min ago";
    if (s < 48 * 3600) return Math.floor(s / 3600) + " h ago";
    if (s < 30 * 86400) return Math.floor(s / 86400) + " days ago";
    return new Date(t).toISOString().slice(0, 10);
  }
  var when = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short"
  });
  function times(root) {
    root.querySelectorAll("time[data-ago]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("datetime"));
      if (!isNaN(t)) el.textContent = ago(t);
    });
    root.querySelectorAll("time[data-when]:not([data-local])").forEach(function (el) {
      var t = Date.parse(el.getAttribute("datetime"));
      if (isNaN(t)) return;
      el.textContent = when.format(new Date(t));
      el.setAttribute("data-local", "");
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    times(document);
    setInterval(function () { times(document); }, 5000);
  });
  document.addEventListener("htmx:afterSwap", function (ev) { times(ev.target); });
  document.addEventListener("htmx:sseMessage", function (ev) { times(ev.target); });

  // Live updates: when a page's stream of changes is lost, the page says
  // so until it is back; the server then sends the current state, which
  // replaces what went stale. Leaving the page closes its streams: that
  // is no loss.
  var leaving = false, lost = new Set();
  window.addEventListener("pagehide", function () { leaving = true; });
  function liveStatus(msg) {
    var el = document.getElementById("live-status");
    if (el) el.textContent = msg;
  }
  document.addEventListener("htmx:sseError", function (ev) {
    if (leaving) return;
    ev.target.setAttribute("data-live", "lost");
    lost.add(ev.target);
    liveStatus("Reconnecting… Live updates have stopped; this page catches up as soon as the connection is back.");
  });
  document.addEventListener("htmx:sseOpen", function (ev) {
    ev.target.setAttribute("data-live", "open");
    if (!lost.delete(ev.target) || lost.size > 0) return;
    liveStatus("");
  });
})();
