"""The SQL of the cell key method for magnitudes (docs/methods.md §1.8) for the parameters of a
:class:`protab.magnitude.MagnitudeCKM`, as R cellKey (``ck_params_nums``) and tau-ARGUS
define it: the noise of a cell is a numeric p-table draw, looked up by the ratio of the
driving value to its scaled size and interpolated between p-table rows, times that size.
The parameters are secrets: they enter as one bound row (:func:`ckm_parameters`), never
as SQL text; the p-tables as the lookup relation of ``MagnitudeCKM.lookup_frames``."""

from __future__ import annotations

import math
from typing import Any

from protab.errors import SpecError
from protab.magnitude import MAX_TOP_K, MagnitudeCKM

PARAMETER_COLUMNS = ["_m_zs", "_m_fp", "_m_ps", "_m_pl", "_m_q", "_m_mu"] + [
    f"_m_e{j}" for j in range(1, MAX_TOP_K + 1)] + [f"_m_top{t}" for t in range(4)]

#: the columns each component adds and drops again
_TEMPORARY = "_x, _ax, _xd, _ov, _x2, _xd2, _small, _zr, _tab, _a, _v"


def rotate_sql(key: str, modulus: int, times: int = 1) -> str:
    """SQL of the base cell key ``key`` rotated ``times`` digits (docs/methods.md §1.8).

    Decimal keys (modulus 10^d), as R cellKey's ``.scramble_ckeys``: the key written as R
    writes the number (its d digits, trailing zeros dropped: w digits) moves its first digit
    to the end, and every further rotation moves the next one, the w digits kept, zeros
    included (0.0871234 → 0.871234, 0.7123408, 0.1234087). A chain therefore rotates the
    base key, never a rotated one, whose trailing zeros would be dropped. Binary keys
    (modulus 2^b): the b bits rotate left by 4 per step (one hexadecimal digit)."""
    d = round(math.log10(modulus))
    if 10**d == modulus:
        return _rotate_decimal(key, d, int(times))
    b = modulus.bit_length() - 1
    if 2**b != modulus:
        raise SpecError("the record-key modulus must be a power of 2 or of 10 for magnitude cell keys")
    s = (min(4, b - 1) * int(times)) % b if b > 1 else 0
    if s == 0:
        return key
    return f"((({key} << {s}) | ({key} >> {b - s})) & {modulus - 1})"


def _rotate_decimal(key: str, d: int, times: int) -> str:
    """:func:`rotate_sql` of a d-digit decimal key in integer arithmetic (string functions cost
    ~100× more per row): one CASE branch per printed width w (the key's trailing zeros), each
    with its rotation r = times mod w as literals: with s = 10^(d-w) and t = key // s (the w
    printed digits), ((t mod 10^(w-r))·10^r + t // 10^(w-r))·s."""
    branches = []
    for w in range(1, d + 1):
        r, scale = times % w, 10 ** (d - w)
        if r == 0:
            value = key
        else:
            t = f"({key} // {scale})" if scale > 1 else key
            value = f"(({t} % {10 ** (w - r)}) * {10 ** r} + {t} // {10 ** (w - r)})"
            value = f"({value} * {scale})" if scale > 1 else value
        test = f"{key} % {scale} = 0" if w < d else "TRUE"
        branches.append((test, value))
    cases = " ".join(f"WHEN {test} THEN {value}" for test, value in branches[:-1])
    return f"CASE WHEN {key} = 0 THEN 0 {cases} ELSE {branches[-1][1]} END"


def ckm_parameters(m: MagnitudeCKM) -> tuple[str, list[Any]]:
    """SELECT of the one-row relation of the secret parameters (bound, never in SQL text):
    zs, fp, ps, pl, q, mu, e1..e6 and the largest row i of each p-table (top0..top3)."""
    tops = {m.TAB[n]: float(max(t.frame["i"].to_list())) for n, t in m.tables.items()}
    if m.small_cells is not None:
        tops[m.TAB["small_cells"]] = float(max(m.small_cells.frame["i"].to_list()))
    eps = m.epsilon + [0.0] * (MAX_TOP_K - len(m.epsilon))
    values = [m.zs, m.fp, m.p_small, m.p_large, m.q, m.mu_c, *eps] + [tops.get(t, 0.0) for t in range(4)]
    names = ["zs", "fp", "ps", "pl", "q", "mu"] + [f"e{j}" for j in range(1, MAX_TOP_K + 1)] + [f"top{t}" for t in range(4)]
    return "SELECT " + ", ".join(f"CAST(? AS DOUBLE) AS _m_{n}" for n in names), values


def ckm_ctes(
    m: MagnitudeCKM,
    k: int,
    prev: str,
    *,
    modulus: int,
    weighted: bool,
    sensitive: str | None,
    segments: str,
    dims: int,
    top: str,
) -> tuple[list[str], str]:
    """CTEs perturbing sums variable ``k`` of the cells in ``prev`` (R cellKey's
    ``.perturb_cell_flex`` / ``.perturb_cell_simple`` as set work). ``prev`` must carry the
    parameter columns of :func:`ckm_parameters` (``_m_*``).

    Each top-k component j = 1..K (:func:`_component_ctes`) adds its noise to the running
    value x. Returns (CTEs, name of the last one); the last holds the codes
    ``_o0 … _o<dims-1>`` and ``_sp<k>``, the perturbed (weighted) sum."""
    cv = f"CAST(_sw{k} AS DOUBLE)" if weighted else f"CAST(_s{k} AS DOUBLE)"
    drivers = _drivers(m, k, cv, weighted)
    key0 = "_k" if m.zero_keys else f"_kz{k}"
    width, depth = m.lookup_shape(modulus)
    # a narrow relation: the cell's codes, its value, driving values and keys, the parameters
    # (the lists and the other variables stay behind: every join below carries only these)
    keys = [f"_ky{k}_{j}" for j in range(1, m.top_k + 1)]
    skip = f"({cv} = 0 OR {cv} IS NULL OR _z{k} = 0)"
    # component j takes the base key rotated j - 1 times (j times with same_key=False)
    shift = 0 if m.same_key else 1
    key_items = ", ".join(f"{rotate_sql(key0, modulus, shift + j)} AS {key}" for j, key in enumerate(keys))
    codes = ", ".join(f"_o{d}" for d in range(dims))
    xs = ", ".join(f"{x} AS _dx{j}" for j, x in enumerate(drivers, start=1))
    sens = f"{sensitive} AS _sn" if sensitive else "false AS _sn"
    ctes = [
        f"_q{k}_k AS (SELECT {codes}, {cv} AS _xo{k}, {skip} AS _skip{k}, {xs}, {key_items}, "
        f"_n AS _cnt, {sens}, {', '.join(PARAMETER_COLUMNS)} FROM (SELECT *, {top} AS _tl FROM {prev}))"
    ]
    src = f"_q{k}_k"
    for j in range(1, len(drivers) + 1):
        ctes += _component_ctes(m, k, j, src, keys[j - 1], width=width, depth=depth, segments=segments)
        src = f"_q{k}_{j}d"
    ctes.append(f"_q{k}_out AS (SELECT {codes}, _xo{k} AS _sp{k} FROM {src})")
    return ctes, f"_q{k}_out"


def _drivers(m: MagnitudeCKM, k: int, cv: str, weighted: bool) -> list[str]:
    """SQL of the values that drive the noise of sums variable ``k`` (``cv``: its sum), one
    per component: the top-k contributions (weighted), the mean, the range or the sum."""
    if m.variant == "top_contr":  # structs (|x|, w, x) with a weight, else the values
        return [f"(_tl[{j}].x * _tl[{j}].w)" if weighted else f"_tl[{j}]" for j in range(1, m.top_k + 1)]
    if m.variant == "mean":
        return [f"({cv} / nullif(CAST(_w AS DOUBLE), 0))" if weighted else f"({cv} / nullif(_n, 0))"]
    if m.variant == "range":
        return [f"(_mx{k} - _mn{k})" if weighted else f"(_tp{k}[1] - _tn{k}[1])"]
    return [cv]


def _component_ctes(
    m: MagnitudeCKM, k: int, j: int, src: str, key: str, *, width: int, depth: int, segments: str
) -> list[str]:
    """The four CTEs ``_q<k>_<j>a`` … ``d`` of component ``j``: it scales its driving value
    x_j to a size x_delta, looks up the noise v of the ratio |x_j / x_delta| in the numeric
    p-table (interpolating linearly between the rows around it, the same key for both rows)
    and adds sign(x)·|x_delta|·sign(v)·(μ + |v|) to the running value x, never letting a
    negative noise carry it across zero (a noise of 0 counts as positive: a sensitive cell
    gets μ even then, as in R cellKey 1.0.2)."""
    eps = f"_m_e{j}"
    if m.flex:
        # R cellKey 1.0.2: ε_j scales the flexible branch only (tau-ARGUS: every j >= 2)
        flex = ("_m_pl * (1 + ((_m_ps * _ax - _m_pl * _m_fp) / (_m_pl * _m_fp)) * "
                "pow(2 * _m_fp / (_m_fp + _ax), _m_q))")
        size = f"CASE WHEN _ax < _m_zs THEN 1.0 WHEN _ax < _m_fp THEN _x * _m_ps ELSE _x * {flex} * {eps} END"
    else:
        size = f"CASE WHEN _ax < _m_zs THEN 1.0 ELSE _x * _m_ps * {eps} END"
    if len(m.tables) == 2:
        base_tab = f"CASE WHEN _cnt % 2 = 0 THEN {m.TAB['even']} ELSE {m.TAB['odd']} END"
    else:
        base_tab = str(m.TAB["all"])
    top = "CASE _tab " + " ".join(f"WHEN {t} THEN _m_top{t}" for t in range(4)) + " END"
    return [
        f"_q{k}_{j}a AS (SELECT *, ({size}) AS _xd FROM (SELECT *, _dx{j} AS _x, abs(_dx{j}) AS _ax FROM {src}))",
        f"_q{k}_{j}b AS (SELECT *, least(abs(_xo{k} / nullif(_xd2, 0)), {top}) AS _a FROM ("
        f"SELECT *, CASE WHEN _small THEN {m.TAB['small_cells']} ELSE {base_tab} END AS _tab FROM ("
        f"SELECT *, (_ax < _m_zs OR (_ov AND abs(_x2) < _m_zs)) AS _small, "
        f"({'TRUE' if j > 1 or not m.flex else 'FALSE'} AND _ov AND abs(_x2) < _m_zs) AS _zr, "
        f"CASE WHEN _ov THEN CASE WHEN abs(_x2) < _m_zs THEN 1.0 ELSE _xo{k} END ELSE _xd END AS _xd2 FROM ("
        f"SELECT *, abs(_xo{k}) < abs(_xd) AS _ov, "
        f"CASE WHEN abs(_xo{k}) < abs(_xd) THEN _xo{k} / (_m_ps * {eps}) ELSE _x END AS _x2 "
        f"FROM _q{k}_{j}a))))",
        *_noise_ctes(k, j, key, width=width, depth=depth, segments=segments),
    ]


def _noise_ctes(k: int, j: int, key: str, *, width: int, depth: int, segments: str) -> list[str]:
    """CTEs ``_q<k>_<j>c`` (the noise ``_v``: the cell's segment and key bucket joined, the
    last entry at or below its key, interpolated between the segment's rows) and
    ``_q<k>_<j>d`` (the running value with the noise added, capped at zero)."""
    v_lo, v_hi = (
        "CASE " + " ".join(f"WHEN c.{key} >= g.{side}_k{d} THEN g.{side}_v{d}" for d in range(depth, 0, -1))
        + f" ELSE g.{side}_v0 END" if depth else f"g.{side}_v0"
        for side in ("lo", "hi")
    )
    mu = "CASE WHEN _sn THEN _m_mu ELSE 0.0 END"
    xh = (f"CASE WHEN _x IS NULL OR _zr OR _skip{k} OR _v IS NULL OR isnan(_a) THEN 0.0 "
          f"ELSE sign(_xo{k}) * abs(_xd2) * (CASE WHEN _v < 0 THEN -1 ELSE 1 END) * ({mu} + abs(_v)) END")
    capped = (f"CASE WHEN _v < 0 AND _xo{k} < 0 THEN least({xh}, -_xo{k}) "
              f"WHEN _v < 0 THEN greatest({xh}, -_xo{k}) ELSE {xh} END")
    return [
        f"_q{k}_{j}c AS (SELECT c.*, CASE WHEN g.hi = g.lo OR c._a = g.lo THEN {v_lo} "
        f"ELSE (1 - (c._a - g.lo) / (g.hi - g.lo)) * {v_lo} + ((c._a - g.lo) / (g.hi - g.lo)) * {v_hi} END AS _v "
        f"FROM _q{k}_{j}b c LEFT JOIN {segments} g ON g.tab = c._tab AND g.b = c.{key} // {width} "
        f"AND c._a >= g.lo AND c._a < g.hx)",
        f"_q{k}_{j}d AS (SELECT * EXCLUDE ({_TEMPORARY}, _xo{k}), _xo{k} + ({capped}) AS _xo{k} FROM _q{k}_{j}c)",
    ]
