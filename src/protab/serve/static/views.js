// protab table builder: the views of an answer in the page (list, crosstab, bars, grid map),
// drawn from the pure functions of format.js, pivot.js and grid.js. SVG is drawn with attributes
// only (no inline styles: the page's Content-Security-Policy allows none).
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svgElement(name, attributes, text) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attributes || {})) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

function htmlElement(name, attributes, text) {
  const el = document.createElement(name);
  for (const [k, v] of Object.entries(attributes || {})) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// A value cell (td) of any view: its text, right-aligned number or a mark with its meaning.
function valueCell(td, value, count, kind) {
  td.textContent = cellText(value, count, kind);
  const mark = cellMark(value, count);
  if (mark === BLANK) {
    td.className = "blank";
    td.title = "blanked: not published (a small count)";
  } else if (mark === UNDEFINED) {
    td.className = "blank";
    td.title = "not defined: no records in this cell";
  } else {
    td.className = "num";
  }
  return mark;
}

// The answer as the API sends it: one row per cell (the "List" view); returns the marks used.
function renderList(table, answer, request) {
  const marks = new Set();
  table.caption.textContent = caption(request, answer.rows.length);
  const kinds = answer.columns.map((c) => columnKind(c, request));
  const countAt = answer.columns.indexOf("n_pert");
  const headRow = table.tHead.insertRow();
  answer.columns.forEach((c, i) => {
    const th = htmlElement("th", { scope: "col", title: c }, columnHeader(c, request));
    if (kinds[i] !== "code") th.className = "num";
    headRow.append(th);
  });
  const body = table.tBodies[0];
  for (const values of answer.rows) {
    const row = body.insertRow();
    values.forEach((v, i) => {
      const td = row.insertCell();
      if (kinds[i] === "code" || kinds[i] === "level") td.textContent = String(v);
      else marks.add(valueCell(td, v, countAt >= 0 ? values[countAt] : v, kinds[i]));
    });
  }
  return marks;
}

// The heading of a crosstab's stub: the row dimensions, named by their chosen level.
function dimLabel(dim, request) {
  return dimName((request.levels || {})[dim] || dim); // labels.js: in the language chosen
}

function crosstabHead(table, t, request, valueLabel) {
  const head = table.createTHead();
  const runs = headerRuns(t.colKeys, t.colDims.length);
  const stubs = Math.max(t.rowDims.length, 1);
  if (!t.colDims.length) {
    const tr = head.insertRow();
    (t.rowDims.length ? t.rowDims : [""]).forEach((d) => tr.append(htmlElement("th", { scope: "col" }, d && dimLabel(d, request))));
    tr.append(htmlElement("th", { scope: "col", class: "num" }, valueLabel));
    return;
  }
  runs.forEach((run, level) => {
    const tr = head.insertRow();
    const last = level === runs.length - 1;
    if (last && t.rowDims.length) {
      t.rowDims.forEach((d) => tr.append(htmlElement("th", { scope: "col", class: "stub" }, dimLabel(d, request))));
    } else {
      tr.append(htmlElement("th", { colspan: stubs, class: "corner" }, dimLabel(t.colDims[level], request)));
    }
    for (const { code, span, total } of run) {
      const th = htmlElement("th", { scope: last ? "col" : "colgroup", class: "num" + (total ? " total" : ""),
        "data-code": code }, codeText(t.colDims[level], code));
      if (span > 1) th.colSpan = span;
      tr.append(th);
    }
  });
}

// One crosstab (a wafer, or the whole table) with its caption; returns the marks used.
function crosstabTable(t, request, kind, valueLabel, title) {
  const marks = new Set();
  const table = htmlElement("table", { class: "crosstab" });
  table.createCaption().textContent = title;
  crosstabHead(table, t, request, valueLabel);
  const body = table.createTBody();
  t.rowKeys.forEach((rowKey, r) => {
    const tr = body.insertRow();
    if (rowKey.includes("Total")) tr.className = "total";
    else if (t.subtotals[r]) tr.className = "subtotal";
    if (!rowKey.length) tr.append(htmlElement("th", { scope: "row" }, valueLabel));
    rowKey.forEach((code, i) => tr.append(htmlElement("th", { scope: "row", class: code === "Total" ? "total" : "",
      "data-code": code }, codeText(t.rowDims[i], code))));
    t.colKeys.forEach((colKey, c) => {
      const td = tr.insertCell();
      const cell = t.cells[r][c];
      if (cell) marks.add(valueCell(td, cell.value, cell.count, kind));
      else td.className = "missing";
      if (colKey.includes("Total")) td.classList.add("total");
    });
  });
  return { table, marks };
}

// The crosstab view: one table, or one per wafer (each captioned with its wafer's codes).
function renderCrosstabs(container, tables, request, kind, valueLabel) {
  const marks = new Set();
  const whole = caption(request, tables.reduce((n, t) => n + t.rowKeys.length * t.colKeys.length, 0));
  for (const t of tables) {
    const wafer = t.wafer.map(([d, code]) => dimLabel(d, request) + ": " + codeText(d, code)).join(", ");
    const built = crosstabTable(t, request, kind, valueLabel, valueLabel + " \u2014 " + (wafer || whole));
    if (wafer) built.table.classList.add("wafer");
    built.marks.forEach((m) => marks.add(m));
    const scroll = htmlElement("div", { class: "scroll", tabindex: 0, role: "region", "aria-label": built.table.caption.textContent });
    scroll.append(built.table);
    container.append(scroll);
  }
  if (tables.length > 1) container.prepend(htmlElement("p", { class: "hint" }, whole + "; one table per wafer"));
  return marks;
}

// The bar view of a one-dimension answer: a bar per code (subtotals darker), the published
// margin written under the chart; returns the marks used.
function renderBars(container, bars, request, dim, kind, valueLabel) {
  const marks = new Set();
  const width = 640;
  const label = 140;
  const room = width - label - 90;
  const rowHeight = 22;
  const values = bars.items.map((i) => i.value).filter((v) => typeof v === "number");
  const top = Math.max(0, ...values);
  const bottom = Math.min(0, ...values);
  const scale = top > bottom ? room / (top - bottom) : 0;
  const zero = label + -bottom * scale;
  const svg = svgElement("svg", { class: "bars", role: "img", width, height: bars.items.length * rowHeight + 8,
    viewBox: "0 0 " + width + " " + (bars.items.length * rowHeight + 8),
    "aria-label": valueLabel + " by " + dimLabel(dim, request) + ", one bar per code" });
  bars.items.forEach((item, i) => {
    const y = 4 + i * rowHeight;
    const shown = cellText(item.value, item.count, kind);
    const mark = cellMark(item.value, item.count);
    marks.add(mark);
    const g = svgElement("g", { class: "bar" + (item.level > 0 && item.level < maxLevel(bars) ? " subtotal" : "") + (mark ? " blank" : ""),
      "data-code": item.code });
    g.append(svgElement("title", {}, codeText(dim, item.code) + ": " + shown));
    g.append(svgElement("text", { x: label - 8, y: y + 15, "text-anchor": "end", class: "code" }, codeText(dim, item.code)));
    let end = zero;
    if (!mark) {
      const x = item.value >= 0 ? zero : zero + item.value * scale;
      const w = Math.abs(item.value) * scale;
      g.append(svgElement("rect", { x, y: y + 3, width: Math.max(w, 1), height: rowHeight - 6 }));
      end = item.value >= 0 ? x + w : zero;
    }
    g.append(svgElement("text", { x: end + 6, y: y + 15, class: "value" }, shown));
    svg.append(g);
  });
  container.append(svg);
  if (bars.total) {
    const shown = cellText(bars.total.value, bars.total.count, kind);
    container.append(htmlElement("p", { class: "bar-total" }, "Total (the published margin): " + shown));
  }
  return marks;
}

function maxLevel(bars) {
  return Math.max(...bars.items.map((i) => i.level));
}

// The grid map: a square per grid code, coloured by its class, north up; a legend of classes.
// `others`: the other dimensions of the table (the map shows their Total).
function renderMap(container, squares, dim, others, kind, valueLabel) {
  const marks = new Set();
  const breaks = classBreaks(squares.map((s) => s.value), MAP_COLOURS.length);
  const layout = mapLayout(squares);
  const cell = Math.max(2, Math.min(48, Math.floor(480 / Math.max(layout.columns, layout.rows))));
  const svg = svgElement("svg", { class: "grid-map", role: "img", width: layout.columns * cell,
    height: layout.rows * cell, viewBox: "0 0 " + layout.columns + " " + layout.rows,
    "aria-label": valueLabel + " by grid square (" + dim + "), " + squares.length + " squares, north up" });
  squares.forEach((s, i) => {
    const k = classOf(s.value, breaks);
    const shown = cellText(s.value, s.count, kind);
    marks.add(cellMark(s.value, s.count));
    const rect = svgElement("rect", { x: layout.places[i].x, y: layout.places[i].y, width: 1, height: 1,
      fill: classColour(k, breaks.length), class: k < 0 ? "square blank" : "square", "data-code": s.code,
      "data-class": k });
    rect.append(svgElement("title", {}, s.code + ": " + shown));
    svg.append(rect);
  });
  const side = squares[0].res >= 1000 ? squares[0].res / 1000 + " km" : squares[0].res + " m";
  container.append(htmlElement("p", { class: "hint map-caption" }, valueLabel + " per " + side + " square of " + dim
    + (others.length ? " (" + others.join(", ") + ": Total)" : "") + "; north up, one square is " + side + " wide"));
  container.append(svg);
  const legend = htmlElement("ul", { class: "map-legend", "aria-label": "Colours of the map" });
  let low = null;
  breaks.forEach((bound, k) => {
    // counts are whole: a class starts one above the bound of the class below; other values: "over"
    const from = low === null ? "up to " : kind === "count" ? formatValue(low + 1, kind) + " to "
      : "over " + formatValue(low, kind) + " to ";
    const text = from + formatValue(bound, kind);
    legend.append(legendSwatch(classColour(k, breaks.length), text));
    low = bound;
  });
  if (squares.some((s) => classOf(s.value, breaks) < 0)) legend.append(legendSwatch(MAP_BLANK, BLANK + " blanked"));
  container.append(legend);
  return marks;
}

function legendSwatch(colour, text) {
  const li = htmlElement("li", {});
  const svg = svgElement("svg", { width: 14, height: 14, "aria-hidden": "true", class: "swatch" });
  svg.append(svgElement("rect", { width: 14, height: 14, fill: colour }));
  li.append(svg, " " + text);
  return li;
}

// The legend under a view: what each mark used means, what the totals are, and the codes the
// disclosure rules withheld ({column: [codes]}).
function renderLegend(dl, marks, hasTotals, withheld) {
  dl.replaceChildren();
  const add = (term, text) => dl.append(htmlElement("dt", {}, term), htmlElement("dd", {}, text));
  add(BLANK, "blanked: not published, a perturbed count below the publication threshold (its sum and mean too)"
    + (marks.has(BLANK) ? "" : "; none in this view"));
  if (marks.has(UNDEFINED)) add(UNDEFINED, "not defined: a sum or mean of a cell without records");
  if (hasTotals) {
    add("Total", "the published margin: protected on its own, so it need not equal the sum of the cells shown");
  }
  const gone = Object.entries(withheld || {}).map(([column, codes]) => column + " " + codes.join(", "));
  if (gone.length) {
    add("Withheld", "left out of the answer by the disclosure rules (areas below their level's minimum"
      + " population): " + gone.join("; "));
  }
  add("Values", "protected by the cell key method: counts are perturbed, sums and means too");
}

if (typeof module !== "undefined") module.exports = {};
