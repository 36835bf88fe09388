// The job's elapsed seconds count on between polls, and while the server cannot be
// reached: the page's first fragment carries the server's figure in data-elapsed, and
// the count goes on from it. A poll answered 304 hands htmx the fragment the browser
// kept, with the seconds of its first answer: the count neither restarts nor goes back
// from those. It restarts from the server's figure when the status changes (a pending
// job counts from its submit, a running one from its start) or when the server is ahead.
// A file, not an inline script: the CSP allows only 'self'.
(function () {
  var base = 0;
  var since = Date.now();
  var status = null;
  function counter() { return document.querySelector("#job-status [data-elapsed]"); }
  function now() { return base + Math.floor((Date.now() - since) / 1000); }
  function read() {
    var el = counter();
    if (!el) { status = null; return; }
    var root = document.getElementById("job-status");
    var given = Number(el.getAttribute("data-elapsed")) || 0;
    var current = root.getAttribute("data-status");
    if (current !== status || given > now()) {
      base = given;
      since = Date.now();
    }
    status = current;
    tick();
  }
  function tick() {
    var el = counter();
    if (el) { el.textContent = String(now()); }
  }
  read();
  document.addEventListener("htmx:afterSwap", read);
  document.addEventListener("htmx:afterSettle", read);
  setInterval(tick, 1000);
})();
