"""``protab audit`` of a programme's output (docs/audit.md): every hypercube's count tables,
each hypercube one joint system (its tables linked through one model matrix built as the run
built them: a coarser level of a classification of columns read from that level's column),
and every cell the hypercubes share checked to be published alike (protab.cli.audit_inputs)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from protab.programme import Programme
    from protab.session import Session


def tables(prog: Programme) -> dict[str, tuple[str, list[str]]]:
    """The audited tables, ``<hypercube>.<table>`` → (hypercube, dimensions): the count tables
    (tables with a weight publish weighted counts, which the audit does not read)."""
    return {f"{c.name}.{t.name}": (c.name, list(t.dims)) for c in prog.cubes for t in c.tables
            if "weight" not in t.options}


def inputs(prog: Programme, db: str) -> list[tuple[str, str]]:
    """What the report may not replace: the records' database, the programme and its files
    (labels files included; Programme.inputs, as the run's outputs)."""
    return prog.inputs(db)


def audit_cubes(s: Session, prog: Programme, frames: dict[str, pl.DataFrame], noise: dict[str, Any],
                max_width: int) -> pl.DataFrame:
    """One joint audit per hypercube; ``source`` names the hypercube."""
    import polars as pl

    from protab.audit import feasibility
    from protab.programme import classifications as cls

    hierarchies = cls.build(s, prog.cfg, prog.cubes, prog.classified, Path(prog.path).parent)
    columns = {n: list(c["columns"]) for n, c in prog.cfg["classifications"].items() if "columns" in c}
    cut: dict[tuple[str, int], Any] = {}
    parts = []
    for cube in prog.cubes:
        names = {f"{cube.name}.{t.name}": t for t in cube.tables if f"{cube.name}.{t.name}" in frames}
        if not names:
            continue
        X, inner, pub = _matrix(s, prog, cube, list(names.values()), cls.levels(prog.cfg, cube, hierarchies),
                                hierarchies, columns, cut)
        out = feasibility({n: frames[n] for n in names}, X, pub, inner, max_width=max_width, **noise)
        parts.append(out.with_columns(pl.lit(cube.name).alias("source")))
    return pl.concat(parts, how="diagonal_relaxed")


def _matrix(s: Session, prog: Programme, cube: Any, chosen: list[Any], depth: dict[str, int],
            hierarchies: dict[str, Any], columns: dict[str, list[str]], cut: dict[tuple[str, int], Any]) -> Any:
    """X of one TableSpec publishing every cell of the hypercube's chosen tables, planned as the
    run planned each table (protab.programme.cube_run), its columns named by the hypercube's variables."""
    from protab.programme.cube_run import plan_table
    from protab.table import TableSpec, union_spec

    specs, names = [], {}
    for t in chosen:
        plan = plan_table(cube, t, depth, hierarchies, columns, cut)
        o = t.options
        specs.append(TableSpec({col: h for col, h, _ in plan.values()}, formula=o.get("formula"),
                               drop_empty=o.get("drop_empty", False), null_code=o.get("null_code")))
        names.update({col: v for v, (col, _, _) in plan.items() if col != v})
    first = specs[0]
    X, inner, pub = s.model_matrix(prog.source, union_spec(specs, null_code=first.null_code, total=first.total),
                                   extend0="all")
    rename = {**names, **{f"{c}_level": f"{v}_level" for c, v in names.items()}}
    return X, inner.rename({k: v for k, v in rename.items() if k in inner.columns}), \
        pub.rename({k: v for k, v in rename.items() if k in pub.columns})
