"""Hierarchies of dimension codes, and the ``(leaf, ancestor, level)`` relation margins join to.

A :class:`Hierarchy` is an immutable tree of string codes with one root (the grand total,
``"Total"`` unless named otherwise). Data are coded at its leaves; every other code is a
margin. :meth:`Hierarchy.relation` gives the bridge table with one row per (leaf, ancestor)
pair, the leaf itself and the root included, so that every margin of a table is a join of
inner cells with these relations followed by ``GROUP BY`` (docs/design.md, idea 2).

Hierarchies need not be trees: SSBtools frames (and parent-child links with a sign and
``several_parents=True``) may subtract codes (EU = Europe − nonEU) and put a code under
several parents (overlapping groups). Then the relation carries a ``coef`` column, the
signed number of times a leaf enters a code, and margins are Σ coef × value; the root is
still the plain total of all leaves. Semantics and rules: :mod:`protab.hierarchy._graph`.

Conventions:

* **Levels**: the root is level 0, its children level 1, and so on. Leaves may sit at
  different levels (ragged trees). ``depth`` is the largest level.
* **Order**: codes are kept by level, then in input order: the order of the links that
  introduce them (the row, or ``.hrc`` line, where a code appears as a child; codes that
  are never children by their first appearance as a parent). The root comes first.
* **Codes are strings.** Integer codes (Python, numpy, polars, Arrow) are converted with
  ``str()`` on input and in lookups, so ``101`` becomes ``"101"``: give strings when codes
  have leading zeros (``"0101"``). Floats, booleans and other types are refused.

Readers for the formats of the R and tau-ARGUS tools: parent-child pairs, positional codes
(sdcHierarchies ``hier_compute(method = "len")``), SSBtools to-from frames
(``mapsFrom``/``mapsTo``/``sign``/``level``) and tau-ARGUS ``.hrc`` files.

Everything is vectorised (numpy and polars): hierarchies of national 1 km grids have
10^5-10^6 codes. Python loops run over levels (or ``log2`` of the number of codes), never
over codes.
"""

from protab.hierarchy._input import DEFAULT_ROOT
from protab.hierarchy.hierarchy_class import Hierarchy
from protab.hierarchy.level_columns import from_level_columns

__all__ = ["DEFAULT_ROOT", "Hierarchy", "from_level_columns"]
