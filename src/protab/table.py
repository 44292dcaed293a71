"""TableSpec: which dimensions a table has and which of their crossings are published.

A published cell fixes one code per dimension, at any level of that dimension's hierarchy
("Total" at the top). A formula such as ``"party*age + party*sex"`` publishes the crossings
party×age and party×sex *with all their margins* (party, age, sex and the grand total) but
not party×age×sex, as the formulas of SSBtools' ModelMatrix do (Langsrud & Lupp 2022).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from protab.errors import SpecError, show_values
from protab.hierarchy import Hierarchy

_NAME = re.compile(r"^[^\s*+~:()]+$")


@dataclass(frozen=True)
class Dimension:
    """One dimension of a table: a microdata column and, optionally, its hierarchy.

    ``hierarchy`` is None for a flat dimension whose codes are the values found in the data,
    with a single margin named ``total``.
    """

    column: str
    hierarchy: Hierarchy | None = None
    total: str = "Total"

    @property
    def root(self) -> str:
        return self.hierarchy.root if self.hierarchy is not None else self.total


@dataclass(frozen=True)
class TableSpec:
    """Dimensions, published crossings, and the values to tabulate.

    Parameters
    ----------
    dims:
        Mapping of microdata column → ``None`` (flat: codes from the data), a list of codes
        (flat with a fixed code list, so absent codes still appear as zero cells), or a
        :class:`Hierarchy`. A plain sequence of column names means all flat.
    formula:
        Published crossings with ``*`` (crossing with all its margins) and ``+`` (union),
        e.g. ``"party*age + party*sex"``. A leading ``~`` is allowed.
    crossings:
        The same as an explicit list, e.g. ``[("party", "age"), ("party", "sex")]``.
        Default (neither given): the full crossing of all dimensions with all margins.
    weight:
        Optional weight column: weighted counts are tabulated beside the counts. Every
        record needs a finite weight of 0 or more (NULL, NaN, ±inf and negative weights
        are refused).
    sums:
        Numeric columns to sum per cell (magnitudes); NULLs are left out of a sum, NaN and
        ±inf are refused.

        Weights and sums are added up exactly, as decimals with 8 decimal places (DuckDB
        ``DECIMAL(38, 8)``: each value rounded to 8 decimals, then summed in integers, so
        the result does not depend on the order of summation or the number of threads). A
        column qualifies when the sum of its absolute values over the table stays below
        10^29 (e.g. 10^9 records of up to 10^20 each); protab refuses larger ones (express
        the column in a larger unit, e.g. thousands).
    null_sums:
        What a missing (NULL) value of a ``sums`` column means: ``"error"`` (default: refused,
        naming the column and how many records), ``"zero"`` (the record contributes 0: it is
        a contributor with a zero value) or ``"omit"`` (left out of the sum, the contributor
        counts, the largest contributions and the non-zero cell key — R cellKey's treatment
        of NA). The record is counted in ``n`` in every case.
    drop_empty:
        Leave out cells with no records (for sparse tables such as national grids); by
        default every combination of the dimensions' codes is published, as R cellKey does.
        True or False.
    null_code:
        Code (a string) given to missing codes in a dimension column: NULL, and NaN in a
        floating-point column (NaN is treated exactly as NULL). By default missing codes are
        an error naming the column and how many records have them. A ``null_code`` that is
        also a code of the data in a column with missing codes is refused (the two would merge).
    freq:
        Integer column of frequencies when the rows are already aggregated (e.g. inner
        cells): counts are sums of it instead of numbers of rows. Cell keys need records.
    total:
        Name of the margin code of flat dimensions.
    margins:
        False publishes the crossing of all dimensions alone, without any margin (the flat
        crosstab of the ONS cell key package); only for flat dimensions (a hierarchy is there
        for its margins), and without formula or crossings. True (default) publishes margins.
    where:
        Records to tabulate, as conditions on columns that must all hold: a sequence of
        ``(column, "in" | "not in", values)``, e.g. ``[("region", "in", ["N", "S"]),
        ("age", "not in", ["0-4"])]``. Values are compared with the column's codes as text
        (the text the table shows); a record whose column is NULL passes neither ``in`` nor
        ``not in``. A cell's key is the sum of its records' keys, so a cell of a filtered
        table that equals a cell of another table (the same records) gets the same noise.
    """

    dims: Mapping[str, object]
    formula: str | None = None
    crossings: Sequence[Sequence[str]] | None = None
    weight: str | None = None
    sums: Sequence[str] = ()
    drop_empty: bool = False
    null_sums: str = "error"
    null_code: str | None = None
    total: str = "Total"
    freq: str | None = None
    margins: bool = True
    where: Sequence[tuple[str, str, Sequence[object]]] = ()
    dimensions: tuple[Dimension, ...] = field(init=False, repr=False)
    terms: tuple[frozenset[str], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._check_types()
        dims = self.dims
        if isinstance(dims, str) or not isinstance(dims, (Mapping, Sequence)):
            raise SpecError(
                "TableSpec: dims must be a mapping of column name to None, a code list or a "
                f"Hierarchy (or a list of column names), not {type(dims).__name__}"
            )
        items = list(dims.items()) if isinstance(dims, Mapping) else [(d, None) for d in dims]
        if not items:
            raise SpecError("TableSpec: at least one dimension is needed")
        dimensions = []
        for name, h in items:
            if not isinstance(name, str) or not name.strip():
                raise SpecError(
                    f"TableSpec: dims: dimension names must be non-empty strings (column names), "
                    f"got {name!r} of type {type(name).__name__}"
                )
            if h is None:
                dimensions.append(Dimension(name, None, self.total))
            elif isinstance(h, Hierarchy):
                dimensions.append(Dimension(name, h, h.root))
            elif isinstance(h, (list, tuple)) or hasattr(h, "__array__"):
                codes = _code_list(name, h)
                dimensions.append(Dimension(name, Hierarchy.flat(codes, root=self.total), self.total))
            else:
                raise SpecError(
                    f"TableSpec: dimension {name!r} must be None, a list of codes or a Hierarchy, "
                    f"not {type(h).__name__}"
                )
        names = [d.column for d in dimensions]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SpecError(f"TableSpec: dimension named twice: {show_values(dup)}")
        object.__setattr__(self, "dimensions", tuple(dimensions))
        object.__setattr__(self, "terms", self._parse_terms(names))
        if not self.margins:
            self._check_no_margins()
        for col in [self.weight, self.freq, *self.sums]:
            if col is not None and col in names:
                raise SpecError(f"TableSpec: column {col!r} is both a dimension and a value to sum")

    def _check_no_margins(self) -> None:
        """margins=False: one crossing of flat dimensions (every leaf at level 1)."""
        if self.formula is not None or self.crossings is not None:
            raise SpecError(
                "TableSpec: margins=False publishes the one crossing of all dimensions without "
                "margins; leave out formula and crossings"
            )
        deep = [d.column for d in self.dimensions if d.hierarchy is not None and d.hierarchy.depth > 1]
        if deep:
            raise SpecError(
                f"TableSpec: margins=False takes flat dimensions only; {show_values(deep)} "
                "have hierarchies, which exist for their margins (publish them with margins)"
            )

    def _check_types(self) -> None:
        """SpecError naming the argument and the type expected for every argument of the
        wrong type (a string where a flag belongs, a number where a column name belongs …)."""
        for arg in ("weight", "freq"):
            _column_name(arg, getattr(self, arg), optional=True)
        object.__setattr__(self, "sums", _sums(self.sums))
        if self.null_sums not in ("error", "zero", "omit"):
            raise SpecError(
                f"TableSpec: null_sums must be 'error', 'zero' or 'omit', not {self.null_sums!r}"
            )
        for flag in ("drop_empty", "margins"):
            value = getattr(self, flag)
            if isinstance(value, np.bool_):
                object.__setattr__(self, flag, bool(value))
            elif not isinstance(value, bool):
                raise SpecError(f"TableSpec: {flag} must be True or False, not {value!r} ({type(value).__name__})")
        if self.null_code is not None and (not isinstance(self.null_code, str) or not self.null_code.strip()):
            raise SpecError(
                "TableSpec: null_code must be a non-empty string (the code that NULL and NaN "
                f"dimension values are published as), not {self.null_code!r} "
                f"({type(self.null_code).__name__})"
            )
        object.__setattr__(self, "where", _where(self.where))
        if not isinstance(self.total, str) or not self.total.strip():
            raise SpecError(
                f"TableSpec: total must be a non-empty string (the margin code of flat "
                f"dimensions), not {self.total!r} ({type(self.total).__name__})"
            )
        if self.formula is not None and not isinstance(self.formula, str):
            raise SpecError(
                f"TableSpec: formula must be a string such as 'party*age + party*sex', not "
                f"{type(self.formula).__name__}"
            )
        if self.crossings is not None:
            _check_crossings(self.crossings)

    # -- published crossings -------------------------------------------------------------
    def _parse_terms(self, names: list[str]) -> tuple[frozenset[str], ...]:
        if self.formula is not None and self.crossings is not None:
            raise SpecError("TableSpec: give either formula or crossings, not both")
        if self.formula is not None:
            text = self.formula.strip()
            if text.startswith("~"):
                text = text[1:]
            if not text.strip():
                raise SpecError(f"TableSpec: empty formula {self.formula!r}")
            raw = []
            for part in text.split("+"):
                factors = [f.strip() for f in part.split("*")]
                if any(not f or not _NAME.match(f) for f in factors):
                    raise SpecError(
                        f"TableSpec: cannot read the formula term {part.strip()!r} in "
                        f"{self.formula!r}; write crossings with '*' and join them with '+', "
                        "e.g. 'party*age + party*sex'"
                    )
                raw.append(factors)
        elif self.crossings is not None:
            raw = [[c] if isinstance(c, str) else list(c) for c in self.crossings]
            if not raw:
                raise SpecError("TableSpec: crossings is empty")
        else:
            raw = [names]
        unknown = sorted({f for term in raw for f in term if f not in names})
        if unknown:
            raise SpecError(
                f"TableSpec: the crossings name {show_values(unknown)}, which are not dimensions "
                f"of this table (dimensions: {', '.join(names)})"
            )
        terms = {frozenset(t) for t in raw}
        # keep only maximal terms: a term inside another adds no cells
        maximal = [t for t in terms if not any(t < u for u in terms)]
        order = {n: k for k, n in enumerate(names)}
        maximal.sort(key=lambda t: sorted(order[n] for n in t))
        return tuple(maximal)

    @property
    def columns(self) -> list[str]:
        """The dimension columns, in order."""
        return [d.column for d in self.dimensions]

    @property
    def full(self) -> bool:
        """True when every combination of levels is published (the full crossing)."""
        return any(len(t) == len(self.dimensions) for t in self.terms)

    def published_subsets(self) -> list[frozenset[str]]:
        """Every set of dimensions that is below its total in some published cell."""
        out: set[frozenset[str]] = set()
        for t in self.terms:
            for k in range(len(t) + 1):
                out.update(frozenset(c) for c in itertools.combinations(sorted(t), k))
        return sorted(out, key=lambda s: (len(s), sorted(s)))

    def is_published(self, below_total: Iterable[str]) -> bool:
        """Whether a cell whose dimensions ``below_total`` are not at their total is published."""
        s = frozenset(below_total)
        return any(s <= t for t in self.terms)

    def dimension(self, column: str) -> Dimension:
        for d in self.dimensions:
            if d.column == column:
                return d
        raise SpecError(f"TableSpec: no dimension named {column!r}")


def union_spec(specs: Sequence[TableSpec], **options: Any) -> TableSpec:
    """One TableSpec publishing every cell of ``specs`` once: their dimensions (each with the
    hierarchy it first has) and the union of their crossings; ``options`` are the new spec's
    other arguments (weight, null_code, ...). Linked suppression and the feasibility audit
    build their one table of cells so."""
    dims: dict[str, Any] = {}
    for x in specs:
        for d in x.dimensions:
            dims.setdefault(d.column, d.hierarchy)
    terms = {t for x in specs for t in x.terms}
    return TableSpec(dims, crossings=[sorted(t, key=list(dims).index) for t in terms], **options)


def _sums(sums: object) -> tuple[str, ...]:
    """``TableSpec.sums`` checked (column names, none twice) as a tuple; one name alone allowed."""
    given = sums
    if isinstance(sums, str):
        sums = (sums,)
    if isinstance(sums, Mapping) or not isinstance(sums, Sequence):
        raise SpecError(
            f"TableSpec: sums must be a column name or a list of column names, not "
            f"{type(given).__name__}"
        )
    for s in sums:
        _column_name("sums", s)
    dup = sorted({s for s in sums if list(sums).count(s) > 1})
    if dup:
        raise SpecError(f"TableSpec: sums names {show_values(dup)} twice")
    return tuple(sums)


def _check_crossings(crossings: object) -> None:
    """SpecError unless ``crossings`` is a list of column names or lists of column names."""
    if isinstance(crossings, (str, Mapping)) or not isinstance(crossings, Sequence):
        raise SpecError(
            "TableSpec: crossings must be a list of crossings, each a column name or a "
            f"list of column names, e.g. [('party', 'age'), ('party', 'sex')]; not "
            f"{type(crossings).__name__}"
        )
    for c in crossings:
        names = [c] if isinstance(c, str) else c
        if not isinstance(names, (Sequence, frozenset, set)) or any(not isinstance(n, str) for n in names):
            raise SpecError(
                f"TableSpec: crossings: each crossing must be a column name or a list of "
                f"column names (strings), not {c!r}"
            )


def _where(where: object) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """``TableSpec.where`` checked and normalised: (column, op, sorted distinct text values)."""
    form = "a list of (column, 'in' | 'not in', values), e.g. [('region', 'in', ['N', 'S'])]"
    if isinstance(where, (str, Mapping)) or not isinstance(where, Sequence):
        raise SpecError(f"TableSpec: where must be {form}; not {type(where).__name__}")
    out = []
    for item in where:
        if isinstance(item, (str, Mapping)) or not isinstance(item, Sequence) or len(item) != 3:
            raise SpecError(f"TableSpec: where must be {form}; got the item {item!r}")
        column, op, values = item
        _column_name("where", column)
        if op not in ("in", "not in"):
            raise SpecError(f"TableSpec: where on {column!r}: the operator must be 'in' or 'not in', not {op!r}")
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence) or not values:
            raise SpecError(f"TableSpec: where on {column!r}: give a non-empty list of values, not {values!r}")
        bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (str, int))]
        if bad:
            raise SpecError(
                f"TableSpec: where on {column!r}: values must be codes (strings or whole numbers); "
                f"got {show_values(bad)}"
            )
        out.append((column, op, tuple(sorted({str(v) for v in values}))))
    return tuple(out)


def _column_name(arg: str, value: object, *, optional: bool = False) -> None:
    """SpecError unless ``value`` is a non-empty column name (or None when ``optional``)."""
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.strip():
        raise SpecError(
            f"TableSpec: {arg} must be a column name (a non-empty string)"
            + (" or None" if optional else "")
            + f", not {value!r} ({type(value).__name__})"
        )


def _code_list(column: str, values: object) -> list[str]:
    """The codes of a fixed code list as text; SpecError for missing codes (None, NaN)
    and codes given twice."""
    raw = list(values)  # type: ignore[call-overload]
    bad = [v for v in raw if v is None or (isinstance(v, (float, np.floating)) and v != v)]
    if bad:
        raise SpecError(
            f"TableSpec: the code list of dimension {column!r} holds {len(bad)} missing value(s) "
            "(None or NaN); list real codes only (NULLs in the data are published with null_code=)"
        )
    codes = [str(v) for v in raw]
    dup = sorted({c for c in codes if codes.count(c) > 1})
    if dup:
        raise SpecError(
            f"TableSpec: the code list of dimension {column!r} names {show_values(dup)} twice"
        )
    return codes
