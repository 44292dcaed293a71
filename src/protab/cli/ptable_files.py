"""``protab ptable``: p-table files generated, converted, shown or installed for ckm(); count
p-tables (frequencies) and magnitude p-tables (sums; R ptable calls them numeric)."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any, Literal, get_args

from protab._io import check_output_file
from protab.cli.options import DB_HELP, DEFAULT_DATABASE, require_database
from protab.errors import InputError
from protab.request.loaders import reading

PTABLE_KINDS = """\
Count p-tables perturb frequencies (ckm() in SQL; [ptable] of a protect request). Numeric
(magnitude) p-tables perturb sums ([magnitude] of a protect request; R ptable's
create_num_ptable): noise on a grid of 1/step per ratio class i, of type all, even, odd or
small_cells. Layouts: ptable (R ptable's CSV; format = "r" in a request's [magnitude]),
tauargus (tau-ARGUS' ';' file; "argus"); ons holds count p-tables only.

show and convert tell the kinds apart: a file with integer noise and a row for every
original value is a count p-table; one with fractional noise, gaps between the classes or
a type even/odd/small_cells is numeric. --magnitude (or --numeric, R ptable's word) refuses
a count p-table; install refuses a numeric one.

{policy}
They are not to be published: knowing D, an attacker bounds every true count within D of
its published value, and additivity narrows those bounds further (the ESS guidelines for
census protection advise against publishing D; docs/census.md). Whoever can read the file
can read them: keep the file, and the output of --reveal-parameters, internal.
"""

#: the one policy on p-table parameters, said alike by `protab ptable --help`, `show`, the
#: README and docs/census.md (tests/cli/test_ptable_show_keeps_parameters_secret.py)
PARAMETERS_POLICY = (
    "p-table parameters (D, V, js, pstay) are secrets of the office: no protected output, log line or "
    "error message of protab shows them, and `protab ptable show` prints them, with the rows they can be "
    "read off from, only with --reveal-parameters, for the office that holds the file."
)

PTABLE_GENERATE = """\
examples:
  protab ptable generate --D 5 --V 3 --js 2 --out counts.csv
  protab ptable generate --magnitude --D 10 --V 3 --step 2 --icat 1 5 10 --optim 4 1 1 \\
      --out sums.csv --format tauargus

--magnitude (or --numeric, R ptable's word) takes --D, --V, --icat (required: the ratio
classes, including 1 and D), --step, --optim, --mono (true/false, one or one per class) and
--type; not --js, --pstay or the ons layout. Rows that cannot reach the variance V warn (see
`protab ptable show --reveal-parameters`).
"""

#: the command line's p-table layouts (PTable.read's formats), and the names MagnitudePTable gives them
#: (no ons layout)
Layout = Literal["auto", "ptable", "tauargus", "ons"]
_LAYOUTS = list(get_args(Layout))
_NUMERIC_LAYOUTS: dict[str, Literal["auto", "r", "argus"]] = {"auto": "auto", "ptable": "r", "tauargus": "argus"}


def add_parser(sub: Any) -> None:
    """``protab ptable`` and its actions generate, convert, show and install."""
    policy = textwrap.fill(PARAMETERS_POLICY, 92)
    pt = sub.add_parser("ptable", help="generate, convert, show or install p-tables",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog=PTABLE_KINDS.format(policy=policy),
                        description="Perturbation tables (p-tables) of the cell key method: count p-tables\n"
                                    "for frequencies, numeric (magnitude) p-tables for sums.")
    ps = pt.add_subparsers(dest="pcmd", required=True, metavar="ACTION")
    _add_generate(ps)
    _add_convert(ps)
    _add_show(ps)
    _add_install(ps)


def _magnitude_option(p: Any, help: str) -> None:
    """``--magnitude``, with ``--numeric`` (R ptable's word) as its other name."""
    p.add_argument("--magnitude", "--numeric", dest="magnitude", action="store_true", help=help)


def _add_generate(ps: Any) -> None:
    g = ps.add_parser("generate", help="a maximum-entropy p-table (as the R package ptable)",
                      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=PTABLE_GENERATE,
                      description="A count p-table by maximum entropy (R ptable's create_cnt_ptable), or with\n"
                                  "--magnitude a magnitude p-table (create_num_ptable) for the [magnitude]\n"
                                  "section of a protect request.")
    g.add_argument("--D", type=int, required=True, help="maximum deviation (noise in -D..D)")
    g.add_argument("--V", type=float, required=True, help="variance of the noise")
    g.add_argument("--js", type=int, default=0, help="counts 1..js are never published (default 0; counts only)")
    g.add_argument("--pstay", type=float, help="least probability of no change (default: none; counts only)")
    g.add_argument("--infeasible", choices=("error", "warn"), default="error",
                   help="a row that cannot have a variance as small as V: refuse (error, as R's ptable; "
                        "default) or build it with its smallest variance and warn")
    g.add_argument("--out", required=True, help="the p-table file to write")
    g.add_argument("--format", default="ptable", choices=["ptable", "tauargus", "ons"],
                   help="file layout: ptable (R CSV, default), tauargus, ons (counts only)")
    g.add_argument("--bits", type=int, default=8, help="ons layout only: cell keys below 2^bits (default 8)")
    gn = g.add_argument_group("numeric (magnitude) p-tables")
    _magnitude_option(gn, "a magnitude p-table for sums (R ptable's create_num_ptable) instead of a count one; "
                          "--numeric is R ptable's word for it")
    gn.add_argument("--icat", type=int, nargs="+", metavar="I",
                    help="required with --magnitude: the ratio classes, integers including 1 and D")
    gn.add_argument("--step", type=int, help="the noise grid is 1/step (default 2); D * step must be below 50")
    gn.add_argument("--optim", type=int, nargs="+", metavar="K",
                    help="optimisation 1 to 4 (4: variance exactly V), one or one per class (default 1)")
    gn.add_argument("--mono", nargs="+", metavar="true|false",
                    help="probabilities non-decreasing up to v = 0: one or one per class (default true)")
    gn.add_argument("--type", metavar="TYPE", help="the table's type: all (default), even, odd or small_cells")
    g.set_defaults(run=_run_generate)


def _add_convert(ps: Any) -> None:
    c = ps.add_parser("convert", help="convert a p-table file between layouts",
                      description="Read a p-table in one layout and write it in another. A numeric p-table "
                                  "keeps every type its file holds (an even/odd pair stays a pair, even "
                                  "first as tau-ARGUS needs).")
    c.add_argument("source", help="the p-table file to read")
    c.add_argument("target", help="the p-table file to write")
    c.add_argument("--to", default="tauargus", choices=["ptable", "tauargus", "ons"],
                   help="layout to write (default tauargus; ons holds count p-tables only)")
    c.add_argument("--from", dest="from_", default="auto", choices=_LAYOUTS,
                   help="layout to read (default: told from the file)")
    c.add_argument("--bits", type=int, default=8, help="--to ons only: cell keys below 2^bits (default 8)")
    _magnitude_option(c, "the source must be a numeric (magnitude) p-table (a count one is refused); "
                         "--numeric is R ptable's word")
    c.set_defaults(run=_run_convert)


def _add_show(ps: Any) -> None:
    sh = ps.add_parser("show", help="check a p-table (with --reveal-parameters: D, V and the rows; numeric: "
                                    "per ratio class)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Check a p-table file: its kind (count or numeric), and whether its noise is "
                                   "unbiased and\nleaves empty cells at 0. With --reveal-parameters also a count "
                                   "p-table's D, V and summary per\noriginal value (--png draws its noise), or a "
                                   "numeric p-table's per ratio class, for each type\nits file holds "
                                   "(MagnitudePTable.summary: nothing the file does not hold).\n\n"
                                   + textwrap.fill(PARAMETERS_POLICY, 92))
    sh.add_argument("source", help="the p-table file to read")
    sh.add_argument("--from", dest="from_", default="auto", choices=_LAYOUTS,
                    help="layout to read (default: told from the file)")
    sh.add_argument("--reveal-parameters", dest="reveal", action="store_true",
                    help="print D, V and the summary per row or ratio class (secrets: keep the output internal)")
    sh.add_argument("--png", help="with --reveal-parameters: write a PNG of the noise distribution per original "
                                  "value here (counts only; it shows D and V)")
    _magnitude_option(sh, "the file must be a numeric (magnitude) p-table (a count one is refused); "
                          "--numeric is R ptable's word")
    sh.set_defaults(run=_run_show)


def _add_install(ps: Any) -> None:
    i = ps.add_parser("install", help="install a count p-table for the SQL macro ckm()",
                      description="Install a count p-table in a database, for ckm(count(*), sum(rkey)) in "
                                  "SQL (numeric p-tables serve the [magnitude] section of a protect request).")
    i.add_argument("source", help="the p-table file to read")
    i.add_argument("--db", default=DEFAULT_DATABASE, help=DB_HELP)
    i.add_argument("--table", help="keyed table whose key modulus to use")
    i.add_argument("--bits", type=int, help="key modulus 2^bits (1 to 32), for keys made elsewhere")
    i.add_argument("--decimals", type=int, help="key modulus 10^decimals (1 to 18), for decimal keys")
    i.set_defaults(run=_run_install)


# -- the actions ----------------------------------------------------------------------------
def _run_generate(args: argparse.Namespace) -> None:
    from protab.ptable import PTable

    if args.magnitude:
        _generate_magnitude(args)
        return
    given = [o for o in ("icat", "step", "optim", "mono", "type") if getattr(args, o) is not None]
    if given:
        raise InputError(f"--{given[0]} is an option of numeric (magnitude) p-tables: add --numeric")
    modulus = _ons_modulus(args.format, args.bits)
    check_output_file(args.out)
    p = PTable.maximum_entropy(D=args.D, V=args.V, js=args.js, pstay=args.pstay, infeasible=args.infeasible)
    p.write(args.out, format=args.format, **modulus)
    print(f"wrote {args.out}")


def _run_convert(args: argparse.Namespace) -> None:
    modulus = _ons_modulus(args.to, args.bits)
    check_output_file(args.target)
    found, p = read_ptable(args.source, args.from_, "numeric" if args.magnitude else "auto")
    if found == "numeric":
        _write_magnitude(p, args.target, args.to, args.source)
    else:
        p.write(args.target, format=args.to, **modulus)
    print(f"wrote {args.target}")


def _run_show(args: argparse.Namespace) -> None:
    print(show_ptable(args.source, args.from_, args.png, "numeric" if args.magnitude else "auto", reveal=args.reveal))


def _run_install(args: argparse.Namespace) -> None:
    from protab.session import Session

    given = [o for o in ("table", "bits", "decimals") if getattr(args, o) is not None]
    if len(given) != 1:
        raise InputError("give exactly one of --table, --bits or --decimals for the key modulus")
    if args.bits is not None and not 1 <= args.bits <= 32:
        raise InputError(f"--bits must be from 1 to 32 (got {args.bits})")
    if args.decimals is not None and not 1 <= args.decimals <= 18:
        raise InputError(f"--decimals must be from 1 to 18 (got {args.decimals})")
    _, p = read_ptable(args.source, kind="count")
    require_database(args.db)
    with Session(args.db) as s:
        if args.table:
            s.install_ptable(p, table=args.table)
        elif args.bits:
            s.install_ptable(p, modulus=2**args.bits)
        else:
            s.install_ptable(p, modulus=10**args.decimals)
    print(f"p-table installed in {args.db}; use ckm(count(*), sum(rkey)) in SQL")


def _ons_modulus(fmt: str, bits: int) -> dict[str, int]:
    """The ONS layout lists every integer cell key, so it needs the key modulus 2^bits."""
    if fmt != "ons":
        return {}
    if not 1 <= bits <= 20:
        raise InputError("--bits for the ons layout must be from 1 to 20 (ONS uses 8: keys 0-255)")
    return {"modulus": 2**bits}


def _generate_magnitude(args: argparse.Namespace) -> None:
    """`protab ptable generate --magnitude`: MagnitudePTable.maximum_entropy, written as ptable or tauargus."""
    from protab.ptable.magnitude_ptable import MagnitudePTable

    kw = _magnitude_parameters(args)
    check_output_file(args.out)
    p = MagnitudePTable.maximum_entropy(args.D, args.V, infeasible=args.infeasible, **kw)
    p.write(args.out, format=_NUMERIC_LAYOUTS[args.format])  # type: ignore[arg-type]
    print(f"wrote {args.out}")


def _magnitude_parameters(args: argparse.Namespace) -> dict[str, Any]:
    """The options of a magnitude p-table as MagnitudePTable.maximum_entropy takes them (besides D, V)."""
    from protab.ptable.magnitude_ptable import TYPES

    if args.icat is None:
        raise InputError("--numeric needs --icat: the ratio classes, integers from 1 to D that include 1 and D")
    if args.js:
        raise InputError("--js applies to count p-tables; numeric p-tables have no js")
    if args.pstay is not None:
        raise InputError("--pstay applies to count p-tables (R ptable ignores it for numeric ones)")
    if args.format == "ons":
        raise InputError("the ons layout holds count p-tables; write a numeric p-table as ptable or tauargus")
    if args.type is not None and args.type not in TYPES:
        raise InputError(f"--type must be one of {', '.join(TYPES)}")
    kw: dict[str, Any] = {"step": 2 if args.step is None else args.step, "icat": args.icat,
                          "type": args.type or "all"}
    for name in ("optim", "mono"):
        given = getattr(args, name)
        if given is not None and len(given) not in (1, len(set(args.icat))):
            raise InputError(f"--{name} takes one value, or one per class of --icat")
    if args.optim is not None:
        kw["optim"] = args.optim[0] if len(args.optim) == 1 else args.optim
    if args.mono is not None:
        words = [m.strip().lower() for m in args.mono]
        if any(w not in ("true", "false") for w in words):
            raise InputError("--mono takes true or false: one, or one per class of --icat")
        kw["mono"] = words[0] == "true" if len(words) == 1 else [w == "true" for w in words]
    return kw


def _write_magnitude(tables: dict[str, Any], target: str, layout: str, source: str) -> None:
    """Every table of a magnitude p-table file, in one file: one table as it is, several as a set."""
    from protab.ptable import MagnitudePTable

    if layout == "ons":
        raise InputError(f"the ons layout holds count p-tables; {source!r} is a numeric (magnitude) "
                         "p-table: convert it --to ptable or tauargus")
    fmt = _NUMERIC_LAYOUTS[layout]
    if len(tables) == 1:
        next(iter(tables.values())).write(target, format=fmt)
    else:
        MagnitudePTable.write_set(target, tables, format=fmt)  # type: ignore[arg-type]


# -- reading and showing p-table files ------------------------------------------------------
def read_ptable(source: str, fmt: Layout = "auto", kind: str = "auto") -> tuple[str, Any]:
    """A p-table file as ``("count", PTable)`` or ``("numeric", {type: MagnitudePTable})``.

    ``kind`` "auto" tells them apart: a file :meth:`PTable.read` accepts (integer noise, a row
    for every original value, type "all" only) is a count p-table, else one
    :meth:`MagnitudePTable.read_set` accepts is numeric. "count" and "numeric" refuse the other.
    """
    from protab.errors import PTableError
    from protab.ptable import MagnitudePTable, PTable

    layout = _NUMERIC_LAYOUTS.get(fmt)
    if kind == "numeric" and layout is None:
        raise InputError(f"--from {fmt} is a layout of count p-tables; numeric (magnitude) p-tables are "
                         "read from the ptable or tauargus layout")
    with reading(source, "the p-table file"):
        try:
            count = PTable.read(source, format=fmt)
        except PTableError as exc:
            count_error = exc
        else:
            return _refuse_kind("count", kind, source), count
        if layout is None:
            raise count_error
        try:
            tables = MagnitudePTable.read_set(source, format=layout)
        except PTableError:
            if kind == "numeric" or "numeric (magnitude)" in str(count_error):
                raise
            raise count_error from None
    return _refuse_kind("numeric", kind, source), tables


def _refuse_kind(found: str, wanted: str, source: str) -> str:
    if wanted in ("auto", found):
        return found
    if found == "count":
        raise InputError(f"the p-table file {source!r} is a count p-table (integer noise, a row for every "
                         "original value), not a numeric (magnitude) one; leave out --numeric for counts")
    raise InputError(f"the p-table file {source!r} is a numeric (magnitude) p-table; this command takes count "
                     "p-tables (numeric ones serve the [magnitude] section of `protab protect`)")


def show_ptable(source: str, fmt: Layout = "auto", png: str | None = None, kind: str = "auto", *,
                reveal: bool = False) -> str:
    """A p-table file checked: its kind, whether its noise is unbiased and keeps empty cells at 0.
    With ``reveal`` also its parameters and summary (count: D, V, rows, the summary per original
    value; numeric: per ratio class, for each type the file holds) and, with ``png``, a picture of
    a count p-table's noise; these give D, V and js away (:data:`PARAMETERS_POLICY`)."""
    if png and not reveal:
        raise InputError("--png draws the noise of every row, from which D, V and js are read off at a glance: "
                         "add --reveal-parameters (and keep the picture internal)")
    found, p = read_ptable(source, fmt, kind)
    if found == "numeric":
        if png:
            raise InputError(f"--png draws count p-tables; {source!r} is a numeric (magnitude) p-table")
        text = _show_magnitude(source, p, reveal)
    elif reveal:
        text = _reveal_count(source, p, png)
    else:
        text = [f"count p-table {source}: {_checks(p.summary()['mean'], _row0(p.frame))}"]
    if not reveal:
        hidden = ("D, V, the step and the ratio classes are not shown, nor the summary per class" if found == "numeric"
                  else "D, V, js and pstay are not shown, nor the number of rows, the variances and the noise ranges")
        text.append(f"{hidden}, from which they are read off.")
    text.append(f"Note: {PARAMETERS_POLICY}")
    return "\n".join(text)


def _checks(means: Any, row0: str) -> str:
    """What a p-table's file says without its parameters: unbiased or not, and its row 0."""
    worst = float(means.abs().max())
    bias = ("the noise has mean 0 in every row (unbiased, to the 1e-6 of a file's probabilities)" if worst < 1e-6
            else f"the noise is biased (a row's mean is up to {worst:.3g} away from 0)")
    return f"{bias}; {row0}"


def _row0(frame: Any) -> str:
    import polars as pl

    zero = frame.filter((pl.col("i") == 0) & (pl.col("ub_n") > pl.col("lb_n")) if "ub_n" in frame.columns
                        else pl.col("i") == 0)
    if zero.height == 0:
        return "no row 0: counts below its first row are published as they are"
    return ("an empty cell stays 0" if (zero["v"] == 0).all()
            else "row 0 moves empty cells (its noise is not only 0)")


def _reveal_count(source: str, p: Any, png: str | None) -> list[str]:
    """A count p-table's D, V, rows and summary per original value (for the office only)."""
    import polars as pl

    summary = p.summary()
    D, V = int(summary["D"][0]), float(summary["V"][0])
    text = [f"p-table {source}: D = {D}, V = {V:g}, {p.frame.height} rows, original values "
            f"0..{int(summary['i'].max())} (the last serves every larger count)"]
    summary = summary.drop("D", "V")
    with pl.Config(tbl_rows=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   float_precision=4):
        text.append(str(summary))
    if png:
        from protab._io import atomic_path

        with atomic_path(png) as tmp:
            p.plot(tmp)
        text.append(f"wrote {png}")
    return text


def _show_magnitude(source: str, tables: dict[str, Any], reveal: bool) -> list[str]:
    """Each table of a numeric p-table file checked; with ``reveal`` its MagnitudePTable.summary()
    (nothing the file does not hold)."""
    import polars as pl

    kinds = ", ".join(tables)
    text = [f"numeric (magnitude) p-table {source}: {len(tables)} table{'s' if len(tables) > 1 else ''} "
            f"(type {kinds})"]
    if not reveal:
        for kind, t in tables.items():
            text.append(f"type {kind}: {_checks(t.summary()['mean'], _row0(t.frame))}")
        return text
    text.append("per ratio class i: mean and variance of the noise v (in units of x_delta), p_stay (p of "
                "v = 0), n_entries")
    with pl.Config(tbl_rows=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   float_precision=4):
        for kind, t in tables.items():
            text.append(f"type {kind}: {len(t.rows) - 1} ratio classes and row 0, {len(t)} entries")
            text.append(str(t.summary()))
    return text
