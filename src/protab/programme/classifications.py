"""The classifications of a programme built as hierarchies (once each, shared by name), the
level of every hypercube dimension resolved against them, and each hypercube's cell limit
checked from the code counts, before any table is built."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab.errors import ProtabError, SpecError, show_values
from protab.request.loaders import hierarchy
from protab.vocabulary.labels import LABEL_SOURCES, check_labels
from protab.vocabulary.sections import code_texts

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy import Hierarchy
    from protab.programme.definition import Hypercube
    from protab.session import Session

_OWN_KEYS = ("flat", "codes", "levels", "labels", "labels_file", LABEL_SOURCES, "name")


def build(s: Session, cfg: dict[str, Any], cubes: list[Hypercube], source: str, base: Path,
          file: str = "programme") -> dict[str, Hierarchy]:
    """Every classification a hypercube uses, as a Hierarchy read from ``source`` (codes from
    data are read from the first variable that uses the classification); its ``labels`` label
    only its codes (a SpecError naming ``file``, the classification and the codes)."""
    from protab.hierarchy import Hierarchy

    first: dict[str, str] = {}
    for cube in cubes:
        for d in cube.dims:
            first.setdefault(d.classification, d.variable)
    out: dict[str, Hierarchy] = {}
    for name, variable in first.items():
        c = cfg["classifications"][name]
        root = c.get("root", "Total")
        try:
            if "codes" in c:
                h = Hierarchy.flat(code_texts(c["codes"]), root=root)
            elif c.get("flat"):
                h = Hierarchy.flat(s.codes(source, variable), root=root)
            else:
                loader = {k: v for k, v in c.items() if k not in _OWN_KEYS}
                h = hierarchy(s, loader, source, variable, base)
        except ProtabError as exc:
            msg = str(exc).replace(f"[hierarchies.{variable}] of the request", f"[classifications.{name}]")
            raise type(exc)(msg.replace(f"hierarchies.{variable}.", f"classifications.{name}.")) from None
        check_labels(c, h.codes, file, f"[classifications.{name}]")
        names = level_names(name, c)
        if names is not None and len(names) != h.depth:
            raise SpecError(f"programme: [classifications.{name}] levels names {len(names)} levels "
                            f"({', '.join(names)}), but the classification has {h.depth}")
        out[name] = h
    return out


def level_names(name: str, c: dict[str, Any]) -> list[str] | None:
    """The names of levels 1 … depth: ``levels``, else the columns of a ``columns``
    classification, else the classification's name for a flat one; None: numbers only."""
    if "levels" in c:
        return list(c["levels"])
    if "columns" in c:
        return list(c["columns"])
    if "codes" in c or c.get("flat"):
        return [name]
    return None


def levels(cfg: dict[str, Any], cube: Hypercube, hierarchies: dict[str, Hierarchy]) -> dict[str, int]:
    """The level (1 … depth) each dimension of ``cube`` is published down to."""
    out = {}
    for d in cube.dims:
        depth = hierarchies[d.classification].depth
        names = level_names(d.classification, cfg["classifications"][d.classification])
        if d.level is None:
            out[d.variable] = depth
        elif names is not None and d.level in names:
            out[d.variable] = names.index(d.level) + 1
        elif d.level.isdigit() and 1 <= int(d.level) <= depth:
            out[d.variable] = int(d.level)
        else:
            known = ", ".join(names) if names else f"1 to {depth}"
            raise SpecError(
                f"programme: hypercube {cube.name!r}: dims.{d.variable} asks for level {d.level!r} of "
                f"classification {d.classification!r}, which has no such level (levels: {known})"
            )
    return out


def check_cells(cube: Hypercube, depth: dict[str, int], hierarchies: dict[str, Hierarchy]) -> int:
    """The most cells the tables of ``cube`` publish (per table the product of its dimensions'
    codes down to their level, totals included), refused above the hypercube's ``max_cells``."""
    import numpy as np

    counts = {}
    for d in cube.dims:
        lv = np.asarray(hierarchies[d.classification].code_levels().column("level"))
        counts[d.variable] = int((lv <= depth[d.variable]).sum())
    total = 0
    for t in cube.tables:
        total += int(np.prod([counts[v] for v in t.dims], dtype=object))
    if total > cube.max_cells:
        raise SpecError(
            f"programme: hypercube {cube.name!r} publishes up to {total:,} cells, over its limit max_cells = "
            f"{cube.max_cells:,}; publish some dimensions at a coarser level, split it, or raise max_cells"
        )
    return total


def check_records(s: Session, cfg: dict[str, Any], cubes: list[Hypercube], source: str,
                  hierarchies: dict[str, Hierarchy]) -> None:
    """Refuse, before anything is computed, records that a hypercube could not publish: a code of
    a variable that its classification does not declare (at its finest level), and NULLs in a
    variable that a table publishes without a ``null_code`` the classification declares.

    One SQL pass over ``source`` for every variable at once (GROUPING SETS: the distinct codes
    per variable with their record counts, anti-joined in the database with the declared codes,
    which are registered as an Arrow relation); only a summary per variable comes back. The
    programme has one source: its swapped copy moves codes between households but adds none."""
    from uuid import uuid4

    variables = list(dict.fromkeys(d.variable for c in cubes for d in c.dims))
    classification = {d.variable: d.classification for c in cubes for d in c.dims}
    null_codes = _null_codes(cubes)
    name = f"_protab_declared_{uuid4().hex}"
    s.engine.register(name, _declared(variables, classification, hierarchies, null_codes))
    try:
        rows = s.engine.rows(_scan_sql(variables, s.columns(source), source, name))
    finally:
        s.engine.unregister(name)
    found = {int(r[0]): r[1:] for r in rows}
    for k, v in enumerate(variables):
        n_bad, records, first, margins, nulls, held = found.get(k, (0, 0, [], 0, 0, []))
        where = f"column {v!r} of {source!r} (classification {classification[v]!r})"
        if n_bad:
            also = (f"; {margins:,} of them are codes of its coarser levels (margins), while the records hold "
                    "the finest codes" if margins else "")
            raise SpecError(
                f"programme: {where} holds {n_bad:,} code{'s' if n_bad > 1 else ''} that "
                f"[classifications.{classification[v]}] does not declare, in {records:,} records: "
                f"{_listing(first, n_bad)}{also}; declare {'them' if n_bad > 1 else 'it'} or recode those records "
                "(nothing was computed)"
            )
        if nulls:
            flat = bool(cfg["classifications"][classification[v]].get("flat"))
            _check_nulls(where, classification[v], int(nulls), null_codes.get(v, {}), hierarchies[classification[v]],
                         held or [], flat)


def _null_codes(cubes: list[Hypercube]) -> dict[str, dict[str | None, list[str]]]:
    """Per variable, the tables that publish it (``hypercube.table``) by their ``null_code``."""
    out: dict[str, dict[str | None, list[str]]] = {}
    for cube in cubes:
        for t in cube.tables:
            for v in t.dims:
                out.setdefault(v, {}).setdefault(t.options.get("null_code"), []).append(f"{cube.name}.{t.name}")
    return out


def _declared(variables: list[str], classification: dict[str, str], hierarchies: dict[str, Hierarchy],
              null_codes: dict[str, dict[str | None, list[str]]]) -> Any:
    """The Arrow relation (k, code, leaf, watched) of every variable k: the codes of its
    classification (``leaf``: at the finest level, NULL for the null codes it lacks), and
    (``watched``) the null codes of its tables, whose presence in the records is reported."""
    import polars as pl

    parts = []
    for k, v in enumerate(variables):
        h = hierarchies[classification[v]]
        codes = pl.Series("code", h.codes, pl.String)
        watch = pl.Series("code", [c for c in null_codes.get(v, {}) if c is not None], pl.String)
        frame = pl.DataFrame({"code": codes, "leaf": codes.is_in(pl.Series(h.leaves, dtype=pl.String).implode())})
        frame = frame.join(watch.to_frame(), on="code", how="full", coalesce=True).with_columns(
            k=pl.lit(k, pl.Int64), watched=pl.col("code").is_in(watch.implode()))
        parts.append(frame.select("k", "code", "leaf", "watched"))
    return pl.concat(parts).to_arrow()


def _scan_sql(variables: list[str], types: dict[str, str], source: str, declared: str) -> str:
    """The one pass: per variable k, the number of its distinct codes that are not declared at the
    finest level, their records, the first six of them, how many are coarser codes, its NULL
    records, and the watched (null) codes it holds (sorted lists: the same statement on every
    engine)."""
    from protab.sqltools import code_sql, quote_ident

    cols = [f"c{k}" for k in range(len(variables))]
    read = ", ".join(f"{code_sql(v, types[v])} AS c{k}" for k, v in enumerate(variables))
    which = "CASE " + " ".join(f"WHEN grouping({c}) = 0 THEN {k}" for k, c in enumerate(cols)) + " END"
    text = ", ".join(f"CAST({c} AS VARCHAR)" for c in cols)  # codes become text after grouping (cheaper)
    bad = "u.code IS NOT NULL AND d.leaf IS NOT TRUE"
    return (
        f"WITH u AS (SELECT {which} AS k, coalesce({text}) AS code, count(*) AS n "
        f"FROM (SELECT {read} FROM {quote_ident(source)}) GROUP BY GROUPING SETS ({', '.join(f'({c})' for c in cols)})) "
        f"SELECT u.k, count(*) FILTER (WHERE {bad}), coalesce(sum(u.n) FILTER (WHERE {bad}), 0), "
        f"coalesce(list_slice(list_sort(list(u.code) FILTER (WHERE {bad})), 1, 6), []), "
        "count(*) FILTER (WHERE u.code IS NOT NULL AND d.leaf = false), "
        "coalesce(sum(u.n) FILTER (WHERE u.code IS NULL), 0), "
        "coalesce(list_sort(list(u.code) FILTER (WHERE d.watched)), []) "
        f"FROM u LEFT JOIN {quote_ident(declared)} d ON d.k = u.k AND d.code = u.code GROUP BY u.k"
    )


def _check_nulls(where: str, name: str, nulls: int, tables: dict[str | None, list[str]], h: Hierarchy,
                 held: list[str], flat: bool) -> None:
    """NULLs of a variable are published only as a table's ``null_code``, which must be a
    declared code (at the finest level) that the records do not hold."""
    section = f"[classifications.{name}]"
    if None in tables:
        raise SpecError(
            f"programme: {where} is missing (NULL) in {nulls:,} records, and table {tables[None][0]} publishes it "
            f"without a null_code; give its tables null_code = \"Unknown\" (a code {section} declares) or fix "
            "those records (nothing was computed)"
        )
    leaves = set(h.leaves)
    for code, users in tables.items():
        if code not in leaves:
            raise SpecError(
                f"programme: {where} is missing (NULL) in {nulls:,} records, which table {users[0]} publishes as "
                f"null_code {code!r}, a code {section} does not declare; declare it"
                + (" (flat = true takes the codes of the records, which NULL is not: list them with codes = [...])"
                   if flat else "") + " (nothing was computed)"
            )
        if code in held:
            raise SpecError(
                f"programme: {where} is missing (NULL) in {nulls:,} records and holds the code {code!r} too, the "
                f"null_code of table {users[0]}: both would be published as one category; choose a null_code the "
                "column does not hold (nothing was computed)"
            )


def _listing(first: list[str], n: int, limit: int = 5) -> str:
    """The first codes as :func:`protab.errors.show_values` shows them, with how many in all."""
    if n <= limit:
        return show_values(first, limit)
    return ", ".join(repr(c) for c in first[:limit]) + f", … ({n:,} in all)"
