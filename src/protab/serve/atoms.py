"""Atoms of a classification: the classes of its finest codes that no answered cell tells apart,
and the differencing rule of custom groups judged on them (:mod:`protab.serve.groups`).

A *variable* is a classification: a dimension with its hierarchy's levels (``age`` with
``agegroup``, ``municipality`` with ``region``), or a dimension on its own. Every cell the
service publishes over it is a set of its finest codes (*leaves*): a code of an upper level is
the leaves under it, a custom group of any level's codes the leaves under those. The
*generators* are every code above the finest (and the total) and every custom cell ever
answered, to any user, through any dataset over the same records (kept by
:class:`protab.serve.atom_ledger.Ledger`). Their *atoms* are the
classes of leaves that no generator separates: every linear combination of answered cells —
any differences, of any users' groups, over any number of requests — is constant on atoms
(crossed with the cells of the other variables), so an atom is the finest thing they can
isolate, and fresh noise on many answers that differ by one atom would average out on it
(Asghar & Kaafar 2020, on ABS TableBuilder; Hundepool et al. 2012, Statistical Disclosure
Control, §5.4). Leaves are not generators: each is published anyway with its own noise, and
with them every atom would be one leaf.

A request's *fresh* cells are its groups and their total that are not a published code (a
group equal to a published code has the same records, so the same value, as that code's cell:
it adds nothing). After adding them to the generators, :func:`judge` asks, in the request's
filtered population and in every cell of its crossing with the other variables, that

0. every group and the groups' total hold at least ``least`` records;
1. every piece that a fresh cell cuts off a published code above the finest, or the total
   (``code \\ cell``), hold at least ``least`` (the cell and the code would publish it by their
   difference), and so every atom that the request newly carves out of such a code;
2. every atom inside a fresh cell hold at least ``least`` — atoms that are published codes
   too: groups that are whole small bands plus different large parts would average the band;
3. every atom inside an earlier custom cell that a fresh cell cuts (overlaps without containing)
   hold at least ``least``: that cell was judged in its own population, maybe not in this one.

Atoms of the total that the request does not carve are not judged again: what lies outside
every group is learnt only through the total, whose value (one cell key) is the same in every
answer, so asking again averages the groups' noise, never the total's; judging them would let
any small atom anywhere refuse every request. Counts are *perturbed* (the count p-table, the
cell key of a set being the sum of its records' keys modulo the modulus), as published cells
are, so a verdict tells no more than an answer would; a part with no records in a crossing
cell follows the dataset's ``group_zero_atoms`` ("refuse": its emptiness would be exact, since
two cells of the same records have the same value; "allow").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from protab.serve.classifications import MARGIN

#: SDMX's reserved code of a total (exchange outputs write it for the margins)
SDMX_TOTAL = "_T"


@dataclass(frozen=True, eq=False)
class Classification:
    """A variable's leaves (its finest codes, declared order) and published codes: ``published``
    has one row per code of each level above the finest, then the total (last), as leaf masks;
    ``leaf_rows[i, leaf]`` is the published row of the leaf's code at upper level ``i`` (the
    total's row last)."""

    dataset: str
    #: the records' table: datasets over one table share its records, so their groups are one ledger
    source: str
    variable: str
    levels: tuple[str, ...]
    table: pl.DataFrame = field(repr=False)
    published: np.ndarray = field(repr=False)
    published_names: tuple[str, ...] = field(repr=False)
    leaf_rows: np.ndarray = field(repr=False)
    reserved: frozenset[str] = field(repr=False)
    _keys: frozenset[bytes] = field(repr=False, default=frozenset())

    @property
    def leaves(self) -> list[str]:
        return self.table[self.levels[-1]].to_list()

    @property
    def size(self) -> int:
        return self.table.height

    def mask(self, column: str, codes: Sequence[str]) -> np.ndarray:
        """The leaves whose code at level ``column`` is one of ``codes``."""
        return self.table[column].is_in(list(codes)).to_numpy()

    def is_published(self, mask: np.ndarray) -> bool:
        """Whether the leaf set is a published cell: one leaf, a code of an upper level, the total."""
        return int(mask.sum()) == 1 or pack(mask) in self._keys


def pack(mask: np.ndarray) -> bytes:
    """A leaf mask as bytes (bit ``i`` of the leaves' order is leaf ``i``)."""
    return np.packbits(mask, bitorder="little").tobytes()


def unpack(data: bytes, size: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(data, np.uint8), count=size, bitorder="little").astype(bool)


def classification(dataset: str, variable: str, levels: Sequence[str], table: pl.DataFrame,
                   source: str | None = None) -> Classification:
    """The classification of ``variable`` of ``dataset`` (over the records of table ``source``,
    default the dataset's name) from its declared table (one row per leaf, a column per level,
    coarsest first, the variable last)."""
    levels = tuple(levels)
    size = table.height
    rows, names, leaf_rows = [], [], []
    offset = 0
    for col in levels[:-1]:
        first = table[col].unique(maintain_order=True).to_list()
        ids = table[col].replace_strict({c: k for k, c in enumerate(first)}, return_dtype=pl.Int64).to_numpy()
        onehot = np.zeros((len(first), size), dtype=bool)
        onehot[ids, np.arange(size)] = True
        rows.append(onehot)
        names += [f"{col} {c!r}" for c in first]
        leaf_rows.append(ids + offset)
        offset += len(first)
    rows.append(np.ones((1, size), dtype=bool))
    names.append(f"the total of {variable}")
    leaf_rows.append(np.full(size, offset))
    published = np.vstack(rows)
    reserved = frozenset(str(c) for col in levels for c in table[col].to_list()) | {MARGIN, SDMX_TOTAL}
    return Classification(dataset, source or dataset, variable, levels, table, published, tuple(names), np.vstack(leaf_rows),
                          reserved, frozenset(pack(r) for r in published))


def atom_labels(members: np.ndarray) -> np.ndarray:
    """Each leaf's atom (0, 1, ... in the order of the atoms' first leaves) under the generators
    ``members`` (one leaf mask per row): two leaves share an atom iff no row separates them."""
    size = members.shape[1]
    if members.shape[0] == 0 or size == 0:
        return np.zeros(size, dtype=np.int64)
    packed = np.ascontiguousarray(np.packbits(members, axis=0).T)  # a leaf's signature, as bytes
    rows = packed.view(np.dtype((np.void, packed.shape[1]))).ravel()
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.ravel()]


def cuts(members: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """``[g, c]``: whether cell ``c`` cuts generator ``g`` (overlaps it without containing it)."""
    if members.shape[0] == 0 or cells.shape[0] == 0:
        return np.zeros((members.shape[0], cells.shape[0]), dtype=bool)
    inter = members.astype(np.float32) @ cells.T.astype(np.float32)  # exact: counts below 2^24
    return (inter > 0) & (inter < members.sum(axis=1)[:, None])


@dataclass(frozen=True)
class Cell:
    """A cell a request publishes over the variable: its name in messages, its leaves, and
    whether it is a group or the groups' total (judged by the minimum of records on its own)."""

    label: str
    mask: np.ndarray = field(repr=False)
    group: bool = True


#: the perturbed counts of sets of leaves (:func:`protab.serve.groups.set_counts`, from the Session):
#: leaf masks (one set per row) → (frame, layers); the frame has a row ``set, q, n, p`` per set
#: and layer where the set holds records (``q`` = -1 the filtered population, 0 .. ``layers`` - 2
#: the cells of the crossing), ``n`` its records, ``p`` its perturbed count; secret
Counted = Callable[[np.ndarray], tuple[pl.DataFrame, int]]


@dataclass(frozen=True)
class Failure:
    """Why a request's cell is refused: ``kind`` "holds" (too few records itself or in a part
    of it), "differs" (from published code ``code``), "cuts" (an earlier group) or "carves"
    (a part of published code ``code``); ``whole``: the small part is the cell itself."""

    cell: str
    kind: str
    code: str | None = None
    whole: bool = False


@dataclass
class _Sets:
    """Verdicts on perturbed counts of sets (the Session's, :data:`Counted`): ``fails(frame)``."""

    least: int
    zeros: str

    def fails(self, frame: pl.DataFrame, n_sets: int, layers: int) -> np.ndarray:
        """Per set: a layer where it holds fewer than ``least`` records after perturbation, or
        (zeros "refuse") none; ``frame``: rows set, n, p, one per layer where the set has records."""
        if frame.is_empty():
            sid = n = p = np.zeros(0, dtype=np.int64)
        else:
            sid, n, p = frame["set"].to_numpy(), frame["n"].to_numpy(), frame["p"].to_numpy()
        bad = np.where(n > 0, p < self.least, self.zeros == "refuse")
        out = np.bincount(sid[bad], minlength=n_sets) > 0
        if self.zeros == "refuse":  # a layer without a row is a part with no records there
            out |= np.bincount(sid[n > 0], minlength=n_sets) < layers
        return out


@dataclass(frozen=True)
class _Layout:
    """The sets a request is judged on, from leaf masks alone: the atoms (``labels``: each leaf's
    under the generators and the fresh cells; ``carved``: the atoms the request newly carves)
    and the (published code, fresh cell) pairs the cell cuts within the request's domain."""

    labels: np.ndarray
    carved: np.ndarray
    cut_pub: np.ndarray

    @property
    def atoms(self) -> np.ndarray:
        """The atoms as leaf masks (one per row)."""
        return np.arange(int(self.labels.max()) + 1)[:, None] == self.labels[None, :]


def _layout(cls: Classification, custom: np.ndarray, fresh: np.ndarray, domain: np.ndarray) -> _Layout:
    base = np.vstack([cls.published, custom])
    old, lab = atom_labels(base), atom_labels(np.vstack([base, fresh]))
    first = np.unique(lab, return_index=True)[1]
    carved = np.bincount(lab, minlength=int(lab.max()) + 1) != np.bincount(old)[old[first]]
    published = cls.published.astype(np.float32)
    cut_pub = cuts(cls.published, fresh) & (published @ (domain & ~fresh).T.astype(np.float32) > 0)
    return _Layout(lab, carved, cut_pub)


@dataclass(frozen=True)
class _Verdicts:
    """Per fresh cell: the pieces it cuts off published codes that fail (``differs``, codes ×
    cells), whether an atom inside it fails (``holds``), an earlier cell it cuts holds a failing
    atom (``cuts``), it carves a failing new atom out of a code (``carves``, codes × cells)."""

    differs: np.ndarray
    holds: np.ndarray
    cuts: np.ndarray
    carves: np.ndarray
    labels: np.ndarray


def _verdicts(sets: _Sets, cls: Classification, custom: np.ndarray, fresh: np.ndarray, domain: np.ndarray,
              lay: _Layout, counts: pl.DataFrame, layers: int, offset: int) -> _Verdicts:
    """(1) to (3) of the module doc from the perturbed counts of the atoms (sets ``offset`` ..)
    and of the pieces ``code \\ cell`` of the cut pairs (the sets after the atoms)."""
    lab = lay.labels
    n_atoms, pairs = int(lab.max()) + 1, np.argwhere(lay.cut_pub)
    mine = counts.filter(pl.col("set") >= offset).with_columns(pl.col("set") - offset)
    atom_bad = sets.fails(mine.filter(pl.col("set") < n_atoms), n_atoms, layers)
    bad = (atom_bad & (np.bincount(lab[domain], minlength=n_atoms) > 0))[lab]  # per leaf
    differs = np.zeros(lay.cut_pub.shape, dtype=bool)
    if pairs.size:
        piece = mine.filter(pl.col("set") >= n_atoms).with_columns(pl.col("set") - n_atoms)
        differs[pairs[:, 0], pairs[:, 1]] = sets.fails(piece, len(pairs), layers)
    published = cls.published.astype(np.float32)
    carves = (published @ ((bad & lay.carved[lab])[None, :] & ~fresh).T.astype(np.float32) > 0) & lay.cut_pub
    held = (custom & bad).any(axis=1)
    return _Verdicts(differs, (fresh & bad).any(axis=1), (cuts(custom, fresh) & held[:, None]).any(axis=0), carves,
                     lab)


def judge(cls: Classification, custom: np.ndarray, cells: Sequence[Cell], domain: np.ndarray, counted: Counted,
          least: int, zeros: str) -> Failure | None:
    """The differencing rule (module doc) on a request's ``cells`` (none empty) over the
    generators: ``cls``'s published codes and the ``custom`` cells answered before (a leaf mask
    per row); ``domain``: the leaves the request's filters keep; ``counted``: the perturbed
    counts of sets of leaves (:data:`Counted`), asked once for every set judged (the groups, the
    atoms, the pieces cut off published codes). The first failure, in the order of ``cells``
    and of the module doc's conditions, or None."""
    sets = _Sets(least, zeros)
    grouped = [c for c in cells if c.group]
    fresh_cells = [c for c in cells if not cls.is_published(c.mask)]
    fresh = np.vstack([c.mask for c in fresh_cells]) if fresh_cells else np.zeros((0, cls.size), dtype=bool)
    lay = _layout(cls, custom, fresh, domain) if fresh_cells else None
    asked = [c.mask for c in grouped]
    if lay is not None:
        pairs = np.argwhere(lay.cut_pub)
        asked += [*lay.atoms, *(cls.published[pairs[:, 0]] & ~fresh[pairs[:, 1]])]
    counts, layers = counted(np.vstack(asked)) if asked else (_EMPTY, 1)
    group_bad: dict[str, bool] = {}
    if grouped:  # (0): each group cell's records in the population
        pop = counts.filter((pl.col("q") == -1) & (pl.col("set") < len(grouped)))
        group_bad = dict(zip([c.label for c in grouped], sets.fails(pop, len(grouped), 1)))
    v = _verdicts(sets, cls, custom, fresh, domain, lay, counts, layers, len(grouped)) if lay is not None else None
    index = {c.label: j for j, c in enumerate(fresh_cells)}
    for c in cells:
        j = index.get(c.label)
        if group_bad.get(c.label):
            return Failure(c.label, "holds", whole=True)
        if v is None or j is None:
            continue
        if v.differs[:, j].any():
            return Failure(c.label, "differs", cls.published_names[int(np.argmax(v.differs[:, j]))])
        if v.holds[j]:
            return Failure(c.label, "holds", whole=np.unique(v.labels[c.mask]).size == 1)
        if v.cuts[j]:
            return Failure(c.label, "cuts")
        if v.carves[:, j].any():
            return Failure(c.label, "carves", cls.published_names[int(np.argmax(v.carves[:, j]))])
    return None


_EMPTY = pl.DataFrame(schema={"set": pl.Int64, "q": pl.Int64, "n": pl.Int64, "p": pl.Int64})
