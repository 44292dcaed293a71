// protab table builder: custom groups of a ticked dimension (the request's "groups"), and groups
// saved under their name (GET/POST /v1/groups, DELETE /v1/groups/{dataset}/{dim}/{name}).
// Codes are picked into named groups with checkboxes (a code in one group at most: the codes of
// the other groups are disabled); a group saved and unchanged travels by its name. Uses api,
// option, currentDataset, placeTicked, setStatus, showError and refused of app.js.
"use strict";

// The groups on the page: the grouped dimension, its groups [{name, codes: [..]}], and the name
// they are saved under while they are unchanged (null after any change).
let groupEdit = { dim: "", groups: [], saved: null };
let savedGroups = []; // [{dataset, dim, name, groups, saved}] of GET /v1/groups

// -- pure functions (tests/serve/test_serve_builder_groups.py runs them under node) ------------

// The "groups" of a table request: {dim: saved name} while saved groups are unchanged, else
// {dim: {group: [codes, sorted]}}; undefined without a grouped dimension, groups, or when the
// dimension is not one of `dims` (the table's).
function groupsBody(edit, dims) {
  if (!edit.dim || !edit.groups.length || !dims.includes(edit.dim)) return undefined;
  if (edit.saved) return { [edit.dim]: edit.saved };
  return { [edit.dim]: Object.fromEntries(edit.groups.map((g) => [g.name, [...g.codes].sort()])) };
}

// The group each code is in, but for group `index`: {code: group name}.
function takenBy(groups, index) {
  const taken = {};
  groups.forEach((g, i) => {
    if (i !== index) for (const c of g.codes) taken[c] = g.name;
  });
  return taken;
}

// Why a new group's name is not taken (empty when it may be added): the service's rules on
// names (not a code, not Total, not another group's name, 1 to 60 characters).
function groupNameProblem(name, groups, codes) {
  if (!name) return "Give the group a name.";
  if (name.length > 60) return "A group's name has at most 60 characters.";
  if (name === "Total" || codes.includes(name)) return "A group's name may not be Total or a code of the dimension.";
  if (groups.some((g) => g.name === name)) return "There is a group named " + name + " already.";
  return "";
}

// The editor's state from groups of a request or a saved entry ({group: [codes]}).
function editFrom(dim, groups, saved) {
  return { dim, groups: Object.entries(groups || {}).map(([name, codes]) => ({ name, codes: [...codes].map(String) })),
    saved: saved || null };
}

// -- the page --------------------------------------------------------------------------------

function groupableCodes(dim) {
  const ds = currentDataset();
  const d = ds && ds.dims.find((x) => x.name === dim);
  return d ? d.codes.map(String) : [];
}

function tickedDimNames() {
  return [...$("dims").tBodies[0].rows].filter((r) => r.querySelector(".dim-pick").checked).map((r) => r.dataset.dim);
}

// The request's groups (tableRequest of app.js calls it).
function customGroups(dims) {
  return groupsBody(groupEdit, dims);
}

// The dimensions that may be grouped: the ticked ones (and the grouped one, kept while unticked).
function refreshGroupDims() {
  const select = $("groups-dim");
  const ticked = tickedDimNames();
  const names = ticked.includes(groupEdit.dim) || !groupEdit.dim ? ticked : [...ticked, groupEdit.dim];
  select.replaceChildren(option("", "none (codes as published)"),
    ...names.map((d) => option(d, d + (ticked.includes(d) ? "" : " (not ticked: not in the request)"))));
  select.value = groupEdit.dim;
  renderSavedGroups();
}

function groupsChanged() {
  groupEdit.saved = null;
  renderGroups();
}

// One fieldset per group: its codes as checkboxes (codes of other groups disabled) and a button
// that removes it.
function renderGroups() {
  const box = $("groups-editor");
  box.replaceChildren();
  const codes = groupableCodes(groupEdit.dim);
  $("group-name").disabled = $("group-add").disabled = !groupEdit.dim;
  $("groups-save").disabled = !groupEdit.groups.length;
  groupEdit.groups.forEach((group, i) => {
    const set = document.createElement("fieldset");
    set.className = "group";
    set.dataset.group = group.name;
    const legend = document.createElement("legend");
    legend.textContent = "Group " + group.name;
    set.append(legend);
    const taken = takenBy(groupEdit.groups, i);
    const list = document.createElement("p");
    list.className = "group-codes";
    codes.forEach((code, j) => {
      const box = document.createElement("input");
      box.type = "checkbox";
      box.id = "group-" + i + "-code-" + j;
      box.dataset.code = code;
      box.checked = group.codes.includes(code);
      box.disabled = code in taken;
      const label = document.createElement("label");
      label.htmlFor = box.id;
      label.textContent = code;
      if (code in taken) label.title = box.title = code + " is in group " + taken[code];
      box.addEventListener("change", () => {
        group.codes = box.checked ? [...group.codes, code] : group.codes.filter((c) => c !== code);
        groupsChanged();
        document.getElementById(box.id).focus(); // the keyboard stays where it was
      });
      const item = document.createElement("span");
      item.className = "group-code";
      item.append(box, label);
      list.append(item);
    });
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "group-remove";
    remove.textContent = "Remove group " + group.name;
    remove.addEventListener("click", () => {
      groupEdit.groups.splice(i, 1);
      groupsChanged();
      $("group-name").focus();
    });
    set.append(list, remove);
    box.append(set);
  });
  $("groups-state").textContent = !groupEdit.dim ? "" : groupEdit.groups.length
    ? groupEdit.groups.length + " group(s) of " + groupEdit.dim + (groupEdit.saved ? ", saved as " + groupEdit.saved : "")
      + ": the table shows them and their total."
    : "No group of " + groupEdit.dim + " yet: name one and add it.";
}

function chooseGroupDim() {
  groupEdit = { dim: $("groups-dim").value, groups: [], saved: null };
  renderGroups();
  renderSavedGroups();
}

function addGroup(event) {
  event.preventDefault();
  const name = $("group-name").value.trim();
  const problem = groupNameProblem(name, groupEdit.groups, groupableCodes(groupEdit.dim));
  if (problem) {
    setStatus(problem);
    return;
  }
  groupEdit.groups.push({ name, codes: [] });
  $("group-name").value = "";
  groupsChanged();
  const first = document.querySelector("#groups-editor fieldset:last-of-type input:not([disabled])");
  if (first) first.focus();
}

// The dataset changed (or a saved table is opened): no groups.
function resetGroups() {
  groupEdit = { dim: "", groups: [], saved: null };
  refreshGroupDims();
  renderGroups();
}

// A request's groups on the page (a saved table or a job opened): by name or inline.
function applyGroups(request) {
  const [dim, groups] = Object.entries(request.groups || {})[0] || ["", null];
  if (typeof groups === "string") {
    const entry = savedGroups.find((g) => g.dataset === request.dataset && g.dim === dim && g.name === groups);
    groupEdit = editFrom(dim, entry ? entry.groups : {}, entry ? groups : null);
  } else {
    groupEdit = editFrom(dim, groups, null);
  }
  refreshGroupDims();
  renderGroups();
}

async function loadSavedGroups() {
  try {
    savedGroups = (await (await api("/v1/groups")).json()).groups || [];
  } catch (error) {
    savedGroups = [];
    if (error.status !== 404) refused(error);
  }
  renderSavedGroups();
}

// The saved groups of the dataset (of the grouped dimension, when there is one).
function renderSavedGroups() {
  const ds = $("dataset").value;
  const mine = savedGroups.filter((g) => g.dataset === ds && (!groupEdit.dim || g.dim === groupEdit.dim));
  $("groups-saved").replaceChildren(...mine.map((g) => option(g.dim + "/" + g.name, g.name + " (" + g.dim + ": "
    + Object.keys(g.groups).join(", ") + ")")));
  if (groupEdit.saved) $("groups-saved").value = groupEdit.dim + "/" + groupEdit.saved;
  $("groups-use").disabled = $("groups-delete").disabled = !mine.length;
}

function selectedSaved() {
  const value = $("groups-saved").value;
  return savedGroups.find((g) => g.dataset === $("dataset").value && g.dim + "/" + g.name === value);
}

// Saved groups on the page: their dimension ticked (if it is not) and grouped by them.
function useSavedGroups() {
  const entry = selectedSaved();
  if (!entry) return;
  const row = [...$("dims").tBodies[0].rows].find((r) => r.dataset.dim === entry.dim);
  if (row && !row.querySelector(".dim-pick").checked) {
    row.querySelector(".dim-pick").checked = true;
    placeTicked(row);
  }
  groupEdit = editFrom(entry.dim, entry.groups, entry.name);
  refreshGroupDims();
  renderGroups();
  $("groups-save-name").value = entry.name;
  setStatus("Grouping " + entry.dim + " by the saved groups " + entry.name + ".");
}

async function saveGroups() {
  showError(null);
  const name = $("groups-save-name").value.trim();
  const groups = groupsBody({ ...groupEdit, saved: null }, [groupEdit.dim]);
  if (!groups) return;
  try {
    await api("/v1/groups", { dataset: $("dataset").value, dim: groupEdit.dim, name, groups: groups[groupEdit.dim] });
    groupEdit.saved = name;
    await loadSavedGroups();
    renderGroups();
    setStatus("Saved the groups of " + groupEdit.dim + " as " + name + ".");
  } catch (error) {
    refused(error);
  }
}

async function deleteSavedGroups() {
  showError(null);
  const entry = selectedSaved();
  if (!entry) return;
  try {
    await api("/v1/groups/" + [entry.dataset, entry.dim, entry.name].map(encodeURIComponent).join("/"), undefined, "DELETE");
    if (groupEdit.saved === entry.name && groupEdit.dim === entry.dim) groupEdit.saved = null;
    await loadSavedGroups();
    renderGroups();
    setStatus("Deleted the saved groups " + entry.name + ".");
  } catch (error) {
    refused(error);
  }
}

if (typeof document !== "undefined") document.addEventListener("DOMContentLoaded", () => {
  $("groups-form").addEventListener("submit", addGroup);
  $("groups-dim").addEventListener("change", chooseGroupDim);
  $("dims").addEventListener("change", (event) => {
    if (event.target.classList.contains("dim-pick")) refreshGroupDims();
  });
  $("groups-save").addEventListener("click", saveGroups);
  $("groups-save-name").addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return;
    event.preventDefault(); // Enter here saves the groups (the form's own submit adds a group)
    saveGroups();
  });
  $("groups-use").addEventListener("click", useSavedGroups);
  $("groups-delete").addEventListener("click", deleteSavedGroups);
});

if (typeof module !== "undefined") module.exports = { groupsBody, takenBy, groupNameProblem, editFrom };
