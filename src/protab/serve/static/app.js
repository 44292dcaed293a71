// protab table builder: a small page over the query service's API (/v1/catalog, /v1/table).
// The token lives in sessionStorage only and travels in the Authorization header, never in a URL.
"use strict";

const TOKEN_KEY = "protab.token";
const BLANK = "\u2014"; // how a blanked cell (null in the answer) is shown

const $ = (id) => document.getElementById(id);
let catalog = []; // [{name, description, dims: [{name, levels, codes}], measures: [...]}] from GET /v1/catalog

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
  if (message) box.scrollIntoView({ block: "nearest" });
}

// An API refusal: its message in the error area; a token refused (401) signs the page out.
function refused(error) {
  if (error.status === 401) signOut();
  setStatus("");
  showError(error.message);
}

function setStatus(message) {
  $("status").textContent = message;
}

// One call to the API; resolves to the Response, throws an Error carrying the API's message.
async function api(path, body) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const init = { method: body === undefined ? "GET" : "POST", headers: { Authorization: "Bearer " + token } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) {
    let message = response.status + " " + response.statusText;
    try {
      const answer = await response.json();
      if (answer && answer.error) message = answer.error + " (" + response.status + ")";
    } catch (_) {
      // not JSON: keep the status line
    }
    const error = new Error(message);
    error.status = response.status;
    throw error;
  }
  return response;
}

// The datasets of the catalogue; measures only where the service protects their sums.
function readCatalog(answer) {
  return answer.datasets.map((ds) => ({
    name: ds.name,
    description: ds.description || "",
    dims: ds.dims.map((d) => ({ name: d.name, levels: d.levels || [], codes: d.codes || [] })),
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

// One row per dimension: a checkbox, a level choice (hierarchies only) and a filter.
function renderDims() {
  const ds = currentDataset();
  const body = $("dims").tBodies[0];
  body.replaceChildren();
  $("measure").replaceChildren(option("", "count"));
  $("result").hidden = true;
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
    label.textContent = dim.name;
    row.insertCell().append(pick, " ", label);

    const levelCell = row.insertCell();
    if (dim.levels.length) {
      const level = document.createElement("select");
      level.className = "dim-level";
      level.setAttribute("aria-label", "Level of " + dim.name);
      level.append(option("", "all levels"));
      dim.levels.forEach((name) => level.append(option(name, name)));
      levelCell.append(level);
    }

    const filter = document.createElement("input");
    filter.type = "text";
    filter.className = "dim-filter";
    filter.setAttribute("aria-label", "Filter on " + dim.name + " (codes separated by commas)");
    const some = dim.codes.slice(0, 4).join(", ");
    filter.placeholder = some ? "all codes (" + some + (dim.codes.length > 4 ? ", \u2026)" : ")") : "all codes";
    row.insertCell().append(filter);
  });
  ds.measures.forEach((m) => $("measure").append(option(m, m + " (sum and mean)")));
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
  return request;
}

// What a column of a /v1/table answer holds: "code" (a dimension), "level", "count" (n_pert),
// "mean" (<m>_mean_pert) or "sum" (<m>_pert).
function columnKind(column, request) {
  if (request.dims.includes(column)) return "code";
  if (column.endsWith("_level") && request.dims.includes(column.slice(0, -6))) return "level";
  if (column === "n_pert") return "count";
  if (column.endsWith("_mean_pert")) return "mean";
  if (column.endsWith("_pert")) return "sum";
  return "code";
}

// The heading of a column: a dimension shown at a chosen level is named by that level.
function columnHeader(column, request) {
  const levels = request.levels || {};
  switch (columnKind(column, request)) {
    case "code":
      return levels[column] || column;
    case "level":
      return "level of " + (levels[column.slice(0, -6)] || column.slice(0, -6));
    case "count":
      return "count";
    case "mean":
      return "mean " + column.slice(0, -10);
    default:
      return "sum " + column.slice(0, -5);
  }
}

// A value as the page shows it: counts as whole numbers and sums and means with thousands
// separators, to fewer decimals the larger they are (perturbed values: more digits are noise).
function formatValue(value, kind, locale) {
  if (value === null || value === undefined) return BLANK;
  if (typeof value !== "number" || kind === "code" || kind === "level") return String(value);
  const size = Math.abs(value);
  const decimals = kind === "count" || size >= 1000 ? 0 : size >= 100 ? 1 : 2;
  return new Intl.NumberFormat(locale, { minimumFractionDigits: decimals, maximumFractionDigits: decimals })
    .format(value);
}

// The table's caption: dataset, dimensions (with their chosen levels), filters and size.
function caption(request, cells) {
  const levels = request.levels || {};
  const dims = request.dims.map((d) => (levels[d] ? d + " (" + levels[d] + " level)" : d));
  const filters = Object.entries(request.filters || {}).map(
    ([d, codes]) => d + " = " + (Array.isArray(codes) ? codes.join(", ") : codes));
  return (
    request.dataset + " by " + (dims.join(" \u00d7 ") || "total") +
    (request.measure ? ", " + request.measure : "") +
    (filters.length ? "; filters: " + filters.join("; ") : "; no filter") +
    " (" + cells + " cells)"
  );
}

function renderTable(answer, request) {
  const table = $("result");
  table.caption.textContent = caption(request, answer.rows.length);
  const kinds = answer.columns.map((c) => columnKind(c, request));
  const head = table.tHead;
  head.replaceChildren();
  const headRow = head.insertRow();
  answer.columns.forEach((c, i) => {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = columnHeader(c, request);
    th.title = c; // the column's name in the API's answer and in the CSV
    if (kinds[i] !== "code") th.className = "num";
    headRow.append(th);
  });
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const values of answer.rows) {
    const row = body.insertRow();
    values.forEach((v, i) => {
      const td = row.insertCell();
      td.textContent = formatValue(v, kinds[i]);
      if (v === null) {
        td.className = "blank";
        td.title = "blanked: not published (a small count)";
      } else if (typeof v === "number") {
        td.className = "num";
      }
    });
  }
  table.hidden = false;
}

async function showTable(event) {
  event.preventDefault();
  showError("");
  const request = tableRequest();
  setStatus("Computing the protected table\u2026");
  try {
    const answer = await (await api("/v1/table", request)).json();
    renderTable(answer, request);
    setStatus("Protected table ready. " + BLANK + " marks a blanked cell.");
  } catch (error) {
    $("result").hidden = true;
    refused(error);
  }
}

async function downloadCsv() {
  showError("");
  const request = tableRequest();
  try {
    const blob = await (await api("/v1/table?format=csv", request)).blob();
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
  showError("");
  const field = $("token");
  if (field.value) sessionStorage.setItem(TOKEN_KEY, field.value.trim());
  field.value = "";
  if (!sessionStorage.getItem(TOKEN_KEY)) return;
  try {
    catalog = readCatalog(await (await api("/v1/catalog")).json());
  } catch (error) {
    refused(error);
    return;
  }
  $("dataset").replaceChildren(...catalog.map((ds) => option(ds.name, ds.name)));
  renderDims();
  $("signin").hidden = true;
  $("builder").hidden = false;
  setStatus(catalog.length ? "" : "No dataset is open to this token.");
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  catalog = [];
  $("result").hidden = true;
  $("builder").hidden = true;
  $("signin").hidden = false;
  showError("");
  setStatus("");
}

if (typeof document !== "undefined") document.addEventListener("DOMContentLoaded", () => {
  $("signin").addEventListener("submit", signIn);
  $("signout").addEventListener("click", signOut);
  $("dataset").addEventListener("change", renderDims);
  $("request").addEventListener("submit", showTable);
  $("download").addEventListener("click", downloadCsv);
  if (sessionStorage.getItem(TOKEN_KEY)) signIn();
});

// For tests under node (tests/test_serve_builder_format.py); in a browser `module` is undefined.
if (typeof module !== "undefined") module.exports = { columnKind, columnHeader, formatValue, caption, BLANK };
