// protab table builder: the squares of a grid dataset (INSPIRE codes of EPSG:3035, as
// src/protab/grid/_codes.py reads them) for the map view. Pure functions, tested under node by
// tests/serve/test_serve_builder_grid.py.
"use strict";

const GRID_RESOLUTIONS = { "100m": 100, "1km": 1000, "10km": 10000, "100km": 100000 };
const GRID_SHORT = /^(100m|1km|10km|100km)N(0|[1-9][0-9]{0,8})E(0|[1-9][0-9]{0,8})$/;
const GRID_LONG = /^CRS3035RES(100|1000|10000|100000)mN(0|[1-9][0-9]{0,13})E(0|[1-9][0-9]{0,13})$/;
// sequential colours, light to dark (ColorBrewer YlGnBu, 5 classes); blanked squares grey
const MAP_COLOURS = ["#ffffcc", "#a1dab4", "#41b6c4", "#2c7fb8", "#253494"];
const MAP_BLANK = "#9e9e9e";

// A grid code as {res, n, e} (side and lower-left corner in metres), or null if it is none.
function parseGridCode(code) {
  if (typeof code !== "string") return null;
  let m = GRID_SHORT.exec(code);
  if (m) {
    const res = GRID_RESOLUTIONS[m[1]];
    return { res, n: Number(m[2]) * res, e: Number(m[3]) * res };
  }
  m = GRID_LONG.exec(code);
  if (m) {
    const res = Number(m[1]);
    const n = Number(m[2]);
    const e = Number(m[3]);
    return n % res === 0 && e % res === 0 ? { res, n, e } : null;
  }
  return null;
}

// The first dimension of the request whose codes (other than Total) are all grid codes.
function gridDim(answer, request) {
  for (const dim of request.dims) {
    const at = answer.columns.indexOf(dim);
    const codes = answer.rows.map((row) => row[at]).filter((c) => c !== "Total");
    if (codes.length && codes.every((c) => parseGridCode(c))) return dim;
  }
  return null;
}

// The squares of the map: the cells of `dim` at its finest resolution where every other
// dimension is at its margin (Total): [{code, res, n, e, value, count}]; null when another
// dimension has no margin (a filter of several codes), so no cell stands for all its codes.
function gridSquares(answer, request, dim, column) {
  const at = answer.columns.indexOf(dim);
  const others = request.dims.filter((d) => d !== dim).map((d) => answer.columns.indexOf(d));
  const valueAt = answer.columns.indexOf(column);
  const countAt = answer.columns.indexOf("n_pert");
  const rows = answer.rows.filter((row) => others.every((i) => row[i] === "Total"));
  const squares = [];
  for (const row of rows) {
    const where = parseGridCode(row[at]);
    if (where) squares.push({ code: row[at], ...where, value: row[valueAt], count: countAt >= 0 ? row[countAt] : row[valueAt] });
  }
  if (!squares.length) return null;
  const finest = Math.min(...squares.map((s) => s.res));
  return squares.filter((s) => s.res === finest);
}

// The upper bounds of `classes` colour classes of the published values (equal counts of squares
// per class, so that a few large squares do not wash the others out); fewer when values repeat.
function classBreaks(values, classes) {
  const sorted = values.filter((v) => typeof v === "number").sort((a, b) => a - b);
  if (!sorted.length) return [];
  const breaks = [];
  for (let k = 1; k <= classes; k += 1) {
    const bound = sorted[Math.min(sorted.length - 1, Math.ceil((k * sorted.length) / classes) - 1)];
    if (!breaks.length || bound > breaks[breaks.length - 1]) breaks.push(bound);
  }
  return breaks;
}

// The colour class of a value (index into the breaks), or -1 for a blanked value.
function classOf(value, breaks) {
  if (typeof value !== "number") return -1;
  const k = breaks.findIndex((bound) => value <= bound);
  return k < 0 ? breaks.length - 1 : k;
}

// The colour of class k of n classes: spread over the palette, light to dark.
function classColour(k, n) {
  if (k < 0) return MAP_BLANK;
  const at = n <= 1 ? MAP_COLOURS.length - 1 : Math.round((k * (MAP_COLOURS.length - 1)) / (n - 1));
  return MAP_COLOURS[at];
}

// Where each square goes on the map, in squares from the top left (north up):
// {columns, rows, places: [{x, y}] in the order of `squares`}.
function mapLayout(squares) {
  const res = squares[0].res;
  const minE = Math.min(...squares.map((s) => s.e));
  const maxE = Math.max(...squares.map((s) => s.e));
  const minN = Math.min(...squares.map((s) => s.n));
  const maxN = Math.max(...squares.map((s) => s.n));
  return {
    columns: (maxE - minE) / res + 1,
    rows: (maxN - minN) / res + 1,
    places: squares.map((s) => ({ x: (s.e - minE) / res, y: (maxN - s.n) / res })),
  };
}

if (typeof module !== "undefined") {
  module.exports = { MAP_COLOURS, MAP_BLANK, parseGridCode, gridDim, gridSquares, classBreaks, classOf,
    classColour, mapLayout };
}
