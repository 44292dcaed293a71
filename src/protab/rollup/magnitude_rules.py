"""The SQL of the primary sensitivity rules of magnitude tables (docs/methods.md §6.2) for
the parameters of a :class:`protab.magnitude.SensitivityRules`: minimum frequency,
(n, k)-dominance, the p% rule and its (p, q) form, zero cells — as tau-ARGUS and SSB's
GaussSuppression define them. The rules are the macros of ``sql/protab.sql`` over the
columns of one scan (:func:`protab.rollup.cells.value_columns`); thresholds are bound
parameters, never SQL text."""

from __future__ import annotations

from typing import Any

from protab.magnitude import SensitivityRules


def rule_columns(
    rules: SensitivityRules, k: int, weighted: bool, holdings: bool, top: str
) -> tuple[str | None, str, str, str]:
    """(weights, top list, total X, contributors) as SQL for sums variable ``k``."""
    weights = rules.weights if weighted else None
    if holdings:
        t, total, nonzero, everyone = f"_ht{k}", f"_hsa{k}", f"_hz{k}", "_hn"
        if weights == "default":
            total = f"_hswa{k}"
    else:
        t, total, nonzero, everyone = f"({top})", f"CAST(_s{k} AS DOUBLE)", f"_z{k}", "_n"
        if weights is not None:
            total = f"CAST(_sw{k} AS DOUBLE)"
    return weights, t, total, nonzero if rules.convention == "gauss" else everyone


def share_sql(k: int, n: int, weights: str | None, total: str) -> str:
    """The share of the n largest contributions (tau-ARGUS weighting: its stage column)."""
    if weights == "tauargus":
        return f"protab_dominance_ratio(_rwl{k}_{n}, {total}, 1)"
    return f"protab_dominance_ratio(_rx{k}, {total}, {n})"


def rules_sql(
    rules: SensitivityRules, k: int, *, weighted: bool, holdings: bool, top: str
) -> tuple[list[list[str]], str, list[Any]]:
    """(stages, rule names, parameters) as SQL over the columns of sums variable ``k``:
    ``stages`` are select items to compute first, stage after stage (the top list's values
    ``_rx<k>`` and weights ``_rw<k>``, then tau-ARGUS's weighted sums of the largest), which
    the rules' macros then take as plain columns (Spark takes no lambda, nor a SQL function
    holding one, inside the argument of a SQL function). The rule names are the rules a cell
    fails, comma-separated, NULL for none: a cell is sensitive exactly when they are not
    NULL (each rule judged once).

    Columns read: records ``top`` (SQL of the top list), ``_s<k>`` (Σ x), ``_sw<k>`` (Σ w·x),
    ``_z<k>`` / ``_n`` (non-zero / all contributors); with ``holdings`` the holdings'
    ``_ht<k>``, ``_hsa<k>``, ``_hswa<k>``, ``_hz<k>``, ``_hn``."""
    weights, t, total, contributors = rule_columns(rules, k, weighted, holdings, top)
    # holdings: |holding sums| over Σ|holding sums|; records: the signed values of the
    # records of largest |x| over the signed total (GaussSuppression 1.2.3 on its data)
    # (unweighted tables' top lists are the values already)
    lists = [f"{t} AS _rx{k}" if not (holdings or weighted) else
             f"list_transform({t}, lambda e: e.{'a' if holdings else 'x'}) AS _rx{k}"]
    largest: list[str] = []
    if weights == "tauargus":  # each share's weighted sum of the largest, a one-element list
        lists += [f"list_transform({t}, lambda e: e.x) AS _rxs{k}", f"list_transform({t}, lambda e: e.w) AS _rw{k}"]
        largest = [f"[protab_weighted_largest(_rxs{k}, _rw{k}, {n})] AS _rwl{k}_{n}" for n in rules.shares]

    def ratio(n: int) -> str:
        return share_sql(k, n, weights, total)

    # the macros of sql/protab.sql, the same SQL a duckdb CLI user calls
    conds: list[tuple[str, str, list[Any]]] = []
    if rules.min_frequency is not None:
        conds.append((f"protab_frequency_rule({contributors}, ?)", "frequency", [rules.min_frequency]))
    cmp = ">=" if rules.convention == "gauss" else ">"
    for n, kk in rules.dominance:
        conds.append((f"({ratio(n)} {cmp} CAST(? AS DOUBLE) / 100)", f"dominance({n})", [kk]))
    for name, num, den in (("p%", rules.p_percent, 100.0), ("pq", *(rules.pq or (None, None)))):
        if num is not None:
            conds.append((f"(abs(1 - {ratio(2)}) < abs(CAST(? AS DOUBLE) / ? * {ratio(1)}))", name, [num, den]))
    if rules.zero:
        conds.append((f"({total} = 0 OR {total} IS NULL)", "zero", []))
    names = "concat_ws(',', " + ", ".join(f"CASE WHEN {c} THEN '{name}' END" for c, name, _ in conds) + ")"
    params = [p for _, _, ps in conds for p in ps]
    return [lists, largest], f"nullif({names}, '')", params


def diagnostics_sql(rules: SensitivityRules, k: int, *, weighted: bool, holdings: bool, top: str) -> list[str]:
    """Select items, beside :func:`rules_sql`'s, of what the verdicts of sums variable ``k``
    read: ``_dg<k>_<n>``, the share of the n largest contributions in X for each n of
    ``rules.shares`` (GaussSuppression's ``dominant1``/``dominant2``, weighted and of
    holdings as the rules take them), and ``_fc<k>``, the contributors the frequency rule
    counts."""
    weights, _, total, contributors = rule_columns(rules, k, weighted, holdings, top)
    items = [f"{share_sql(k, n, weights, total)} AS _dg{k}_{n}" for n in rules.shares]
    if rules.min_frequency is not None:
        items.append(f"{contributors} AS _fc{k}")
    return items
