"""The atoms of custom groups (protab.serve.atoms), as properties: the partition is the coarsest
one the generators make (two leaves share an atom iff no generator separates them) and every
generator is a union of atoms; after any sequence of requests judged and recorded, every atom
inside a recorded group holds at least the minimum (perturbed), so no combination of answers
isolates fewer records. And a small published band cannot be averaged out by groups of whole
bands (atoms that are published codes are judged inside a group too)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import serve_fixtures as F
from hypothesis import given, settings
from hypothesis import strategies as st

import protab as pt
from protab.serve.atoms import Cell, atom_labels, classification, judge

PTABLE = pt.PTable.maximum_entropy(**F.PTABLE)
MODULUS = 2**32
LEAST = 10


@st.composite
def families(draw):
    size = draw(st.integers(1, 40))
    rows = draw(st.lists(st.lists(st.booleans(), min_size=size, max_size=size), max_size=8))
    return np.array(rows, dtype=bool).reshape(len(rows), size)


@settings(max_examples=200)
@given(families())
def test_atoms_are_the_coarsest_partition_the_generators_make(members):
    labels = atom_labels(members)
    size = members.shape[1]
    same = labels[:, None] == labels[None, :]
    separated = (members[:, :, None] != members[:, None, :]).any(axis=0) if members.size else \
        np.zeros((size, size), dtype=bool)
    assert (same == ~separated).all()  # a shared atom iff no generator separates the two leaves
    for g in members:  # every generator is a union of atoms
        inside = set(labels[g].tolist())
        assert not inside & set(labels[~g].tolist())
    assert sorted(set(labels.tolist())) == list(range(labels.max() + 1 if size else 0))


def _classification(bands):
    """Leaves 0..size-1 in bands of ``bands`` leaves (a level above them), or flat (None)."""
    def build(size):
        leaves = [str(i) for i in range(size)]
        if bands is None:
            return classification("d", "v", ("v",), pl.DataFrame({"v": leaves}))
        return classification("d", "v", ("band", "v"),
                              pl.DataFrame({"band": [f"b{i // bands}" for i in range(size)], "v": leaves}))
    return build


def _counts(n, keys):
    """The perturbed counts of sets of leaves (protab.serve.atoms.Counted) of one population
    whose leaves hold ``n`` records with key sums ``keys``: what the Session's cell key method
    gives a set (its records, the sum of their keys) written out for the policy's tests."""
    def counted(masks):
        sets = masks.astype(np.int64)
        total, key = sets @ n, (sets @ keys) % MODULUS
        frame = pl.DataFrame({"set": np.arange(len(masks)), "q": np.full(len(masks), -1), "n": total,
                              "p": PTABLE.lookup(total, key, MODULUS)},
                             schema={"set": pl.Int64, "q": pl.Int64, "n": pl.Int64, "p": pl.Int64})
        return frame.filter(pl.col("n") > 0), 1
    return counted


@st.composite
def histories(draw):
    """Leaves, their records in two populations (e.g. the two sexes: requests filter on one),
    bands or none, and requests of one to three disjoint groups in one population each."""
    size = draw(st.integers(2, 16))
    n = np.array(draw(st.lists(st.lists(st.integers(0, 30), min_size=size, max_size=size), min_size=2, max_size=2)),
                 dtype=np.int64)
    keys = np.array(draw(st.lists(st.lists(st.integers(0, MODULUS - 1), min_size=size, max_size=size), min_size=2,
                                  max_size=2)), dtype=np.int64)
    bands = draw(st.sampled_from([None, 3, 5]))
    requests = []
    for _ in range(draw(st.integers(1, 12))):
        owner = np.array(draw(st.lists(st.integers(-1, 2), min_size=size, max_size=size)))  # -1: in no group
        requests.append((draw(st.integers(0, 1)), [owner == g for g in range(3) if (owner == g).any()]))
    return size, n, keys, bands, requests


@settings(max_examples=150)
@given(histories())
def test_after_any_history_every_atom_of_an_answered_group_holds_the_minimum(history):
    """Whatever was asked, in whichever population: in each population, every atom of the
    partition its answers make (with the published codes) that lies inside a group answered
    there holds the minimum there, after perturbation (the rule judges each request in its own
    population against every group answered anywhere)."""
    size, n, keys, bands, requests = history
    cls = _classification(bands)(size)
    counts = [_counts(n[u], keys[u] % MODULUS) for u in range(2)]
    recorded = np.zeros((0, size), dtype=bool)
    answered: list[list[np.ndarray]] = [[], []]
    for u, groups in requests:
        if not groups:
            continue
        cells = [Cell(f"group {k}", g) for k, g in enumerate(groups)]
        if len(groups) > 1:
            cells.append(Cell("the groups' total", np.logical_or.reduce(groups)))
        if judge(cls, recorded, cells, np.ones(size, dtype=bool), counts[u], LEAST, "refuse") is None:
            fresh = [c.mask for c in cells if not cls.is_published(c.mask)]
            recorded = np.vstack([recorded, *fresh]) if fresh else recorded
            answered[u] += fresh
    for u in range(2):
        if not answered[u]:
            continue
        mine = np.vstack(answered[u])
        labels = atom_labels(np.vstack([cls.published, mine]))
        for atom in set(labels[mine.any(axis=0)].tolist()):
            leaves = labels == atom
            records = int(n[u][leaves].sum())
            key = int(keys[u][leaves].sum()) % MODULUS
            perturbed = int(PTABLE.lookup(np.array([records]), np.array([key]), MODULUS)[0])
            assert records > 0 and perturbed >= LEAST, (u, atom, records)


def test_a_small_band_cannot_be_averaged_by_groups_of_whole_bands():
    """Bands of 5 leaves, band b0 holds 3 records, every other band 100. The groups b0 + B_k and
    B_k (B_k: whole other bands) differ by b0 with fresh noise each time, so each group holding
    b0 is refused although it cuts no band; groups of the large bands alone are answered."""
    size = 30
    cls = _classification(5)(size)
    n = np.array([1, 1, 1, 0, 0] + [20] * 25, dtype=np.int64)
    counts = _counts(n, (np.arange(size, dtype=np.int64) * 2654435761) % MODULUS)
    recorded = np.zeros((0, size), dtype=bool)
    for k in range(1, 5):
        rest = (np.arange(size) >= 5) & (np.arange(size) < 5 * (k + 1))  # bands b1 .. bk
        with_b0 = rest | (np.arange(size) < 5)
        assert judge(cls, recorded, [Cell("B", rest)], np.ones(size, dtype=bool), counts, LEAST, "refuse") is None
        recorded = np.vstack([recorded, rest]) if not cls.is_published(rest) else recorded
        failure = judge(cls, recorded, [Cell("B+b0", with_b0)], np.ones(size, dtype=bool), counts, LEAST,
                        "refuse")
        assert failure is not None and (failure.cell, failure.kind, failure.whole) == ("B+b0", "holds", False)


@pytest.mark.parametrize("zeros, refused", [("refuse", True), ("allow", False)])
def test_an_empty_part_follows_the_zero_policy(zeros, refused):
    """Leaves 0..9 flat, leaves 2 and 3 hold no record: a group of 0..3 has the empty part 2..3
    once a group 0..1 was answered."""
    size = 10
    cls = _classification(None)(size)
    n = np.array([20, 20, 0, 0, 20, 20, 20, 20, 20, 20], dtype=np.int64)
    counts = _counts(n, np.arange(size, dtype=np.int64) * 7919)
    first = np.arange(size) < 2
    assert judge(cls, np.zeros((0, size), dtype=bool), [Cell("g", first)], np.ones(size, dtype=bool), counts, LEAST,
                 zeros) is None
    failure = judge(cls, first[None, :], [Cell("h", np.arange(size) < 4)], np.ones(size, dtype=bool), counts, LEAST,
                    zeros)
    assert (failure is not None) == refused


def test_a_cut_group_is_judged_again_in_each_population():
    """H = 0..8 answered in population M; 0..7 answered in F, where leaf 8 is large (so the
    part it sets apart passes there); 0..7 asked in M, where leaf 8 holds 2 records, is refused:
    with H there it would publish leaf 8 of M by their difference, although it carves no new
    part (the partition is global) and its part cut off the total (leaves 8, 9) is large."""
    size = 10
    cls = _classification(None)(size)
    keys = np.arange(size, dtype=np.int64) * 104729
    female = _counts(np.array([20] * 10, dtype=np.int64), keys)
    male = _counts(np.array([20] * 8 + [2, 20], dtype=np.int64), keys + 1)
    everyone = np.ones(size, dtype=bool)
    h, g = np.arange(size) < 9, np.arange(size) < 8
    assert judge(cls, np.zeros((0, size), dtype=bool), [Cell("H", h)], everyone, male, LEAST, "refuse") is None
    assert judge(cls, h[None, :], [Cell("G", g)], everyone, female, LEAST, "refuse") is None
    failure = judge(cls, np.vstack([h, g]), [Cell("G", g)], everyone, male, LEAST, "refuse")
    assert failure is not None and (failure.cell, failure.kind) == ("G", "cuts")
