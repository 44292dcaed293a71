"""The named steps p-tables are built, checked, read and written with (protab.ptable._count_rows,
_count_frames, _count_files, _keyspace, _maxent, _magnitude_*), each on a small input whose
result is worked out by hand or checked against its defining property."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from protab.errors import PTableError
from protab.ptable._count_files import count_file_frame, count_file_text, ons_table
from protab.ptable._count_frames import frame_rows, ons_rows
from protab.ptable._count_rows import count_frame
from protab.ptable._magnitude_checks import maxent_parameters
from protab.ptable._magnitude_files import read_frame, render
from protab.ptable._magnitude_frames import frame_entries
from protab.ptable._maxent import _constraints, _interior_point, _phase_one, _Row
from protab.ptable.keyspace import row_classes


def test_row_classes_repeat_the_last_period_rows_above_imax():
    counts = np.arange(0, 30)
    expected = []
    for n in counts.tolist():  # imax 10, period 3: 11 -> 8, 12 -> 9, 13 -> 10, 14 -> 8 ...
        expected.append(n if n <= 10 else 8 + (n - 8) % 3)
    assert row_classes(counts, 10, 3).tolist() == expected


def test_count_frame_merges_adjacent_intervals_of_equal_noise():
    core = pl.DataFrame(
        {"i": [0, 0, 1, 1, 1], "v": [0, 0, -1, 0, 0], "lb_n": [0, 5, 0, 3, 6], "ub_n": [5, 10, 3, 6, 10]}
    )
    frame, imax, period = count_frame(core, 10, None, 1, "[lb,ub)")
    assert (imax, period) == (1, 1)
    assert frame.select("i", "v", "lb_n", "ub_n").rows() == [(0, 0, 0, 10), (1, -1, 0, 3), (1, 0, 3, 10)]
    assert frame["j"].to_list() == [0, 0, 1] and frame["p"].to_list() == pytest.approx([1.0, 0.3, 0.7])


def test_count_frame_names_the_row_with_a_gap():
    core = pl.DataFrame({"i": [0, 1, 1], "v": [0, 0, 1], "lb_n": [0, 0, 6], "ub_n": [10, 5, 10]})
    with pytest.raises(PTableError, match="gaps between intervals for i = 1"):
        count_frame(core, 10, None, 1, "[lb,ub)")


def test_frame_rows_cumulate_probabilities_over_1e8():
    core, den = frame_rows(
        pl.DataFrame({"i": [0, 1, 1, 1], "j": [0, 2, 0, 1], "p": [1.0, 0.25, 0.25, 0.5]}), den=None, digits=None
    )
    assert den == 10**8
    assert core.rows() == [(0, 0, 0, 10**8), (1, -1, 0, 25 * 10**6), (1, 0, 25 * 10**6, 75 * 10**6),
                           (1, 1, 75 * 10**6, 10**8)]


def test_ons_rows_fill_absent_keys_with_noise_zero():
    core, den = ons_rows(pl.DataFrame({"pcv": [1, 2], "ckey": [1, 0], "pvalue": [1, -1]}), imax=None,
                         fill_missing=True)
    assert den == 2
    assert core.sort("i", "lb_n").rows() == [(1, 0, 0, 1), (1, 1, 1, 2), (2, -1, 0, 1), (2, 0, 1, 2)]


def test_ons_table_of_a_table_without_noise_is_all_zero():
    frame, _, _ = count_frame(pl.DataFrame({"i": [0, 1], "v": [0, 0], "lb_n": [0, 0], "ub_n": [4, 4]}), 4, None, 1,
                              "[lb,ub)")
    tab = ons_table(frame, 4, 1, 1, "[lb,ub)", None)
    assert tab.height == 750 * 4 and tab["pcv"].min() == 1 and tab["pcv"].max() == 750
    assert (tab["pvalue"] == 0).all()


def test_count_file_text_reads_back(tmp_path):
    frame, _, _ = count_frame(
        pl.DataFrame({"i": [0, 1, 1], "v": [0, -1, 1], "lb_n": [0, 0, 1], "ub_n": [4, 1, 4]}), 4, None, 1, "[lb,ub)"
    )
    for fmt in ("ptable", "tauargus"):
        path = tmp_path / f"{fmt}.csv"
        path.write_text(count_file_text(frame, 4, fmt))
        kind, df = count_file_frame(path, "auto")
        assert kind == fmt
        core, den = frame_rows(df, den=None, digits=None)
        assert core.select(pl.col("lb_n") * 4 // den, pl.col("ub_n") * 4 // den).rows() == [(0, 4), (0, 1), (1, 4)]
    with pytest.raises(PTableError, match="unknown p-table format 'csv'"):
        count_file_text(frame, 4, "csv")


def test_interior_point_reaches_the_same_row_densely_and_in_o_n():
    v = np.arange(-3.0, 4.0)
    lower = np.full(v.size, 1e-8)
    A, b, G, h, n_var, n_mono = _constraints(v, 2.0, lower, True, 1)
    start = _phase_one(A, b, G, h)
    assert start is not None and start[-1] > 0  # a strictly feasible point: positive slack
    assert np.all(G @ start[:-1] - h < 0)
    row = _Row(A, b, G, G.T.tocsr(), h, n_var, n_mono)
    p, done = _interior_point(row, start[:-1].copy(), True)
    q, done_sparse = _interior_point(row, start[:-1].copy(), False)
    assert done and done_sparse
    np.testing.assert_allclose(p, q, atol=1e-9)
    assert p.sum() == pytest.approx(1.0) and p @ v == pytest.approx(0.0, abs=1e-12)
    assert p @ (v * v) <= 2.0 + 1e-9 and np.all(np.diff(p[:4]) >= -1e-12)  # mono up to v = 0


def test_magnitude_parameters_sort_the_classes_and_refuse_a_missing_d():
    assert maxent_parameters(4, 1, 2, "even", [4, 1, 2, 2]) == (4, 2, 1.0, "even", [1, 2, 4])
    with pytest.raises(PTableError, match="icat must include 1 and D"):
        maxent_parameters(4, 1, 2, "all", [1, 2])


def test_magnitude_frame_entries_pick_one_type_and_files_read_back(tmp_path):
    df = pl.DataFrame(
        {"i": [0.0, 1.0, 1.0, 0.0, 1.0], "j": [0.0, 0.5, 1.5, 0.0, 1.0], "p": [1.0, 0.5, 0.5, 1.0, 1.0],
         "type": ["even", "even", "even", "odd", "odd"]}
    )
    i, j, v, lb_n, ub_n, den, kind = frame_entries(df, type="even", digits=None)
    assert kind == "even" and den == 10**8
    assert v.tolist() == [0.0, -0.5, 0.5]
    assert lb_n.tolist() == [0, 0, 5 * 10**7] and ub_n.tolist() == [10**8, 5 * 10**7, 10**8]
    with pytest.raises(PTableError, match="pass type= to pick one"):
        frame_entries(df, type=None, digits=None)
    frame = pl.DataFrame({"i": i, "j": j, "v": v, "lb_n": lb_n, "ub_n": ub_n})
    path = tmp_path / "m.csv"
    path.write_text(render([(frame, den, "even"), (frame, den, "odd")], "r"))
    back = read_frame(path, "auto")
    assert back["type"].to_list() == ["even"] * 3 + ["odd"] * 3
    assert back.filter(pl.col("type") == "odd")["p_int_ub"].to_list() == ["1", "0.5", "1"]
