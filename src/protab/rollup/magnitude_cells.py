"""Magnitude tables of a table request (docs/methods.md §1.8, §6.2): the sensitivity rules
and the cell key method for sums over the count-perturbed (or original) published cells,
and the holdings' contributions the rules may read instead of the records'."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from protab.errors import InputError, SpecError
from protab.rollup.cells import rounded, top_list
from protab.rollup.magnitude_ckm import ckm_ctes, ckm_parameters
from protab.rollup.magnitude_rules import diagnostics_sql, rules_sql
from protab.rollup.state import RunState
from protab.sqltools import quote_ident

if TYPE_CHECKING:  # pragma: no cover
    from protab.magnitude import MagnitudeCKM, SensitivityRules


class MagnitudeCells(RunState):
    """Part of :class:`TableRun`: rules and the magnitude perturbation as CTEs over cells."""

    def _perturb_magnitudes(
        self,
        base: str,
        cols: list[str],
        magnitude: MagnitudeCKM | None,
        rules: SensitivityRules | None,
        *,
        original: bool,
        diagnostics: bool = False,
    ) -> pl.DataFrame | None:
        """Rules and the magnitude perturbation over the count-perturbed cells ``base``
        (``diagnostics``: with the shares the rules read, for :meth:`sensitivity` only)."""
        spec = self.spec
        if not spec.sums:
            raise SpecError("magnitude perturbation and sensitivity rules need sums=[...] in the TableSpec")
        if rules is not None and rules.needs_nonnegative:
            self._check_nonnegative(base)
        ctes: list[str] = []
        params: list[Any] = []
        prev = base
        if self.holding is not None:
            hold = self._holdings(weights=rules.weights if rules is not None else None)
            using = ", ".join(f"_o{j}" for j in range(self.nd))
            prev = self._create("hcells", f"SELECT * FROM {base} LEFT JOIN {hold} USING ({using})")
        # each variable's top-k list, built once for the rules and the perturbation: structs
        # (|x|, w, x) with a weight, else the values alone
        n, weighted = int(self.top_k or 1), spec.weight is not None
        tops = ", ".join(f"{top_list(k, n, weighted)} AS _tl{k}" for k in range(len(spec.sums)))
        ctes.append(f"_tops AS (SELECT *, {tops} FROM {prev})")
        prev = "_tops"
        if rules is not None:
            prev = self._rules_ctes(rules, prev, ctes, params, diagnostics)
        if magnitude is not None:
            prev = self._ckm_ctes(magnitude, prev, ctes, sensitive=rules is not None)
        out = self._magnitude_values(cols, magnitude, rules, original=original, diagnostics=diagnostics)
        _, joins, order = self._decode()
        return self._emit(f"WITH {', '.join(ctes)} ", out, f"FROM {prev} c {joins} ORDER BY {order}", params)

    def _rules_ctes(
        self, rules: SensitivityRules, prev: str, ctes: list[str], params: list[Any], diagnostics: bool
    ) -> str:
        """The rules' CTEs over ``prev`` appended to ``ctes`` (stages ``_rlists<j>``, then
        ``_rnames`` with ``_rule<k>`` and with ``diagnostics`` the shares, then ``_rules`` with
        ``_sens<k>``), their parameters to ``params``; returns the name of the last."""
        weighted, holdings = self.spec.weight is not None, self.holding is not None
        stages: list[list[str]] = [[], []]
        items = []
        for k in range(len(self.spec.sums)):
            more, names, ps = rules_sql(rules, k, weighted=weighted, holdings=holdings, top=f"_tl{k}")
            for stage, extra in zip(stages, more, strict=True):
                stage += extra
            items += [f"{names} AS _rule{k}"] + (diagnostics_sql(
                rules, k, weighted=weighted, holdings=holdings, top=f"_tl{k}") if diagnostics else [])
            params += ps
        for j, stage in enumerate(s for s in stages if s):
            ctes.append(f"_rlists{j} AS (SELECT *, {', '.join(stage)} FROM {prev})")
            prev = f"_rlists{j}"
        sens = ", ".join(f"_rule{k} IS NOT NULL AS _sens{k}" for k in range(len(self.spec.sums)))
        ctes += [f"_rnames AS (SELECT *, {', '.join(items)} FROM {prev})", f"_rules AS (SELECT *, {sens} FROM _rnames)"]
        return "_rules"

    def _ckm_ctes(self, magnitude: MagnitudeCKM, prev: str, ctes: list[str], *, sensitive: bool) -> str:
        """The cell key method's CTEs over ``prev`` appended to ``ctes`` (each sums variable's
        ``_sp<k>``, joined in ``_mall``), with its lookup relation and parameters as tables;
        ``sensitive``: the cells carry the rules' verdicts. Returns the name of the last."""
        seg = self._kept("numseg", "SELECT * FROM {src}", (), magnitude.lookup_frames(self.modulus))
        select, values = ckm_parameters(magnitude)
        par = self._kept("numpar", select, values)
        ctes.append(f"_mp AS (SELECT * FROM {prev} CROSS JOIN {par})")
        using = ", ".join(f"_o{j}" for j in range(self.nd))
        outs = []
        for k in range(len(self.spec.sums)):
            more, last = ckm_ctes(
                magnitude, k, "_mp", modulus=self.modulus, weighted=self.spec.weight is not None,
                sensitive=f"_sens{k}" if sensitive else None, segments=seg,
                dims=self.nd, top=f"_tl{k}",
            )
            ctes += more
            outs.append(last)
        ctes.append(f"_mall AS (SELECT * FROM {prev} " + " ".join(f"JOIN {o} USING ({using})" for o in outs) + ")")
        return "_mall"

    def _magnitude_values(
        self, cols: list[str], magnitude: MagnitudeCKM | None, rules: SensitivityRules | None, *,
        original: bool, diagnostics: bool,
    ) -> list[str]:
        """Select items of the published magnitude table: ``cols``, then per sums column its
        original total, perturbed sum and mean, and the rules' verdicts (and shares)."""
        weighted = self.spec.weight is not None
        out = list(cols)
        for k in range(len(self.spec.sums)):
            total = f"_sw{k}" if weighted else f"_s{k}"
            if original:
                out.append(f"CAST(c.{total} AS DOUBLE) AS {total}")
            if magnitude is not None:
                # blanked with n_pert; the mean is the perturbed sum over the perturbed count
                # of the records holding a value (docs/methods.md §1.8), both rounded as declared
                sp = f"CASE WHEN c._np IS NULL THEN NULL ELSE c._sp{k} END"
                mean = f"{sp} / nullif({self._denominator(k)}, 0)"
                places = magnitude.decimals_for(self.spec.sums[k])
                out += [f"{rounded(sp, places)} AS _sp{k}", f"{rounded(mean, places)} AS _spm{k}"]
            if rules is not None:
                out += [f"c._sens{k}", f"c._rule{k}"]
                if diagnostics:
                    out += [f"c._dg{k}_{n}" for n in rules.shares] + ([f"c._fc{k}"] if rules.min_frequency else [])
        return out

    def _denominator(self, k: int) -> str:
        """The perturbed count the mean of sums column ``k`` divides by: the records holding a
        value. Under ``null_sums='error'`` (no NULL) and ``'zero'`` (NULL is the value 0) that is
        every record, ``n_pert`` (``w_pert`` weighted); under ``'omit'`` the perturbed count of
        the records with a value, ``_npv`` (weighted: their weight sum scaled by it, as ``w_pert``)."""
        weighted = self.spec.weight is not None
        if self.spec.null_sums != "omit" or self.key is None:
            return "c._wp" if weighted else "c._np"
        if weighted:
            return f"(c._npv{k} * CAST(c._wv{k} AS DOUBLE) / nullif(c._nv{k}, 0))"
        return f"c._npv{k}"

    def sensitivity(self, rules: SensitivityRules, diagnostics: bool = False) -> pl.DataFrame:
        """The published cells with their original values and the rules' verdicts (and with
        ``diagnostics`` the shares behind them)."""
        ctes, cells, params = self._cells_source()
        base = self._create("scells", f"{ctes}SELECT * FROM {cells}", params)
        cols, _, _ = self._decode()
        cols += self._value_selects(self.values)
        facts = self._perturb_magnitudes(base, cols, None, rules, original=False, diagnostics=diagnostics)
        assert facts is not None  # only a run with a sink (none here) writes its cells out instead
        return facts

    def _holdings(self, *, weights: str | None) -> str:
        """Per published cell the contributions of holdings (docs/methods.md §6.2): each
        holding's values summed over the records under the cell (margins included, by the
        roll-up with the holding as one more grouping column), then per cell ``_hn``
        (holdings), and per sums column ``_hz`` (non-zero holdings), ``_hsa`` (Σ|holding
        sum|), ``_ht`` (the top-k list of holding sums) and with weights ``_hswa``
        (Σ|holding weighted sum|)."""
        spec, h = self.spec, quote_ident(self.holding or "")
        t = self.source
        nulls = self.eng.rows(f"SELECT count(*) FROM {t} WHERE {h} IS NULL")[0][0]
        if nulls:
            raise InputError(
                f"holding column {self.holding!r} of table {self.table!r} is missing (NULL) in {nulls} "
                "record(s); give every record its contributor group (a record that is its own group "
                "can take its own id)"
            )
        raw, params = self._raw_codes()
        sums, vals = [], []
        wx = f"CAST({quote_ident(spec.weight)} AS DOUBLE)" if spec.weight is not None else "1.0"
        for k, col in enumerate(spec.sums):
            x = f"CAST(coalesce({quote_ident(col)}, 0) AS DOUBLE)" if spec.null_sums == "zero" \
                else f"CAST({quote_ident(col)} AS DOUBLE)"
            sums.append(f"sum(TRY_CAST({x} AS DECIMAL(38, 8))) AS _hx{k}")
            vals.append(f"_hx{k}")
            if weights is not None:
                sums.append(f"sum(TRY_CAST({x} * {wx} AS DECIMAL(38, 8))) AS _hwx{k}")
                vals.append(f"_hwx{k}")
        rows = (f"SELECT {', '.join(f'CAST(_r{j} AS VARCHAR) AS _d{j}' for j in range(self.nd))}, _h, "
                f"{', '.join(vals)} FROM (SELECT {', '.join(raw)}, CAST({h} AS VARCHAR) AS _h, {', '.join(sums)} "
                f"FROM {t} GROUP BY ALL)")
        ids = ", ".join(f"c{j}.ord AS _o{j}" for j in range(self.nd))
        joins = " ".join(f"JOIN {c} c{j} ON i._d{j} = c{j}.code" for j, c in enumerate(self.codes))
        inner = self._create("hinner", f"SELECT {ids}, i._h, {', '.join('i.' + v for v in vals)} FROM ({rows}) i {joins}",
                             params)
        ctes, last, rparams = self._rollup_ctes(inner, vals, keys=["_h"])
        aggs = ["count(*) AS _hn"]
        for k in range(len(spec.sums)):
            x = f"CAST(_hx{k} AS DOUBLE)"
            aggs += [
                f"count(*) FILTER (WHERE {x} <> 0) AS _hz{k}",
                f"CAST(sum(abs(_hx{k})) AS DOUBLE) AS _hsa{k}",  # exact: the same in any order
                f"max({{'a': abs({x}), 'w': 1.0, 'x': {x}}}, {int(self.top_k or 1)}) AS _ht{k}",
            ]
            if weights is not None:
                aggs.append(f"CAST(sum(abs(_hwx{k})) AS DOUBLE) AS _hswa{k}")
        group = ", ".join(f"_o{j}" for j in range(self.nd))
        return self._create("hold", f"{ctes}SELECT {group}, {', '.join(aggs)} FROM {last} GROUP BY {group}", rparams)
