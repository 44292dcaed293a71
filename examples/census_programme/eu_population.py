"""A synthetic national population for the EU-style census programme (eu_programme.toml),
generated in DuckDB SQL: vectorised, deterministic from a seed, no loop over records.

    python examples/census_programme/eu_population.py --persons 1.8e7 --db eu_census.duckdb

The country is a plane of 280 x 240 1 km squares (INSPIRE short codes, ``1kmN3100E3900``) cut
into blocks: 4 NUTS 1 regions (``XX1``), 12 NUTS 2 (``XX11``), 48 NUTS 3 (``XX111``) and 432
municipalities (``XX111_01``). Households live in settlements of Zipf-distributed sizes
(20,000 of them: a few cities, many villages) spread as a 2-D normal around their centres,
widening with their size, plus a thin dispersed rural share: some dense squares, many sparse.
Household size, type and tenure are drawn per household; each member gets a household status,
sex and single-year age consistent with it (partners of an age, children younger), then
activity status, ISCO-08 major group and NACE Rev. 2 section (the employed only), ISCED 2011
attainment, country of birth and citizenship (a household's origin shared by its members),
year of arrival (the foreign-born) and residence one year before.

Each variable's codes are those of the classifications in eu_programme.toml (:data:`CODES`);
``persons`` has one row per person with a record key ``rkey`` (32 bits of SHA-256 of a seed
and ``pid``, ``Session.add_record_keys``).
"""

from __future__ import annotations

import argparse
import hashlib
import time
from typing import Any

#: The plane: WIDTH x HEIGHT squares from (E0, N0) km, the lower left corner (EPSG:3035).
E0, N0, WIDTH, HEIGHT = 3900, 3100, 280, 240
#: settlements (Zipf ranks 1 ... SETTLEMENTS) and the share of households dispersed uniformly
SETTLEMENTS, DISPERSED = 20_000, 0.03
#: the mean household size of the size distribution below (institutional persons included)
MEAN_HOUSEHOLD = 2.2

#: the declared codes of each flat variable (the classifications of eu_programme.toml)
CODES: dict[str, list[str]] = {
    "sex": ["F", "M"],
    "cas1": ["LF", "NLF"],
    "cas": ["EMP", "UNE", "PEN", "STU", "HOM", "OTH", "U15"],
    "occ": [f"OC{k}" for k in range(10)] + ["NAP"],
    "ind": [chr(c) for c in range(ord("A"), ord("U") + 1)] + ["NAP"],
    "edu": [f"ED{k}" for k in range(9)] + ["NAP"],
    "pob1": ["NAT", "EU_OTH", "NEU"],
    "pob": ["RC", "EU_W", "EU_E", "EUR_NEU", "AFR", "ASI", "AME", "OCE"],
    "cit1": ["NAT", "EU_OTH", "NEU"],
    "cit": ["RC", "EU_W", "EU_E", "EUR_NEU", "AFR", "ASI", "AME", "OCE"],
    "yae": ["NAP", "Y_LT1980", "Y1980-89", "Y1990-99", "Y2000-04", "Y2005-09", "Y2010-14", "Y2015-19",
            "Y2020-21"],
    "roy": ["SAME", "CHG_IN", "CHG_OUT", "NAP"],
    "hsize": ["HS1", "HS2", "HS3", "HS4", "HS5", "HS_GE6", "NAP"],
    "hst": ["PART", "LPAR", "CHILD", "ALONE", "OTHER", "INST"],
    "tenure": ["OWN", "RENT", "OTH", "NAP"],
}
#: the shares of the NACE Rev. 2 sections among the employed (roughly an EU member's)
INDUSTRY = {"A": 2.0, "B": 0.2, "C": 12.0, "D": 0.6, "E": 0.7, "F": 6.5, "G": 13.5, "H": 5.5, "I": 4.0,
            "J": 4.5, "K": 3.0, "L": 1.0, "M": 7.0, "N": 5.5, "O": 6.0, "P": 8.0, "Q": 15.0, "R": 2.0,
            "S": 2.5, "T": 0.3, "U": 0.2}
#: the group (finest code -> level-1 code) of country of birth and citizenship
ORIGIN_GROUP = {"RC": "NAT", "EU_W": "EU_OTH", "EU_E": "EU_OTH", "EUR_NEU": "NEU", "AFR": "NEU", "ASI": "NEU",
                "AME": "NEU", "OCE": "NEU"}

# u(k): a uniform [0, 1) draw, deterministic from the seed, the row and the draw's number k
_U = "((hash({id}, $seed, {k}) % 1000000007) / 1000000007.0)"

HOUSEHOLDS = """
CREATE OR REPLACE TEMP TABLE eu_households AS
WITH h AS (
    SELECT range AS hid, {u1} AS u_set, {u2} AS u_rank, {u3} AS u_r, {u4} AS u_a, {u5} AS u_x, {u6} AS u_y,
           {u7} AS u_size, {u8} AS u_type, {u9} AS u_ten, {u10} AS u_org, {u11} AS u_age, {u12} AS u_arr
    FROM range($households)
), s AS (   -- the settlement: Zipf rank (P(rank <= r) = ln r / ln K), its centre and spread
    SELECT *, CAST(floor(exp(u_rank * ln($settlements))) AS BIGINT) AS rnk FROM h
), c AS (
    SELECT *, ((hash(rnk, $seed, 31) % 1000003) / 1000003.0) * $width AS cx,
              ((hash(rnk, $seed, 32) % 1000003) / 1000003.0) * $height AS cy,
              0.3 + 0.12 * sqrt($persons / (rnk * ln($settlements)) / 1000.0) AS sigma
    FROM s
), p AS (
    SELECT *,
        CAST(floor(CASE WHEN u_set < $dispersed THEN u_x * $width
             ELSE cx + sigma * sqrt(-2 * ln(greatest(u_r, 1e-12))) * cos(2 * pi() * u_a) END) AS BIGINT) AS x0,
        CAST(floor(CASE WHEN u_set < $dispersed THEN u_y * $height
             ELSE cy + sigma * sqrt(-2 * ln(greatest(u_r, 1e-12))) * sin(2 * pi() * u_a) END) AS BIGINT) AS y0
    FROM c
), g AS (
    SELECT *, (x0 % $width + $width) % $width AS x, (y0 % $height + $height) % $height AS y FROM p
)
SELECT hid, x, y,
    CASE WHEN u_size < 0.015 THEN 0                             -- a person in an institution
         WHEN u_size < 0.37 THEN 1 WHEN u_size < 0.68 THEN 2 WHEN u_size < 0.81 THEN 3
         WHEN u_size < 0.93 THEN 4 WHEN u_size < 0.98 THEN 5
         ELSE 6 + CAST(floor((u_size - 0.98) * 150) AS INTEGER) END AS size,
    CASE WHEN u_type < 0.72 THEN 'couple' WHEN u_type < 0.88 THEN 'lone' ELSE 'other' END AS htype,
    CASE WHEN u_ten < 0.57 THEN 'OWN' WHEN u_ten < 0.94 THEN 'RENT' ELSE 'OTH' END AS tenure,
    CASE WHEN u_org < 0.82 THEN 'RC' WHEN u_org < 0.86 THEN 'EU_W' WHEN u_org < 0.89 THEN 'EU_E'
         WHEN u_org < 0.92 THEN 'EUR_NEU' WHEN u_org < 0.95 THEN 'AFR' WHEN u_org < 0.98 THEN 'ASI'
         WHEN u_org < 0.995 THEN 'AME' ELSE 'OCE' END AS origin,
    22 + CAST(floor(63 * pow(u_age, 1.1)) AS INTEGER) AS ref_age, u_arr
FROM g
"""

PERSONS = """
CREATE OR REPLACE TABLE {out} AS
WITH m AS (
    SELECT h.*, hid * 16 + k AS pid, k FROM eu_households h, unnest(range(greatest(size, 1))) AS t(k)
), u AS (
    SELECT *, {p1} AS u_sex, {p2} AS u_age, {p3} AS u_act, {p4} AS u_occ, {p5} AS u_ind, {p6} AS u_edu,
              {p7} AS u_nat, {p8} AS u_mov, {p9} AS u_cit
    FROM m
), r AS (   -- household status and age
    SELECT *,
        CASE WHEN size = 0 THEN 'INST' WHEN size = 1 THEN 'ALONE'
             WHEN htype = 'couple' AND k < 2 THEN 'PART' WHEN htype = 'lone' AND k = 0 THEN 'LPAR'
             WHEN htype = 'other' THEN 'OTHER' ELSE 'CHILD' END AS hst
    FROM u
), a AS (
    SELECT *, least(100, CASE
        WHEN hst = 'INST' THEN CASE WHEN u_age < 0.4 THEN 18 + CAST(floor(u_age / 0.4 * 12) AS INTEGER)
                                    ELSE 60 + CAST(floor((u_age - 0.4) / 0.6 * 41) AS INTEGER) END
        WHEN hst IN ('PART', 'LPAR') THEN greatest(18, ref_age + CAST(floor(u_age * 9) AS INTEGER) - 4)
        WHEN hst = 'ALONE' THEN 18 + CAST(floor(83 * pow(u_age, 0.9)) AS INTEGER)
        WHEN hst = 'OTHER' THEN 15 + CAST(floor(u_age * 70) AS INTEGER)
        ELSE CAST(floor(u_age * least(ref_age - 17, 35)) AS INTEGER) END) AS age_n
    FROM r
), b AS (   -- activity status by age; born abroad: most members of a household of foreign origin
    SELECT *,
        CASE WHEN age_n < 15 THEN 'U15'
             WHEN age_n >= 67 THEN CASE WHEN u_act < 0.06 THEN 'EMP' WHEN u_act < 0.95 THEN 'PEN' ELSE 'HOM' END
             WHEN age_n < 25 AND u_act < 0.55 THEN 'STU'
             WHEN u_act < 0.78 THEN 'EMP' WHEN u_act < 0.83 THEN 'UNE' WHEN u_act < 0.89 THEN 'HOM'
             WHEN u_act < 0.94 THEN 'PEN' WHEN u_act < 0.96 THEN 'STU' ELSE 'OTH' END AS cas,
        CASE WHEN origin = 'RC' OR (hst = 'CHILD' AND u_nat < 0.55) THEN 'RC' ELSE origin END AS pob,
        2021 - least(age_n, CAST(floor(u_arr * 45) AS INTEGER)) AS arrived
    FROM a
)
SELECT pid, hid,
    'XX' || (x // 70 + 1) AS nuts1,
    'XX' || (x // 70 + 1) || (y // 80 + 1) AS nuts2,
    'XX' || (x // 70 + 1) || (y // 80 + 1) || ((x % 70) // 35 * 2 + (y % 80) // 40 + 1) AS nuts3,
    'XX' || (x // 70 + 1) || (y // 80 + 1) || ((x % 70) // 35 * 2 + (y % 80) // 40 + 1)
        || '_' || lpad(CAST((x % 35) * 3 // 35 * 3 + (y % 40) * 3 // 40 + 1 AS VARCHAR), 2, '0') AS lau,
    '1kmN' || ($n0 + y) || 'E' || ($e0 + x) AS grid1km,
    CASE WHEN hst = 'PART' AND k = 1 THEN (CASE WHEN u_sex < 0.97 THEN 'F' ELSE 'M' END)
         WHEN hst = 'PART' THEN (CASE WHEN u_sex < 0.97 THEN 'M' ELSE 'F' END)
         WHEN hst = 'LPAR' THEN (CASE WHEN u_sex < 0.8 THEN 'F' ELSE 'M' END)
         WHEN u_sex < 0.51 THEN 'F' ELSE 'M' END AS sex,
    CASE WHEN age_n < 15 THEN 'Y_LT15' WHEN age_n < 65 THEN 'Y15-64' ELSE 'Y_GE65' END AS age3,
    CASE WHEN age_n >= 100 THEN 'Y_GE100' ELSE 'Y' || (age_n // 5 * 5) || '-' || (age_n // 5 * 5 + 4) END AS age5,
    'Y' || age_n AS age,
    CASE WHEN cas IN ('EMP', 'UNE') THEN 'LF' ELSE 'NLF' END AS cas1, cas,
    CASE WHEN cas <> 'EMP' THEN 'NAP' ELSE 'OC' || CAST(floor(
        CASE WHEN u_occ < 0.005 THEN 0 WHEN u_occ < 0.06 THEN 1 WHEN u_occ < 0.28 THEN 2 WHEN u_occ < 0.45 THEN 3
             WHEN u_occ < 0.55 THEN 4 WHEN u_occ < 0.70 THEN 5 WHEN u_occ < 0.73 THEN 6 WHEN u_occ < 0.82 THEN 7
             WHEN u_occ < 0.88 THEN 8 ELSE 9 END) AS INTEGER) END AS occ,
    CASE WHEN cas <> 'EMP' THEN 'NAP' {industry} END AS ind,
    CASE WHEN age_n < 15 THEN 'NAP' ELSE 'ED' || CAST(least(8, floor(CASE
        WHEN age_n < 20 THEN 1 + 2 * u_edu ELSE 9 * pow(u_edu, 0.8) END)) AS INTEGER) END AS edu,
    CASE WHEN pob = 'RC' THEN 'NAT' WHEN pob IN ('EU_W', 'EU_E') THEN 'EU_OTH' ELSE 'NEU' END AS pob1, pob,
    CASE WHEN pob = 'RC' OR u_cit < 0.45 THEN 'NAT' WHEN pob IN ('EU_W', 'EU_E') THEN 'EU_OTH' ELSE 'NEU' END
        AS cit1,
    CASE WHEN pob = 'RC' OR u_cit < 0.45 THEN 'RC' ELSE pob END AS cit,
    CASE WHEN pob = 'RC' THEN 'NAP' WHEN arrived < 1980 THEN 'Y_LT1980' WHEN arrived < 1990 THEN 'Y1980-89'
         WHEN arrived < 2000 THEN 'Y1990-99' WHEN arrived < 2005 THEN 'Y2000-04' WHEN arrived < 2010 THEN 'Y2005-09'
         WHEN arrived < 2015 THEN 'Y2010-14' WHEN arrived < 2020 THEN 'Y2015-19' ELSE 'Y2020-21' END AS yae,
    CASE WHEN age_n < 1 THEN 'NAP' WHEN u_mov < 0.89 THEN 'SAME' WHEN u_mov < 0.99 THEN 'CHG_IN'
         ELSE 'CHG_OUT' END AS roy,
    CASE WHEN size = 0 THEN 'NAP' WHEN size >= 6 THEN 'HS_GE6' ELSE 'HS' || size END AS hsize,
    hst,
    CASE WHEN size = 0 THEN 'NAP' ELSE tenure END AS tenure
FROM b
"""


def _draws(ident: str, first: int, count: int, prefix: str) -> dict[str, str]:
    return {f"{prefix}{k}": _U.format(id=ident, k=first + k) for k in range(1, count + 1)}


def _industry() -> str:
    """The WHEN branches drawing a NACE section from :data:`INDUSTRY` (u_ind against cumulative shares)."""
    total, cum, out = sum(INDUSTRY.values()), 0.0, []
    for code, share in INDUSTRY.items():
        cum += share
        out.append(f"WHEN u_ind < {cum / total:.6f} THEN '{code}'")
    return " ".join(out[:-1]) + f" ELSE '{code}'"


def generate(con: Any, persons: int, seed: str, out: str = "persons") -> int:
    """Households, then the table ``out`` of about ``persons`` persons (deterministic from ``seed``),
    on a DuckDB connection; the persons' count is returned. SQL only (two statements)."""
    seed_int = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:7], "big")
    households = max(1, round(persons / MEAN_HOUSEHOLD))
    params = {"seed": seed_int, "households": households, "settlements": SETTLEMENTS, "persons": persons,
              "width": WIDTH, "height": HEIGHT, "dispersed": DISPERSED}
    con.execute(HOUSEHOLDS.format(**_draws("range", 0, 12, "u")), params)
    q = '"' + out.replace('"', '""') + '"'
    con.execute(PERSONS.format(out=q, industry=_industry(), **_draws("pid", 100, 9, "p")), {"seed": seed_int, "n0": N0, "e0": E0})
    con.execute("DROP TABLE eu_households")
    return int(con.execute(f"SELECT count(*) FROM {q}").fetchall()[0][0])


def build_database(database: str, persons: int, seed: str, key_seed: str) -> dict[str, float]:
    """``persons`` generated into ``database`` with record keys; (persons, seconds)."""
    import protab as pt

    t0 = time.perf_counter()
    with pt.Session(database, progress=False) as s:
        n = generate(s.con, persons, seed)
        t1 = time.perf_counter()
        s.add_record_keys("persons", id_column="pid", seed=key_seed, replace=True)
    return {"persons": n, "generate_s": t1 - t0, "keys_s": time.perf_counter() - t1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--persons", type=float, default=1.8e7)
    ap.add_argument("--db", default="eu_census.duckdb")
    ap.add_argument("--seed", default="eu-census-example", help="the generator's seed (synthetic data only)")
    ap.add_argument("--key-seed", default="eu-census-record-keys",
                    help="the record keys' seed (an example: a real one is a secret, protab keys)")
    args = ap.parse_args()
    r = build_database(args.db, int(args.persons), args.seed, args.key_seed)
    print(f"{r['persons']:,} persons in {args.db} (table persons): generated in {r['generate_s']:.1f} s, "
          f"record keys in {r['keys_s']:.1f} s")


if __name__ == "__main__":
    main()
