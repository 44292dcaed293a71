"""Targeted record swapping (TRS) of households as set work in DuckDB SQL.

Follows the census handbook's targeted record swapping (Eurostat recommendation for the 2021
round; docs/methods.md §6.1) with the semantics of sdcMicro's ``recordSwap`` (docs/swapping.md):
a household's risk at geography level h is 1/count of the records that share its risk
variables inside its level-h area (maximum over its members); a household is *risky* at the
first (coarsest) level where that risk exceeds 1/k (a count below k); risky households are
swapped, level by level from the coarsest, with a donor household outside their level-h area
that agrees on a similarity profile (fallback profiles in order), donors drawn with probability
proportional to their risk; at the finest level random households (weighted by their risk) top
the swaps up to the global swap rate (every risky household is swapped, so the achieved rate can
be far above it: SwapRateWarning; ``SwapSpec.max_swap_rate`` caps it, riskiest households
first). A swap exchanges the geography (and the carry-along
variables) of two whole households. Every random choice is a keyed hash (SHA-256) of the seed
and the household id, so the result depends on nothing but the data and the seed.

The matching of recipients with donors runs in rounds of proposals (each recipient proposes to
one donor; a proposal is kept where it is the best one touching both of its households, which
makes the kept proposals a matching); a loop over geography levels, profiles and a bounded
number of rounds is the only Python loop. The spec lives in ``protab.swapping.spec``, the input
checks and the writing of results (permanent or temporary, ``persist_swap``) in
``protab.swapping.writing``; both are re-exported here.
"""

from __future__ import annotations

import math
import uuid
import warnings
from collections.abc import Sequence
from typing import Any

import duckdb

from protab._sql import quote_ident as q
from protab.errors import InputError, SpecError, show_values
from protab.swapping.spec import SwapSpec
from protab.swapping.writing import (
    check_columns,
    check_names,
    check_seed,
    check_values,
    discard_swap,
    persist_swap,
    relation_kind,
    write_results,
)

__all__ = ["SwapRateWarning", "SwapSpec", "discard_swap", "persist_swap", "swap"]


class SwapRateWarning(UserWarning):
    """The risky households alone made the achieved swap rate exceed the requested one (every
    risky household is swapped, as sdcMicro's recordSwap does); ``SwapSpec(max_swap_rate=...)``
    caps it."""


_PROPOSAL_ROUNDS = 6  # rounds of proposals to the best-ranked donors (risk-weighted order)
_RESCUE_ROUNDS = 64  # rounds of proposals over every donor outside the area, until none is left
_TOPUP_ROUNDS = 64  # draws of further households until the swap rate is reached (each draw pairs or
# fails at least one household, so the loop ends long before on real data)
_CANDIDATES = 3  # the best `_CANDIDATES * m + 8` donors of a class serve its m recipients first
_HEX = 13  # hexadecimal digits (52 bits) of SHA-256 per uniform number
_UNIT = repr(2.0 ** (-4 * _HEX))  # a DOUBLE literal (a decimal one makes DuckDB compute in DECIMAL)
_TAG = "protab-swap"


# -- the run --------------------------------------------------------------------------------


class _Run:
    """One swap: temporary work tables on the caller's connection, dropped at the end."""

    def __init__(self, con: duckdb.DuckDBPyConnection, table: str, spec: SwapSpec, seed: str) -> None:
        self.con, self.table, self.spec, self.seed = con, table, spec, seed
        self.prefix = f"_protab_swap_{uuid.uuid4().hex}"
        self.tmp: list[str] = []
        self.rounds = 0
        self.round_limit_hit = False
        self.cols: dict[str, str] = {}  # the input's columns and types
        self.columns: list[str] = []
        self.const: list[str] = []  # similarity and carry-along columns, household-level
        self.props_params: list[Any] = []
        self.target = self.n_hh = 0
        self.cap: int | None = None  # the most households swapped (SwapSpec.max_swap_rate)

    def t(self, name: str) -> str:
        full = f"{self.prefix}_{name}"
        if full not in self.tmp:
            self.tmp.append(full)
        return q(full)

    def x(self, sql: str, params: Sequence[Any] | None = None) -> duckdb.DuckDBPyConnection:
        return self.con.execute(sql, list(params) if params is not None else None)

    def one(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        return self.x(sql, params).fetchall()[0][0]

    def close(self) -> None:
        for name in reversed(self.tmp):
            try:
                self.con.execute(f"DROP TABLE IF EXISTS {q(name)}")
            except duckdb.Error:  # pragma: no cover - the connection is gone
                pass

    # -- households -------------------------------------------------------------------------
    def build_households(self) -> None:
        """One row per household: size, geography, similar and carry-along values, risk and
        swap level per geography level, and its random keys."""
        s, src = self.spec, q(self.table)
        geo, rv = list(s.geography), list(s.risk_variables)
        L = len(geo)
        hid = q(s.household)
        sims = list(s.similar_columns())
        carry = list(s.carry_along)
        const = list(dict.fromkeys(sims + carry))
        if s.risk:
            risk_cols = [f"max(CAST(t.{q(c)} AS DOUBLE)) AS r{h}" for h, c in enumerate(s.risk)]
            join = ""
        else:
            keys = rv + geo
            cells = self.t("cells")
            parts = [
                f"sum(n) OVER (PARTITION BY {', '.join(q(c) for c in rv + geo[: h + 1])}) AS c{h}" for h in range(L)
            ]
            self.x(
                f"CREATE TEMP TABLE {cells} AS SELECT {', '.join(q(c) for c in keys)}, {', '.join(parts)} "
                f"FROM (SELECT {', '.join(q(c) for c in keys)}, count(*) AS n FROM {src} GROUP BY ALL)"
            )
            cond = " AND ".join(f"t.{q(c)} IS NOT DISTINCT FROM k.{q(c)}" for c in keys)
            join = f"JOIN {cells} k ON {cond}"
            risk_cols = [f"CAST(1 AS DOUBLE) / min(k.c{h}) AS r{h}" for h in range(L)]
        geo_bad = " OR ".join(f"min(t.{q(g)}) <> max(t.{q(g)})" for g in geo)
        const_cols = []
        for i, c in enumerate(const):
            const_cols.append(f"min(t.{q(c)}) AS v{i}")
            const_cols.append(
                f"(min(t.{q(c)}) IS DISTINCT FROM max(t.{q(c)}) OR count(t.{q(c)}) NOT IN (0, count(*))) AS bad{i}"
            )
        self.const = const
        hh = self.t("hh")
        self.x(
            f"CREATE TEMP TABLE {hh} AS SELECT t.{hid} AS hid, count(*) AS size, "
            + ", ".join(f"min(t.{q(g)}) AS g{h}" for h, g in enumerate(geo))
            + f", ({geo_bad}) AS geo_bad, "
            + ", ".join(risk_cols + const_cols)
            + f" FROM {src} t {join} GROUP BY t.{hid}"
        )
        self.check_households()
        self.build_work()
        self.bookkeeping_tables()

    def build_work(self) -> None:
        """The work table: per household its area id per level, class id per similarity profile,
        risk and swap level, and its random keys."""
        s, hh, const = self.spec, self.t("hh"), self.const
        L = len(s.geography)
        # work table: area ids per level, class ids per profile (numbered over the distinct
        # values, then joined: an unpartitioned window over every household runs on one thread)
        joins, area, cls = [], [], []
        for h in range(L):
            gs = ", ".join(f"g{j}" for j in range(h + 1))
            ids = self.t(f"area{h}")
            self.x(
                f"CREATE TEMP TABLE {ids} AS SELECT {gs}, row_number() OVER (ORDER BY {gs}) AS id "
                f"FROM (SELECT DISTINCT {gs} FROM {hh})"
            )
            joins.append(f"JOIN {ids} A{h} ON " + " AND ".join(f"A{h}.g{j} = hh.g{j}" for j in range(h + 1)))
            area.append(f"A{h}.id AS a{h}")
        for p, prof in enumerate(s.similar):
            if not prof:
                cls.append(f"1 AS k{p}")
                continue
            vs = ", ".join(f"v{const.index(c)}" for c in prof)
            ids = self.t(f"class{p}")
            self.x(
                f"CREATE TEMP TABLE {ids} AS SELECT {vs}, row_number() OVER (ORDER BY {vs}) AS id "
                f"FROM (SELECT DISTINCT {vs} FROM {hh})"
            )
            on = " AND ".join(f"K{p}.v{const.index(c)} IS NOT DISTINCT FROM hh.v{const.index(c)}" for c in prof)
            joins.append(f"JOIN {ids} K{p} ON {on}")
            cls.append(f"K{p}.id AS k{p}")
        thr = s.threshold
        level = "CASE " + " ".join(f"WHEN r{h} > {thr!r} THEN {h}" for h in range(L)) + f" ELSE {L} END"
        n_uniform = L + 1  # a donor key per level and a draw key for the top-up
        digests = [
            f"sha256(CAST(? AS VARCHAR) || chr(31) || '{_TAG}' || chr(31) || '{d}' || chr(31) || CAST(hid AS VARCHAR))"
            f" AS d{d}"
            for d in range((n_uniform + 3) // 4)
        ]

        def uniform(j: int) -> str:
            bits = f"CAST('0x' || substr(d{j // 4}, {1 + _HEX * (j % 4)}, {_HEX}) AS UBIGINT)"
            return f"((CAST({bits} AS DOUBLE) + 0.5) * {_UNIT})"

        # risk/Exp(1); a zero risk (given risk columns) becomes tiny so that its keys stay distinct
        dkeys = [f"greatest(r{h}, 1e-300) / -ln({uniform(h)}) AS dkey{h}" for h in range(L)]
        skey = f"greatest(r{L - 1}, 1e-300) / -ln({uniform(L)}) AS skey"
        w = self.t("w")
        self.x(
            f"CREATE TEMP TABLE {w} AS SELECT hid, size, "
            + ", ".join([f"a{h}" for h in range(L)] + [f"k{p}" for p in range(len(s.similar))])
            + ", "
            + ", ".join(f"r{h}" for h in range(L))
            + f", {level} AS level, {', '.join(dkeys)}, {skey} FROM (SELECT hh.*, {', '.join(area + cls)}, "
            + f"{', '.join(digests)} FROM {hh} hh {' '.join(joins)})",
            [self.seed] * len(digests),
        )

    def bookkeeping_tables(self) -> None:
        """Households done, pairs, households without donor and those left by the cap."""
        self.x(f"CREATE TEMP TABLE {self.t('done')} (hid {self.hid_type})")
        self.x(
            f"CREATE TEMP TABLE {self.t('pairs')} (rid {self.hid_type}, did {self.hid_type}, level INTEGER, "
            "profile INTEGER, reason VARCHAR)"
        )
        self.x(f"CREATE TEMP TABLE {self.t('failed')} (hid {self.hid_type}, level INTEGER, reason VARCHAR)")
        self.x(f"CREATE TEMP TABLE {self.t('capped')} (hid {self.hid_type}, level INTEGER)")

    def check_households(self) -> None:
        s, hh = self.spec, self.t("hh")
        n_bad = self.one(f"SELECT count(*) FROM {hh} WHERE geo_bad")
        if n_bad:
            geo = ", ".join(q(g) for g in s.geography)
            rows = self.x(
                f"SELECT {q(s.household)}, count(*), count(DISTINCT ({geo})) FROM {q(self.table)} "
                f"WHERE {q(s.household)} IN (SELECT hid FROM {hh} WHERE geo_bad ORDER BY hid LIMIT 5) "
                f"GROUP BY 1 ORDER BY 1"
            ).fetchall()
            shown = "; ".join(f"household {r[0]!r}: {r[1]} members in {r[2]} areas" for r in rows)
            raise InputError(
                f"table {self.table!r}: the members of {n_bad} household(s) (column {s.household!r}) disagree on "
                f"the geography {list(s.geography)} ({shown}{'; …' if n_bad > len(rows) else ''}); every member "
                "of a household must have the same geography"
            )
        for i, c in enumerate(self.const):
            n_bad = self.one(f"SELECT count(*) FROM {hh} WHERE bad{i}")
            if n_bad:
                ids = [r[0] for r in self.x(f"SELECT hid FROM {hh} WHERE bad{i} ORDER BY hid LIMIT 5").fetchall()]
                what = "a similarity" if c in self.spec.similar_columns() else "a carry-along"
                raise InputError(
                    f"table {self.table!r}: column {c!r} ({what} variable) differs between the members of "
                    f"{n_bad} household(s) (households {show_values(ids)}); it must be a household-level "
                    "variable (one value per household)"
                )

    # -- matching ---------------------------------------------------------------------------
    def rec_order(self, context: str) -> str:
        """Per-round random order of recipients: a keyed hash of (seed, round, household)."""
        return (
            f"sha256(CAST(? AS VARCHAR) || chr(31) || '{_TAG}-round' || chr(31) || '{context}' || chr(31) "
            "|| CAST(r.hid AS VARCHAR)), r.hid"
        )

    def keep(self, props: str, level: int, profile: int, reason: str) -> int:
        """Keep the proposals (rid, did, i) that are the best (smallest i) of every proposal
        touching either household: they form a matching. Returns how many pairs were kept."""
        kept = self.t("kept")
        self.x(
            f"CREATE OR REPLACE TEMP TABLE {kept} AS WITH p AS ({props}), "
            "e AS (SELECT rid AS x, i FROM p UNION ALL SELECT did AS x, i FROM p), "
            "b AS (SELECT x, min(i) AS m FROM e GROUP BY x) "
            "SELECT p.rid, p.did FROM p JOIN b b1 ON b1.x = p.rid AND b1.m = p.i "
            "JOIN b b2 ON b2.x = p.did AND b2.m = p.i",
            self.props_params,
        )
        n = int(self.one(f"SELECT count(*) FROM {kept}"))
        if n:
            self.x(
                f"INSERT INTO {self.t('pairs')} SELECT rid, did, ?, ?, ? FROM {kept}",
                [level, profile, reason],
            )
            self.x(f"INSERT INTO {self.t('done')} SELECT rid FROM {kept} UNION ALL SELECT did FROM {kept}")
        self.rounds += 1
        return n

    def match(self, rec: str, level: int, reason: str) -> None:
        """Find donors for the households in table ``rec`` (hid) across level ``level``: per
        similarity profile, rounds of proposals to the best donors by risk-weighted key, then
        rounds over every donor outside the area until no recipient has one; recipients left
        are logged as without donor."""
        w, done = self.t("w"), self.t("done")
        area, dkey = f"a{level}", f"dkey{level}"
        avail = f"(SELECT * FROM {w} WHERE hid NOT IN (SELECT hid FROM {done}))"
        active = f"(SELECT hid FROM {rec} WHERE hid NOT IN (SELECT hid FROM {done}))"
        for p in range(len(self.spec.similar)):
            cls = f"k{p}"
            if not self.one(f"SELECT count(*) FROM {active}"):
                break
            # the best donors of each class by key risk/Exp(1) (Efraimidis–Spirakis): the
            # recipients' first choices, as sdcMicro scans its donors from the largest key
            cand = self.t("cand")
            self.x(
                f"CREATE OR REPLACE TEMP TABLE {cand} AS WITH m AS (SELECT w.{cls} AS cls, "
                f"{_CANDIDATES} * count(*) + 8 AS m FROM {w} w SEMI JOIN {active} r ON w.hid = r.hid GROUP BY 1), "
                f"top AS (SELECT a.{cls} AS cls, unnest(arg_max(a.hid, a.{dkey}, (SELECT max(m) + 16 FROM m))) AS hid "
                f"FROM {avail} a SEMI JOIN m ON a.{cls} = m.cls GROUP BY 1) "
                f"SELECT w.hid, w.{area} AS area, w.{cls} AS cls, w.{dkey} AS dkey FROM top JOIN {w} w ON w.hid = top.hid "
                f"JOIN m ON m.cls = top.cls "
                f"QUALIFY row_number() OVER (PARTITION BY top.cls ORDER BY w.{dkey} DESC, w.hid DESC) <= any_value(m.m) "
                f"OVER (PARTITION BY top.cls)"
            )
            for t in range(_PROPOSAL_ROUNDS):
                ctx = f"{level}:{p}:{reason}:a{t}:{self.rounds}"
                props = (
                    f"SELECT r.hid AS rid, c.hid AS did, r.i FROM ("
                    f"SELECT r.hid, w.{area} AS area, w.{cls} AS cls, row_number() OVER "
                    f"(PARTITION BY w.{cls} ORDER BY {self.rec_order(ctx)}) AS i "
                    f"FROM {active} r JOIN {w} w ON w.hid = r.hid) r JOIN ("
                    f"SELECT *, row_number() OVER (PARTITION BY cls ORDER BY dkey DESC, hid DESC) AS j FROM {cand} "
                    f"WHERE hid NOT IN (SELECT hid FROM {done})) c ON c.cls = r.cls AND c.j = r.i "
                    "WHERE c.hid <> r.hid AND c.area <> r.area"
                )
                self.props_params = [self.seed]
                if not self.keep(props, level, p, reason) or not self.one(f"SELECT count(*) FROM {active}"):
                    break
            if not self.one(f"SELECT count(*) FROM {active}"):
                break
            # every donor outside the area: order the class's donors by (area, key); the k-th
            # donor outside area a sits at position k, or k + (donors in a) past a's block
            for t in range(_RESCUE_ROUNDS):
                ctx = f"{level}:{p}:{reason}:b{t}:{self.rounds}"
                pool = self.t("pool")
                self.x(
                    f"CREATE OR REPLACE TEMP TABLE {pool} AS SELECT a.hid, a.{area} AS area, a.{cls} AS cls, "
                    f"row_number() OVER (PARTITION BY a.{cls} ORDER BY a.{area}, a.{dkey} DESC, a.hid) AS pos "
                    f"FROM {avail} a WHERE a.{cls} IN (SELECT w.{cls} FROM {w} w SEMI JOIN {active} r ON w.hid = r.hid)"
                )
                props = (
                    f"WITH blk AS (SELECT cls, area, min(pos) - 1 AS start, count(*) AS size FROM {pool} GROUP BY ALL), "
                    f"n AS (SELECT cls, count(*) AS n FROM {pool} GROUP BY ALL), "
                    f"r AS (SELECT r.hid, w.{area} AS area, w.{cls} AS cls, row_number() OVER "
                    f"(PARTITION BY w.{cls} ORDER BY {self.rec_order(ctx)}) AS i "
                    f"FROM {active} r JOIN {w} w ON w.hid = r.hid), "
                    "rk AS (SELECT r.hid, r.cls, r.i, blk.start, blk.size, ((r.i - 1) % (n.n - blk.size)) + 1 AS k "
                    "FROM r JOIN blk ON blk.cls = r.cls AND blk.area = r.area JOIN n ON n.cls = r.cls "
                    "WHERE n.n > blk.size) "
                    "SELECT rk.hid AS rid, pl.hid AS did, rk.i FROM rk JOIN "
                    f"{pool} pl ON pl.cls = rk.cls AND pl.pos = CASE WHEN rk.k <= rk.start THEN rk.k "
                    "ELSE rk.k + rk.size END"
                )
                self.props_params = [self.seed]
                if not self.keep(props, level, p, reason) or not self.one(f"SELECT count(*) FROM {active}"):
                    break
            else:
                self.round_limit_hit = True
        self.x(
            f"INSERT INTO {self.t('failed')} SELECT hid, ?, ? FROM {active}",
            [level, reason],
        )
        self.x(f"INSERT INTO {done} SELECT hid FROM {active}")

    def run(self) -> None:
        s, w, done = self.spec, self.t("w"), self.t("done")
        L = len(s.geography)
        rec = self.t("rec")
        n_hh = int(self.one(f"SELECT count(*) FROM {w}"))
        cap = None if s.max_swap_rate is None else math.ceil(s.max_swap_rate * n_hh - 1e-9)
        for h in range(L):
            if cap is None:
                self.x(f"CREATE OR REPLACE TEMP TABLE {rec} AS SELECT hid FROM {w} WHERE level = ?", [h])
                self.match(rec, h, "risk")
            else:
                self.match_capped(rec, h, cap)
        # top up at the finest level to the global swap rate: draw households by key
        # risk/Exp(1) (Efraimidis–Spirakis, as sdcMicro's sample at its lowest level)
        target = math.ceil(s.swap_rate * n_hh - 1e-9)  # share of households, as sdcMicro
        pairs = self.t("pairs")
        for _ in range(_TOPUP_ROUNDS):
            swapped = 2 * int(self.one(f"SELECT count(*) FROM {pairs}"))
            if swapped >= target:
                break
            need = (target - swapped + 1) // 2
            if cap is not None:  # a pair is two households: stay within the cap
                need = min(need, (cap - swapped) // 2)
                if need < 1:
                    break
            self.x(
                f"CREATE OR REPLACE TEMP TABLE {rec} AS SELECT hid FROM {w} "
                f"WHERE hid NOT IN (SELECT hid FROM {done}) ORDER BY skey DESC, hid LIMIT ?",
                [need],
            )
            if not self.one(f"SELECT count(*) FROM {rec}"):
                break
            self.match(rec, L - 1, "rate")
        else:
            self.round_limit_hit = True
        self.target, self.n_hh, self.cap = target, n_hh, cap

    def match_capped(self, rec: str, level: int, cap: int) -> None:
        """``match`` for the households risky at ``level`` under a cap of ``cap`` swapped
        households: riskiest first (risk at the level, then the risk-weighted random key), each
        round as many as the room left allows (a recipient makes at most one pair, two
        households). Risky households beyond the cap take no further part (logged as 'cap')."""
        w, done, pairs = self.t("w"), self.t("done"), self.t("pairs")
        left = (
            f"(SELECT hid, r{level} AS r, dkey{level} AS k FROM {w} "
            f"WHERE level = {int(level)} AND hid NOT IN (SELECT hid FROM {done}))"
        )
        for _ in range(_TOPUP_ROUNDS):
            n_left = int(self.one(f"SELECT count(*) FROM {left}"))
            room = cap - 2 * int(self.one(f"SELECT count(*) FROM {pairs}"))
            if not n_left or room < 2:
                break
            self.x(
                f"CREATE OR REPLACE TEMP TABLE {rec} AS SELECT hid FROM {left} ORDER BY r DESC, k DESC, hid LIMIT ?",
                [min(n_left, room // 2)],
            )
            self.match(rec, level, "risk")
        else:
            self.round_limit_hit = True
        self.x(f"INSERT INTO {self.t('capped')} SELECT hid, ? FROM {left}", [level])
        self.x(f"INSERT INTO {done} SELECT hid FROM {self.t('capped')} WHERE level = ?", [level])

    # -- results ----------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        s, w, pairs, failed = self.spec, self.t("w"), self.t("pairs"), self.t("failed")
        L = len(s.geography)
        n_hh = self.n_hh
        persons = int(self.one(f"SELECT coalesce(sum(size), 0) FROM {w}"))
        sw = f"(SELECT rid AS hid FROM {pairs} UNION ALL SELECT did FROM {pairs})"
        row = self.x(
            f"SELECT count(*) FILTER (WHERE w.level < {L}), count(s.hid), coalesce(sum(w.size) FILTER "
            f"(WHERE s.hid IS NOT NULL), 0), count(s.hid) FILTER (WHERE w.level < {L}) "
            f"FROM {w} w LEFT JOIN {sw} s ON s.hid = w.hid"
        ).fetchall()[0]
        risky, swapped, swapped_persons, risky_swapped = (int(v) for v in row)
        per_level: dict[str, dict[str, int]] = {}
        for h, g in enumerate(s.geography):
            per_level[g] = {
                "risky": int(self.one(f"SELECT count(*) FROM {w} WHERE level = ?", [h])),
                "pairs": int(self.one(f"SELECT count(*) FROM {pairs} WHERE level = ? AND reason = 'risk'", [h])),
                "without_donor": int(
                    self.one(f"SELECT count(*) FROM {failed} WHERE level = ? AND reason = 'risk'", [h])
                ),
            }
        top_pairs = int(self.one(f"SELECT count(*) FROM {pairs} WHERE reason = 'rate'"))
        no_donor = int(self.one(f"SELECT count(*) FROM {failed}"))
        no_donor_risky = int(self.one(f"SELECT count(*) FROM {failed} WHERE reason = 'risk'"))
        over_cap = int(self.one(f"SELECT count(*) FROM {self.t('capped')}"))
        return {
            "households": n_hh,
            "persons": persons,
            "risky_households": risky,
            "swapped_households": swapped,
            "swapped_persons": swapped_persons,
            "pairs": swapped // 2,
            "top_up_pairs": top_pairs,
            "requested_swap_rate": s.swap_rate,
            "target_households": self.target,
            "achieved_swap_rate": swapped / n_hh if n_hh else 0.0,
            "risky_swapped": risky_swapped,
            "share_risky_swapped": risky_swapped / risky if risky else None,
            "households_without_donor": no_donor,
            "risky_without_donor": no_donor_risky,
            "per_level": per_level,
            "matching_rounds": self.rounds,
            "round_limit_hit": self.round_limit_hit,
            "risky_share": risky / n_hh if n_hh else 0.0,
            "max_swap_rate": s.max_swap_rate,
            "cap_households": self.cap,
            "risky_over_cap": over_cap,
        }

    def out_select(self, columns: list[str]) -> str:
        s, pairs, hh = self.spec, self.t("pairs"), self.t("hh")
        moved = {g: f"g{h}" for h, g in enumerate(s.geography)}
        moved.update({c: f"v{self.const.index(c)}" for c in s.carry_along})
        sel = []
        for c in columns:
            if c in moved:
                sel.append(f"CASE WHEN m.hid IS NULL THEN t.{q(c)} ELSE m.{moved[c]} END AS {q(c)}")
            else:
                sel.append(f"t.{q(c)}")
        if s.return_swapped_id:
            sel.append(f"coalesce(m.partner, t.{q(s.household)}) AS {q(s.household + '_swapped')}")
        names = columns + ([s.household + "_swapped"] if s.return_swapped_id else [])
        if relation_kind(self.con, self.table) == "table" and "rowid" not in self.cols:
            order = "t.rowid"  # the input's order
        else:  # a view has no row order of its own: by household, then every column
            order = ", ".join(q(c) for c in [s.household] + [c for c in names if c != s.household])
        m = (
            f"SELECT x.hid, x.partner, {', '.join(sorted(set(moved.values())))} FROM "
            f"(SELECT rid AS hid, did AS partner FROM {pairs} UNION ALL SELECT did, rid FROM {pairs}) x "
            f"JOIN {hh} h ON h.hid = x.partner"
        )
        return (
            f"SELECT {', '.join(sel)} FROM {q(self.table)} t LEFT JOIN ({m}) m ON m.hid = t.{q(s.household)} "
            f"ORDER BY {order}"
        )

    def log_select(self) -> str:
        s, pairs, failed, w = self.spec, self.t("pairs"), self.t("failed"), self.t("w")
        geo = ", ".join(f"(?, {h})" for h in range(len(s.geography)))
        risk = "CASE " + " ".join(f"WHEN x.level = {h} THEN w.r{h}" for h in range(len(s.geography))) + " END"
        return (
            f"WITH names(name, level) AS (VALUES {geo}), x AS ("
            f"SELECT rid AS hid, did AS partner, level, profile, reason, 'recipient' AS role FROM {pairs} "
            f"UNION ALL SELECT did, rid, level, profile, reason, 'donor' FROM {pairs} "
            f"UNION ALL SELECT hid, NULL, level, NULL, reason, NULL FROM {failed} "
            f"UNION ALL SELECT hid, NULL, level, NULL, 'cap', NULL FROM {self.t('capped')}) "
            f"SELECT x.hid AS {q(s.household)}, x.partner AS partner, x.level AS level, names.name AS geography, "
            f"x.profile + 1 AS profile, x.reason AS reason, x.role AS role, x.partner IS NOT NULL AS swapped, "
            f"w.size AS persons, {risk} AS risk "
            f"FROM x JOIN {w} w ON w.hid = x.hid JOIN names ON names.level = x.level "
            f"ORDER BY x.hid"
        )

    @property
    def hid_type(self) -> str:
        return self.cols[self.spec.household]


def _warn_rate(table: str, spec: SwapSpec, r: dict[str, Any]) -> None:
    """SwapRateWarning when the risky households alone took the achieved rate past the requested
    one by more than the rounding of a pair (no cap given)."""
    if spec.max_swap_rate is not None or r["swapped_households"] <= r["target_households"] + 1:
        return
    level, most = max(r["per_level"].items(), key=lambda kv: kv[1]["risky"])
    why = (f"a combination of {', '.join(map(repr, spec.risk_variables))} shared by fewer than k_anonymity "
           "records in their area" if not spec.risk else "their given risk is above the threshold")
    warnings.warn(
        f"swap: table {table!r}: the requested swap rate {spec.swap_rate:g} became {r['achieved_swap_rate']:.3f} "
        f"({r['swapped_households']:,} of {r['households']:,} households swapped) because {r['risky_share']:.1%} "
        f"of the households ({r['risky_households']:,}) are risky ({why}; most of them first at level {level!r}: "
        f"{most['risky']:,}) and every risky household is swapped, as in sdcMicro's recordSwap. To keep the rate "
        "down give SwapSpec(max_swap_rate=...) (the riskiest households first, up to that rate), or lower "
        "k_anonymity, use fewer risk variables or a coarser finest geography",
        SwapRateWarning,
        stacklevel=3,
    )


def swap(
    con: duckdb.DuckDBPyConnection,
    table: str,
    spec: SwapSpec,
    *,
    seed: str | int,
    out: str,
    log: str | None = None,
    replace: bool = False,
    temporary: bool = False,
) -> dict[str, Any]:
    """Targeted record swapping of the microdata ``table`` (handbook §5.6; sdcMicro recordSwap).

    Writes the swapped records to table ``out`` (the input's columns, geography and carry-along
    values exchanged between paired households, rows in the input order) and, if ``log`` is
    given, one row per household swapped, left without a donor or left by the cap (partner,
    level, profile, reason 'risk', 'rate' or 'cap'). Both are written in one transaction; on any
    error nothing is. With ``temporary=True`` they are temporary tables of the connection (gone
    when it closes) until ``persist_swap`` keeps them. Returns a summary: households, risky
    households and their share, swapped households, requested and achieved swap rate, share of
    risky households swapped, per-level counts, households without donor, the cap and the risky
    households it left. Warns (SwapRateWarning) when risky households alone took the achieved
    rate past the requested one.
    """
    if not isinstance(spec, SwapSpec):
        raise SpecError(f"swap: spec must be a SwapSpec, not {type(spec).__name__}")
    seed_text = check_seed(seed)
    for name, flag in (("replace", replace), ("temporary", temporary)):
        if not isinstance(flag, bool):
            raise InputError(f"swap: {name} must be True or False, not {flag!r}")
    run = _Run(con, table, spec, seed_text)
    try:
        check_names(con, table, out, log, replace)
        run.cols = check_columns(con, table, spec)
        run.columns = list(run.cols)
        check_values(con, table, spec, run.cols)
        run.build_households()
        run.run()
        result = run.summary()
        outputs = [(out, run.out_select(run.columns), ())]
        if log is not None:
            outputs.append((log, run.log_select(), spec.geography))
        write_results(con, outputs, temporary=temporary)
    finally:
        run.close()
    _warn_rate(table, spec, result)
    return result
