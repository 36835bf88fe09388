// A print button: the browser's own Print, from a file (the CSP allows only 'self' scripts).
(function () {
  document.querySelectorAll("[data-print]").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () { window.print(); });
  });
})();
