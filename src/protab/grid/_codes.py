"""INSPIRE grid codes of EPSG:3035 (ETRS89-LAEA): parse, format, coarsen (polars), and the same in DuckDB SQL.

Codes follow the INSPIRE Data Specification on Geographical Grid Systems (Annex D) as Eurostat
GEOSTAT publishes them. The long form ``CRS3035RES1000mN2689000E4337000`` gives the resolution
and the lower-left corner in metres; the short form ``1kmN2689E4337`` gives the resolution as a
label and the corner in units of the resolution (northing 2 689 000 m = 2689 × 1 km). Resolutions:
100 m, 1 km, 10 km, 100 km. Codes are strict: no signs, spaces or leading zeros (so that one
square has one code), and long-form coordinates must be multiples of the resolution.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import numpy as np
import polars as pl
import pyarrow as pa

from protab.errors import InputError
from protab.sqltools import quote_ident

#: Resolution label (short form) → side of the square in metres.
RESOLUTIONS: dict[str, int] = {"100m": 100, "1km": 1_000, "10km": 10_000, "100km": 100_000}
_LABEL = {v: k for k, v in RESOLUTIONS.items()}
FORMS = ("short", "long")

#: Extracts the parts of a code already known to be valid; groups: long-form resolution (m),
#: short-form label, N, E.
PATTERN = (
    "^(?:CRS3035RES(" + "|".join(str(v) for v in RESOLUTIONS.values()) + ")m|("
    + "|".join(RESOLUTIONS) + "))N([0-9]+)E([0-9]+)$"
)


def _long_num(res: int) -> str:
    zeros = "0" * (len(str(res)) - 1)  # a multiple of 10^k ends in k zeros
    return f"(?:0|[1-9][0-9]{{0,8}}{zeros})"


#: The well-formed codes, one regular expression (no groups) used by both polars and DuckDB:
#: long-form coordinates are multiples of the resolution, written out per resolution; at most
#: 9 digits in units of the resolution (corners below 10^14 m, far inside int64).
VALID_PATTERN = (
    "^(?:"
    + "|".join(f"CRS3035RES{v}mN{_long_num(v)}E{_long_num(v)}" for v in RESOLUTIONS.values())
    + "|(?:" + "|".join(RESOLUTIONS) + ")N(?:0|[1-9][0-9]{0,8})E(?:0|[1-9][0-9]{0,8}))$"
)
_EXPECTED = (
    "Expected INSPIRE grid codes of EPSG:3035, long form 'CRS3035RES1000mN2689000E4337000' "
    "(resolution and lower-left corner in metres) or short form '1kmN2689E4337' (corner in units "
    f"of the resolution), at resolutions {', '.join(RESOLUTIONS)}, without spaces or leading "
    "zeros, long-form coordinates multiples of the resolution."
)


def resolution_metres(level: object, what: str = "level") -> int:
    """The side in metres of a resolution given as a label (``"10km"``) or in metres (10000)."""
    if isinstance(level, str) and level in RESOLUTIONS:
        return RESOLUTIONS[level]
    if isinstance(level, (int, np.integer)) and not isinstance(level, bool) and int(level) in _LABEL:
        return int(level)
    raise InputError(
        f"{what}: unknown grid resolution {level!r}; use one of {', '.join(map(repr, RESOLUTIONS))} "
        f"(or the side in metres: {', '.join(str(v) for v in RESOLUTIONS.values())})"
    )


def check_form(form: str) -> str:
    if form not in FORMS:
        raise InputError(f"form must be 'short' (1kmN2689E4337) or 'long' (CRS3035RES1000mN2689000E4337000), "
                         f"got {form!r}")
    return form


def as_code_series(codes: Any, column: str | None = None) -> pl.Series:
    """Grid codes as a polars String series named after their column (``column``, the series'
    own name, or ``"code"``); a frame needs ``column``."""
    if isinstance(codes, (pl.DataFrame, pl.LazyFrame, pa.Table)) or (
        type(codes).__module__.startswith("pandas") and hasattr(codes, "columns")
    ):
        from protab._frames import as_polars, require_columns

        frame = as_polars(codes, "grid codes")
        if column is None:
            raise InputError(f"grid codes: a frame was given; name its code column with column= "
                             f"(columns: {', '.join(frame.columns[:10])})")
        require_columns(frame, [column], "grid codes")
        s = frame[column]
    elif isinstance(codes, pl.Series):
        s = codes
    elif isinstance(codes, (pa.Array, pa.ChunkedArray)):
        s = pl.Series(values=codes)
    elif type(codes).__module__.startswith("pandas"):
        s = cast(pl.Series, pl.from_pandas(codes))  # not a frame (those have columns: the first branch)
    elif isinstance(codes, (str, bytes)):
        raise InputError(f"grid codes: expected a column of codes, got the single string {codes!r}")
    else:
        s = pl.Series(values=list(codes) if not isinstance(codes, np.ndarray) else codes, dtype=pl.String,
                      strict=False)
    name = column or (s.name if isinstance(s, pl.Series) and s.name else "code")
    if isinstance(s.dtype, (pl.Categorical, pl.Enum)) or s.dtype == pl.Null:
        s = s.cast(pl.String)
    if s.dtype != pl.String:
        raise InputError(f"grid codes in column {name!r}: expected strings, got a column of type {s.dtype}")
    return s.alias(name)


def malformed_codes_error(column: str, top: list[tuple[object, int]], distinct: int, rows: int) -> InputError:
    """The InputError for malformed grid codes: ``top`` the first few (code, rows) pairs, most
    rows first; ``distinct`` and ``rows`` the totals. Also for a session that counted the bad
    codes in SQL (``WHERE NOT valid_code_sql(column) GROUP BY column``)."""
    shown = ", ".join(f"{c!r} ({k} row{'s' if k > 1 else ''})" for c, k in top[:5])
    more = f", … ({distinct} distinct codes in all)" if distinct > 5 else ""
    return InputError(
        f"grid codes in column {column!r}: {distinct} malformed code{'s' if distinct > 1 else ''} in "
        f"{rows} row{'s' if rows > 1 else ''}: {shown}{more}. {_EXPECTED} Fix or drop these rows."
    )


def _bad_codes_error(s: pl.Series, bad: pl.Series) -> InputError:
    vc = s.filter(bad).value_counts(name="rows").sort(["rows", s.name], descending=[True, False], nulls_last=True)
    return malformed_codes_error(s.name, list(vc.head(5).iter_rows()), vc.height, int(vc["rows"].sum()))


def parse_codes(codes: Any, *, column: str | None = None) -> pl.DataFrame:
    """Parse INSPIRE grid codes (long or short form, mixed allowed), vectorised.

    Returns a frame with ``northing``, ``easting`` (metres, the lower-left corner) and
    ``resolution`` (metres), one row per code. Malformed codes (nulls included) raise
    :class:`~protab.errors.InputError` listing the distinct bad codes with their row counts.
    ``codes``: a polars/pandas/pyarrow column, a list, or a frame with ``column``.
    """
    s = as_code_series(codes, column)
    ok = s.str.contains(VALID_PATTERN).fill_null(False)
    if not ok.all():
        raise _bad_codes_error(s, ~ok)
    g = s.str.extract_groups(PATTERN).struct.unnest()
    long_res = g["1"].cast(pl.Int64)
    f = pl.DataFrame({
        "res": long_res.fill_null(g["2"].replace_strict(RESOLUTIONS, default=None, return_dtype=pl.Int64)),
        "n": g["3"].cast(pl.Int64),
        "e": g["4"].cast(pl.Int64),
        "long": long_res.is_not_null(),
    })
    unit = pl.when(pl.col("long")).then(1).otherwise(pl.col("res"))  # short form: units of the resolution
    return f.select(
        (pl.col("n") * unit).alias("northing"),
        (pl.col("e") * unit).alias("easting"),
        pl.col("res").alias("resolution"),
    )


def _as_int_array(values: Any, what: str) -> np.ndarray:
    arr = values.to_numpy() if isinstance(values, pl.Series) else np.asarray(values)
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise InputError(f"{what}: expected whole numbers of metres, got values of type {arr.dtype}")
    return arr.astype(np.int64, copy=False).ravel()


def format_codes(northing: Any, easting: Any, resolution: Any, *, form: str = "short",
                 name: str = "code") -> pl.Series:
    """Grid codes from lower-left corners in metres and the resolution (a label, metres, or one
    per code), in the ``"short"`` (``1kmN2689E4337``) or ``"long"`` form; vectorised."""
    check_form(form)
    n = _as_int_array(northing, "northing")
    e = _as_int_array(easting, "easting")
    if n.shape != e.shape:
        raise InputError(f"format_codes: {n.size} northings against {e.size} eastings")
    if isinstance(resolution, (str, int, np.integer)):
        r = np.full(n.shape, resolution_metres(resolution, "resolution"), dtype=np.int64)
    else:
        r = _as_int_array(resolution, "resolution")
        unknown = np.setdiff1d(np.unique(r), np.array(list(_LABEL), dtype=np.int64))
        if unknown.size:
            resolution_metres(int(unknown[0]), "resolution")
        if r.shape != n.shape:
            raise InputError(f"format_codes: {r.size} resolutions against {n.size} northings")
    bad = (n < 0) | (e < 0) | (n % r != 0) | (e % r != 0)
    if bad.any():
        i = np.flatnonzero(bad)
        ex = ", ".join(f"(N {n[k]}, E {e[k]}, {r[k]} m)" for k in i[:5])
        raise InputError(f"format_codes: {i.size} corner(s) that are negative or not multiples of the "
                         f"resolution: {ex}. Floor them first (coarsen_codes does).")
    f = pl.DataFrame({"n": n, "e": e, "r": r})
    if form == "long":
        expr = pl.format("CRS3035RES{}mN{}E{}", "r", "n", "e")
    else:
        label = pl.col("r").replace_strict(_LABEL, return_dtype=pl.String)
        expr = pl.format("{}N{}E{}", label, pl.col("n") // pl.col("r"), pl.col("e") // pl.col("r"))
    return f.select(expr.alias(name)).to_series()


def floor_to(parsed: pl.DataFrame, level: object, what: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Lower-left corners of the squares of ``level`` that hold the parsed squares."""
    r = resolution_metres(level, "level")
    finer = parsed["resolution"] > r
    if finer.any():
        coarse = parsed.filter(finer)["resolution"].unique().sort().to_list()
        raise InputError(f"{what}: codes at {', '.join(_LABEL[c] for c in coarse)} cannot be placed in "
                         f"{_LABEL[r]} squares (a level must be at least as coarse as the codes)")
    n = parsed["northing"].to_numpy()
    e = parsed["easting"].to_numpy()
    return n // r * r, e // r * r, r


def coarsen_codes(codes: Any, level: object, *, form: str = "short", column: str | None = None) -> pl.Series:
    """The code of the ``level`` square (``"10km"``, ``"100km"``, …) holding each code, in ``form``.

    Arithmetic on the corners (floor to a multiple of the level's side), vectorised; codes
    already at ``level`` are re-formatted, finer levels than a code are refused."""
    check_form(form)
    s = as_code_series(codes, column)
    n, e, r = floor_to(parse_codes(s), level, f"grid codes in column {s.name!r}")
    return format_codes(n, e, r, form=form, name=s.name)


def single_resolution(parsed: pl.DataFrame, name: str) -> int:
    """The one resolution of the parsed codes, else InputError with the count per resolution."""
    counts = parsed.group_by("resolution").len().sort("resolution")
    if counts.height != 1:
        shown = ", ".join(f"{_LABEL[r]}: {k} rows" for r, k in counts.iter_rows())
        raise InputError(f"grid codes in column {name!r}: codes of {counts.height} resolutions ({shown}); "
                         f"give codes of one resolution (coarsen_codes brings them to one level)")
    return int(counts["resolution"][0])


def check_unique(s: pl.Series) -> None:
    """InputError listing codes that occur in more than one row (a grid table has one row a square)."""
    vc = s.value_counts(name="rows").filter(pl.col("rows") > 1).sort(["rows", s.name], descending=[True, False])
    if vc.height:
        shown = ", ".join(f"{c!r} ({k} rows)" for c, k in vc.head(5).iter_rows())
        more = f", … ({vc.height} codes in all)" if vc.height > 5 else ""
        raise InputError(f"grid codes in column {s.name!r}: codes in more than one row: {shown}{more}. "
                         f"Give one row per square (sum the rows of each code first).")


def sorted_levels(levels: Iterable[object] | str, finest: int, name: str) -> list[int]:
    """Levels in metres, coarsest last; each must be coarser than the codes (``finest``)."""
    if isinstance(levels, (str, int)):
        levels = [levels]
    rs = sorted({resolution_metres(v, "levels") for v in levels})
    low = [r for r in rs if r <= finest]
    if low:
        raise InputError(
            f"grid codes in column {name!r} are {_LABEL[finest]} squares, so the levels above them must be "
            f"coarser; got {', '.join(_LABEL[r] for r in low)}. Leave those levels out."
        )
    return rs


# ------------------------------------------------------------------------------------------
# DuckDB SQL text (identifiers quoted; no user value enters the text)


def _parts(column: str) -> dict[str, str]:
    """SQL pieces over the quoted column. The code splits at its one ``N`` into the resolution
    part (``1km`` or ``CRS3035RES1000m``, looked up in a list) and ``2689E4337``; validity is
    one match of :data:`VALID_PATTERN`. Cheap string functions: a regexp_extract per piece
    made the expression ~50× slower than a bare scan."""
    q = quote_ident(column)
    heads = list(RESOLUTIONS) + [f"CRS3035RES{v}m" for v in RESOLUTIONS.values()]
    metres = list(RESOLUTIONS.values())
    idx = f"list_position([{', '.join(repr(h) for h in heads)}], split_part({q}, 'N', 1))"
    res = f"[{', '.join(map(str, metres * 2))}][{idx}]"
    unit = f"[{', '.join(map(str, metres + [1] * len(metres)))}][{idx}]"  # short form: units of the resolution
    tail = f"split_part({q}, 'N', 2)"
    return {
        "resolution": res,
        "northing": f"(TRY_CAST(split_part({tail}, 'E', 1) AS BIGINT) * {unit})",
        "easting": f"(TRY_CAST(split_part({tail}, 'E', 2) AS BIGINT) * {unit})",
        "valid": f"coalesce(regexp_full_match({q}, '{VALID_PATTERN}'), false)",
    }


def code_parts_sql(column: str) -> dict[str, str]:
    """DuckDB SQL expressions over the code column ``column`` (quoted here): ``northing``,
    ``easting``, ``resolution`` (BIGINT metres; NULL for a malformed code) and ``valid``
    (BOOLEAN, false for a malformed or NULL code, the same rule as :func:`parse_codes`)."""
    return dict(_parts(column))


def valid_code_sql(column: str) -> str:
    """DuckDB SQL: true where ``column`` holds a well-formed grid code (see :func:`parse_codes`).
    A session counts the rows where it is false, grouped by code, to report bad codes."""
    return _parts(column)["valid"]


def coarser_code_sql(column: str, level: object, *, form: str = "short") -> str:
    """DuckDB SQL computing, from the grid code column ``column``, the code of the ``level``
    square holding it (in ``form``), so that parent columns are derived in the scan:
    ``SELECT …, {coarser_code_sql('cell', '10km')} AS cell_10km FROM persons``.

    NULL where the code is malformed or finer than ``level`` is asked for; check codes with
    :func:`valid_code_sql` first. ``column`` is quoted here; ``level`` and ``form`` are checked
    against the fixed lists, so no user text enters the SQL."""
    check_form(form)
    r = resolution_metres(level, "level")
    p = _parts(column)
    n, e = f"({p['northing']} // {r})", f"({p['easting']} // {r})"
    if form == "short":
        text = f"'{_LABEL[r]}N' || CAST({n} AS VARCHAR) || 'E' || CAST({e} AS VARCHAR)"
    else:
        text = f"'CRS3035RES{r}mN' || CAST({n} * {r} AS VARCHAR) || 'E' || CAST({e} * {r} AS VARCHAR)"
    return f"CASE WHEN {p['valid']} AND {p['resolution']} <= {r} THEN {text} END"
