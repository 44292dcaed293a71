"""What a cell of a table request carries: its value columns (internal names ``_n``, ``_w``,
``_s0`` …), their kinds, their output names, and which cells some published crossing holds.
Plain functions of the :class:`protab.table.TableSpec`; every module of the run reads them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from protab.errors import SpecError, show_values
from protab.table import TableSpec


def temp_name(kind: str) -> str:
    """A fresh name for a temporary relation of one run."""
    return f"_protab_{kind}_{uuid.uuid4().hex}"


def value_columns(spec: TableSpec, *, keys: bool, top_k: int | None = None) -> list[tuple[str, str]]:
    """(internal column, output name) of the values carried per cell.

    With ``top_k`` (magnitude tables, docs/methods.md §1.8) every sums column ``s`` brings
    more columns of the same scan: the weighted sum ``s_w`` (with a weight), the number of
    non-zero contributors ``s_nonzero``, the ``top_k`` largest contributions ``s_top`` (a
    list of structs: |x|, weight, x, in descending order), the largest and
    smallest value, and with keys the cell key of the non-zero contributors. With
    ``null_sums='omit'`` also the records holding a value ``s_holders`` (their weight sum and
    cell key): the denominator of the perturbed mean (docs/methods.md §1.8)."""
    cols = [("_n", "n")]
    if spec.weight is not None:
        cols.append(("_w", "w"))
    for k, s in enumerate(spec.sums):
        cols.append((f"_s{k}", s))
        if top_k is not None:
            if spec.weight is not None:
                cols.append((f"_sw{k}", f"{s}_w"))
            cols.append((f"_z{k}", f"{s}_nonzero"))
            if spec.weight is not None:
                cols += [(f"_t{k}", f"{s}_top"), (f"_mx{k}", f"{s}_max"), (f"_mn{k}", f"{s}_min")]
            else:  # the k largest and the k smallest values (plain lists, cheap to keep; their
                # first elements are the largest and smallest value)
                cols += [(f"_tp{k}", f"{s}_top"), (f"_tn{k}", f"{s}_top_negative")]
            if keys:
                cols.append((f"_kz{k}", f"{s}_cell_key"))
            if spec.null_sums == "omit":  # the records holding a value: the mean's denominator
                cols.append((f"_nv{k}", f"{s}_holders"))
                if spec.weight is not None:
                    cols.append((f"_wv{k}", f"{s}_holders_w"))
                if keys:
                    cols.append((f"_kv{k}", f"{s}_holders_cell_key"))
    if keys:
        cols.append(("_k", "cell_key"))
    return cols


def value_kind(internal: str) -> str:
    """The kind of an internal value column: 'n' (integer count), 'key' (key sum modulo the
    modulus), 'list' (top-k list, largest first), 'list_asc' (smallest first), 'max', 'min'
    or 'sum' (decimal)."""
    for prefix, kind in (("_kz", "key"), ("_k", "key"), ("_tn", "list_asc"), ("_t", "list"), ("_mx", "max"),
                         ("_mn", "min"), ("_z", "n"), ("_np", "n"), ("_n", "n")):
        if internal.startswith(prefix):
            return kind
    return "sum"


def top_list(k: int, top_k: int, weighted: bool) -> str:
    """SQL of the top-k list of sums variable ``k``, largest |x| first (ties: larger weight,
    then larger x). Weighted tables carry it as structs (a = |x|, w, x); for unweighted ones
    it is the plain list of the values (rules and the cell key method read only these;
    numbers cost several times less than structs). Unweighted tables carry the k largest and
    the k smallest values (``_tp``/``_tn``: lists of numbers compare and merge several times
    faster than lists of structs), and the k values of largest |x| are among the
    non-negative ones of the first and the negative ones of the second. A cell whose
    smallest value is 0 or more (most cells of most variables) takes the list of largest
    values as it is, already in that order: no sort."""
    if weighted:
        return f"_t{k}"
    as_struct = "lambda v: {'a': abs(v), 'x': v}"
    signed = (f"list_transform(list_slice(list_sort(list_concat("
              f"list_transform(list_filter(coalesce(_tp{k}, []), lambda v: v >= 0), {as_struct}), "
              f"list_transform(list_filter(coalesce(_tn{k}, []), lambda v: v < 0), {as_struct})), 'DESC'), "
              f"1, {int(top_k)}), lambda e: e.x)")
    plain = f"list_slice(coalesce(_tp{k}, []), 1, {int(top_k)})"
    return f"CASE WHEN coalesce(_tn{k}[1] >= 0, TRUE) THEN {plain} ELSE {signed} END"


def rounded(expr: str, places: int | None) -> str:
    """SQL of a DOUBLE ``expr`` rounded to ``places`` decimals (None: as it is): the value
    times 10^places rounded half away from zero, over 10^places. Each step is one IEEE
    operation or a round to a whole number, which every engine does alike (DuckDB, Spark)."""
    if places is None:
        return expr
    scale = f"{10 ** int(places)}.0"
    return f"(round(({expr}) * {scale}) / {scale})"


def zero_sql(internal: str, alias: str) -> str:
    """The value of an empty cell: 0 for counts, keys and sums; NULL for lists, max, min."""
    if value_kind(internal) in ("list", "list_asc", "max", "min"):
        return f"{alias}.{internal} AS {internal}"
    return f"coalesce({alias}.{internal}, 0) AS {internal}"


def wide_key(key: str, modulus: int) -> str:
    """A key column as summed: keys of more than 32 bits (decimal keys with 10 to 15 digits)
    as HUGEINT, so that a sum over many records cannot overflow on an engine whose BIGINT
    sums stay BIGINT (Spark; DuckDB sums BIGINT into HUGEINT anyway: the same numbers)."""
    return f"CAST({key} AS HUGEINT)" if modulus > 2**32 else key


def output_names(spec: TableSpec, columns: Sequence[str]) -> dict[str, str]:
    """Map internal column names to output names, refusing clashes."""
    mapping: dict[str, str] = {}
    for k, d in enumerate(spec.dimensions):
        mapping[f"_d{k}"] = d.column
        mapping[f"_l{k}"] = f"{d.column}_level"
    mapping.update(dict(value_columns(spec, keys=True, top_k=1)))
    mapping.update({f"_mx{k}": f"{s}_max" for k, s in enumerate(spec.sums)})
    mapping.update({f"_mn{k}": f"{s}_min" for k, s in enumerate(spec.sums)})
    mapping.update({"_np": "n_pert", "_wp": "w_pert"})
    for k, s in enumerate(spec.sums):
        mapping.update({f"_sp{k}": f"{s}_pert", f"_spm{k}": f"{s}_mean_pert", f"_sens{k}": f"{s}_sensitive",
                        f"_rule{k}": f"{s}_rule", f"_sw{k}": f"{s}_w" if spec.weight else s,
                        f"_fc{k}": f"{s}_contributors"})
        mapping.update({f"_dg{k}_{n}": f"{s}_dominance_{n}" for n in range(1, 7)})  # n <= MAX_TOP_K
    out = {c: mapping[c] for c in columns if c in mapping}
    names = list(out.values())
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SpecError(
            f"the output would have two columns named {show_values(dup)}; rename the "
            "dimension or value column"
        )
    return out


def published_filter(spec: TableSpec, level: dict[int, str] | None = None) -> str:
    """SQL condition keeping the cells that some published crossing holds.

    ``level`` maps dimension positions to their level expressions (default ``_l<k>`` for
    every dimension); given only some dimensions, it keeps the partial cells that can still
    become published ones, so the roll-up prunes early.
    """
    if level is None:
        level = {k: f"_l{k}" for k in range(len(spec.dimensions))}
    if not spec.margins:  # the crossing of all (flat) dimensions alone: every code a leaf
        return " AND ".join(f"{expr} = 1" for expr in level.values()) or "TRUE"
    cols = spec.columns
    ors = []
    for term in spec.terms:
        ands = [f"{expr} = 0" for k, expr in level.items() if cols[k] not in term]
        if not ands:
            return "TRUE"
        ors.append("(" + " AND ".join(ands) + ")")
    return " OR ".join(ors)
