// Copy buttons: a button with data-copy="ID" copies the text of the element
// with that id. Nothing else of the UI needs script of its own.
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
