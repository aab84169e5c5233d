// harel monitor: follow the page's data without reloading by hand.
// One request per tab at a time: every 2 s while visible, every 10 s while hidden; when the
// answer's fingerprint differs from the one the page was rendered with, reload the page
// (not while the user is typing in a form field).
(function () {
  "use strict";
  var body = document.body;
  var url = body.dataset.poll;
  var seen = body.dataset.fingerprint;
  if (!url) { return; }
  var VISIBLE_MS = 2000;
  var HIDDEN_MS = 10000;
  var timer = null;

  function typing() {
    var el = document.activeElement;
    return el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT");
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(poll, document.hidden ? HIDDEN_MS : VISIBLE_MS);
  }

  function poll() {
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.ok || response.status === 404 ? response.json() : null; })
      .then(function (answer) {
        if (answer && answer.fingerprint !== undefined && answer.fingerprint !== seen && !typing()) {
          window.location.reload();
          return;
        }
        schedule();
      })
      .catch(schedule);
  }

  document.addEventListener("visibilitychange", schedule);
  schedule();
})();
