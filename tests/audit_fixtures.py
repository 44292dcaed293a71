"""Shared by the audit's tests: the model matrix of a full hypercube and a small request of two
linked tables."""

from __future__ import annotations

import itertools

import numpy as np
from scipy import sparse

#: two linked cell-key tables over the demo's persons (region × sex and region)
TWO_TABLES = '''
[ptable]
maximum_entropy = { D = 3, V = 1 }
[[tables]]
name = "region_sex"
source = "persons"
dims = ["region", "sex"]
[[tables]]
name = "region"
source = "persons"
dims = ["region"]
'''


def hypercube(sizes):
    """X of a hypercube of ``sizes`` with every margin (inner cells × published cells)."""
    n = int(np.prod(sizes))
    codes = np.indices(sizes).reshape(len(sizes), n)
    parts = []
    for keep in itertools.product([True, False], repeat=len(sizes)):
        col, width = np.zeros(n, dtype=np.int64), 1
        for k in range(len(sizes)):
            if keep[k]:
                col, width = col * sizes[k] + codes[k], width * sizes[k]
        parts.append(sparse.csc_array((np.ones(n), (np.arange(n), col)), shape=(n, width)))
    return sparse.hstack(parts, format="csc")
