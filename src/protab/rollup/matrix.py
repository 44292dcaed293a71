"""Step 4 of a table request: the (inner, published) pairs of the roll-up's joins, which are
the sparse model matrix X (docs/design.md, idea 2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from protab.errors import SpecError, show_values
from protab.rollup.cells import published_filter
from protab.rollup.state import RunState


class Matrix(RunState):
    """Part of :class:`TableRun`: the model matrix of inner × published cells."""

    def pairs(self, *, coefficients: bool = False) -> tuple[np.ndarray, np.ndarray, int, int]:
        """(inner id, published id) of every inner cell under every published cell.

        Published ids number the cells in publication order (as :meth:`published`).

        Under a hierarchy that is not a tree an inner cell enters a published cell with a
        coefficient: the product over dimensions of the leaf's coefficient in the code
        (−1 for a country of nonEU in EU = Europe − nonEU; 2 for a leaf counted twice).
        These are the values of X, left in ``self.pair_coef`` (int64, one per pair; all 1
        for trees) when ``coefficients=True``; :meth:`matrix` builds X with them. Without
        ``coefficients=True`` a coefficient other than 1 raises SpecError, as the caller
        would build a 0/1 matrix.
        """
        nd = self.nd
        pub = self._create(
            "pub",
            f"SELECT CAST(row_number() OVER (ORDER BY {', '.join(f'_o{k}' for k in range(nd))}) - 1 "
            f"AS BIGINT) AS _pid, {', '.join(f'_o{k}' for k in range(nd))} FROM {self.cells}",
        )
        joins = " ".join(f"JOIN {b} b{k} ON i._o{k} = b{k}.leaf" for k, b in enumerate(self.bridges))
        match = " AND ".join(f"p._o{k} = b{k}.anc" for k in range(nd))
        where = published_filter(self.spec, {k: f"b{k}.level" for k in range(nd)})
        signed = [k for k in range(nd) if self.coef[k]]
        coef = (", " + " * ".join(f"b{k}.coef" for k in signed) + " AS _c") if signed else ""
        tab = self.eng.arrow(
            f"SELECT i._id, p._pid{coef} FROM {self.ids} i {joins} JOIN {pub} p ON {match} WHERE {where}"
        )
        n_inner = self._count(f"SELECT 1 FROM {self.ids}")
        n_pub = self._count(f"SELECT 1 FROM {pub}")
        self.pair_coef = tab.column("_c").to_numpy().astype(np.int64) if signed else np.ones(tab.num_rows, np.int64)
        if not coefficients and signed and bool((self.pair_coef != 1).any()):
            dims = [self.spec.dimensions[k].column for k in signed]
            raise SpecError(
                f"the hierarchy of {show_values(dims)} has coefficients other than 1 (signs -1, "
                "or a leaf counted more than once), which a 0/1 model matrix cannot hold; build "
                "X with TableRun.matrix() (or pairs(coefficients=True))"
            )
        return (
            tab.column("_id").to_numpy(),
            tab.column("_pid").to_numpy(),
            n_inner,
            n_pub,
        )

    def matrix(self) -> Any:
        """The model matrix X (scipy csc, inner × published, float64) with the coefficients
        of :meth:`pairs`, so that ``X.T @ inner n == published n`` for any hierarchy."""
        from scipy import sparse

        rows, cols, n_inner, n_pub = self.pairs(coefficients=True)
        return sparse.csc_matrix((self.pair_coef.astype(np.float64), (rows, cols)), shape=(n_inner, n_pub))
