"""Step 6 of a swap (docs/swapping.md): the summary, the swapped records (each pair exchanges
geography and carry-along values; every member of a household takes its partner's) and the log."""

from __future__ import annotations

from typing import Any

from protab.sqltools import quote_ident as q
from protab.swapping.matching import Matching


class Results(Matching):
    """What a swap returns and writes."""

    def summary(self) -> dict[str, Any]:
        """The counts of the swap (docs/swapping.md, the summary)."""
        s, w, pairs, failed = self.spec, self.t("w"), self.t("pairs"), self.t("failed")
        L = len(s.geography)
        n_hh = self.n_hh
        persons = int(self.one(f"SELECT coalesce(sum(size), 0) FROM {w}"))
        sw = f"(SELECT rid AS hid FROM {pairs} UNION ALL SELECT did FROM {pairs})"
        row = self.rows(
            f"SELECT count(*) FILTER (WHERE w.level < {L}), count(s.hid), coalesce(sum(w.size) FILTER "
            f"(WHERE s.hid IS NOT NULL), 0), count(s.hid) FILTER (WHERE w.level < {L}) "
            f"FROM {w} w LEFT JOIN {sw} s ON s.hid = w.hid"
        )[0]
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
        """The swapped records: the input's rows, geography and carry-along values of each
        swapped household taken from its partner, in the input's order."""
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
        stored = self.eng.row_order(self.table)
        if stored is not None and stored not in self.cols:
            order = f"t.{stored}"  # the input's order
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
        """One row per household swapped, left without donor or left by the cap."""
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
