"""GaussSuppression 1.2.3's SuppressLinkedTables interval example (tests/data/gauss_rules/levels,
lk_ex_intervals_k90_range50_lpSolve: geo x sector2 and eu x sector4 of magnitude1, dominance
k = 90 over companies, super-consistent, rangeMin = 50): the joint system's intervals of the
package's final pattern and of protab's first-round super-consistent pattern are the package's
lo/up and lo_1/up_1, through the array API (protab.suppression.linked)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from scipy import sparse

from protab.suppression import candidates_num
from protab.suppression.linked import copies_by_records, gauss_linked, linked_intervals

LEVELS = Path(__file__).resolve().parents[1] / "data" / "gauss_rules" / "levels"
NAME = "lk_ex_intervals_k90_range50_lpSolve__table_{}"


def _system():
    data = pl.read_csv(LEVELS / "input_magnitude1_num2.csv")
    tables = []
    for t, (region, sector) in ((1, ("geo", "sector2")), (2, ("eu", "sector4"))):
        ref = pl.read_csv(LEVELS / f"{NAME.format(t)}.csv")
        keys = [tuple(sorted([(c, v) for c, v in ((region, r), (sector, s)) if v != "Total"]))
                for r, s in zip(ref[region], ref[sector])]
        tables.append((keys, ref))
    cells = sorted({c for keys, _ in tables for c in keys})
    col = {c: i for i, c in enumerate(cells)}
    X = np.zeros((data.height, len(cells)), dtype=np.int64)
    for c, i in col.items():
        X[:, i] = np.logical_and.reduce([(data[k] == v).to_numpy() for k, v in c] + [np.ones(data.height, bool)])
    X = sparse.csc_matrix(X)
    members = []
    for keys, _ in tables:
        m = np.zeros(len(cells), dtype=bool)
        m[[col[k] for k in keys]] = True
        members.append(m)
    return X, X.T @ data["value"].to_numpy(), copies_by_records(X, members), tables, col


def _check(lo, up, tables, col, suffix):
    for t, (keys, ref) in enumerate(tables):
        prim = ref["primary"].to_numpy()
        idx = np.array([col[k] for k in keys])[prim]
        np.testing.assert_allclose(lo[t, idx], ref[f"lo{suffix}"].to_numpy()[prim], atol=1e-9)
        np.testing.assert_allclose(up[t, idx], ref[f"up{suffix}"].to_numpy()[prim], atol=1e-9)


def test_joint_intervals_of_the_package_pattern_and_of_the_first_round():
    X, z, members, tables, col = _system()
    primary = np.zeros(X.shape[1], dtype=bool)
    final = np.zeros((2, X.shape[1]), dtype=bool)
    for t, (keys, ref) in enumerate(tables):
        primary[[col[k] for k, p in zip(keys, ref["primary"]) if p]] = True
        final[t, [col[k] for k, s in zip(keys, ref["suppressed"]) if s]] = True
    # a copy under other codes (nonEU x Total = Iceland x Total) takes its table's decision
    Xd = X.toarray()
    for t in range(2):
        for c in np.flatnonzero(members[t]):
            final[t, c] = final[t, np.flatnonzero((Xd == Xd[:, [c]]).all(axis=0) & members[t])].any()
    lo, up, _ = linked_intervals(X, z, final, members, mode="super-consistent", primary=primary)
    _check(lo, up, tables, col, "")  # [0, 90.6] and [0, 131.5]
    order = candidates_num(X, z, freq=np.asarray(X.sum(axis=0)).ravel())
    first = gauss_linked(X, z, primary, members, mode="super-consistent", candidates=order,
                         singleton_method="none")
    assert (first.sum(axis=1) < final.sum(axis=1)).all()  # rangeMin's extra cells are not in it
    lo1, up1, _ = linked_intervals(X, z, first, members, mode="super-consistent", primary=primary)
    _check(lo1, up1, tables, col, "_1")  # [0, 32.8] and [0, 37.1]
