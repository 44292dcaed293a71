"""The exact derivability test of a suppression pattern (:func:`derivable`), independent of the
elimination of :func:`protab.suppression.gauss`: fraction-free elimination in Python integers."""

from __future__ import annotations

from typing import Any

import numpy as np

from protab.suppression._suppression_inputs import _as_int_csc, _bool_vector

__all__ = ["derivable"]


def derivable(X: Any, suppressed: Any) -> np.ndarray:
    """Which suppressed cells are exactly determined by the published ones.

    A boolean per published cell (False for published cells): True where the column of a
    suppressed cell lies in the span of the columns of the non-suppressed cells. An independent
    exact test: fraction-free elimination in unbounded Python integers over the published
    columns, then every suppressed column is reduced against that basis. Cost grows with the
    size of the table (Python-level loops); meant for checking results.
    """
    Xc = _as_int_csc(X, "derivable")
    n = Xc.shape[1]
    supp = _bool_vector(suppressed, n, "suppressed", "derivable")
    basis: dict[int, dict[int, int]] = {}  # pivot row → integer vector (pivot entry positive)

    def column(j: int) -> dict[int, int]:
        s, e = Xc.indptr[j], Xc.indptr[j + 1]
        return {int(r): int(v) for r, v in zip(Xc.indices[s:e], Xc.data[s:e])}

    def reduce(v: dict[int, int]) -> dict[int, int]:
        while v:
            hit = [r for r in v if r in basis]
            if not hit:
                return v
            r = min(hit)
            b = basis[r]
            f, g = b[r], v[r]
            out = {k: f * x for k, x in v.items()}
            for k, x in b.items():
                out[k] = out.get(k, 0) - g * x
            v = {k: x for k, x in out.items() if x != 0}
        return v

    for j in np.flatnonzero(~supp):
        v = reduce(column(int(j)))
        if v:
            p = min(v)
            if v[p] < 0:
                v = {k: -x for k, x in v.items()}
            # keep reduced: eliminate p from existing basis vectors is not needed for membership
            basis[p] = v
    out = np.zeros(n, dtype=bool)
    for j in np.flatnonzero(supp):
        out[j] = not reduce(column(int(j)))
    return out
