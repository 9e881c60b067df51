// kraft console: swaps in the server-rendered panels every data-refresh-ms milliseconds.
// Everything is drawn on the server (tables and SVG charts); this script only refreshes,
// keeping each topic's <details> open or closed as the reader left it.
(function () {
  "use strict";
  var panels = document.getElementById("panels");
  var status = document.getElementById("status");
  var period = parseInt(document.body.getAttribute("data-refresh-ms"), 10) || 2000;

  function openTopics() {
    var state = {};
    panels.querySelectorAll("details[data-topic]").forEach(function (d) {
      state[d.getAttribute("data-topic")] = d.open;
    });
    return state;
  }

  function refresh() {
    fetch("panels", {cache: "no-store"})
      .then(function (resp) {
        if (!resp.ok) { throw new Error("HTTP " + resp.status); }
        return resp.text();
      })
      .then(function (text) {
        var state = openTopics();
        panels.innerHTML = text;
        panels.querySelectorAll("details[data-topic]").forEach(function (d) {
          var name = d.getAttribute("data-topic");
          if (name in state) { d.open = state[name]; }
        });
        status.textContent = "live";
        status.className = "live";
      })
      .catch(function (err) {
        status.textContent = "console not answering (" + err.message + ")";
        status.className = "stale";
      })
      .finally(function () { setTimeout(refresh, period); });
  }

  setTimeout(refresh, period);
})();
