"""``include = ["shared.toml", …]`` at the top of a request, programme, serve.toml or report
request: the shared sections (p-table, classifications, rules, …) declared once by an office and
merged into every file that includes them.

Paths are relative to the including file (and the paths inside an included file, e.g.
``[ptable] file``, relative to the included file). An included file holds only the shared keys
the including front accepts (:data:`protab.vocabulary.sections.SHARED_KEYS`); a section given
twice must be given the same (an identical repeat is fine). Every refusal is one SpecError naming
the file, the key and what is accepted there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from protab._io import read_toml
from protab.errors import SpecError
from protab.vocabulary.sections import FRONT_NAMES, NAMED_SECTIONS, SHARED_KEYS, front_of

#: the keys (and, in named sections, the keys of each entry) whose values are file paths
_PATH_KEYS: dict[str, tuple[str, ...]] = {
    "ptable": ("file",),
    "swap": ("seed_file",),
}
_ENTRY_PATH_KEYS = ("hrc", "parent_child", "ssb_frame")
_MAGNITUDE_TABLES = ("ptable", "even", "odd", "small_cells")


def read_with_includes(path: Path, front: str) -> dict[str, Any]:
    """The TOML file ``path`` of ``front`` (protect, programme, serve, report) with its
    includes merged in; a file without ``include`` is read as it is."""
    path = Path(path)
    return expand(read_toml(path, SpecError), path, front)


def expand(cfg: Mapping[str, Any], path: Path, front: str) -> dict[str, Any]:
    """``cfg`` (the content of ``path``, or of a mapping whose paths are relative to
    ``path.parent``) with its includes merged in."""
    return _expand(dict(cfg), path, front, (), path.parent)


def _expand(cfg: dict[str, Any], path: Path, front: str, stack: tuple[Path, ...], base: Path) -> dict[str, Any]:
    here = path.resolve()
    if here in stack:
        chain = " -> ".join(str(p) for p in (*stack, here))
        raise SpecError(f"{_name(path)}: include forms a cycle ({chain}); a file cannot include itself, directly "
                        "or through another")
    includes = cfg.pop("include", None)
    if includes is None:
        return cfg
    if not isinstance(includes, list) or not all(isinstance(x, str) and x.strip() for x in includes):
        raise SpecError(f"{_name(path)}: include must be a list of file names (e.g. include = [\"shared.toml\"]), "
                        f"relative to the file, not {includes!r}")
    merged: dict[str, Any] = {}
    origin: dict[str, Path] = {}
    for rel in includes:
        sub_path = path.parent / rel
        if not sub_path.is_file():
            what = "is a folder, not a TOML file" if sub_path.is_dir() else "does not exist"
            raise SpecError(f"{_name(path)}: include = {rel!r}: the file {str(sub_path)!r} {what} (paths in include "
                            "are relative to the including file)")
        sub = read_toml(sub_path, SpecError)
        _check_keys(sub, sub_path, front)
        _rebase(sub, sub_path.parent, base)
        sub = _expand(sub, sub_path, front, (*stack, here), base)
        _merge(merged, origin, sub, sub_path)
    _merge(merged, origin, cfg, path)
    return {**cfg, **merged}


def _name(path: Path) -> str:
    return f"the file {str(path)!r}"


def _check_keys(sub: Mapping[str, Any], path: Path, front: str) -> None:
    """An included file holds only the shared keys its including front accepts."""
    accepted = SHARED_KEYS[front]
    for key in sub:
        if key == "include" or key in accepted:
            continue
        listing = ", ".join(sorted(accepted)) + ", include"
        owner = front_of(key, exclude=front)
        if owner is not None:
            hint = f"; {key!r} is a key of {FRONT_NAMES[owner]}, not of {FRONT_NAMES[front]}"
            if key in NAMED_SECTIONS:
                hint += " (a programme declares [classifications.…], protect and report [hierarchies.…])"
        else:
            hint = ""
        raise SpecError(f"{_name(path)} (included by {FRONT_NAMES[front]}): key {key!r} is not accepted in an "
                        f"included file{hint}; an included file of {FRONT_NAMES[front]} may hold: {listing}")


def _rebase(sub: dict[str, Any], folder: Path, base: Path) -> None:
    """The paths of an included file, relative to its own folder, made relative to ``base``
    (the folder of the file that the front reads), where the loaders look for them."""
    rel = os.path.relpath(folder, base)

    def move(table: Any, key: str) -> None:
        if isinstance(table, dict) and isinstance(table.get(key), str):
            value = table[key]
            if value != ":memory:" and not os.path.isabs(value):
                table[key] = os.path.normpath(os.path.join(rel, value))

    move(sub, "database")
    for section, keys in _PATH_KEYS.items():
        for key in keys:
            move(sub.get(section), key)
    magnitude = sub.get("magnitude")
    if isinstance(magnitude, dict):
        for t in _MAGNITUDE_TABLES:
            move(magnitude.get(t), "file")
    for section in NAMED_SECTIONS:
        entries = sub.get(section)
        if isinstance(entries, dict):
            for entry in entries.values():
                for key in _ENTRY_PATH_KEYS:
                    move(entry, key)
                _rebase_labels_files(entry, move)


def _rebase_labels_files(entry: Any, move: Any) -> None:
    """The paths of an entry's ``labels_file`` (a file name, a table, or a list of them)."""
    if not isinstance(entry, dict) or "labels_file" not in entry:
        return
    value = entry["labels_file"]
    if isinstance(value, list):
        holder = {str(k): v for k, v in enumerate(value)}
        for k, v in holder.items():
            if isinstance(v, str):
                move(holder, k)
            else:
                move(v, "file")
                move(v, "sdmx")
        entry["labels_file"] = list(holder.values())
    elif isinstance(value, dict):
        move(value, "file")
        move(value, "sdmx")
    else:
        move(entry, "labels_file")


def _merge(merged: dict[str, Any], origin: dict[str, Path], sub: Mapping[str, Any], path: Path) -> None:
    """Merge the keys of ``sub`` (the file ``path``): named sections entry by entry, other keys
    whole; a key (or entry) given twice must be given the same."""
    for key, value in sub.items():
        if key in NAMED_SECTIONS and isinstance(value, dict) and isinstance(merged.get(key, {}), dict):
            into = merged.setdefault(key, {})
            for name, entry in value.items():
                _one(into, origin, name, entry, f"{key}.{name}", path)
        else:
            _one(merged, origin, key, value, key, path)


def _one(into: dict[str, Any], origin: dict[str, Path], key: str, value: Any, full: str, path: Path) -> None:
    if key in into and into[key] != value:
        raise SpecError(
            f"{_name(path)}: {full} is defined differently in {str(origin[full])!r}; declare it once (an "
            "identical repeat is fine) or remove one of them"
        )
    into[key] = value
    origin.setdefault(full, path)
