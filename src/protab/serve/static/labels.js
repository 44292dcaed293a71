// protab table builder: the labels the office declares for codes and dimensions (the catalogue's
// "languages", and per dimension "names" and "labels"), in the language chosen on the page.
// Codes stay visible ("0301 Oslo"); the choice is kept in localStorage; table requests carry
// it as "lang", so that a downloaded CSV has the label columns too.
"use strict";

const LANG_KEY = "protab.lang";
let languages = []; // the catalogue's languages

// The language chosen ("" for codes only).
function chosenLang() {
  const select = document.getElementById("lang");
  return select && !select.disabled ? select.value : "";
}

// The catalogue's entry of a dimension of the dataset on the form.
function dimEntry(dim) {
  const ds = typeof currentDataset === "function" ? currentDataset() : null;
  return ds ? ds.dims.find((d) => d.name === dim) : undefined;
}

// A dimension's (or level's) name in the chosen language, else its column.
function dimName(dim) {
  const entry = dimEntry(dim);
  const lang = chosenLang();
  return (lang && entry && entry.names && entry.names[lang]) || dim;
}

// A dimension's description in the chosen language ("" without one): the title of its name on the form.
function dimDescription(dim) {
  const entry = dimEntry(dim);
  const lang = chosenLang();
  return (lang && entry && entry.descriptions && entry.descriptions[lang]) || "";
}

// A code as the page shows it: the code and its label ("0301 Oslo"); the margin by its label alone.
function codeText(dim, code) {
  const entry = dimEntry(dim);
  const lang = chosenLang();
  const label = lang && entry && entry.labels && entry.labels[lang] ? entry.labels[lang][code] : undefined;
  if (!label) return String(code);
  return code === "Total" ? label : code + " " + label;
}

// A language tag with its name in that language, "nb (norsk bokmål)", where the browser knows it.
function languageName(tag) {
  try {
    const name = new Intl.DisplayNames([tag], { type: "language" }).of(tag);
    return name && name !== tag ? tag + " (" + name + ")" : tag;
  } catch (_) {
    return tag;
  }
}

// The language choice after sign-in: shown (and enabled) only when the catalogue has languages;
// the language kept from before is chosen again when the service still has it.
function setUpLanguages(list) {
  languages = Array.isArray(list) ? list : [];
  const select = document.getElementById("lang");
  select.replaceChildren(option("", "codes only"), ...languages.map((l) => option(l, languageName(l))));
  const kept = localStorage.getItem(LANG_KEY) || "";
  select.value = languages.includes(kept) ? kept : "";
  select.disabled = !languages.length;
  document.getElementById("lang-choice").hidden = !languages.length;
}

// The dimension rows of the form, named in the chosen language (their levels too).
function relabelDims() {
  for (const row of document.querySelectorAll("#dims tbody tr")) {
    const dim = row.dataset.dim;
    const label = row.querySelector("label[for^='dim-']");
    if (label) {
      label.textContent = dimName(dim);
      label.title = dimDescription(dim);
    }
    for (const o of row.querySelectorAll(".dim-level option")) {
      if (o.value) o.textContent = dimName(o.value);
    }
  }
}

function languageChanged() {
  localStorage.setItem(LANG_KEY, chosenLang());
  relabelDims();
  if (typeof render === "function") render(); // the answer on the page, relabelled (no new request)
}

if (typeof document !== "undefined") document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("lang").addEventListener("change", languageChanged);
});
