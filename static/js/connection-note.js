// Polls keep going through a restart; say so while they fail, so the page never
// looks frozen on an old state. A file, not an inline script: the CSP allows only 'self'.
(function () {
  var note = document.getElementById("connection-note");
  if (!note) { return; }
  function failed() { note.hidden = false; }
  document.addEventListener("htmx:sendError", failed);
  document.addEventListener("htmx:responseError", failed);
  document.addEventListener("htmx:afterSettle", function () { note.hidden = true; });
})();
