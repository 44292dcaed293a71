"""Risk-utility reports: one table of measures per protection method, an R-U map, noise plots.

:func:`compare` puts an original table beside several protected versions of it (any protab
method's output: the dimension columns and a value column such as ``n_pert``) and, if given,
their expected inner frequencies (Langsrud & Lupp 2022: a fair comparison fits every method
to expected frequencies first). It returns a polars frame of the measures of
:mod:`protab.measures`, one row per method (and view), and with ``out_dir`` writes a report
folder a person reads:

- ``report.html`` and ``report.md``: a short introduction, the measures table, the figures,
  and what each measure means;
- ``ru_map.png``: the R-U confidentiality map (Duncan, Keller-McNulty & Stokes 2001; Shlomo
  & Young 2006), risk across and utility up, one labelled point per method and setting;
- ``noise_<method>.png`` for every method given a p-table: the noise v = protected −
  original per original value, observed (bars) against the p-table's probabilities (dots);
- ``measures.csv``: the measures table.

Every file is written atomically (a temporary name, then renamed). The report describes
original values and p-table noise: it is an internal document, not for publication.

Request file of ``protab report REQUEST.toml [--out DIR]`` (paths relative to the file)::

    title = "Party by age and sex"        # optional
    output = "report"                      # optional report folder; --out overrides
    dims = ["party", "age", "sex"]         # the dimension columns shared by every file
    total = "Total"                        # optional: the code of a margin (default Total)

    [original]
    file = "original.csv"                  # CSV or Parquet: dims + value (+ <dim>_level)
    value = "n"                            # optional, default "n"
    inner = "original_inner.csv"           # optional: the original inner cells (for expected)
    inner_value = "n"                      # optional, default: value

    [[protected]]                          # one entry per method and parameter setting
    label = "CKM D=5 V=3"                  # the name in the table and on the map
    file = "ckm.parquet"                   # its protected table (may be left out if expected)
    value = "n_pert"                       # optional: n_pert, n_rounded, rounded, … found alone
    ptable = "ptable.csv"                  # optional: its p-table (PTable.read): noise plot
    expected = "ckm_expected.csv"          # optional: its expected inner frequencies
    expected_value = "expected"            # optional: expected, n_expected, ipfit, … found alone

    [measures]                             # all optional
    small = 2                              # small cells are 1…small
    sensitive = "party"                    # sensitive dimension: disclosive cells, F_β
    quasi = ["age", "sex"]                 # quasi-identifiers for the disclosure probabilities
    know_yourself = true                   # the attacker is a member (1-coalition)
    beta = 0.5
    coalition = 1                          # k of the directly disclosive cells
    two_way = ["party", "age"]             # χ² and Cramér's V of this two-way crossing
    groups = "party"                       # rows for AAD, variance of cell averages, ANOVA R²
    risk = "f_beta"                        # x axis of the R-U map (a column of measures.csv)
    utility = "hellinger_utility"          # y axis

Cells are matched on the dimension columns (codes compared as strings). A cell missing from
a protected table counts as 0 when its original value is 0 (tables with ``drop_empty``) and is
an error otherwise; a null protected value (a blanked cell) counts as 0, as a naive user would
read it. Cells at every level of every dimension (margins included) enter the cell measures;
the inner cells (every dimension at its finest level: the largest ``<dim>_level``, or a code
other than ``total`` without level columns) enter the entropy measures and the group measures.
"""

from protab import measures as m  # noqa: F401  (in protab.report's namespace before it became a package)
from protab._io import (
    atomic_path,  # noqa: F401  (likewise)
    write_frame,  # noqa: F401  (likewise)
    write_text,  # noqa: F401  (likewise)
)
from protab.errors import (
    InputError,  # noqa: F401  (likewise)
    SpecError,  # noqa: F401  (likewise)
    show_values,  # noqa: F401  (likewise)
)
from protab.ptable import PTable  # noqa: F401  (likewise)
from protab.report._common import MEASURES
from protab.report.comparison import compare
from protab.report.plots import plot_noise, plot_ru_map
from protab.report.request import run_request

__all__ = ["MEASURES", "compare", "plot_noise", "plot_ru_map", "run_request"]
