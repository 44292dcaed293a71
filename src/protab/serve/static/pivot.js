// protab table builder: the flat cells of a /v1/table answer laid out as a crosstab (rows,
// columns and wafers, as ABS TableBuilder names them). Pure functions, tested under node by
// tests/serve/test_serve_builder_pivot.py. Totals are the answer's own margin cells ("Total"),
// placed at the edges; nothing is added up here (the inner cells are perturbed independently).
"use strict";

const PLACES = ["rows", "cols", "wafers"];

// The codes of a dimension in the answer, in the order a crosstab shows them: the finest level
// first, coarser levels (subtotals) after, the margin "Total" last; within a level, as answered.
function dimCodes(answer, dim) {
  const at = answer.columns.indexOf(dim);
  const levelAt = answer.columns.indexOf(dim + "_level");
  const seen = new Map(); // code -> [level, first position]
  answer.rows.forEach((row, i) => {
    const code = row[at];
    if (!seen.has(code)) seen.set(code, [levelAt >= 0 ? Number(row[levelAt]) : 1, i]);
  });
  const rank = (code) => (code === "Total" ? 1 : 0);
  return [...seen.keys()].sort((a, b) => {
    const [la, ia] = seen.get(a);
    const [lb, ib] = seen.get(b);
    return rank(a) - rank(b) || lb - la || ia - ib;
  });
}

// The level number of each code of a dimension (0 for Total; 1 for a flat dimension).
function codeLevels(answer, dim) {
  const at = answer.columns.indexOf(dim);
  const levelAt = answer.columns.indexOf(dim + "_level");
  const levels = {};
  for (const row of answer.rows) {
    if (!(row[at] in levels)) levels[row[at]] = levelAt >= 0 ? Number(row[levelAt]) : row[at] === "Total" ? 0 : 1;
  }
  return levels;
}

// The place of each dimension when the user has chosen none: the first on rows, the second on
// columns, the others on wafers.
function defaultPlaces(dims) {
  const places = {};
  dims.forEach((d, i) => (places[d] = i === 0 ? "rows" : i === 1 ? "cols" : "wafers"));
  return places;
}

// Every combination of the codes of `lists` (one list per dimension), the first varying slowest.
function product(lists) {
  return lists.reduce((acc, codes) => acc.flatMap((head) => codes.map((c) => [...head, c])), [[]]);
}

// The dimensions of each place, in the request's order.
function layoutOf(request, places) {
  const layout = { rows: [], cols: [], wafers: [] };
  for (const dim of request.dims) layout[PLACES.includes(places[dim]) ? places[dim] : "rows"].push(dim);
  return layout;
}

// The crosstab(s) of an answer: one per combination of the wafer dimensions' codes (a single
// one without wafers), each {wafer: [[dim, code]...], rowDims, colDims, rowKeys, colKeys,
// cells[r][c] = {value, count} or null (no such cell in the answer), subtotals[r]: whether row r
// is a subtotal (a coarser level of a hierarchy)}. `column`: the answer
// column shown (n_pert, <m>_pert or <m>_mean_pert). Row and column keys that hold no cell of
// the answer are left out; the combinations that hold one keep the codes' order.
function pivot(answer, request, places, column) {
  const layout = layoutOf(request, places);
  const dimAt = request.dims.map((d) => answer.columns.indexOf(d));
  const valueAt = answer.columns.indexOf(column);
  const countAt = answer.columns.indexOf("n_pert");
  const index = new Map(answer.rows.map((row) => [JSON.stringify(dimAt.map((i) => row[i])), row]));
  const codes = Object.fromEntries(request.dims.map((d) => [d, dimCodes(answer, d)]));
  const levels = Object.fromEntries(request.dims.map((d) => [d, codeLevels(answer, d)]));
  const finest = Object.fromEntries(request.dims.map((d) => [d, Math.max(...Object.values(levels[d]))]));
  // a row of a coarser level than its dimension's finest, not the margin: a subtotal
  const subtotal = (key) => layout.rows.some((d, i) => levels[d][key[i]] > 0 && levels[d][key[i]] < finest[d]);
  const keys = (dims) => product(dims.map((d) => codes[d]));
  const rowKeys = keys(layout.rows);
  const colKeys = keys(layout.cols);
  const tables = [];
  for (const waferKey of keys(layout.wafers)) {
    const chosen = {};
    layout.wafers.forEach((d, i) => (chosen[d] = waferKey[i]));
    const lookup = (rowKey, colKey) => {
      layout.rows.forEach((d, i) => (chosen[d] = rowKey[i]));
      layout.cols.forEach((d, i) => (chosen[d] = colKey[i]));
      const row = index.get(JSON.stringify(request.dims.map((d) => chosen[d])));
      return row ? { value: row[valueAt], count: countAt >= 0 ? row[countAt] : row[valueAt] } : null;
    };
    const grid = rowKeys.map((r) => colKeys.map((c) => lookup(r, c)));
    const keepRows = rowKeys.map((_, r) => grid[r].some((cell) => cell));
    const keepCols = colKeys.map((_, c) => grid.some((row) => row[c]));
    if (!keepRows.some(Boolean)) continue;
    tables.push({
      wafer: layout.wafers.map((d, i) => [d, waferKey[i]]),
      rowDims: layout.rows,
      colDims: layout.cols,
      rowKeys: rowKeys.filter((_, r) => keepRows[r]),
      subtotals: rowKeys.filter((_, r) => keepRows[r]).map(subtotal),
      colKeys: colKeys.filter((_, c) => keepCols[c]),
      cells: grid.filter((_, r) => keepRows[r]).map((row) => row.filter((_, c) => keepCols[c])),
    });
  }
  return tables;
}

// Column header rows of a crosstab: for each column dimension, its runs of equal codes
// [{code, span}] (a code spans the columns under it, as in a printed table).
function headerRuns(colKeys, depth) {
  const runs = [];
  for (let level = 0; level < depth; level += 1) {
    const row = [];
    colKeys.forEach((key, c) => {
      const last = row[row.length - 1];
      const same = last && colKeys[c - 1].slice(0, level + 1).every((code, i) => code === key[i]);
      if (same) last.span += 1;
      else row.push({ code: key[level], span: 1, total: key[level] === "Total" });
    });
    runs.push(row);
  }
  return runs;
}

// The items of a bar chart of a one-dimension answer: [{code, level, value, count}] without the
// margin, and the margin itself ({value, count} or null).
function barItems(answer, dim, column) {
  const at = answer.columns.indexOf(dim);
  const valueAt = answer.columns.indexOf(column);
  const countAt = answer.columns.indexOf("n_pert");
  const levels = codeLevels(answer, dim);
  const byCode = new Map(answer.rows.map((row) => [row[at], row]));
  const cell = (row) => ({ value: row[valueAt], count: countAt >= 0 ? row[countAt] : row[valueAt] });
  const items = dimCodes(answer, dim).filter((c) => c !== "Total")
    .map((code) => ({ code, level: levels[code], ...cell(byCode.get(code)) }));
  return { items, total: byCode.has("Total") ? cell(byCode.get("Total")) : null };
}

if (typeof module !== "undefined") {
  module.exports = { PLACES, dimCodes, codeLevels, defaultPlaces, product, layoutOf, pivot, headerRuns, barItems };
}
