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

The report folder is written as a whole: every file is made in memory first, then all are
swapped into the folder at once (``protab._io.write_batch``); a run that fails or is killed
leaves the folder as it was, and files of the folder that are not the report's are kept. The
report describes original values and, for p-table methods, the p-table's noise distribution:
it is an internal document, not for publication.

Request files
-------------
``protab report REQUEST.toml [--out DIR]`` reads a TOML request. Every key is checked before
anything runs: an unknown key (anywhere, nested ones too) is an error naming it and the
closest valid key, a value of the wrong type (``"true"`` for true, ``"age"`` for ``["age"]``)
an error naming the key and the type it needs, and a file that is missing, a folder or not
UTF-8 text an error naming the file and its key. Paths are relative to the request file.

Top-level keys:

- ``dims`` (required): the dimension columns, a list of strings;
- ``include``, ``database``, ``output`` and ``[hierarchies.<dim>]``: the keys every front shares
  (docs/vocabulary.md); ``database`` is read only when ``[original]`` names a ``table``
  (``original.database``, its old place, is still read);
- ``title``: the report's title; ``output``: the report folder (default ``report``; ``--out``
  overrides it); ``total``: the code of a flat dimension's margin (default ``Total``);
- ``[original]`` (required): the original counts, either tabulated from the microdata or
  read from a file, exactly one of

  - ``table``: the microdata table in the DuckDB ``database`` (the top-level key, default
    ``protab.duckdb`` beside the request; ``run_request(…, database=…)`` overrides it), tabulated as ``protab protect`` tabulates a request table, with
    the same optional keys ``formula``, ``weight``, ``drop_empty``, ``null_code`` and the
    same ``[hierarchies.<dim>]`` sections (``columns``, ``code_lengths``, ``hrc``,
    ``parent_child`` or ``ssb_frame``, and ``root``). The database is opened read-only;
    this is trusted use of unprotected counts. When a method gives expected frequencies,
    the original inner cells are tabulated too;
  - ``file``: a CSV or Parquet file with the dims, the value column and optionally
    ``<dim>_level`` columns (as ``Session.tabulate`` writes them);

  and, either way, ``value`` (the value column, default ``n``; ``w`` for the weighted counts
  of a table with ``weight``), ``inner`` (a file of the original inner cells, for expected
  frequencies) and ``inner_value`` (its value column, default: ``value``);
- ``[[protected]]`` (required, one entry per method and setting): ``label`` (required: the
  name in the table and on the map), ``file`` (its protected table, CSV or Parquet: the dims
  and a value column), ``value`` (that column; found alone if it is one of n_pert,
  n_rounded, rounded, n_protected, protected, or the only numeric column), ``ptable`` (its
  p-table for the noise plot and table: a file as ``PTable.read`` reads it, or a table as the
  ``[ptable]`` of a protect request: ``{ file = "…", format = "…" }`` or
  ``{ maximum_entropy = { D = …, V = …, js = … } }``), ``expected`` (a file of
  its expected inner frequencies) and ``expected_value``; an entry needs ``file`` or
  ``expected``;
- ``[measures]`` (all optional): ``small`` (small cells are 1…small, default 2),
  ``sensitive`` (a dimension: disclosive cells and, with ``quasi``, F_β), ``quasi`` (a list
  of dimensions: the quasi-identifiers), ``know_yourself`` (true: the attacker is in the
  data; default true), ``beta`` (default 0.5), ``coalition`` (k of the directly disclosive
  cells, default 1), ``two_way`` (two dimensions: χ² and Cramér's V), ``groups`` (a
  dimension: the rows of AAD, variance of cell averages and ANOVA R²), ``risk`` and
  ``utility`` (columns of measures.csv: the axes of the R-U map).

Without ``risk`` the R-U map shows ``f_beta`` (with sensitive and quasi, when the original
has exact disclosures), else ``small_unchanged`` (when the original has small cells), else
``rm`` (on the inner cells or, for a table published by a formula, on its finest published
crossings), else ``small_share``; the report says why when it is not the first. When no row
has both values of the asked axes, the map says why in its middle.

Example: the demo census and a cell-key-protected table published by a formula. In a folder
of its own::

    protab demo --persons 20000 --db protab.duckdb --out protab_output

then ``protab report report.toml`` with this ``report.toml`` writes the folder ``report``::

    title = "Municipality by age group + municipality by sex"
    output = "report"
    dims = ["municipality", "agegroup", "sex"]
    database = "protab.duckdb"        # the default; relative to this file

    [original]                        # tabulated from the microdata (trusted use)
    table = "persons"
    formula = "municipality*agegroup + municipality*sex"

    [hierarchies.municipality]        # as in a protect request
    columns = ["region", "municipality"]

    [[protected]]
    label = "CKM D=5 V=3"
    file = "protab_output/municipality_agegroup_plus_sex.parquet"
    value = "n_pert"
    ptable = { maximum_entropy = { D = 5, V = 3, js = 2 } }   # the demo's; or a file name

    [measures]
    small = 2
    sensitive = "agegroup"
    quasi = ["municipality"]
    two_way = ["municipality", "sex"]

A report from files instead names ``file = "original.csv"`` in ``[original]`` (no
``database``, ``table`` or ``[hierarchies]``); tests/report/test_report.py runs such a request.

Cells are matched on the dimension columns (codes compared as strings). A cell missing from
a protected table counts as 0 when its original value is 0 (tables with ``drop_empty``) and is
an error otherwise; a null protected value (a blanked cell) counts as 0, as a naive user would
read it. Cells at every level of every dimension (margins included) enter the cell measures;
the inner cells (every dimension at its finest level: the largest ``<dim>_level``, or a code
other than ``total`` without level columns) enter the entropy measures and the group measures.
"""

from protab.report._columns import MEASURES
from protab.report.comparison import compare
from protab.report.plots import plot_noise, plot_ru_map
from protab.report.request_run import run_request

__all__ = ["MEASURES", "compare", "plot_noise", "plot_ru_map", "run_request"]
