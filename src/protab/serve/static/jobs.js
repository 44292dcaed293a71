// protab table builder: the user's jobs (GET /v1/jobs): state, cells, when created; a finished
// job's answer opened on the page (a table request's) or downloaded in each format of the API.
// Uses api, option, applyRequest, offerValues, offerViews, render, withheldCodes, setStatus,
// showError and refused of app.js and saved.js.
"use strict";

// The formats of GET /v1/jobs/{id}?format=... and the suffix of their files (protab.serve.formats).
const JOB_FORMATS = [["csv", "CSV", ".csv"], ["json", "JSON", ".json"], ["parquet", "Parquet", ".parquet"],
  ["arrow", "Arrow", ".arrow"], ["sdmx-csv", "SDMX-CSV", ".sdmx.csv"], ["json-stat", "JSON-stat", ".stat.json"]];
let jobs = []; // [{id, status, request, cells, created, finished, expires, error, result}] of GET /v1/jobs

// -- pure functions (tests/serve/test_serve_builder_groups.py runs them under node) ------------

// A job's table request (its canonical JSON), or null for a job of an SQL query.
function jobRequest(job) {
  try {
    const request = JSON.parse(job.request);
    return request && typeof request === "object" && Array.isArray(request.dims) ? request : null;
  } catch (_) {
    return null;
  }
}

// What a job computes, in a few words: "dataset: dims" (and its groups), or its SQL, cut.
function jobSummary(job) {
  const request = jobRequest(job);
  if (!request) return String(job.request || "").slice(0, 80);
  const grouped = Object.keys(request.groups || {});
  return request.dataset + ": " + request.dims.join(" \u00d7 ") + (grouped.length ? " (" + grouped[0] + " grouped)" : "");
}

// The file name of a job's answer in `format`.
function jobFileName(job, format) {
  const request = jobRequest(job);
  const suffix = (JOB_FORMATS.find((f) => f[0] === format) || ["", "", ".txt"])[2];
  return (request ? [request.dataset, ...request.dims].join("_") : "job-" + job.id.slice(0, 8)) + suffix;
}

// -- the page --------------------------------------------------------------------------------

async function loadJobs() {
  try {
    jobs = (await (await api("/v1/jobs")).json()).jobs || [];
  } catch (error) {
    jobs = [];
    refused(error);
  }
  renderJobs();
}

function jobButton(text, label, action) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  b.setAttribute("aria-label", label);
  b.addEventListener("click", action);
  return b;
}

// One row per job, newest first: created, state, cells, what it computes, and for a finished
// job Open (a table request's) and Download in a chosen format; a failed job's message.
function renderJobs() {
  const body = $("jobs-table").tBodies[0];
  body.replaceChildren();
  $("jobs-empty").hidden = jobs.length > 0;
  $("jobs-table").hidden = !jobs.length;
  jobs.forEach((job, i) => {
    const row = body.insertRow();
    row.dataset.job = job.id;
    row.insertCell().textContent = (job.created || "").replace("T", " ").replace("+00:00", " UTC");
    row.insertCell().textContent = job.status;
    const cells = row.insertCell();
    cells.className = "num";
    cells.textContent = job.cells === null || job.cells === undefined ? "" : String(job.cells);
    row.insertCell().textContent = jobSummary(job);
    const actions = row.insertCell();
    if (job.status === "done") {
      if (jobRequest(job)) actions.append(jobButton("Open", "Open job " + (i + 1) + " on the page", () => openJob(job)), " ");
      const format = document.createElement("select");
      format.className = "job-format";
      format.append(...JOB_FORMATS.map(([value, text]) => option(value, text)));
      actions.append(...labelled(format, "job-format-" + i, "Format of job " + (i + 1)), " ",
        jobButton("Download", "Download job " + (i + 1), () => downloadJob(job, format.value)));
    } else if (job.status === "failed") {
      actions.textContent = job.error || "failed";
    } else {
      actions.textContent = "computing\u2026";
    }
  });
}

// A finished job's answer on the page: its request back on the form, the answer laid out.
async function openJob(job) {
  showError(null);
  const request = jobRequest(job);
  try {
    const response = await api(job.result);
    const answer = await response.json();
    applyRequest(request);
    shown = { answer, request, withheld: withheldCodes(response) };
    offerValues(answer, request);
    offerViews(answer, request);
    render();
    setStatus("Job opened: " + caption(request, answer.rows.length) + ".");
  } catch (error) {
    refused(error);
  }
}

async function downloadJob(job, format) {
  showError(null);
  try {
    const blob = await (await api(job.result + "?format=" + encodeURIComponent(format))).blob();
    const url = URL.createObjectURL(blob);
    const link = document.createElement("a");
    link.href = url;
    link.download = jobFileName(job, format);
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
    setStatus("Downloaded " + link.download + ".");
  } catch (error) {
    refused(error);
  }
}

if (typeof document !== "undefined") document.addEventListener("DOMContentLoaded", () => {
  $("jobs-refresh").addEventListener("click", loadJobs);
});

if (typeof module !== "undefined") module.exports = { jobRequest, jobSummary, jobFileName, JOB_FORMATS };
