// protab table builder: how values, headings, captions and refusals are shown (pure functions,
// tested under node by tests/serve/test_serve_builder_format.py).
"use strict";

const BLANK = "x"; // a blanked cell: a perturbed count below the threshold (null in the answer), with its sum and mean
const UNDEFINED = ".."; // a mean (or sum) the answer leaves null although its count is published: no records
const TOTAL = "Total"; // the code of a margin in a /v1/table answer

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

// The mark of a cell whose value is null: BLANK when its count is blanked too (or the value is
// the count), UNDEFINED when the count is published (a sum or mean of no records); "" otherwise.
function cellMark(value, count) {
  if (value !== null && value !== undefined) return "";
  return count === null || count === undefined ? BLANK : UNDEFINED;
}

// A cell's text: its formatted value, or its mark.
function cellText(value, count, kind, locale) {
  return cellMark(value, count) || formatValue(value, kind, locale);
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

// A refusal of the API as the alert shows it: a title naming the status, the API's message,
// and its rule and advice when the answer carries them ({"error", "rule"?, "advice"?}).
function refusalParts(status, statusText, answer) {
  const titles = {
    400: "The service refused this request",
    401: "The token was refused",
    403: "Outside your rights",
    408: "The request took too long to arrive",
    413: "The request is too large",
    429: "Too many requests",
  };
  const body = answer && typeof answer === "object" ? answer : {};
  const text = (v) => (typeof v === "string" && v.trim() ? v : "");
  const parts = {
    title: (titles[status] || "The request failed") + " (" + status + ")",
    message: text(body.error) ? body.error + " (" + status + ")" : status + " " + (statusText || "error"),
    rule: text(body.rule),
    advice: text(body.advice),
  };
  return parts;
}

if (typeof module !== "undefined") {
  module.exports = { BLANK, UNDEFINED, TOTAL, columnKind, columnHeader, formatValue, cellMark, cellText,
    caption, refusalParts };
}
