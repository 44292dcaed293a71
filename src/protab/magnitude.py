"""Magnitude tables: the parameters of the sensitivity rules and of the cell key method for
sums (docs/methods.md §1.8), checked when they are made.

Both work on the columns one scan of the microdata gives every published cell (see
:func:`protab.rollup.value_columns`): the sum of a variable, its number of (non-zero)
contributors, its ``top_k`` largest contributions and the cell key of its non-zero
contributors. Their SQL over those columns lives with the table request
(:mod:`protab.rollup.magnitude_rules`, :mod:`protab.rollup.magnitude_ckm`).

- :class:`SensitivityRules`: minimum frequency, (n, k)-dominance, the p% rule and its
  prior/posterior (p, q) form, zero cells — the primary rules of tau-ARGUS and of SSB's
  GaussSuppression (docs/methods.md §6.2).
- :class:`MagnitudeCKM`: the perturbation of magnitudes by the cell key method as R cellKey
  (``ck_params_nums``) and tau-ARGUS define it: the noise of a cell is a numeric p-table draw,
  looked up by the ratio of the driving value to its scaled size and interpolated between
  p-table rows, times that size (docs/methods.md §1.8).

Parameters of both are secrets: neither class shows them in its repr or its errors.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from protab.errors import PTableError, SpecError, show_values

if TYPE_CHECKING:  # pragma: no cover
    from protab.ptable.magnitude_ptable import MagnitudePTable

VARIANTS = ("top_contr", "mean", "range", "sum")
MAX_TOP_K = 6
#: decimals of published perturbed sums and means unless declared (MagnitudeCKM(decimals=...))
DEFAULT_DECIMALS = 2
#: the most decimals: sums are held exactly to 8 (DECIMAL(38, 8))
MAX_DECIMALS = 8


def _number(value: object, name: str, *, low: float | None = None, high: float | None = None,
            low_open: bool = False, owner: str) -> float:
    """A finite real number within bounds, else SpecError naming the argument (not its value:
    rule and p-table parameters are secrets)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise SpecError(f"{owner}: {name} must be a finite number")
    x = float(value)
    if low is not None and (x <= low if low_open else x < low):
        raise SpecError(f"{owner}: {name} must be {'greater than' if low_open else 'at least'} {low:g}")
    if high is not None and x > high:
        raise SpecError(f"{owner}: {name} must be at most {high:g}")
    return x


def _whole(value: object, name: str, low: int, high: int, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= int(value) <= high:
        raise SpecError(f"{owner}: {name} must be a whole number from {low} to {high}")
    return int(value)


def _dominance(dominance: object, owner: str) -> tuple[tuple[int, float], ...]:
    """The (n, k) pairs of the dominance rules (one pair may be given bare), else SpecError."""
    if isinstance(dominance, (str, bytes)) or not isinstance(dominance, Sequence):
        raise SpecError(f"{owner}: dominance must be a list of (n, k) pairs, e.g. [(1, 80), (2, 90)]")
    if len(dominance) == 2 and all(isinstance(v, numbers.Real) for v in dominance):
        dominance = [dominance]  # one pair given bare
    pairs = []
    for item in dominance:
        if isinstance(item, (str, bytes)) or not isinstance(item, Sequence) or len(item) != 2:
            raise SpecError(f"{owner}: dominance must be a list of (n, k) pairs, e.g. [(1, 80), (2, 90)]")
        n = _whole(item[0], "dominance n", 1, MAX_TOP_K, owner)
        k = _number(item[1], "dominance k (a percentage)", low=0, high=100, low_open=True, owner=owner)
        pairs.append((n, k))
    return tuple(pairs)


def _pq(pq: object, owner: str) -> tuple[float, float]:
    """The (p, q) pair of the prior/posterior rule, p < q, else SpecError."""
    if isinstance(pq, (str, bytes)) or not isinstance(pq, Sequence) or len(pq) != 2:
        raise SpecError(f"{owner}: pq must be a pair (p, q) of percentages with p < q")
    p = _number(pq[0], "pq p", low=0, low_open=True, owner=owner)
    q = _number(pq[1], "pq q", low=0, high=100, low_open=True, owner=owner)
    if not p < q:
        raise SpecError(f"{owner}: pq needs p < q (the prior knowledge q is wider than p)")
    return p, q


# ----------------------------------------------------------------------------------- rules


class SensitivityRules:
    """Primary sensitivity rules for the cells of a magnitude table (docs/methods.md §6.2).

    Contributions x1 >= x2 >= … are those of records, or with ``holding=`` of contributor
    groups (enterprise groups): a holding's values are summed over everything under the cell,
    margins included, before they are ranked. Records are ranked by |x| and enter with their
    signed values over X = the signed cell total; holdings enter with |holding sum| over
    X = Σ|holding sums| (GaussSuppression's conventions; with values of 0 or more both are
    the plain rules). A cell of a sums variable is sensitive when any rule given holds:

    - ``min_frequency=n``: fewer than n contributors (and at least one);
    - ``dominance=[(n, k), …]``: x1 + … + xn is at least k % of X (``convention="argus"``:
      more than k %);
    - ``p_percent=p``: |X − x1 − x2| < p/100 · x1 (the second largest contributor could
      estimate the largest within p %); one contributor is always sensitive, X = 0 never;
    - ``pq=(p, q)``: the prior/posterior form, p/q in place of p/100;
    - ``zero=True``: cells with X = 0 (empty cells and cells of zero contributions).

    ``convention``: ``"gauss"`` (default; SSB GaussSuppression: contributions are absolute
    values, so negative values are allowed; contributors are the non-zero ones, its
    ``NContributorsRule(maxN)`` is ``min_frequency=maxN + 1``) or ``"argus"`` (tau-ARGUS:
    values must be 0 or more, every contributor counts, dominance is strict).

    ``weights`` (a table with a weight column): ``None`` (default: the records' own
    values), ``"default"`` (GaussSuppression's default weighting: the largest records by
    unweighted |x|, their unweighted signed values over the weighted signed total Σ w·x; with
    holdings the holdings' unweighted sums over Σ|Σ w·x| of the holdings) or ``"tauargus"``
    (Hundepool et al. 2012: each of the n largest records counts with its weight until the
    weights reach n, over Σ w·x; not with holdings). Rule parameters are not shown in the
    repr or in errors.
    """

    def __init__(
        self,
        *,
        min_frequency: int | None = None,
        dominance: Sequence[Sequence[float]] = (),
        p_percent: float | None = None,
        pq: Sequence[float] | None = None,
        zero: bool = False,
        convention: str = "gauss",
        weights: str | None = None,
        holding: str | None = None,
    ) -> None:
        owner = "SensitivityRules"
        self.min_frequency = None if min_frequency is None else _whole(min_frequency, "min_frequency", 1, 2**31, owner)
        self.dominance = _dominance(dominance, owner)
        self.p_percent = None if p_percent is None else _number(
            p_percent, "p_percent", low=0, high=100, low_open=True, owner=owner)
        self.pq = None if pq is None else _pq(pq, owner)
        if not isinstance(zero, bool):
            raise SpecError(f"{owner}: zero must be True or False")
        self.zero = zero
        if convention not in ("gauss", "argus"):
            raise SpecError(f"{owner}: convention must be 'gauss' or 'argus', not {convention!r}")
        self.convention = convention
        if weights not in (None, "default", "tauargus"):
            raise SpecError(f"{owner}: weights must be None, 'default' or 'tauargus', not {weights!r}")
        self.weights = weights
        if holding is not None and (not isinstance(holding, str) or not holding.strip()):
            raise SpecError(f"{owner}: holding must be a column name")
        if holding is not None and weights == "tauargus":
            raise SpecError(f"{owner}: weights='tauargus' is defined for records, not holdings")
        self.holding = holding
        if self.min_frequency is None and not self.dominance and self.p_percent is None and self.pq is None \
                and not zero:
            raise SpecError(
                f"{owner}: no rule given; pass min_frequency=, dominance=, p_percent=, pq= or zero=True"
            )

    def __repr__(self) -> str:
        names = [n for n, on in (("min_frequency", self.min_frequency is not None),
                                 ("dominance", bool(self.dominance)), ("p_percent", self.p_percent is not None),
                                 ("pq", self.pq is not None), ("zero", self.zero)) if on]
        return f"SensitivityRules({', '.join(names)}; convention={self.convention!r}; parameters hidden)"

    @property
    def top_k(self) -> int:
        """How many of the largest contributions the rules read."""
        need = [n for n, _ in self.dominance]
        if self.p_percent is not None or self.pq is not None:
            need.append(2)
        return max(need, default=1)

    @property
    def needs_nonnegative(self) -> bool:
        return self.convention == "argus" and (bool(self.dominance) or self.p_percent is not None
                                               or self.pq is not None)

    @property
    def shares(self) -> list[int]:
        """The n of every share of the n largest contributions a rule reads (1 and 2 for p%)."""
        need = {n for n, _ in self.dominance}
        if self.p_percent is not None or self.pq is not None:
            need |= {1, 2}
        return sorted(need)


# ------------------------------------------------------------------------- perturbation


def _p_tables(ptable: object, small_cells: object, owner: str) -> dict[str, MagnitudePTable]:
    """The numeric p-tables by type ("all", or "even" and "odd"), else SpecError; also checks
    ``small_cells``."""
    from protab.ptable.magnitude_ptable import MagnitudePTable

    if isinstance(ptable, MagnitudePTable):
        tables = {"all": ptable}
    elif isinstance(ptable, Mapping):
        tables = dict(ptable)
        if set(tables) not in ({"all"}, {"even", "odd"}):
            raise SpecError(
                f"{owner}: ptable must be one numeric p-table, or a mapping with 'even' and 'odd' "
                f"tables (not {sorted(map(str, tables))})"
            )
    else:
        from protab.ptable import PTable

        hint = (" (a count p-table: build a numeric one with MagnitudePTable.maximum_entropy or "
                "MagnitudePTable.read)") if isinstance(ptable, PTable) else ""
        raise SpecError(f"{owner}: ptable must be a protab.MagnitudePTable, not {type(ptable).__name__}{hint}")
    for name, t in tables.items():
        if not isinstance(t, MagnitudePTable):
            raise SpecError(f"{owner}: the {name!r} p-table must be a protab.MagnitudePTable, not {type(t).__name__}")
    if small_cells is not None and not isinstance(small_cells, MagnitudePTable):
        raise SpecError(f"{owner}: small_cells must be a protab.MagnitudePTable, not {type(small_cells).__name__}")
    return tables


def _epsilon(
    epsilon: Sequence[float] | None, top_k: object, variant: str, even_odd: bool, owner: str
) -> tuple[list[float], int]:
    """(ε per top-k position, top_k), else SpecError: ε starts at 1 and does not increase, one
    per position; a variant other than top_contr, and even/odd p-tables, have top_k = 1."""
    if epsilon is None:
        epsilon = [1.0] * (top_k if isinstance(top_k, int) and not isinstance(top_k, bool) and top_k > 0 else 1)
    if isinstance(epsilon, (str, bytes)) or not isinstance(epsilon, Sequence):
        raise SpecError(f"{owner}: epsilon must be a list of numbers, one per top-k position")
    eps = [_number(e, "epsilon", low=0, high=1, owner=owner) for e in epsilon]
    if not eps or eps[0] != 1.0 or any(b > a for a, b in zip(eps, eps[1:])):
        raise SpecError(f"{owner}: epsilon must start at 1 and not increase (1 >= ε2 >= … >= 0)")
    if top_k is None:
        top_k = len(eps)
    k = _whole(top_k, "top_k", 1, MAX_TOP_K, owner)
    if variant != "top_contr" and k != 1:
        raise SpecError(f"{owner}: variant {variant!r} has one driving value; top_k must be 1")
    if len(eps) != k:
        raise SpecError(f"{owner}: epsilon must have one value per top-k position ({k})")
    if even_odd and k != 1:
        raise SpecError(f"{owner}: even/odd p-tables need top_k=1")
    return eps, k


def _scaling(fp: object, p: object, q: object, owner: str) -> tuple[bool, float, float, float, float]:
    """(flexible, p_small, p_large, fp, q) of the scaling, else SpecError: without ``fp``
    one p for every value (simple scaling), with it the flexible function."""
    if fp is None:  # simple scaling
        if isinstance(p, Sequence):
            raise SpecError(
                f"{owner}: give fp= for the flexible scaling (with p=(p_small, p_large)), or p= one "
                "number in (0, 1] for the simple scaling"
            )
        one = _number(p, "p", low=0, high=1, low_open=True, owner=owner)
        return False, one, one, 0.0, 1.0
    fp_ = _number(fp, "fp", low=0, low_open=True, owner=owner)
    if isinstance(p, (str, bytes)) or not isinstance(p, Sequence) or len(p) != 2:
        raise SpecError(f"{owner}: p must be a pair (p_small, p_large) with 0 <= p_large <= p_small <= 1")
    ps, pl_ = (_number(v, "p", low=0, high=1, owner=owner) for v in p)
    if pl_ > ps or ps == 0:
        raise SpecError(f"{owner}: p must be a pair (p_small, p_large) with 0 <= p_large <= p_small <= 1")
    return True, ps, pl_, fp_, _number(q, "q", low=1, owner=owner)


class MagnitudeCKM:
    """The cell key method for magnitudes: parameters (R cellKey ``ck_params_nums`` with
    ``ck_flexparams`` or ``ck_simpleparams``; tau-ARGUS CKM for magnitudes).

    ``ptable``: a :class:`protab.ptable.MagnitudePTable` (type "all"), or a mapping with
    ``"even"`` and ``"odd"`` tables chosen by the parity of the number of contributors (only
    with ``top_k=1``). ``small_cells``: a numeric p-table for values below the separation
    point z_s = sqrt(m1²) / (sqrt(E) · p_small), m1² the variance of its last row and
    E = Σ ε_j² (no separation without it).

    ``variant``: which values drive the noise: ``"top_contr"`` (the ``top_k`` largest
    contributions, weighted), ``"mean"`` (the weighted cell mean), ``"range"`` (largest minus
    smallest value) or ``"sum"`` (the cell sum).

    Scaling: with ``fp`` the flexible function (``p = (p_small, p_large)``, ``q``): a value
    x below fp is scaled by p_small, above by
    m(x) = p_large · (1 + (p_small·x − p_large·fp)/(p_large·fp) · (2·fp/(fp + x))^q);
    without ``fp``, ``p`` is one number and every value is scaled by it (simple scaling).
    ``epsilon``: one weight per top-k position (the first 1, not increasing).

    ``mu_c``: extra noise (in units of the scaled size) for cells the rules mark sensitive.
    ``same_key``: the first component uses the cell key itself (True, R cellKey's default)
    or a rotated key (False, as tau-ARGUS); each further component rotates once more.
    ``zero_keys``: the cell key sums the keys of every contributor (True) or only of the
    non-zero ones (False, default).

    ``decimals``: the published perturbed sums and means are rounded to this many decimals
    (0 to 8; default 2), after perturbation: one number for every sums column, or a mapping
    column → decimals (columns it does not name take the default); None publishes them
    unrounded (as R cellKey returns them). Not a secret.
    """

    def __init__(
        self,
        ptable: "MagnitudePTable | Mapping[str, MagnitudePTable]",
        *,
        variant: str = "top_contr",
        top_k: int | None = None,
        fp: float | None = None,
        p: float | Sequence[float] = (0.25, 0.05),
        q: float = 3.0,
        epsilon: Sequence[float] | None = None,
        mu_c: float = 0.0,
        same_key: bool = True,
        zero_keys: bool = False,
        small_cells: "MagnitudePTable | None" = None,
        decimals: int | Mapping[str, int] | None = DEFAULT_DECIMALS,
    ) -> None:
        owner = "MagnitudeCKM"
        self.decimals = _decimals(decimals, owner)
        tables = _p_tables(ptable, small_cells, owner)
        if variant not in VARIANTS:
            raise SpecError(f"{owner}: variant must be one of {', '.join(VARIANTS)}, not {variant!r}")
        self.variant = variant
        self.epsilon, self.top_k = _epsilon(epsilon, top_k, variant, set(tables) == {"even", "odd"}, owner)
        self.flex, self.p_small, self.p_large, self.fp, self.q = _scaling(fp, p, q, owner)
        self.mu_c = _number(mu_c, "mu_c", low=0, owner=owner)
        for flag, value in (("same_key", same_key), ("zero_keys", zero_keys)):
            if not isinstance(value, bool):
                raise SpecError(f"{owner}: {flag} must be True or False")
        self.same_key, self.zero_keys = same_key, zero_keys
        self.tables = tables
        self.small_cells = small_cells
        if variant == "range" and small_cells is None:
            raise SpecError(
                f"{owner}: variant 'range' needs small_cells: a cell whose values are all equal (one "
                "contributor, say) has range 0, and without the small-cells table it would get no noise"
            )
        if small_cells is not None:
            E = sum(e * e for e in self.epsilon)
            self.zs = math.sqrt(small_cells.variance()) / (math.sqrt(E) * self.p_small)
        else:
            self.zs = 0.0

    def __repr__(self) -> str:
        return (f"MagnitudeCKM(variant={self.variant!r}, top_k={self.top_k}, decimals={self.decimals!r}; "
                "parameters hidden)")

    def decimals_for(self, column: str) -> int | None:
        """The decimals the perturbed sum and mean of sums column ``column`` are published with."""
        if isinstance(self.decimals, Mapping):
            return self.decimals.get(column, DEFAULT_DECIMALS)
        return self.decimals

    # -- the p-tables as one relation ----------------------------------------------------
    TAB = {"all": 0, "even": 1, "odd": 2, "small_cells": 3}

    #: key buckets per pair of p-table rows in the lookup relation: few, so that the relation
    #: each component joins stays small (64: 22 % faster than 1,024 and 45 % than 65,536 at 10^6
    #: records in benchmarks/magnitude_scale.py); entries crowding a bucket deepen the CASE
    BUCKETS = 64

    def lookup_frames(self, modulus: int) -> Any:
        """The p-tables as one small relation for the SQL lookup (polars), scalar columns only.

        Per table ``tab``, pair of consecutive rows ``lo`` < ``hi`` (the last row paired with
        itself, ``hx`` = ∞: it serves every larger ratio) and key bucket ``b`` (keys k with
        k // width = b, :meth:`lookup_shape`): for each of the two rows the noise of the entry
        whose key range holds the bucket's first key (``lo_v0``, ``hi_v0``) and the next
        ``depth`` entries starting inside the bucket, by their lowest key (``lo_k1``,
        ``lo_v1``, …; NULL where there are fewer). A cell joins its segment and bucket (a hash
        join matching one row) and takes the last entry whose lowest key is at or below its
        key: a CASE of ``depth`` comparisons, no list scanned per cell."""

        return self._lookup(modulus)[0]

    def lookup_shape(self, modulus: int) -> tuple[int, int]:
        """(width of a key bucket, depth) of :meth:`lookup_frames` for ``modulus``."""
        _, width, depth = self._lookup(modulus)
        return width, depth

    def _lookup(self, modulus: int) -> tuple[Any, int, int]:
        import numpy as np
        import polars as pl

        cache = self.__dict__.setdefault("_lookups", {})
        if modulus in cache:
            return cache[modulus]
        named = list(self.tables.items()) + ([("small_cells", self.small_cells)] if self.small_cells else [])
        segments = []  # (tab, lo, hi, hx, lower bounds and noise of row lo, of row hi)
        for name, t in named:
            ks = t.keyspace(modulus).sort(["i", "klo"])
            per_row = {float(i): (g["klo"].to_numpy().astype(np.int64), g["v"].cast(pl.Float64).to_numpy())
                       for (i,), g in ks.group_by(["i"], maintain_order=True)}
            rows = sorted(per_row)
            for lo, hi in zip(rows, rows[1:] + rows[-1:]):
                segments.append((self.TAB[name], lo, hi, hi if hi > lo else math.inf, per_row[lo], per_row[hi]))
        width = -(-modulus // self.BUCKETS)
        starts = np.arange(-(-modulus // width), dtype=np.int64) * width
        depth = 0  # the most entry bounds strictly inside one bucket
        for seg in segments:
            for klo, _ in seg[4:]:
                n_inside = np.searchsorted(klo, starts + width, "left") - np.searchsorted(klo, starts, "right")
                depth = max(depth, int(n_inside.max()))
        cols: dict[str, list[Any]] = {c: [] for c in ("tab", "lo", "hi", "hx", "b")}
        for side in ("lo", "hi"):
            cols[f"{side}_v0"] = []
            for j in range(1, depth + 1):
                cols[f"{side}_k{j}"], cols[f"{side}_v{j}"] = [], []
        b = starts // width
        n_b = len(b)
        for tab, lo, hi, hx, row_lo, row_hi in segments:
            for c, value in (("tab", tab), ("lo", lo), ("hi", hi), ("hx", hx)):
                cols[c].append(np.full(n_b, value))
            cols["b"].append(b)
            for side, (klo, v) in (("lo", row_lo), ("hi", row_hi)):
                first = np.searchsorted(klo, b * width, "right") - 1  # the entry holding the bucket's first key
                cols[f"{side}_v0"].append(v[first])
                for j in range(1, depth + 1):
                    e = first + j
                    inside = (e < len(klo)) & (klo[np.minimum(e, len(klo) - 1)] < (b + 1) * width)
                    e = np.minimum(e, len(klo) - 1)
                    cols[f"{side}_k{j}"].append(np.where(inside, klo[e], -1))
                    cols[f"{side}_v{j}"].append(v[e])
        frame = pl.DataFrame({c: np.concatenate(v) for c, v in cols.items()}).with_columns(
            pl.col("tab").cast(pl.Int32),
            *[pl.when(pl.col(c) >= 0).then(pl.col(c)).otherwise(None).alias(c)
              for c in cols if "_k" in c],
        )
        cache[modulus] = (frame, width, depth)
        return cache[modulus]


def _decimals(value: object, owner: str) -> int | dict[str, int] | None:
    """``decimals`` checked: None, a whole number 0..MAX_DECIMALS, or a mapping of column names to such."""
    def one(v: object, what: str) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_DECIMALS:
            raise SpecError(f"{owner}: {what} must be a whole number from 0 to {MAX_DECIMALS} (the sums are exact "
                            f"to {MAX_DECIMALS} decimals), not {show_values([v])}")
        return v

    if value is None:
        return None
    if isinstance(value, Mapping):
        bad = [k for k in value if not isinstance(k, str) or not k]
        if bad:
            raise SpecError(f"{owner}: decimals maps sums column names to decimals; {show_values(bad)} is not a name")
        return {k: one(v, f"decimals[{k!r}]") for k, v in value.items()}
    return one(value, "decimals")


def check_ptable_kind(ptable: object, where: str) -> None:
    """PTableError when a numeric p-table is given where a count p-table is needed."""
    from protab.ptable.magnitude_ptable import MagnitudePTable

    if isinstance(ptable, MagnitudePTable):
        raise PTableError(
            f"{where}: this is a numeric (magnitude) p-table; counts need a count p-table "
            "(protab.PTable), and magnitudes take the numeric one through MagnitudeCKM"
        )
