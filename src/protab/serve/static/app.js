// protab table builder: a small page over the query service's API (/v1/catalog, /v1/table;
// saved tables in saved.js, custom groups in groups.js, jobs in jobs.js).
// The token lives in sessionStorage only and travels in the Authorization header, never in a URL.
// The answer's cells are laid out in the browser (pivot.js, views.js); nothing is computed from them.
"use strict";

const TOKEN_KEY = "protab.token";
const VIEWS = ["crosstab", "list", "bars", "map"];

const $ = (id) => document.getElementById(id);
let catalog = []; // [{name, description, dims: [{name, levels, codes}], measures: [...]}] from GET /v1/catalog
let shown = null; // the answer on the page: {answer, request}

// The alert: a refusal's title, the API's message, and its rule and advice when it gives them.
function showError(parts) {
  const box = $("error");
  const fill = (id, text, label) => {
    $(id).textContent = text ? (label || "") + text : "";
    $(id).hidden = !text;
  };
  fill("error-title", parts && parts.title);
  fill("error-message", parts && parts.message);
  fill("error-rule", parts && parts.rule, "Rule: ");
  fill("error-advice", parts && parts.advice, "What you can do: ");
  box.hidden = !parts;
  if (parts) box.scrollIntoView({ block: "nearest" });
}

// An API refusal: shown in the alert; a token refused (401) signs the page out.
function refused(error) {
  if (error.status === 401) signOut();
  setStatus("");
  showError(error.parts || { title: "The request failed", message: error.message });
}

function setStatus(message) {
  $("status").textContent = message;
}

// One call to the API (GET, or POST of `body`, or `method`); resolves to the Response, throws an
// Error carrying the API's refusal.
async function api(path, body, method) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const init = { method: method || (body === undefined ? "GET" : "POST"), headers: { Authorization: "Bearer " + token } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) {
    let answer = null;
    try {
      answer = await response.json();
    } catch (_) {
      // not JSON: the status line only
    }
    const parts = refusalParts(response.status, response.statusText, answer);
    const error = new Error(parts.message);
    error.status = response.status;
    error.parts = parts;
    throw error;
  }
  return response;
}

// The datasets of the catalogue; measures only where the service protects their sums.
function readCatalog(answer) {
  return answer.datasets.map((ds) => ({
    name: ds.name,
    description: ds.description || "",
    dims: ds.dims.map((d) => ({ name: d.name, levels: d.levels || [], codes: d.codes || [],
      names: d.names || {}, labels: d.labels || {}, descriptions: d.descriptions || {} })), // labels.js shows them
    measures: (ds.functions || []).includes("sum") ? ds.measures : [],
  }));
}

function option(value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  return o;
}

function currentDataset() {
  return catalog.find((ds) => ds.name === $("dataset").value);
}

function labelled(control, id, text) {
  control.id = id;
  const label = document.createElement("label");
  label.htmlFor = id;
  label.className = "visually-hidden";
  label.textContent = text;
  return [label, control];
}

// One row per dimension: a checkbox, its place (rows, columns, wafers), a level choice
// (hierarchies only) and a filter.
function renderDims() {
  const ds = currentDataset();
  const body = $("dims").tBodies[0];
  body.replaceChildren();
  $("measure").replaceChildren(option("", "count"));
  hideAnswer();
  $("description").textContent = ds ? ds.description : "";
  if (!ds) return;
  ds.dims.forEach((dim, i) => {
    const row = body.insertRow();
    row.dataset.dim = dim.name;

    const pick = document.createElement("input");
    pick.type = "checkbox";
    pick.id = "dim-" + i;
    pick.className = "dim-pick";
    const label = document.createElement("label");
    label.htmlFor = pick.id;
    label.textContent = dimName(dim.name); // labels.js: in the language chosen
    label.title = dimDescription(dim.name);
    row.insertCell().append(pick, " ", label);

    const place = document.createElement("select");
    place.className = "dim-place";
    place.disabled = true;
    place.append(option("rows", "rows"), option("cols", "columns"), option("wafers", "wafers"));
    row.insertCell().append(...labelled(place, "place-" + i, "Place " + dim.name + " in"));
    pick.addEventListener("change", () => placeTicked(row));
    place.addEventListener("change", relayout);

    const levelCell = row.insertCell();
    if (dim.levels.length) {
      const level = document.createElement("select");
      level.className = "dim-level";
      level.append(option("", "all levels"));
      dim.levels.forEach((name) => level.append(option(name, dimName(name))));
      levelCell.append(...labelled(level, "level-" + i, "Level of " + dim.name));
    }

    const filter = document.createElement("input");
    filter.type = "text";
    filter.className = "dim-filter";
    const some = dim.codes.slice(0, 4).join(", ");
    filter.placeholder = some ? "all codes (" + some + (dim.codes.length > 4 ? ", \u2026)" : ")") : "all codes";
    row.insertCell().append(...labelled(filter, "filter-" + i, "Filter on " + dim.name + " (codes separated by commas)"));
  });
  ds.measures.forEach((m) => $("measure").append(option(m, m + " (sum and mean)")));
  if (typeof resetGroups === "function") resetGroups(); // groups.js: no custom groups on a new dataset
}

// A dimension ticked goes to the rows if none is there, else to the columns if none is there,
// else to the wafers; unticked, its place is off.
function placeTicked(row) {
  const place = row.querySelector(".dim-place");
  place.disabled = !row.querySelector(".dim-pick").checked;
  if (place.disabled) return;
  const taken = [...$("dims").tBodies[0].rows]
    .filter((r) => r !== row && r.querySelector(".dim-pick").checked)
    .map((r) => r.querySelector(".dim-place").value);
  place.value = !taken.includes("rows") ? "rows" : !taken.includes("cols") ? "cols" : "wafers";
}

// The place chosen for each ticked dimension: {dim: "rows" | "cols" | "wafers"}.
function chosenPlaces() {
  const places = {};
  for (const row of $("dims").tBodies[0].rows) {
    if (row.querySelector(".dim-pick").checked) places[row.dataset.dim] = row.querySelector(".dim-place").value;
  }
  return places;
}

// The body of POST /v1/table from the form.
function tableRequest() {
  const request = { dataset: $("dataset").value, dims: [] };
  const filters = {};
  const levels = {};
  for (const row of $("dims").tBodies[0].rows) {
    const dim = row.dataset.dim;
    if (row.querySelector(".dim-pick").checked) {
      request.dims.push(dim);
      const level = row.querySelector(".dim-level");
      if (level && level.value) levels[dim] = level.value;
    }
    const codes = row.querySelector(".dim-filter").value.split(",").map((c) => c.trim()).filter((c) => c);
    if (codes.length) filters[dim] = codes.length === 1 ? codes[0] : codes;
  }
  if (Object.keys(levels).length) request.levels = levels;
  if (Object.keys(filters).length) request.filters = filters;
  if ($("measure").value) request.measure = $("measure").value;
  const groups = typeof customGroups === "function" ? customGroups(request.dims) : undefined; // groups.js
  if (groups) request.groups = groups;
  if (chosenLang()) request.lang = chosenLang(); // labels.js: label columns in the answer (and its CSV)
  return request;
}

function hideAnswer() {
  shown = null;
  $("answer").hidden = true;
}

// The values an answer offers: the count, and the sum and mean of its measure.
function offerValues(answer, request) {
  const previous = $("value").value;
  const columns = answer.columns.filter((c) => ["count", "sum", "mean"].includes(columnKind(c, request)));
  $("value").replaceChildren(...columns.map((c) => option(c, columnHeader(c, request))));
  if (columns.includes(previous)) $("value").value = previous;
}

// The views an answer allows: bars for one dimension, a map when a dimension holds grid codes.
function offerViews(answer, request) {
  const allowed = { crosstab: true, list: true, bars: request.dims.length === 1,
    map: gridDim(answer, request) !== null };
  for (const o of $("view").options) o.disabled = !allowed[o.value];
  if (!allowed[$("view").value]) $("view").value = "crosstab";
}

// Draw the answer on the page in the chosen view, value and layout.
function render() {
  if (!shown) return;
  const { answer, request } = shown;
  const view = $("view").value;
  const column = $("value").value || "n_pert";
  const kind = columnKind(column, request);
  const label = columnHeader(column, request);
  for (const v of VIEWS) {
    $(v === "list" ? "result" : v).replaceChildren(...(v === "list" ? [document.createElement("caption"),
      document.createElement("thead"), document.createElement("tbody")] : []));
    $(v).hidden = v !== view;
  }
  let marks;
  let totals = true;
  if (view === "list") {
    marks = renderList($("result"), answer, request);
  } else if (view === "bars") {
    const dim = request.dims[0];
    marks = renderBars($("bars"), barItems(answer, dim, column), request, dim, kind, label);
  } else if (view === "map") {
    const dim = gridDim(answer, request);
    const squares = gridSquares(answer, request, dim, column);
    const others = request.dims.filter((d) => d !== dim);
    marks = squares ? renderMap($("map"), squares, dim, others, kind, label) : new Set();
    if (!squares) $("map").textContent = "No map: another dimension of the table has no total.";
    totals = false;
  } else {
    marks = renderCrosstabs($("crosstab"), pivot(answer, request, chosenPlaces(), column), request, kind, label);
  }
  renderLegend($("legend"), marks, totals, shown.withheld);
  $("answer").hidden = false;
}

// A place changed: lay the answer on the page out again (no new request) if it has the ticked dimensions.
function relayout() {
  if (!shown) return;
  const ticked = Object.keys(chosenPlaces());
  if (ticked.length === shown.request.dims.length && ticked.every((d) => shown.request.dims.includes(d))) render();
  else setStatus("Show the table again to use the dimensions ticked now.");
}

async function showTable(event) {
  event.preventDefault();
  showError(null);
  const request = tableRequest();
  setStatus("Computing the protected table\u2026");
  $("answer").setAttribute("aria-busy", "true");
  try {
    const response = await jobAnswer(await api("/v1/table", request));
    const answer = await response.json();
    shown = { answer, request, withheld: withheldCodes(response) };
    offerValues(answer, request);
    offerViews(answer, request);
    render();
    setStatus("Protected table ready: " + caption(request, answer.rows.length) + ".");
  } catch (error) {
    hideAnswer();
    refused(error);
  } finally {
    $("answer").removeAttribute("aria-busy");
  }
}

// A large table is answered as a job (202 with {"job": {id, result}}): its result is fetched
// again (in `format`, e.g. "?format=csv") after the Retry-After seconds until it is ready (200)
// or refused.
async function jobAnswer(response, format = "") {
  while (response.status === 202) {
    const job = (await response.json()).job;
    const wait = Math.min(Math.max(Number(response.headers.get("Retry-After")) || 1, 0.2), 30);
    setStatus("A large table: computing it as job " + job.id + " (" + (job.cells || "?") + " cells)\u2026");
    await new Promise((done) => setTimeout(done, wait * 1000));
    response = await api(job.result + format);
  }
  return response;
}

// The codes the disclosure rules withheld from an answer (header Protab-Withheld: {column: [codes]}).
function withheldCodes(response) {
  try {
    return JSON.parse(response.headers.get("Protab-Withheld") || "{}");
  } catch (_) {
    return {};
  }
}

async function downloadCsv() {
  showError(null);
  const request = tableRequest();
  try {
    const blob = await (await jobAnswer(await api("/v1/table?format=csv", request), "?format=csv")).blob();
    const url = URL.createObjectURL(blob);
    const link = document.createElement("a");
    link.href = url;
    link.download = [request.dataset, ...request.dims].join("_") + ".csv";
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
    setStatus("CSV downloaded.");
  } catch (error) {
    refused(error);
  }
}

async function signIn(event) {
  if (event) event.preventDefault();
  showError(null);
  const field = $("token");
  if (field.value) sessionStorage.setItem(TOKEN_KEY, field.value.trim());
  field.value = "";
  if (!sessionStorage.getItem(TOKEN_KEY)) return;
  let answer;
  try {
    answer = await (await api("/v1/catalog")).json();
  } catch (error) {
    refused(error);
    return;
  }
  catalog = readCatalog(answer);
  setUpLanguages(answer.languages); // labels.js
  $("dataset").replaceChildren(...catalog.map((ds) => option(ds.name, ds.name)));
  renderDims();
  $("signin").hidden = true;
  $("builder").hidden = false;
  setStatus(catalog.length ? "" : "No dataset is open to this token.");
  await loadSaved();
  if (typeof loadSavedGroups === "function") await loadSavedGroups(); // groups.js
  if (typeof loadJobs === "function") await loadJobs(); // jobs.js
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  catalog = [];
  hideAnswer();
  $("builder").hidden = true;
  $("signin").hidden = false;
  showError(null);
  setStatus("");
}

if (typeof document !== "undefined") document.addEventListener("DOMContentLoaded", () => {
  $("signin").addEventListener("submit", signIn);
  $("signout").addEventListener("click", signOut);
  $("dataset").addEventListener("change", renderDims);
  $("request").addEventListener("submit", showTable);
  $("download").addEventListener("click", downloadCsv);
  $("view").addEventListener("change", render);
  $("value").addEventListener("change", render);
  if (sessionStorage.getItem(TOKEN_KEY)) signIn();
});
