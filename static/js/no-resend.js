// An answer to a posted form that a reload would post again (409: an assessment is already
// running) names the address to reload as instead: the form, filled in, read with a GET.
const reloadAs = document.querySelector("[data-reload-as]");
if (reloadAs) {
  history.replaceState(null, "", reloadAs.dataset.reloadAs);
}
