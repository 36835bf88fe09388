// The job's elapsed seconds count on between polls, and while the server cannot be
// reached: each fragment carries the server's figure in data-elapsed, and the count
// restarts from it whenever htmx swaps a new one in. A file, not an inline script: the
// CSP allows only 'self'.
(function () {
  var base = 0;
  var since = Date.now();
  function counter() { return document.querySelector("#job-status [data-elapsed]"); }
  function read() {
    var el = counter();
    if (el) { base = Number(el.getAttribute("data-elapsed")) || 0; }
    since = Date.now();
  }
  function tick() {
    var el = counter();
    if (el) { el.textContent = String(base + Math.floor((Date.now() - since) / 1000)); }
  }
  read();
  document.addEventListener("htmx:afterSettle", read);
  setInterval(tick, 1000);
})();
