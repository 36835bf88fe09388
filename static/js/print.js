// Print buttons ([data-print]) open the browser's own Print. Delegated from the document, so
// a report that arrives with the poll's last answer has a working button too. A file, not an
// inline script: the CSP allows only 'self'.
document.addEventListener("click", function (event) {
  if (event.target.closest("[data-print]")) { window.print(); }
});
