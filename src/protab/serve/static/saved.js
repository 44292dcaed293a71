// protab table builder: saved tables (GET/POST /v1/saved, DELETE /v1/saved/{name}): keep the
// request on the form under a name, open one again (its request back on the form, then shown),
// delete one. Uses api, tableRequest, renderDims, placeTicked, setStatus and refused of app.js.
"use strict";

let savedTables = []; // [{name, request, saved}] of GET /v1/saved

async function loadSaved() {
  try {
    savedTables = (await (await api("/v1/saved")).json()).saved || [];
  } catch (error) {
    savedTables = [];
    if (error.status !== 404) refused(error);
  }
  const list = $("saved-list");
  list.replaceChildren(...savedTables.map((t) => option(t.name, t.name + " (" + t.request.dataset + ")")));
  $("saved-open").disabled = $("saved-delete").disabled = !savedTables.length;
}

async function saveTable() {
  showError(null);
  const name = $("saved-name").value.trim();
  try {
    await api("/v1/saved", { name, request: tableRequest() });
    setStatus("Saved as " + name + ".");
    await loadSaved();
    $("saved-list").value = name;
  } catch (error) {
    refused(error);
  }
}

// A saved request back on the form: its dataset, ticked dimensions (placed in their order),
// levels, filters, measure and the language of its labels.
function applyRequest(request) {
  $("dataset").value = request.dataset;
  renderDims();
  const rows = Object.fromEntries([...$("dims").tBodies[0].rows].map((r) => [r.dataset.dim, r]));
  for (const dim of request.dims || []) {
    if (!rows[dim]) continue;
    rows[dim].querySelector(".dim-pick").checked = true;
    placeTicked(rows[dim]);
  }
  for (const [dim, level] of Object.entries(request.levels || {})) {
    const select = rows[dim] && rows[dim].querySelector(".dim-level");
    if (select) select.value = typeof level === "number" ? select.options[level] ? select.options[level].value : "" : level;
  }
  for (const [dim, codes] of Object.entries(request.filters || {})) {
    if (rows[dim]) rows[dim].querySelector(".dim-filter").value = [].concat(codes).join(", ");
  }
  $("measure").value = request.measure || "";
  if (request.lang && languages.includes(request.lang) && request.lang !== chosenLang()) { // labels.js
    $("lang").value = request.lang;
    languageChanged();
  }
  if (typeof applyGroups === "function") applyGroups(request); // groups.js: its custom groups, inline or by name
}

function openSaved() {
  const entry = savedTables.find((t) => t.name === $("saved-list").value);
  if (!entry) return;
  applyRequest(entry.request);
  $("saved-name").value = entry.name;
  $("request").requestSubmit();
}

async function deleteSaved() {
  showError(null);
  const name = $("saved-list").value;
  if (!name) return;
  try {
    await api("/v1/saved/" + encodeURIComponent(name), undefined, "DELETE");
    setStatus("Deleted the saved table " + name + ".");
    await loadSaved();
  } catch (error) {
    refused(error);
  }
}

if (typeof document !== "undefined") document.addEventListener("DOMContentLoaded", () => {
  $("saved-form").addEventListener("submit", (event) => {
    event.preventDefault();
    saveTable();
  });
  $("saved-open").addEventListener("click", openSaved);
  $("saved-delete").addEventListener("click", deleteSaved);
});
