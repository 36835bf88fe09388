// The job's elapsed seconds and its time left count on between polls, and while the
// server cannot be reached: the page's first fragment carries the server's figure in
// data-elapsed, and the count goes on from it. A poll answered 304 hands htmx the
// fragment the browser kept, with the seconds of its first answer: the count neither
// restarts nor goes back from those. It restarts from the server's figure when the
// status changes (a pending job counts from its submit, a running one from its start)
// or when the server is ahead.
// The time left is worked out here as the server works it out (JobView.seconds_left),
// from what the fragment gives once: the recent jobs' typical time, else the progress.
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
  function secondsLeft(el, elapsed) {
    var typical = Number(el.getAttribute("data-typical"));
    var progress = Number(el.getAttribute("data-progress"));
    if (typical > 0 && elapsed < typical) { return Math.max(1, Math.round(typical - elapsed)); }
    if (!(progress > 0 && progress < 100)) { return null; }
    return Math.round(elapsed * (100 - progress) / progress);
  }
  function words(el, left) {
    if (left === null) { return ""; }
    if (left < 60) { return " · " + el.getAttribute("data-seconds").replace("{n}", left); }
    return " · " + el.getAttribute("data-minutes").replace("{n}", Math.ceil(left / 60));
  }
  function tick() {
    var el = counter();
    if (el) { el.textContent = String(now()); }
    var left = document.querySelector("#job-status .left[data-progress]");
    if (left) { left.textContent = words(left, secondsLeft(left, now())); }
  }
  read();
  document.addEventListener("htmx:afterSwap", read);
  document.addEventListener("htmx:afterSettle", read);
  setInterval(tick, 1000);
})();
