"""GaussSuppression 1.2.3's SuppressLinkedTables help example 1 (tests/data/gauss_rules/levels,
lk_ex1_*): three linked tables of magnitude1 (geo and eu by sector2 with margins; eu x sector4
without margins; the one-way margins of geo, eu and sector4 without a grand total), which a
Session TableSpec cannot express, through the array API (protab.suppression.linked) with the
package's primary cells (p% = 10 over companies) and candidates by value: the secondary cells
of the local, consistent and super-consistent modes, cell for cell in every table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import sparse

from protab.suppression import candidates_num, derivable
from protab.suppression.linked import copies_by_records, gauss_linked

LEVELS = Path(__file__).resolve().parents[1] / "data" / "gauss_rules" / "levels"
REGION = {"Iceland": "geo", "Portugal": "geo", "Spain": "geo", "EU": "eu", "nonEU": "eu"}


def _cell(region: str, sector_column: str, sector: str) -> tuple:
    """A cell as the records it holds: (column, code) conditions, totals dropped."""
    cond = ([(REGION[region], region)] if region != "Total" else []) + \
        ([(sector_column, sector)] if sector != "Total" else [])
    return tuple(sorted(cond))


def _tables(mode: str) -> list[tuple[list[tuple], pl.DataFrame]]:
    out = []
    for t, sector_column in ((1, "sector2"), (2, "sector4"), (3, "sector4")):
        ref = pl.read_csv(LEVELS / f"lk_ex1_{mode}__table_{t}.csv")
        # the package's output names the region column "geo" and the sector column "sector4"
        out.append(([_cell(g, sector_column, s) for g, s in zip(ref["geo"], ref["sector4"])], ref))
    return out


@pytest.mark.parametrize("mode", ["local", "consistent", "super-consistent"])
def test_help_example_1_reproduces_the_package_in_every_mode(mode):
    data = pl.read_csv(LEVELS / "input_magnitude1_num2.csv")
    tables = _tables(mode.replace("-", "_"))
    cells = sorted({c for keys, _ in tables for c in keys})
    col = {c: i for i, c in enumerate(cells)}
    X = np.zeros((data.height, len(cells)), dtype=np.int64)  # records x cells
    for c, i in col.items():
        X[:, i] = np.logical_and.reduce([(data[k] == v).to_numpy() for k, v in c] + [np.ones(data.height, bool)])
    X = sparse.csc_matrix(X)
    z = X.T @ data["value"].to_numpy()
    primary = np.zeros(len(cells), dtype=bool)
    members = []
    for keys, ref in tables:
        m = np.zeros(len(cells), dtype=bool)
        m[[col[k] for k in keys]] = True
        members.append(m)
        primary[[col[k] for k, p in zip(keys, ref["primary"]) if p]] = True
    members = copies_by_records(X, members)
    order = candidates_num(X, z, freq=np.asarray(X.sum(axis=0)).ravel())
    got = gauss_linked(X, z, primary, members, mode=mode, candidates=order, singleton_method="none")
    for t, (keys, ref) in enumerate(tables):
        assert got[t, [col[k] for k in keys]].tolist() == ref["suppressed"].to_list(), f"table {t + 1}"
        own = np.flatnonzero(members[t])
        assert not (derivable(X[:, own], got[t, own]) & primary[own]).any()
    n_secondary = [int(got[t, [col[k] for k in keys]].sum() - ref["primary"].sum()) for t, (keys, ref) in
                   enumerate(tables)]
    assert n_secondary == ([3, 0, 2] if mode == "super-consistent" else [3, 0, 1])
