"""Key rotation of the cell key method for magnitudes keeps the key's digit width (R cellKey).

R cellKey's ``.scramble_ckeys`` writes the cell key as R prints it ("0.0871234": trailing
zeros of the key dropped, its width fixed then) and moves the first digit to the end, each
component from the previous one's string, the width kept: 0.0871234 → 0.871234 (printed
"0.8712340"), 0.7123408, 0.1234087. A rotation must not drop the zeros a previous rotation
moved to the end (which gave 0.712348 and 0.123487). Binary keys rotate their bits, a
permutation that keeps their width anyway.
"""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

import protab as pt
from protab.magnitude import MagnitudeCKM
from protab.ptable.magnitude import MagnitudePTable
from protab.rollup.magnitude_ckm import rotate_sql


def _rotations(key: int, modulus: int, n: int) -> list[int]:
    con = duckdb.connect()
    items = ", ".join(f"{rotate_sql('k', modulus, t)}" for t in range(n))
    return list(con.execute(f"SELECT {items} FROM (SELECT CAST(? AS BIGINT) AS k)", [key]).fetchone())


def test_decimal_rotation_keeps_the_width_through_the_chain():
    # R: "0.0871234" → "0.8712340" → "0.7123408" → "0.1234087" → "0.2340871"
    assert _rotations(871234, 10**7, 5) == [871234, 8712340, 7123408, 1234087, 2340871]


def test_decimal_width_is_the_printed_key():
    # d = 8, key 0.1234567 (12345670): R prints "0.1234567", 7 digits, and rotates those
    assert _rotations(12345670, 10**8, 3) == [12345670, 23456710, 34567120]
    # seven rotations of a seven-digit key give the key back
    assert _rotations(871234, 10**7, 8)[7] == 871234


def test_binary_rotation_is_unchanged():
    # 4 bits per step, the same as rotating the rotated key again
    assert _rotations(0x12345678, 2**32, 3) == [0x12345678, 0x23456781, 0x34567812]
    assert _rotations(0xF0000000, 2**32, 3) == [0xF0000000, 0x0000000F, 0x000000F0]


def _ptable() -> MagnitudePTable:
    """Row 1: v = +0.5 for keys below 0.12341, −0.5 up to 0.712344, +0.5 above (den 10^7)."""
    return MagnitudePTable(pl.DataFrame({
        "i": [0.0, 1.0, 1.0, 1.0], "v": [0.0, 0.5, -0.5, 0.5],
        "lb_n": [0, 0, 1_234_100, 7_123_440], "ub_n": [10**7, 1_234_100, 7_123_440, 10**7],
    }), den=10**7)


def perturbed_cell(s: pt.Session) -> pl.DataFrame:
    """The cell a = x of three records with keys summing to 0.0871234 (x = 100, 50, 20),
    perturbed with simple scaling p = 0.1, ε = 1 and tau-ARGUS keys (same_key=False); its
    ratios are capped at row 1 of :func:`_ptable`. tests/test_spark_magnitude.py runs it on Spark.

    The cell value is 170; the running value after each component in brackets:
    j = 1: key 0.871234, v = +0.5, x_delta = 10 → +5     (175)
    j = 2: key 0.7123408, v = −0.5, x_delta = 5 → −2.5   (172.5)  [key 0.712348 gave +2.5]
    j = 3: key 0.1234087, v = +0.5, x_delta = 2 → +1     (173.5)  [key 0.123487 gave −1]
    """
    s.register("rotation", pl.DataFrame({"a": ["x", "x", "x"], "v": [100.0, 50.0, 20.0],
                                         "kdec": [0.05, 0.03, 0.0071234]}), replace=True)
    s.add_record_keys("rotation", record_key_column="kdec", decimals=7, replace=True)
    m = MagnitudeCKM(_ptable(), p=0.1, top_k=3, epsilon=[1, 1, 1], same_key=False)
    counts = pt.PTable.maximum_entropy(D=3, V=1.0)
    out = s.cell_key("rotation", pt.TableSpec({"a": None}, sums=["v"]), counts, magnitude=m, original=True)
    return out.filter(pl.col("a") == "x")


def test_magnitude_cell_with_zero_in_its_key():
    with pt.Session(":memory:") as s:
        cell = perturbed_cell(s)
    assert cell["v"].item() == 170.0
    assert cell["v_pert"].item() == pytest.approx(173.5, abs=1e-9)
