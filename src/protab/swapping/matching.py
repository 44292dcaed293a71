"""Steps 4-5 of a swap (docs/swapping.md, *The algorithm*): recipients matched with donors level
by level, coarsest first, in rounds of proposals (each recipient proposes to one donor; a proposal
is kept where it is the best one touching both of its households, which makes the kept proposals
a matching), then the top-up to the swap rate at the finest level, optionally under a cap. The
loops over levels, profiles and a bounded number of rounds are the only Python loops."""

from __future__ import annotations

import math

from protab.swapping.households import TAG, Households

_PROPOSAL_ROUNDS = 6  # rounds of proposals to the best-ranked donors (risk-weighted order)
_RESCUE_ROUNDS = 64  # rounds of proposals over every donor outside the area, until none is left
_TOPUP_ROUNDS = 64  # draws of further households until the swap rate is reached (each draw pairs or
# fails at least one household, so the loop ends long before on real data)
_CANDIDATES = 3  # the best `_CANDIDATES * m + 8` donors of a class serve its m recipients first


class Matching(Households):
    """The pairs of the swap."""

    def rec_order(self, context: str) -> str:
        """Per-round random order of recipients: a keyed hash of (seed, round, household)."""
        return (
            f"sha256(CAST(? AS VARCHAR) || chr(31) || '{TAG}-round' || chr(31) || '{context}' || chr(31) "
            "|| CAST(r.hid AS VARCHAR)), r.hid"
        )

    def keep(self, props: str, level: int, profile: int, reason: str) -> int:
        """Keep the proposals (rid, did, i) that are the best (smallest i) of every proposal
        touching either household: they form a matching. Returns how many pairs were kept."""
        kept = self.t("kept")
        self.replace(
            "kept",
            f"WITH p AS ({props}), "
            "e AS (SELECT rid AS x, i FROM p UNION ALL SELECT did AS x, i FROM p), "
            "b AS (SELECT x, min(i) AS m FROM e GROUP BY x) "
            "SELECT p.rid, p.did FROM p JOIN b b1 ON b1.x = p.rid AND b1.m = p.i "
            "JOIN b b2 ON b2.x = p.did AND b2.m = p.i",
            self.props_params,
        )
        n = int(self.one(f"SELECT count(*) FROM {kept}"))
        if n:
            self.insert("pairs", f"SELECT rid, did, ?, ?, ? FROM {kept}", [level, profile, reason])
            self.insert("done", f"SELECT rid FROM {kept} UNION ALL SELECT did FROM {kept}")
        self.rounds += 1
        return n

    def match(self, rec: str, level: int, reason: str) -> None:
        """Find donors for the households in table ``rec`` (hid) across level ``level``: per
        similarity profile, rounds of proposals to the best donors by risk-weighted key, then
        rounds over every donor outside the area until no recipient has one; recipients left
        are logged as without donor."""
        active = f"(SELECT hid FROM {rec} WHERE hid NOT IN (SELECT hid FROM {self.t('done')}))"
        for p in range(len(self.spec.similar)):
            if not self.one(f"SELECT count(*) FROM {active}"):
                break
            self.candidates(active, level, p)
            self.proposal_rounds(active, level, p, reason)
            if not self.one(f"SELECT count(*) FROM {active}"):
                break
            self.rescue_rounds(active, level, p, reason)
        self.insert("failed", f"SELECT hid, ?, ? FROM {active}", [level, reason])
        self.insert("done", f"SELECT hid FROM {active}")

    def candidates(self, active: str, level: int, p: int) -> None:
        """The best donors of each class by key risk/Exp(1) (Efraimidis–Spirakis): the
        recipients' first choices, as sdcMicro scans its donors from the largest key."""
        w, cls, area, dkey = self.t("w"), f"k{p}", f"a{level}", f"dkey{level}"
        avail = f"(SELECT * FROM {w} WHERE hid NOT IN (SELECT hid FROM {self.t('done')}))"
        m = (f"SELECT w.{cls} AS cls, {_CANDIDATES} * count(*) + 8 AS m FROM {w} w SEMI JOIN {active} r "
             "ON w.hid = r.hid GROUP BY 1")
        top = int(self.one(f"SELECT max(m) + 16 FROM ({m})"))  # a constant: Spark's max_by needs one
        self.replace(
            "cand",
            f"WITH m AS ({m}), "
            f"top AS (SELECT a.{cls} AS cls, unnest(arg_max(a.hid, a.{dkey}, ?)) AS hid "
            f"FROM {avail} a SEMI JOIN m ON a.{cls} = m.cls GROUP BY 1) "
            f"SELECT w.hid, w.{area} AS area, w.{cls} AS cls, w.{dkey} AS dkey FROM top JOIN {w} w ON w.hid = top.hid "
            f"JOIN m ON m.cls = top.cls "
            f"QUALIFY row_number() OVER (PARTITION BY top.cls ORDER BY w.{dkey} DESC, w.hid DESC) <= any_value(m.m) "
            f"OVER (PARTITION BY top.cls)",
            [top],
        )

    def proposal_rounds(self, active: str, level: int, p: int, reason: str) -> None:
        """Each round every recipient, in a fresh random order, proposes to the candidate of
        its class of the same rank."""
        w, cls, area = self.t("w"), f"k{p}", f"a{level}"
        for t in range(_PROPOSAL_ROUNDS):
            ctx = f"{level}:{p}:{reason}:a{t}:{self.rounds}"
            props = (
                f"SELECT r.hid AS rid, c.hid AS did, r.i FROM ("
                f"SELECT r.hid, w.{area} AS area, w.{cls} AS cls, row_number() OVER "
                f"(PARTITION BY w.{cls} ORDER BY {self.rec_order(ctx)}) AS i "
                f"FROM {active} r JOIN {w} w ON w.hid = r.hid) r JOIN ("
                f"SELECT *, row_number() OVER (PARTITION BY cls ORDER BY dkey DESC, hid DESC) AS j FROM {self.t('cand')} "
                f"WHERE hid NOT IN (SELECT hid FROM {self.t('done')})) c ON c.cls = r.cls AND c.j = r.i "
                "WHERE c.hid <> r.hid AND c.area <> r.area"
            )
            self.props_params = [self.seed]
            if not self.keep(props, level, p, reason) or not self.one(f"SELECT count(*) FROM {active}"):
                break

    def rescue_rounds(self, active: str, level: int, p: int, reason: str) -> None:
        """Every donor outside the area: order the class's donors by (area, key); the k-th
        donor outside area a sits at position k, or k + (donors in a) past a's block."""
        w, cls, area, dkey = self.t("w"), f"k{p}", f"a{level}", f"dkey{level}"
        avail = f"(SELECT * FROM {w} WHERE hid NOT IN (SELECT hid FROM {self.t('done')}))"
        for t in range(_RESCUE_ROUNDS):
            ctx = f"{level}:{p}:{reason}:b{t}:{self.rounds}"
            pool = self.t("pool")
            self.replace(
                "pool",
                f"SELECT a.hid, a.{area} AS area, a.{cls} AS cls, "
                f"row_number() OVER (PARTITION BY a.{cls} ORDER BY a.{area}, a.{dkey} DESC, a.hid) AS pos "
                f"FROM {avail} a WHERE a.{cls} IN (SELECT w.{cls} FROM {w} w SEMI JOIN {active} r ON w.hid = r.hid)",
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

    def pair(self) -> None:
        """Every level, coarsest first, then the top-up at the finest level to the global swap
        rate: households drawn by key risk/Exp(1) (Efraimidis–Spirakis, as sdcMicro's sample at
        its lowest level)."""
        s, w, done = self.spec, self.t("w"), self.t("done")
        L = len(s.geography)
        rec = self.t("rec")
        n_hh = int(self.one(f"SELECT count(*) FROM {w}"))
        cap = None if s.max_swap_rate is None else math.ceil(s.max_swap_rate * n_hh - 1e-9)
        for h in range(L):
            if cap is None:
                self.replace("rec", f"SELECT hid FROM {w} WHERE level = ?", [h])
                self.match(rec, h, "risk")
            else:
                self.match_capped(rec, h, cap)
        target = math.ceil(s.swap_rate * n_hh - 1e-9)  # share of households, as sdcMicro
        for _ in range(_TOPUP_ROUNDS):
            swapped = 2 * int(self.one(f"SELECT count(*) FROM {self.t('pairs')}"))
            if swapped >= target:
                break
            need = (target - swapped + 1) // 2
            if cap is not None:  # a pair is two households: stay within the cap
                need = min(need, (cap - swapped) // 2)
                if need < 1:
                    break
            self.replace(
                "rec", f"SELECT hid FROM {w} WHERE hid NOT IN (SELECT hid FROM {done}) ORDER BY skey DESC, hid LIMIT ?",
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
            self.replace(
                "rec", f"SELECT hid FROM {left} ORDER BY r DESC, k DESC, hid LIMIT ?", [min(n_left, room // 2)]
            )
            self.match(rec, level, "risk")
        else:
            self.round_limit_hit = True
        self.insert("capped", f"SELECT hid, ? FROM {left}", [level])
        self.insert("done", f"SELECT hid FROM {self.t('capped')} WHERE level = ?", [level])
