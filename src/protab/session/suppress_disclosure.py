"""The Session's side of the attribute-disclosure rules and of an earlier release's pattern
(:mod:`protab.suppression.disclosure`): checking the keywords of :meth:`protab.Session.suppress`,
turning them into primary cells, candidate order, extra primary columns and forced / never
masks, and running the elimination with the extra columns."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from scipy import sparse

from protab.errors import SpecError, show_values


@dataclass(frozen=True)
class Disclosure:
    """The rule keywords of :meth:`protab.Session.suppress`: ``direct`` (characteristic
    dimensions, True for all, or None), ``coalition``, ``k`` (k-disclosure) and ``previous``."""

    direct: Any = None
    coalition: int = 1
    k: int | None = None
    previous: Any = None

    @property
    def rules(self) -> bool:
        """Whether a disclosure rule (direct or k) is asked for."""
        return self.direct is not None or self.k is not None

    @property
    def active(self) -> bool:
        """Whether anything here changes the suppression."""
        return self.rules or self.previous is not None


def of_args(args: dict[str, Any]) -> Disclosure:
    """The disclosure keywords among the arguments of :meth:`protab.Session.suppress`."""
    return Disclosure(args["direct_disclosure"], args["coalition"], args["k_disclosure"], args["previous"])


def rule_min_frequency(args: dict[str, Any]) -> Any:
    """``min_frequency``, or 1 (no small-count primary cells) for a frequency table given only a
    disclosure rule: the rule decides."""
    if of_args(args).rules and args["min_frequency"] is None and args["rules"] is None:
        return 1
    return args["min_frequency"]


def check_disclosure(spec: Any, args: dict[str, Any]) -> None:
    """SpecError for disclosure keywords that do not fit the table or each other."""
    d = of_args(args)
    protect_zeros, audit, levels = args["protect_zeros"], args["audit"], args["levels"]
    interval_protection = args["interval_protection"]
    if d.direct is None and d.coalition != 1:
        raise SpecError("suppress: coalition is the coalition of direct_disclosure (k_disclosure is its own k); "
                        "pass direct_disclosure= with it")
    if not d.rules:
        return
    if spec.sums:
        raise SpecError("suppress: direct_disclosure and k_disclosure are rules of frequency tables (no sums)")
    if protect_zeros:
        raise SpecError("suppress: direct_disclosure and k_disclosure do not protect zeros (protect_zeros=False), "
                        "as GaussSuppression's rules; a zero difference is what k_disclosure protects")
    if d.direct is not None and d.direct is not True:
        names = [d.direct] if isinstance(d.direct, str) else d.direct
        if not isinstance(names, (list, tuple)) or not all(isinstance(x, str) for x in names):
            raise SpecError("suppress: direct_disclosure is a dimension name, a list of them, or True (every "
                            f"dimension), not {d.direct!r}")
        unknown = [x for x in names if x not in spec.columns]
        if unknown or not names:
            raise SpecError(f"suppress: direct_disclosure names dimensions the table does not have: "
                            f"{show_values(unknown) if unknown else 'none given'} "
                            f"(dimensions: {show_values(list(spec.columns))})")
    if d.direct is False:
        raise SpecError("suppress: direct_disclosure is None (off), True or dimension names, not False")
    for name, value, low in (("coalition", d.coalition, 0), ("k_disclosure", d.k, 1)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise SpecError(f"suppress: {name} must be a whole number of {low} or more, not {value!r}")
    if d.k is not None and (audit or interval_protection or levels is not None):
        raise NotImplementedError("suppress: the audit of k_disclosure (its primary cells are differences the "
                                  "table does not publish) is not implemented")


def disclosure_cells(spec: Any, d: Disclosure, X: Any, published: pl.DataFrame, primary: np.ndarray,
                     order: np.ndarray, method: str) -> tuple[np.ndarray, np.ndarray, str, Any]:
    """(primary, candidate order, singleton method, extra primary columns or None) with the
    rules of ``d`` added to the small-count ones (GaussSuppression's order and method for them)."""
    from protab.suppression.disclosure import direct_disclosure, disclosure_candidates, k_disclosure_columns

    if not d.rules:
        return primary, order, method, None
    n = published["n"].to_numpy()
    dims = list(spec.columns)
    primary = primary.copy()
    secondary_zeros = 1
    if d.direct is not None:
        primary |= direct_disclosure(published, dims, d.direct, d.coalition)
        secondary_zeros = d.coalition
    extra = None
    if d.k is not None:
        extra = k_disclosure_columns(X, n, d.k)
        secondary_zeros = 1 if d.direct is None else secondary_zeros
    return primary, disclosure_candidates(n, secondary_zeros), "anySumNOTprimary", extra


def previous_cells(spec: Any, d: Disclosure, published: pl.DataFrame, primary: np.ndarray, forced: np.ndarray,
                   never: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(primary, forced, never) with an earlier release kept: its suppressed cells forced, its
    published cells never suppressed and not primary (GaussSuppression's AdditionalSuppression)."""
    from protab.suppression.disclosure import previous_masks

    if d.previous is None:
        return primary, forced, never
    dims = list(spec.columns)
    values = ["n", *(["w"] if spec.weight else []), *spec.sums]
    before_sup, before_pub = previous_masks(published, dims, d.previous, values)
    for clash, what in ((before_pub & forced, "forced"), (before_sup & never, "never")):
        if clash.any():
            cells = published.filter(pl.Series(clash)).select(dims).rows()
            raise SpecError(f"suppress: previous contradicts {what} at cells {show_values(cells)}")
    return primary & ~before_pub, forced | before_sup, never | before_pub


def gauss_extra(X: Any, z: np.ndarray, primary: np.ndarray, extra: Any, inner_n: np.ndarray, **kw: Any) -> np.ndarray:
    """:func:`protab.suppression.gauss` with the extra primary columns ``extra`` (inner ×
    differences) appended to ``X`` (GaussSuppression's ``xExtraPrimary``); the published cells'
    suppression."""
    from protab.suppression import gauss

    if extra is None or extra.shape[1] == 0:
        return gauss(X, z, primary, **kw)
    m = X.shape[1]
    Xe = sparse.hstack([sparse.csc_matrix(X), extra], format="csc")
    ze = np.concatenate([z, extra.T @ inner_n.astype(float)])
    pe = np.concatenate([primary, np.ones(extra.shape[1], dtype=bool)])
    pad = np.zeros(extra.shape[1], dtype=bool)
    kw = dict(kw)
    for key in ("forced", "never"):
        if kw.get(key) is not None:
            kw[key] = np.concatenate([np.asarray(kw[key], dtype=bool), pad])
    return gauss(Xe, ze, pe, **kw)[:m]
