"""Step 1-3 of a swap (docs/swapping.md, *The algorithm*): one row per household with its size,
geography, similarity and carry-along values, its risk and swap level per geography level, and
its random keys (SHA-256 of the seed and the household id, cut into uniform numbers)."""

from __future__ import annotations

from protab.errors import InputError, show_values
from protab.sqltools import quote_ident as q
from protab.swapping.work import Work

_HEX = 13  # hexadecimal digits (52 bits) of SHA-256 per uniform number
_UNIT = repr(2.0 ** (-4 * _HEX))  # a DOUBLE literal (a decimal one makes DuckDB compute in DECIMAL)
TAG = "protab-swap"


class Households(Work):
    """The households of the swap and their work table."""

    def build_households(self) -> None:
        """One row per household: size, geography, similar and carry-along values, risk and
        swap level per geography level, and its random keys."""
        s, src = self.spec, q(self.table)
        geo = list(s.geography)
        hid = q(s.household)
        const = list(dict.fromkeys(list(s.similar_columns()) + list(s.carry_along)))
        if s.risk:
            risk_cols = [f"max(CAST(t.{q(c)} AS DOUBLE)) AS r{h}" for h, c in enumerate(s.risk)]
            join = ""
        else:
            risk_cols, join = self.risk_counts()
        geo_bad = " OR ".join(f"min(t.{q(g)}) <> max(t.{q(g)})" for g in geo)
        const_cols = []
        for i, c in enumerate(const):
            const_cols.append(f"min(t.{q(c)}) AS v{i}")
            const_cols.append(
                f"(min(t.{q(c)}) IS DISTINCT FROM max(t.{q(c)}) OR count(t.{q(c)}) NOT IN (0, count(*))) AS bad{i}"
            )
        self.const = const
        self.create(
            "hh",
            f"SELECT t.{hid} AS hid, count(*) AS size, "
            + ", ".join(f"min(t.{q(g)}) AS g{h}" for h, g in enumerate(geo))
            + f", ({geo_bad}) AS geo_bad, "
            + ", ".join(risk_cols + const_cols)
            + f" FROM {src} t {join} GROUP BY t.{hid}",
        )
        self.check_households()
        self.build_work()
        self.bookkeeping_tables()

    def risk_counts(self) -> tuple[list[str], str]:
        """The records counted per combination of risk variables and geography, summed over
        every coarser level (window sums): the household's risk columns and the join."""
        s = self.spec
        geo, rv = list(s.geography), list(s.risk_variables)
        keys = rv + geo
        parts = [
            f"sum(n) OVER (PARTITION BY {', '.join(q(c) for c in rv + geo[: h + 1])}) AS c{h}" for h in range(len(geo))
        ]
        self.create(
            "cells",
            f"SELECT {', '.join(q(c) for c in keys)}, {', '.join(parts)} "
            f"FROM (SELECT {', '.join(q(c) for c in keys)}, count(*) AS n FROM {q(self.table)} GROUP BY ALL)",
        )
        cond = " AND ".join(f"t.{q(c)} IS NOT DISTINCT FROM k.{q(c)}" for c in keys)
        join = f"JOIN {self.t('cells')} k ON {cond}"
        return [f"CAST(1 AS DOUBLE) / min(k.c{h}) AS r{h}" for h in range(len(geo))], join

    def ids(self, key: str, columns: str) -> None:
        """The work table ``key``: the distinct ``columns`` of the households numbered in order
        (then joined: an unpartitioned window over every household runs on one thread)."""
        self.create(
            key,
            f"SELECT {columns}, row_number() OVER (ORDER BY {columns}) AS id "
            f"FROM (SELECT DISTINCT {columns} FROM {self.t('hh')})",
        )

    def build_work(self) -> None:
        """The work table: per household its area id per level, class id per similarity profile,
        risk and swap level, and its random keys."""
        s, const = self.spec, self.const
        L = len(s.geography)
        joins, area, cls = [], [], []
        for h in range(L):
            gs = ", ".join(f"g{j}" for j in range(h + 1))
            self.ids(f"area{h}", gs)
            joins.append(f"JOIN {self.t(f'area{h}')} A{h} ON " + " AND ".join(f"A{h}.g{j} = hh.g{j}" for j in range(h + 1)))
            area.append(f"A{h}.id AS a{h}")
        for p, prof in enumerate(s.similar):
            if not prof:
                cls.append(f"1 AS k{p}")
                continue
            self.ids(f"class{p}", ", ".join(f"v{const.index(c)}" for c in prof))
            on = " AND ".join(f"K{p}.v{const.index(c)} IS NOT DISTINCT FROM hh.v{const.index(c)}" for c in prof)
            joins.append(f"JOIN {self.t(f'class{p}')} K{p} ON {on}")
            cls.append(f"K{p}.id AS k{p}")
        thr = s.threshold
        level = "CASE " + " ".join(f"WHEN r{h} > {thr!r} THEN {h}" for h in range(L)) + f" ELSE {L} END"
        n_uniform = L + 1  # a donor key per level and a draw key for the top-up
        digests = [
            f"sha256(CAST(? AS VARCHAR) || chr(31) || '{TAG}' || chr(31) || '{d}' || chr(31) || CAST(hid AS VARCHAR))"
            f" AS d{d}"
            for d in range((n_uniform + 3) // 4)
        ]
        # risk/Exp(1); a zero risk (given risk columns) becomes tiny so that its keys stay distinct;
        # the logarithms in plain double arithmetic: the same keys on every engine
        dkeys = [f"greatest(r{h}, 1e-300) / -ln_u{h} AS dkey{h}" for h in range(L)]
        skey = f"greatest(r{L - 1}, 1e-300) / -ln_u{L} AS skey"
        inner = (f"SELECT hh.*, {', '.join(area + cls)}, {', '.join(digests)} FROM {self.t('hh')} hh "
                 f"{' '.join(joins)}")
        logs = self.eng.ln_columns(inner, {f"ln_u{j}": self.uniform(j) for j in range(n_uniform)})
        self.create(
            "w",
            "SELECT hid, size, "
            + ", ".join([f"a{h}" for h in range(L)] + [f"k{p}" for p in range(len(s.similar))])
            + ", "
            + ", ".join(f"r{h}" for h in range(L))
            + f", {level} AS level, {', '.join(dkeys)}, {skey} FROM ({logs}) AS logs",
            [self.seed] * len(digests),
        )

    def uniform(self, j: int) -> str:
        """SQL of the household's j-th uniform number in (0, 1): 52 bits of its digest, exact."""
        bits = self.eng.hex_integer(f"substr(d{j // 4}, {1 + _HEX * (j % 4)}, {_HEX})")
        return f"((CAST({bits} AS DOUBLE) + 0.5) * {_UNIT})"

    def bookkeeping_tables(self) -> None:
        """Households done, pairs, households without donor and those left by the cap."""
        hid = self.hid_type
        self.empty("done", [("hid", hid)])
        self.empty("pairs", [("rid", hid), ("did", hid), ("level", "INTEGER"), ("profile", "INTEGER"),
                             ("reason", "VARCHAR")])
        self.empty("failed", [("hid", hid), ("level", "INTEGER"), ("reason", "VARCHAR")])
        self.empty("capped", [("hid", hid), ("level", "INTEGER")])

    def check_households(self) -> None:
        s, hh = self.spec, self.t("hh")
        n_bad = self.one(f"SELECT count(*) FROM {hh} WHERE geo_bad")
        if n_bad:
            geo = ", ".join(q(g) for g in s.geography)
            rows = self.rows(
                f"SELECT {q(s.household)}, count(*), count(DISTINCT ({geo})) FROM {q(self.table)} "
                f"WHERE {q(s.household)} IN (SELECT hid FROM {hh} WHERE geo_bad ORDER BY hid LIMIT 5) "
                f"GROUP BY 1 ORDER BY 1"
            )
            shown = "; ".join(f"household {r[0]!r}: {r[1]} members in {r[2]} areas" for r in rows)
            raise InputError(
                f"table {self.table!r}: the members of {n_bad} household(s) (column {s.household!r}) disagree on "
                f"the geography {list(s.geography)} ({shown}{'; …' if n_bad > len(rows) else ''}); every member "
                "of a household must have the same geography"
            )
        for i, c in enumerate(self.const):
            n_bad = self.one(f"SELECT count(*) FROM {hh} WHERE bad{i}")
            if n_bad:
                ids = [r[0] for r in self.rows(f"SELECT hid FROM {hh} WHERE bad{i} ORDER BY hid LIMIT 5")]
                what = "a similarity" if c in self.spec.similar_columns() else "a carry-along"
                raise InputError(
                    f"table {self.table!r}: column {c!r} ({what} variable) differs between the members of "
                    f"{n_bad} household(s) (households {show_values(ids)}); it must be a household-level "
                    "variable (one value per household)"
                )
