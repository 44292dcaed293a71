"""What a noisy published count says about its true value, for an attacker who knows the
p-table's largest deviation D (and perhaps which deviations occur), not the cell keys
(docs/methods.md §1.2 and §1.4)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from protab.errors import InputError

__all__ = ["check_noise", "noise_bounds", "ptable_noise"]


def check_noise(D: Any, support: Iterable[Any] | None) -> tuple[float, float]:
    """The deviations (v = published − true) the attacker allows: (min v, max v).

    ``D`` a finite number ≥ 0; ``support`` the possible deviations (integers within ±D) or None
    for every integer in [−D, D]. Messages never show D or the support (p-table parameters).
    """
    if isinstance(D, bool) or not isinstance(D, numbers.Real) or not math.isfinite(D) or D < 0:
        raise InputError("feasibility audit: D (the p-table's largest absolute deviation) must be a finite "
                         "number of 0 or more")
    if support is None:
        return -float(D), float(D)
    try:
        v = np.asarray(list(support), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError("feasibility audit: support must be a list of integer deviations") from exc
    if v.size == 0 or not np.isfinite(v).all() or (v != np.round(v)).any() or (np.abs(v) > D).any():
        raise InputError("feasibility audit: support must be a non-empty list of integer deviations within "
                         "±D (the deviations the p-table can make)")
    return float(v.min()), float(v.max())


def noise_bounds(z: ArrayLike, D: float, *, support: Iterable[Any] | None = None, zeros_perturbed: bool = False,
                 nonneg: ArrayLike | bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Interval [lower, upper] of each true count behind published counts ``z`` (NaN = blanked:
    no constraint, ±inf).

    true = z − v with v in [min support, max support] (default [−D, D]); a count whose cell
    holds non-negative counts only (``nonneg``: per cell or for all) is ≥ 0; and unless
    ``zeros_perturbed``, a published non-zero count has a true count ≥ 1, because the cell key
    method keeps an empty cell at 0 (methods §1.4). A published 0 is not taken as a true 0: a
    count may be perturbed *to* 0 (unless the support has no negative deviation).
    """
    vmin, vmax = check_noise(D, support)
    zz = np.asarray(z, dtype=np.float64).reshape(-1)
    pos = np.broadcast_to(np.asarray(nonneg, dtype=bool), zz.shape)
    blank = np.isnan(zz)
    lower = np.where(pos, np.maximum(zz - vmax, 0.0), zz - vmax)
    if not zeros_perturbed:
        lower = np.where(pos & (zz != 0), np.maximum(lower, 1.0), lower)
    upper = zz - vmin
    return np.where(blank, -np.inf, lower), np.where(blank, np.inf, upper)


def ptable_noise(ptable: Any) -> dict[str, Any]:
    """What the attacker is assumed to know of a count p-table: ``D`` (largest |v|), ``support``
    (every deviation v = j − i with p > 0) and ``zeros_perturbed`` (row 0 moves a count), as
    keyword arguments of :func:`protab.audit.feasibility`. Values are not shown anywhere."""
    from protab.ptable import PTable

    if not isinstance(ptable, PTable):
        raise InputError(f"ptable_noise: expected a protab.PTable, not {type(ptable).__name__}")
    d = ptable.distribution()
    d = d.filter(d["p"] > 0)
    v = (d["j"] - d["i"]).to_numpy()
    zero = d.filter((d["i"] == 0) & (d["j"] != 0)).height > 0
    return {"D": int(np.abs(v).max()), "support": sorted({int(x) for x in v}), "zeros_perturbed": zero}
