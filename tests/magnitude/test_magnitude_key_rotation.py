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
import pytest
from cases import rotation_cell
from hypothesis import given, settings
from hypothesis import strategies as st

import protab as pt
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


def test_magnitude_cell_with_zero_in_its_key():
    with pt.Session(":memory:") as s:
        cell = rotation_cell(s)
    assert cell["v"].item() == 170.0
    assert cell["v_pert"].item() == pytest.approx(173.5, abs=1e-9)


def _printed_rotation(key: int, d: int, times: int) -> int:
    """R cellKey's rotation as string work: the key's d digits, trailing zeros dropped, rotated."""
    digits = str(key).zfill(d).rstrip("0")
    if not digits:
        return 0
    r = times % len(digits)
    return int((digits[r:] + digits[:r]).ljust(d, "0"))


@settings(max_examples=60, deadline=None)
@given(d=st.integers(1, 16), times=st.integers(0, 40), data=st.data())
def test_decimal_rotation_equals_the_printed_digits_rotated(d, times, data):
    # keys with every count of trailing zeros, the extremes too
    keys = data.draw(st.lists(st.tuples(st.integers(0, d - 1), st.integers(0, 10**d - 1)), min_size=1, max_size=40))
    keys = [k - k % 10**z for z, k in keys] + [0, 10**d - 1, 10 ** (d - 1)]
    got = duckdb.connect().execute(
        f"SELECT list({rotate_sql('k', 10**d, times)} ORDER BY i) FROM "
        "(SELECT unnest(?::BIGINT[]) AS k, unnest(range(?)) AS i)", [keys, len(keys)]).fetchone()[0]
    assert got == [_printed_rotation(k, d, times) for k in keys]
