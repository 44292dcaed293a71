"""Linked tables in the lighter modes of GaussSuppression's ``SuppressLinkedTables`` (its
linked-tables vignette): tables that share cells but not every dimension are protected from
their own inner cells instead of from the finest crossing of all of them (the *global* mode,
one table of every cell, :func:`protab.suppression.gauss` on the combined model matrix).

Each table's own model matrix is the combined one's columns of its cells with repeated rows
merged (two inner cells of the combined table that every cell of the table adds up alike are
one inner cell of that table); as in the package, a singleton row is merged only with singleton
rows (the singleton rules keep seeing the single contributor). *Common cells* are cells with the
same records: the same column of the combined model matrix, also under different codes (as
the package's ``recordAware``: Iceland × 2014 of one table is nonEU × 2014 of another when
Iceland is all of nonEU), and such a cell belongs to every table that has any of its copies.

* ``"local"``: every table by itself (its own candidate order); a common cell can be
  suppressed in one table and published in another.
* ``"super-consistent"``: the tables side by side (a block-diagonal model matrix) plus, for
  every common cell, the differences of its copies published first: the attacker knows that a
  common cell has one value in every table. A common cell is then suppressed in all tables or
  in none (its copies differ by a published column), and no primary cell can be derived from
  the equations of all tables together, but the tables' inner cells are not combined as in the
  global mode.

* ``"consistent"``: the tables side by side with the copies of every common cell suppressed
  or published together, without their equality as the attacker's knowledge (the package's
  ``cell_grouping``; :mod:`protab.suppression._linked_consistent`).

:func:`linked_intervals` gives the attacker's intervals per mode: per table for local and
consistent (each table's own equations), on the joint system (the tables side by side and the
copies' equality) for super-consistent. :func:`check_shared_cells` refuses linked tables whose
common cells have different values (tabulated under different ``where`` filters).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from protab.errors import InputError, SpecError
from protab.suppression._suppression_inputs import _as_int_csc

__all__ = ["INTERVAL_SYSTEMS", "LINKED_MODES", "copies_by_records", "gauss_linked", "check_shared_cells", "linked_intervals"]

LINKED_MODES = ("global", "local", "consistent", "super-consistent")
_NOT_IMPLEMENTED = ("back-tracking", "local-bdiag")


def _column_classes(X: sparse.csc_matrix) -> np.ndarray:
    """For every column, a class id shared exactly by the columns with the same entries."""
    n = X.shape[1]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    nnz = np.diff(X.indptr)
    rng = np.random.default_rng(20240917)
    r1 = rng.integers(1, 2**61, size=X.shape[0], dtype=np.uint64)
    r2 = rng.integers(1, 2**61, size=X.shape[0], dtype=np.uint64)
    vals = X.data.astype(np.int64).astype(np.uint64)
    cols = np.repeat(np.arange(n), nnz)
    with np.errstate(over="ignore"):
        h1 = np.zeros(n, dtype=np.uint64)
        h2 = np.zeros(n, dtype=np.uint64)
        np.add.at(h1, cols, vals * r1[X.indices])
        np.add.at(h2, cols, vals * (r2[X.indices] ^ np.uint64(0x9E3779B97F4A7C15)))
    keys = np.stack([nnz.astype(np.uint64), h1, h2], axis=1)
    _, cls = np.unique(keys, axis=0, return_inverse=True)
    cls = cls.ravel()
    # verify (a hash collision would only merge different cells: check exactly)
    first = np.full(cls.max() + 1, -1)
    first[cls[::-1]] = np.arange(n)[::-1]
    rep = first[cls]
    same = X[:, rep] != X
    if same.nnz:
        raise RuntimeError("linked tables: a hash collision among cells (please report)")
    return cls


def copies_by_records(X: Any, members: list[np.ndarray]) -> list[np.ndarray]:
    """The members of each table extended by the cells with the same records (the same column
    of X) as one of its cells (the package's ``recordAware``). Masks over the columns of X."""
    W = _as_int_csc(X, "linked tables")
    cls = _column_classes(W)
    out = []
    for m in members:
        hit = np.zeros(cls.max() + 1 if cls.size else 0, dtype=bool)
        hit[cls[m]] = True
        out.append(hit[cls])
    return out


def _table_rows(Xt: sparse.csc_matrix, sing: np.ndarray) -> tuple[sparse.csc_matrix, np.ndarray, np.ndarray]:
    """Rows of one table's matrix without empty rows and with repeated rows merged (singleton
    rows among themselves): (matrix, singleton per row, combined inner cell of each row)."""
    R = sparse.csr_matrix(Xt)
    keep = np.flatnonzero(np.diff(R.indptr) > 0)
    R = R[keep]
    cls = _column_classes(sparse.csc_matrix(R.T))
    key = np.stack([cls, sing[keep].astype(np.int64)], axis=1)
    _, first = np.unique(key, axis=0, return_index=True)
    first = np.sort(first)
    return sparse.csc_matrix(R[first]), sing[keep][first], keep[first]


def gauss_linked(X: Any, z: Any, primary: Any, members: list[Any], *, mode: str, candidates: Any,
                 forced: Any = None, never: Any = None, singleton: Any = None, singleton_method: str = "anySum",
                 inner_freq: Any = None) -> np.ndarray:
    """Secondary suppression of linked tables; returns one suppressed mask over the columns of
    X per table (rows; False outside the table). ``members``: per table, a mask of its cells
    (extend them with :func:`copies_by_records` first); ``candidates``: the combined order
    (the super-consistent mode follows it; in the local mode each table orders its own cells by
    ``inner_freq``, its own frequencies, as the package's tables called one by one);
    ``inner_freq``: per inner cell the count (CandidatesDefault of each table in local mode)."""
    from protab.suppression._candidates import candidates_default
    from protab.suppression.gauss import _gauss

    if mode in _NOT_IMPLEMENTED:
        raise NotImplementedError(f"linked tables: mode {mode!r} is not implemented; use one of "
                                  f"{', '.join(LINKED_MODES)}")
    if mode not in ("local", "consistent", "super-consistent"):
        raise SpecError(f"linked tables: unknown mode {mode!r}; use one of {', '.join(LINKED_MODES)}")
    W = _as_int_csc(X, "linked tables")
    m_rows, n = W.shape
    zz = np.asarray(z, dtype=float)
    masks = [np.asarray(mb, dtype=bool) for mb in members]
    prim, forc, nev = (_mask(v, n) for v in (primary, forced, never))
    sing = np.zeros(m_rows, dtype=bool) if singleton is None else np.asarray(singleton, dtype=bool)
    order = np.asarray(candidates, dtype=np.int64)
    blocks = []
    for mb in masks:
        cols = np.flatnonzero(mb)
        Xt, st, rows = _table_rows(W[:, cols], sing)
        blocks.append((cols, Xt, st, rows))
    out = np.zeros((len(masks), n), dtype=bool)
    if mode == "local":
        for t, (cols, Xt, st, _rows) in enumerate(blocks):
            pos = np.full(n, -1)
            pos[cols] = np.arange(cols.size)
            if inner_freq is not None:
                f = np.asarray(inner_freq, dtype=float)
                ft = np.asarray(W[:, cols].T @ f).ravel()
                own = candidates_default(Xt, ft)
            else:
                own = pos[order[masks[t][order]]]
            got = _gauss(Xt, zz[cols], prim[cols], candidates=own, forced=forc[cols], never=nev[cols],
                         singleton=st, singleton_method=singleton_method, auto=(False, True))
            out[t, cols] = got
        return out
    if mode == "consistent":
        return _consistent(blocks, prim | forc, nev, order, singleton_method, out)
    return _super_consistent(blocks, zz, prim, forc, nev, order, singleton_method, out)


def _mask(v: Any, n: int) -> np.ndarray:
    if v is None:
        return np.zeros(n, dtype=bool)
    a = np.asarray(v)
    if a.dtype == bool:
        return a.copy()
    out = np.zeros(n, dtype=bool)
    out[a.astype(np.int64)] = True
    return out


def block_diagonal(blocks: list[tuple[np.ndarray, sparse.csc_matrix, np.ndarray, np.ndarray]]) -> tuple[
        sparse.csc_matrix, np.ndarray, np.ndarray, sparse.csc_matrix]:
    """The tables side by side: (block-diagonal X, combined cell of every column, table of every
    column, the differences of the copies of every common cell as columns)."""
    Xbd = sparse.csc_matrix(sparse.block_diag([b[1] for b in blocks], format="csc"), dtype=np.int64)
    orig = np.concatenate([b[0] for b in blocks])
    tab = np.concatenate([np.full(b[0].size, t) for t, b in enumerate(blocks)])
    srt = np.argsort(orig, kind="stable")
    o = orig[srt]
    first = np.concatenate(([True], o[1:] != o[:-1]))
    head = srt[np.maximum.accumulate(np.where(first, np.arange(o.size), 0))]
    pairs = np.flatnonzero(~first)
    D = sparse.csc_matrix(Xbd[:, head[pairs]] - Xbd[:, srt[pairs]], dtype=np.int64)
    D.eliminate_zeros()
    return Xbd, orig, tab, D


def _copy_order(orig: np.ndarray, tab: np.ndarray, order: np.ndarray, n: int) -> np.ndarray:
    """Every copy of each combined cell in the combined order, copies in table order."""
    rank = np.full(n, np.iinfo(np.int64).max)
    rank[order] = np.arange(order.size)
    cand = np.lexsort((tab, rank[orig]))
    return cand[rank[orig][cand] < np.iinfo(np.int64).max]


def _consistent(blocks: list, protect: np.ndarray, nev: np.ndarray, order: np.ndarray, method: str,
                out: np.ndarray) -> np.ndarray:
    from protab.suppression._linked_consistent import consistent_elimination

    sing = np.concatenate([b[2] for b in blocks])
    if method != "none" and sing.any():
        raise NotImplementedError("linked tables: the 'consistent' mode has no singleton method; pass "
                                  "singleton_method='none' or use 'super-consistent'")
    Xbd, orig, tab, _ = block_diagonal(blocks)
    copies = np.bincount(orig, minlength=out.shape[1])
    group = np.where(copies[orig] > 1, orig, -1)
    got = consistent_elimination(Xbd, protect[orig], nev[orig], _copy_order(orig, tab, order, out.shape[1]), group)
    out[tab, orig] = got
    return out


def _super_consistent(blocks: list, z: np.ndarray, prim: np.ndarray, forc: np.ndarray, nev: np.ndarray,
                      order: np.ndarray, method: str, out: np.ndarray) -> np.ndarray:
    from protab.suppression.gauss import _gauss

    Xbd, orig, tab, D = block_diagonal(blocks)
    nb = orig.size
    cand = _copy_order(orig, tab, order, out.shape[1])
    Xs = sparse.csc_matrix(sparse.hstack([Xbd, D], format="csc"), dtype=np.int64)
    never = np.concatenate([nev[orig], np.ones(D.shape[1], dtype=bool)])
    zs = np.concatenate([z[orig], np.zeros(D.shape[1])])
    sing = np.concatenate([b[2] for b in blocks])
    got = _gauss(Xs, zs, np.concatenate([prim[orig], np.zeros(D.shape[1], dtype=bool)]),
                 candidates=np.concatenate([np.arange(nb, Xs.shape[1]), cand]),
                 forced=np.concatenate([forc[orig], np.zeros(D.shape[1], dtype=bool)]), never=never,
                 singleton=sing, singleton_method=method, auto=(False, False))
    out[tab, orig] = got[:nb]
    return out


INTERVAL_SYSTEMS = {"global": "joint", "super-consistent": "joint", "local": "table", "consistent": "table"}


def linked_intervals(X: Any, z: Any, suppressed: np.ndarray, members: list[Any], *, mode: str,
                     primary: Any = None, **requirements: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The attacker's intervals of linked tables protected in ``mode``: (lo, up, protected),
    each tables × columns of X (NaN / True outside a table's suppressed cells).

    ``suppressed``: one mask per table (rows, as :func:`gauss_linked` returns); ``members``: the
    tables' cells (with :func:`copies_by_records`). ``"local"`` and ``"consistent"``: each
    table from its own equations (its cells over its own inner cells), as the attacker of one
    table; ``"super-consistent"``: the joint system, the tables side by side with the copies of
    every common cell known to be equal (``INTERVAL_SYSTEMS`` names which). The requirements
    are those of :func:`protab.suppression.audit_pattern` (one value per column of X, or scalars)."""
    from protab.suppression.pattern_audit import audit_pattern

    if mode not in ("local", "consistent", "super-consistent"):
        raise SpecError(f"linked intervals: mode must be local, consistent or super-consistent, not {mode!r}")
    W = _as_int_csc(X, "linked tables")
    m_rows, n = W.shape
    zz = np.asarray(z, dtype=float)
    supp = np.asarray(suppressed, dtype=bool)
    prim = np.asarray(supp.any(axis=0)) if primary is None else _mask(primary, n)
    blocks = []
    for mb in members:
        cols = np.flatnonzero(np.asarray(mb, dtype=bool))
        Xt, st, rows = _table_rows(W[:, cols], np.zeros(m_rows, dtype=bool))
        blocks.append((cols, Xt, st, rows))
    lo = np.full(supp.shape, np.nan)
    up = np.full(supp.shape, np.nan)
    ok = np.ones(supp.shape, dtype=bool)
    if mode == "super-consistent":
        Xbd, orig, tab, D = block_diagonal(blocks)
        Xs = sparse.csc_matrix(sparse.hstack([Xbd, D], format="csc"))
        pad = np.zeros(D.shape[1])
        frame = audit_pattern(Xs, np.concatenate([zz[orig], pad]), np.concatenate([supp[tab, orig], pad.astype(bool)]),
                      primary=np.concatenate([prim[orig], pad.astype(bool)]),
                      **_pick(requirements, n, orig, D.shape[1]))
        c = frame["cell"].to_numpy()
        t, o = tab[c], orig[c]
        lo[t, o], up[t, o], ok[t, o] = frame["lo"].to_numpy(), frame["up"].to_numpy(), frame["protected"].to_numpy()
        return lo, up, ok
    for t, (cols, Xt, _st, _rows) in enumerate(blocks):
        frame = audit_pattern(Xt, zz[cols], supp[t, cols], primary=prim[cols], **_pick(requirements, n, cols, 0))
        c = cols[frame["cell"].to_numpy()]
        lo[t, c], up[t, c], ok[t, c] = frame["lo"].to_numpy(), frame["up"].to_numpy(), frame["protected"].to_numpy()
    return lo, up, ok


def _pick(requirements: dict[str, Any], n: int, cols: np.ndarray, pad: int) -> dict[str, Any]:
    """The requirements at the columns ``cols`` (arrays of one value per column of X), with
    ``pad`` zeros for the columns of the copies' differences."""
    out = {}
    for k, v in requirements.items():
        a = None if v is None or np.isscalar(v) else np.asarray(v)
        if a is not None and a.ndim == 1 and a.size == n and k not in ("lower", "upper"):
            out[k] = np.concatenate([a[cols], np.zeros(pad, dtype=a.dtype)])
        else:
            out[k] = v
    return out


def check_shared_cells(frames: list[Any], columns: list[list[str]], values: list[str],
                       names: list[str] | None = None) -> None:
    """InputError naming two linked tables and a common cell that they give different values
    (as from :meth:`protab.Session.tabulate` of each table, e.g. under different ``where``
    filters): a cell of both is one whose dimensions outside the other table are at their
    total and whose shared dimensions have the same codes. ``values``: the columns compared."""
    import polars as pl

    names = names or [f"table {t + 1}" for t in range(len(frames))]
    for a in range(len(frames)):
        for b in range(a + 1, len(frames)):
            shared = [d for d in columns[a] if d in columns[b]]
            sides = []
            for t, other in ((a, b), (b, a)):
                own = [d for d in columns[t] if d not in columns[other]]
                f = frames[t].filter(pl.all_horizontal([pl.col(f"{d}_level") == 0 for d in own] or [pl.lit(True)]))
                sides.append(f.select(*shared, *values).with_columns(_k=pl.lit(0)))
            j = sides[0].join(sides[1], on=[*shared, "_k"], how="inner", suffix="__other")
            differ = pl.any_horizontal([pl.col(v).cast(pl.Float64).ne_missing(pl.col(f"{v}__other").cast(pl.Float64))
                                        for v in values])
            bad = j.filter(differ)
            if bad.height:
                row = bad.row(0, named=True)
                cell = ", ".join(f"{d}={row[d]}" for d in shared) or "the grand total"
                what = "; ".join(f"{v} {row[v]} in {names[a]!r}, {row[f'{v}__other']} in {names[b]!r}"
                                 for v in values if row[v] != row[f"{v}__other"])
                raise InputError(f"linked tables {names[a]!r} and {names[b]!r} disagree on their common cell "
                                 f"({cell}): {what} ({bad.height} common cells differ); linked tables must "
                                 "be tabulated from the same records (the same where filter)")
