// The job's elapsed seconds and its time left count on between polls, and while the
// server cannot be reached: the page's first fragment carries the server's figure
// (data-elapsed, to the tenth in data-elapsed-exact where there is a time left), and the
// count goes on from it. A poll answered 304 hands htmx the fragment the browser kept,
// with the seconds of its first answer: the count neither restarts nor goes back from
// those. It restarts from the server's figure when the status changes (a pending job
// counts from its submit, a running one from its start) or when the server is ahead.
// The time left is worked out here as the server works it out (estimate.seconds_left,
// halves rounded up), from what the fragment gives once: the progress and the recent
// jobs' typical time, the job's own pace taking over from the typical one as it goes. Screen readers get it from the progress bar's aria-valuetext, not
// from the live region, which they would otherwise read out every second.
// A file, not an inline script: the CSP allows only 'self'.
(function () {
  var PRIOR_SHARE = 0.25;  // estimate.PRIOR_SHARE
  var FIRST_PROGRESS = 10;  // estimate.FIRST_PROGRESS
  var base = 0;
  var since = Date.now();
  var status = null;
  function find(selector) { return document.querySelector("#job-status " + selector); }
  function now() { return base + (Date.now() - since) / 1000; }
  function read() {
    var el = find(".elapsed[data-elapsed]");
    if (!el) { status = null; return; }
    var exact = find(".left[data-elapsed-exact]");
    var given = Number((exact || el).getAttribute(exact ? "data-elapsed-exact" : "data-elapsed")) || 0;
    var current = document.getElementById("job-status").getAttribute("data-status");
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
    if (!(progress >= 0 && progress < 100)) { return null; }
    if (typical > 0 && progress === 0) {
      return elapsed < typical ? Math.max(1, Math.floor(typical - elapsed + 0.5)) : null;
    }
    var pace;
    if (typical > 0) {
      pace = (progress + 100 * PRIOR_SHARE) / (elapsed + PRIOR_SHARE * typical);
    } else if (progress >= FIRST_PROGRESS && elapsed > 0) {
      pace = progress / elapsed;
    } else {
      return null;
    }
    return Math.max(1, Math.floor((100 - progress) / pace + 0.5));
  }
  function words(el, left) {
    if (left < 60) { return el.getAttribute("data-seconds").replace("{n}", left); }
    return el.getAttribute("data-minutes").replace("{n}", Math.ceil(left / 60));
  }
  function tick() {
    var elapsed = now();
    var el = find(".elapsed[data-elapsed]");
    if (el) { el.textContent = String(Math.floor(elapsed)); }
    var left = find(".left[data-progress]");
    if (!left) { return; }
    var seconds = secondsLeft(left, elapsed);
    var said = seconds === null ? "" : words(left, seconds);
    left.textContent = said ? " · " + said : "";
    var bar = find("progress");
    if (bar) {
      var value = bar.getAttribute("value") + "%";
      bar.setAttribute("aria-valuetext", said ? value + ", " + said : value);
    }
  }
  read();
  document.addEventListener("htmx:afterSwap", read);
  document.addEventListener("htmx:afterSettle", read);
  setInterval(tick, 1000);
})();
