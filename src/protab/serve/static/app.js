// protab table builder: a small page over the query service's API (/v1/catalog, /v1/table).
// The token lives in sessionStorage only and travels in the Authorization header, never in a URL.
"use strict";

const TOKEN_KEY = "protab.token";
const BLANK = "\u2014"; // how a blanked cell (null in the answer) is shown

const $ = (id) => document.getElementById(id);
let catalog = []; // [{name, dims: [{name, levels: [...]}], measures: [...]}]

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
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

// The catalogue as a list of datasets; accepts a list or an object keyed by name at each level.
function named(items) {
  if (!items) return [];
  if (Array.isArray(items)) return items.map((item) => (typeof item === "string" ? { name: item } : item));
  return Object.entries(items).map(([name, item]) => Object.assign({ name }, Array.isArray(item) ? { levels: item } : item));
}

function readCatalog(answer) {
  return named(answer.datasets).map((ds) => ({
    name: ds.name,
    dims: named(ds.dims || ds.dimensions).map((d) => ({ name: d.name, levels: d.levels || [] })),
    measures: named(ds.measures).map((m) => m.name),
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
      dim.levels.forEach((lv) => {
        const name = typeof lv === "object" ? lv.name : String(lv);
        level.append(option(name, name));
      });
      levelCell.append(level);
    }

    const filter = document.createElement("input");
    filter.type = "text";
    filter.className = "dim-filter";
    filter.setAttribute("aria-label", "Filter on " + dim.name + " (codes separated by commas)");
    filter.placeholder = "all codes";
    row.insertCell().append(filter);
  });
  ds.measures.forEach((m) => $("measure").append(option(m, m)));
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

function renderTable(answer, request) {
  const table = $("result");
  table.caption.textContent =
    request.dataset + " by " + (request.dims.join(" \u00d7 ") || "total") + " (" + answer.rows.length + " cells)";
  const head = table.tHead;
  head.replaceChildren();
  const headRow = head.insertRow();
  answer.columns.forEach((c) => {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = c;
    headRow.append(th);
  });
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const values of answer.rows) {
    const row = body.insertRow();
    for (const v of values) {
      const td = row.insertCell();
      if (v === null) {
        td.textContent = BLANK;
        td.className = "blank";
        td.title = "blanked: a small protected count";
      } else {
        td.textContent = String(v);
        if (typeof v === "number") td.className = "num";
      }
    }
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
    setStatus("");
    showError(error.message);
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
    showError(error.message);
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
    if (error.status === 401) sessionStorage.removeItem(TOKEN_KEY);
    showError(error.message);
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

document.addEventListener("DOMContentLoaded", () => {
  $("signin").addEventListener("submit", signIn);
  $("signout").addEventListener("click", signOut);
  $("dataset").addEventListener("change", renderDims);
  $("request").addEventListener("submit", showTable);
  $("download").addEventListener("click", downloadCsv);
  if (sessionStorage.getItem(TOKEN_KEY)) signIn();
});
