"""Declared code lists of the query service's dimensions (serve.toml ``codes``, ``codes_file``).

Code lists come from declared classifications, never from the records: the catalogue and every
answer list the declared codes, whatever the records hold. A code taken from the data would
disclose that somebody holds it (one person aged 107 makes the code 107 appear, even when its
cell is blanked). A declared code that no record holds is published as an ordinary cell of
count 0 (a structural zero); a code the data hold that is not declared stops the service at
start-up (:func:`check_data`), naming it for the office.

A dimension's classification is a table of codes, one row per code of the dimension, with one
column per level of its hierarchy (``hierarchies.<dim>``, coarsest first; a flat dimension has
one column, itself), declared either inline (``codes.<dim>``: a list of codes, or of rows for a
hierarchy) or in a file (``codes_file.<dim>``: one code per line, or a CSV whose header names
the columns). Hierarchies are built from it with :meth:`protab.hierarchy.Hierarchy.from_parent_child`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from protab.errors import ProtabError, SpecError, show_values
from protab.request import schema
from protab.serve.code_labels import file_labels, is_label_column
from protab.vocabulary.sections import is_code as _is_code

if TYPE_CHECKING:  # pragma: no cover
    from protab.hierarchy import Hierarchy
    from protab.session import Session

#: the name protab gives margins; never a code
MARGIN = "Total"
HOW = ("declare it in the dataset's codes = {{ {dim} = [...] }} or codes_file = {{ {dim} = \"{dim}.txt\" }} "
       "(code lists come from declared classifications, never from the records)")


class _Codes(schema.Type):
    """``codes.<dim>``: a list of codes (strings or whole numbers), or of rows of codes."""

    name = ("a list of codes (strings or whole numbers), or for a dimension with a hierarchy a list of rows "
            "[code of each level, coarsest first]")

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, list) or not value or not all(
            _is_code(x) or (isinstance(x, list) and x and all(_is_code(y) for y in x)) for x in value
        ):
            raise schema.fail(path, self.name, value)


CODES = schema.Dict(_Codes())
CODES_FILE = schema.Dict(schema.Str())


@dataclass(frozen=True, eq=False)
class CodeList:
    """The declared classification of one dimension: ``table`` has one String column per level
    (``levels``, coarsest first, the dimension last) and one row per code of the dimension, in
    the declared order; ``hierarchy`` is built from it when there are several levels."""

    levels: tuple[str, ...]
    table: pl.DataFrame
    source: str
    hierarchy: Hierarchy | None = None
    #: the labels of a code file's label columns: level column → language → code → label
    column_labels: Mapping[str, Mapping[str, Mapping[str, str]]] = field(default_factory=dict)

    @property
    def codes(self) -> list[str]:
        """The dimension's codes (its finest level), in the declared order."""
        return self.table[self.levels[-1]].to_list()


def declared(name: str, ds: Mapping[str, Any], hierarchies: Mapping[str, tuple[str, ...]], base: Path,
             where: str) -> dict[str, CodeList]:
    """The code list of every dimension of dataset ``name`` from its ``codes`` and ``codes_file``;
    a dimension that is a level of another one's hierarchy may take that level's codes. SpecError
    for a dimension without one, naming the key and how to declare it."""
    dims = tuple(ds["dims"])
    inline, files = ds.get("codes", {}), ds.get("codes_file", {})
    for key, given in (("codes", inline), ("codes_file", files)):
        stray = [d for d in given if d not in dims]
        if stray:
            raise SpecError(f"{where}: datasets.{name}.{key}.{stray[0]} names {stray[0]!r}, which is not one of "
                            f"the dataset's dims ({', '.join(dims)})")
    both = [d for d in inline if d in files]
    if both:
        raise SpecError(f"{where}: datasets.{name}: dimension {both[0]!r} is declared both in codes and in "
                        "codes_file; keep one")
    out: dict[str, CodeList] = {}
    for d in dims:
        levels = hierarchies.get(d, (d,))
        if d in inline:
            key = f"datasets.{name}.codes.{d}"
            table = _from_list(inline[d], levels, f"{where}: {key}")
        elif d in files:
            path = base / files[d]
            key = f"datasets.{name}.codes_file.{d} ({str(path)!r})"
            table = _from_file(path, levels, f"{where}: {key}")
        else:
            continue
        labels = file_labels(table, levels, f"{where}: {key}")
        out[d] = _code_list(levels, table.select(levels), key, f"{where}: {key}", labels)
    for d in dims:
        if d not in out:
            out[d] = _level_of_another(d, out, name, where)
    return out


def _level_of_another(dim: str, out: Mapping[str, CodeList], name: str, where: str) -> CodeList:
    """A dimension without its own list: the codes of the level named ``dim`` of another
    dimension's declared hierarchy."""
    for other in out.values():
        if dim in other.levels[:-1]:
            table = other.table.select(dim).unique(maintain_order=True)
            labels = {dim: other.column_labels[dim]} if dim in other.column_labels else {}
            return CodeList((dim,), table, f"the {dim!r} level of {other.source}", column_labels=labels)
    raise SpecError(f"{where}: datasets.{name}: dimension {dim!r} has no declared code list; "
                    + HOW.format(dim=dim))


def _from_list(value: list[Any], levels: tuple[str, ...], where: str) -> pl.DataFrame:
    """An inline list: codes (a flat dimension) or rows of a code per level (a hierarchy)."""
    rows = [x if isinstance(x, list) else [x] for x in value]
    bad = next((k for k, r in enumerate(rows) if len(r) != len(levels)), None)
    if bad is not None:
        if len(levels) == 1:
            raise SpecError(f"{where}: give a list of codes, e.g. [\"a\", \"b\"], not rows ({value[bad]!r})")
        raise SpecError(f"{where}: the dimension has the hierarchy {list(levels)}: give one row per code with its "
                        f"code at each level, e.g. [{', '.join(repr(c) for c in levels)}], not {value[bad]!r}")
    return pl.DataFrame([[str(c) for c in col] for col in zip(*rows)], schema=list(levels), orient="col")


def _from_file(path: Path, levels: tuple[str, ...], where: str) -> pl.DataFrame:
    """A CSV (``.csv``: a header naming the level columns, and label columns ``label_<lang>``,
    ``<level>_label_<lang>`` (protab.serve.code_labels); other columns are ignored) or a text
    file of one code per line (flat dimensions only; blank lines skipped). Codes are stripped of
    surrounding blanks."""
    try:
        from protab.request.loaders import reading

        with reading(path, "the code list"):
            text = path.read_bytes().decode("utf-8-sig")
    except ProtabError as exc:
        raise SpecError(f"{where}: {exc}") from None
    if path.suffix.lower() != ".csv":
        if len(levels) > 1:
            raise SpecError(f"{where}: the dimension has the hierarchy {list(levels)}: give a CSV file (.csv) "
                            f"with the columns {', '.join(levels)} (one row per code)")
        codes = [line.strip() for line in text.splitlines() if line.strip()]
        return pl.DataFrame({levels[0]: codes}, schema={levels[0]: pl.String})
    try:
        frame = pl.read_csv(text.encode(), infer_schema=False)
    except pl.exceptions.PolarsError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise SpecError(f"{where}: cannot read the file as CSV: {first}") from None
    if frame.height == 0:  # its cells unshown: a file of one line named by mistake may be a seed file
        raise SpecError(f"{where}: the file has only one line (a header?), no codes")
    renamed = [c.rsplit("_duplicated_", 1) for c in frame.columns if "_duplicated_" in c]  # polars: a name twice
    twice = [name for name, n in renamed if n.isdigit() and name in frame.columns]
    if twice:
        raise SpecError(f"{where}: the column {twice[0]!r} is in the header twice; keep one")
    missing = [c for c in levels if c not in frame.columns]
    if missing:
        raise SpecError(f"{where}: the CSV has no column {show_values(missing)} (its header: "
                        f"{', '.join(frame.columns) or 'none'}); name the columns {', '.join(levels)}")
    labels = [c for c in frame.columns if c not in levels and is_label_column(c)]
    return frame.select([*(pl.col(c).str.strip_chars() for c in levels), *(pl.col(c) for c in labels)])


def _code_list(levels: tuple[str, ...], table: pl.DataFrame, source: str, where: str,
               labels: Mapping[str, Mapping[str, Mapping[str, str]]]) -> CodeList:
    """Check a declared table (codes non-empty, not the margin's name, each code of the dimension
    once) and build its hierarchy."""
    if table.height == 0:
        raise SpecError(f"{where}: the code list is empty")
    for c in levels:
        col = table[c]
        if col.null_count() or (col.str.strip_chars() == "").any():
            raise SpecError(f"{where}: column {c!r} has an empty code")
        if (col == MARGIN).any():
            raise SpecError(f"{where}: {MARGIN!r} is the name protab gives margins; it cannot be a code")
    twice = table.filter(pl.col(levels[-1]).is_duplicated())[levels[-1]].unique(maintain_order=True)
    if twice.len():
        raise SpecError(f"{where}: codes listed more than once: {show_values(twice.to_list())}")
    if len(levels) == 1:
        return CodeList(levels, table, source, column_labels=labels)
    from protab.hierarchy.level_columns import from_level_columns

    try:
        h = from_level_columns(table, levels, root=MARGIN, source=f"the code list of {where}")
    except ProtabError as exc:
        raise SpecError(f"{where}: not a hierarchy ({', '.join(levels)}): {exc}") from None
    return CodeList(levels, table, source, h, labels)


def check_data(s: Session, table: str, dims: Sequence[str], code_lists: Mapping[str, CodeList],
               null_code: str | None, where: str) -> None:
    """SpecError unless every code the data hold (NULL read as ``null_code``) is declared: per
    dimension, the distinct codes (for a hierarchy, the distinct combinations of its levels'
    columns) anti-joined with the declared table. For the office only: it names the codes."""
    from protab.sqltools import quote_ident

    t = quote_ident(table)
    for d in sorted(dims, key=lambda d: -len(code_lists[d].levels)):  # hierarchies first: their messages say more
        cl = code_lists[d]
        cols = ", ".join(f"CAST({quote_ident(c)} AS VARCHAR) AS {quote_ident(c)}" for c in cl.levels)
        found = s.sql(f"SELECT DISTINCT {cols} FROM {t}")
        for c in cl.levels:
            if not found[c].null_count():
                continue
            if null_code is None:
                raise SpecError(f"{where}: column {c!r} (dimension {d!r}) has missing (NULL) values; set null_code = "
                                "\"Unknown\" (or another code) for the dataset and declare that code, or fix the data")
            if (found[c] == null_code).any():
                raise SpecError(f"{where}: null_code {null_code!r} is also a code of column {c!r} in the data")
        found = found.fill_null(null_code) if null_code is not None else found
        bad = found.join(cl.table, on=list(cl.levels), how="anti").sort(list(cl.levels))
        if bad.height:
            shown = [" > ".join(r) for r in bad.rows()]
            what = "codes" if len(cl.levels) == 1 else f"codes ({' > '.join(cl.levels)})"
            raise SpecError(
                f"{where}: dimension {d!r}: the data hold {what} not declared in {cl.source}: {show_values(shown)}; "
                "declare them (code lists come from declared classifications, never from the records) or recode "
                "those records"
            )
