"""Request files of ``protab report REQUEST.toml``: the schema, reading the files, run_request.

The request format is described in the docstring of :mod:`protab.report`. Every key is
checked against :data:`REQUEST` (built from :mod:`protab.request.schema`) before anything is read,
so that a misspelt key or a string where a list belongs stops the run with a message that
names the key. Every file the request names is checked before it is read: a missing file,
a folder or a file that is not UTF-8 text raises a protab error naming the file and the key.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from protab._io import check_output_folder, database_files, protected_form, refuse_replacing
from protab.errors import InputError, ProtabError, SpecError, show_values
from protab.ptable import PTable
from protab.report._columns import MEASURES
from protab.report.comparison import compare
from protab.request.schema import HIERARCHY, PROTECT_TABLE, PTABLE, Bool, Dict, Int, List, Num, Str, Table, Type, check
from protab.vocabulary.include import read_with_includes
from protab.vocabulary.sections import DATABASE, DEFAULT_DATABASE, OUTPUT

__all__ = ["REQUEST", "run_request"]

_T = TypeVar("_T")

# --------------------------------------------------------------------------------------------
# the schema of a report request

_NAMES = List(Str(), unique=True)


class _PTableKey(Type):
    """A p-table: a file name, or a table as the [ptable] section of a protect request."""

    name = "a p-table file name or a table (file = '…', or maximum_entropy = { D = …, V = … })"

    def check(self, value: Any, path: str) -> None:
        if isinstance(value, dict):
            PTABLE.check(value, path)
        elif isinstance(value, str):
            Str().check(value, path)
        else:
            raise SpecError(f"request: {path} must be {self.name}, not {value!r}")


_MEASURE_NAMES = tuple(MEASURES)

ORIGINAL = Table(
    {
        # the original counts from a file …
        "file": Str(),
        # … or tabulated from the microdata (trusted use), as protab protect describes a table;
        # its database: the top-level key database (original.database: its old place, still read)
        "database": DATABASE,
        "table": Str(),
        **{k: PROTECT_TABLE.keys[k] for k in ("formula", "weight", "drop_empty", "null_code")},
        # either way
        "value": Str(),
        "inner": Str(),
        "inner_value": Str(),
    },
    one_of=("file", "table"),
    doc="file = '…' or table = '…'",
)

PROTECTED = Table(
    {
        "label": Str(),
        "file": Str(),
        "value": Str(),
        "ptable": _PTableKey(),
        "expected": Str(),
        "expected_value": Str(),
    },
    required=("label",),
)

MEASURE_OPTIONS = Table(
    {
        "small": Int(1),
        "sensitive": Str(),
        "quasi": _NAMES,
        "know_yourself": Bool(),
        "beta": Num(0),
        "coalition": Int(0),
        "two_way": _NAMES,
        "groups": Str(),
        "risk": Str(choices=_MEASURE_NAMES),
        "utility": Str(choices=_MEASURE_NAMES),
    },
)

REQUEST = Table(
    {
        "title": Str(),
        "database": DATABASE,
        "output": OUTPUT,
        "dims": _NAMES,
        "total": Str(),
        "original": ORIGINAL,
        "hierarchies": Dict(HIERARCHY),
        "protected": List(PROTECTED),
        "measures": MEASURE_OPTIONS,
    },
    required=("dims", "original", "protected"),
)
"""The keys of a report request (format in the docstring of :mod:`protab.report`)."""

# keys of [original] that only make sense when the counts are tabulated from the database
_TABLE_ONLY = ("database", "formula", "weight", "drop_empty", "null_code")


# --------------------------------------------------------------------------------------------
# files named by the request


class _Request:
    """A request file being read: its folder (paths are relative to it) and its name."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.base = path.parent
        self.name = f"request {str(path)!r}"

    def fail(self, exc: ProtabError, key: str | None = None) -> ProtabError:
        """The same error, its message saying which request (and key) it comes from."""
        msg = str(exc)
        msg = msg[len("request: "):] if msg.startswith("request: ") else msg
        where = f"{self.name}: {key}: " if key else f"{self.name}: "
        return type(exc)(where + msg)

    def file(self, key: str, value: str) -> Path:
        """The path of a file named by ``key = value``: it must exist and be a file."""
        path = self.base / value
        if not path.exists():
            raise InputError(
                f"{self.name}: {key} = {value!r}: no such file ({path}); paths in a request are "
                "relative to the request file"
            )
        if not path.is_file():
            raise InputError(f"{self.name}: {key} = {value!r}: {path} is a folder, not a file; name a file")
        return path

    @contextmanager
    def reading(self, key: str, value: str) -> Iterator[None]:
        """Turn the errors of reading the file of ``key = value`` into protab errors naming both."""
        head = f"{self.name}: {key} = {value!r}"
        try:
            yield
        except UnicodeDecodeError:
            raise InputError(f"{head}: the file is not UTF-8 text; save it as UTF-8") from None
        except OSError as exc:
            raise InputError(f"{head}: cannot read the file ({exc.strerror or exc})") from None
        except pl.exceptions.PolarsError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if "utf-8" in first.lower() or "utf8" in first.lower():
                raise InputError(f"{head}: the file is not UTF-8 text; save it as UTF-8") from None
            raise InputError(f"{head}: cannot read the file as a table ({first})") from None
        except ProtabError as exc:
            raise self.fail(exc, f"{key} = {value!r}") from None

    def load(self, key: str, value: str, reader: Callable[[Path], _T]) -> _T:
        path = self.file(key, value)
        with self.reading(key, value):
            return reader(path)


def _read_table(path: Path, dims: Sequence[str]) -> pl.DataFrame:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return pl.read_csv(path, schema_overrides={d: pl.String for d in dims})
    if suffix in (".parquet", ".pq"):
        return pl.read_parquet(path)
    raise InputError(f"cannot read {path.name!r}: use a .csv or .parquet file")


def _ptable(req: _Request, key: str, cfg: str | Mapping[str, Any]) -> PTable:
    """A p-table named by a file, or made as protab protect makes the p-table of its request."""
    if isinstance(cfg, str):
        return req.load(key, cfg, PTable.read)
    from protab.request.loaders import load_ptable  # the [ptable] section of a protect request

    if "file" in cfg:
        with req.reading(f"{key}.file", cfg["file"]):
            return load_ptable(dict(cfg), req.base)
    try:
        return load_ptable(dict(cfg), req.base)
    except ProtabError as exc:
        raise req.fail(exc, key) from None


def _read_request(path: Path) -> dict[str, Any]:
    if path.is_dir():
        raise SpecError(f"cannot read the request file {str(path)!r}: it is a folder; name a TOML file")
    try:
        return read_with_includes(path, "report")
    except UnicodeDecodeError:
        raise SpecError(f"cannot read the request file {str(path)!r}: it is not UTF-8 text") from None


# --------------------------------------------------------------------------------------------
# checks beyond the types


def _check_request(req: _Request, cfg: Mapping[str, Any]) -> None:
    """The request's schema, then what the types cannot say: which keys go together."""
    try:
        check(cfg, REQUEST)
    except SpecError as exc:
        raise req.fail(exc) from None
    _check_original(req, cfg)
    _check_protected(req, cfg["protected"])
    _check_measures(req, cfg.get("measures", {}), cfg["dims"])


def _check_original(req: _Request, cfg: Mapping[str, Any]) -> None:
    """[original] from a file takes none of the keys of a table tabulated from the database."""
    dims = cfg["dims"]
    oc = cfg["original"]
    if "file" in oc:
        given = [k for k in _TABLE_ONLY if k in oc]
        if given:
            raise SpecError(
                f"{req.name}: original.{', original.'.join(given)}: only with original.table = '…' "
                "(counts tabulated from the database); with file = '…' the counts come from the file"
            )
        if "hierarchies" in cfg:
            raise SpecError(
                f"{req.name}: [hierarchies] only apply when [original] names table = '…' (counts "
                "tabulated from the database); remove them or tabulate from the database"
            )
    unknown_h = sorted(set(cfg.get("hierarchies", {})) - set(dims))
    if unknown_h:
        raise SpecError(f"{req.name}: [hierarchies] {show_values(unknown_h)} not among dims {show_values(dims)}")
    if "inner_value" in oc and "inner" not in oc:
        raise SpecError(f"{req.name}: original.inner_value needs original.inner = '…' (the file of the inner cells)")


def _check_protected(req: _Request, entries: Sequence[Mapping[str, Any]]) -> None:
    """Every [[protected]] entry has its own label and a file or expected frequencies."""
    labels: set[str] = set()
    for k, e in enumerate(entries):
        where = f"protected[{k}] (label {e['label']!r})"
        if e["label"] == "original" or e["label"] in labels:
            raise SpecError(f"{req.name}: {where}: the label is used twice or is reserved ('original'); "
                            "give every method its own label")
        labels.add(e["label"])
        if "file" not in e and "expected" not in e:
            raise SpecError(f"{req.name}: {where} needs file = '…' (its protected table) or expected = '…'")
        for key, needs in (("value", "file"), ("ptable", "file"), ("expected_value", "expected")):
            if key in e and needs not in e:
                raise SpecError(f"{req.name}: {where}: {key} needs {needs} = '…'")


def _check_measures(req: _Request, mc: Mapping[str, Any], dims: list[str]) -> None:
    """The dimensions [measures] names are dims of the request."""
    for key in ("sensitive", "groups"):
        if key in mc and mc[key] not in dims:
            raise SpecError(f"{req.name}: measures.{key} = {mc[key]!r} is not among dims {show_values(dims)}")
    for key in ("quasi", "two_way"):
        bad = [x for x in mc.get(key, []) if x not in dims]
        if bad:
            raise SpecError(f"{req.name}: measures.{key}: {show_values(bad)} not among dims {show_values(dims)}")
    if "two_way" in mc and len(mc["two_way"]) != 2:
        raise SpecError(f"{req.name}: measures.two_way names two dimensions, e.g. [\"{dims[0]}\", \"…\"]")


# --------------------------------------------------------------------------------------------
# the original counts from the database


def _tabulate(req: _Request, cfg: Mapping[str, Any], need_inner: bool,
              database: str | os.PathLike[str] | None = None) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The original table (and its inner cells if ``need_inner``), tabulated from the
    microdata as ``protab protect`` describes a table (protab.request.loaders)."""
    from protab.request.loaders import hierarchy  # the hierarchies of a protect request
    from protab.session import Session
    from protab.table import TableSpec

    oc = cfg["original"]
    if database is not None:  # --db: a path as given (relative to the working folder)
        db_name = os.fspath(database)
        db = Path(db_name)
        if not db.is_file():
            raise InputError(f"--db {db_name!r}: " + ("no such file" if not db.exists() else "a folder, not a DuckDB file"))
    else:
        key, db_name = _database(req, cfg)
        db = req.file(key, db_name)
    source = oc["table"]
    try:
        with Session(db, read_only=True, progress=False) as s:
            dims: dict[str, Any] = {}
            for d in cfg["dims"]:
                h = cfg.get("hierarchies", {}).get(d)
                if h is None:
                    dims[d] = None
                    continue
                fk = next((k for k in ("hrc", "parent_child", "ssb_frame") if k in h), None)
                if fk is None:  # from columns of the microdata
                    dims[d] = hierarchy(s, h, source, d, req.base)
                    continue
                key = f"hierarchies.{d}.{fk}"
                req.file(key, h[fk])
                with req.reading(key, h[fk]):
                    dims[d] = hierarchy(s, h, source, d, req.base)
            spec = TableSpec(
                dims, formula=oc.get("formula"), weight=oc.get("weight"),
                drop_empty=bool(oc.get("drop_empty", False)), null_code=oc.get("null_code"),
                total=cfg.get("total", "Total"),
            )
            original = s.tabulate(source, spec)
            inner = s.inner_cells(source, spec) if need_inner else None
    except ProtabError as exc:
        if str(exc).startswith(req.name):
            raise
        raise req.fail(exc, f"original.table = {source!r} (database {db_name!r})") from None
    return original, inner


def _database(req: _Request, cfg: Mapping[str, Any]) -> tuple[str, str]:
    """(the key, the database file) of a request tabulating from the microdata: the top-level
    ``database`` as on every front, or ``original.database`` (its old place); both: the same."""
    top, old = cfg.get("database"), cfg["original"].get("database")
    if top is not None and old is not None and top != old:
        raise SpecError(f"{req.name}: database = {top!r} and original.database = {old!r} differ; give the database "
                        "once, as the top-level key database (original.database is its old place)")
    if top is not None:
        return "database", top
    if old is not None:
        return "original.database", old
    return "database", DEFAULT_DATABASE


# --------------------------------------------------------------------------------------------
# run_request


def _inputs(req: _Request, cfg: Mapping[str, Any], database: str | os.PathLike[str] | None) -> list[tuple[str, str]]:
    """What the report folder may not replace: the request, the database and every file named."""
    oc = cfg["original"]
    db = os.fspath(database) if database is not None else str(req.base / _database(req, cfg)[1])
    found = [(p, f"the database {db!r}") for p in database_files(db)] if "table" in oc else []
    named = [(f"original.{k}", oc[k]) for k in ("file", "inner") if isinstance(oc.get(k), str)]
    for k, e in enumerate(cfg["protected"]):
        named += [(f"protected[{k}].{key}", e[key]) for key in ("file", "ptable", "expected")
                  if isinstance(e.get(key), str)]
        if isinstance(e.get("ptable"), dict) and isinstance(e["ptable"].get("file"), str):
            named.append((f"protected[{k}].ptable.file", e["ptable"]["file"]))
    found += [(protected_form(str(req.base / v)), f"the file of {key} ({v!r})") for key, v in named]
    return found + [(protected_form(str(req.path)), "the request file")]


def run_request(request: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
                database: str | os.PathLike[str] | None = None, wait: bool = False) -> pl.DataFrame:
    """Run a report request file (TOML, format in the docstring of :mod:`protab.report`) and
    write the report folder (``out``, else the request's ``output``, else ``report`` beside
    the request). ``database`` (``--db``) overrides ``original.database`` of a request whose
    ``[original]`` names a table. Every key and file is checked before anything is computed; nothing is
    written unless the whole report could be computed. The run holds the report folder's lock
    (protab._locks) from before it reads anything: another run into the folder refuses at once,
    naming this one, or waits for it with ``wait=True``."""
    from protab._locks import output_lock

    path = Path(request)
    cfg = _read_request(path)
    req = _Request(path)
    _check_request(req, cfg)
    if database is not None and "table" not in cfg["original"]:
        raise SpecError(f"{req.name}: --db applies only when [original] names table = '…' (counts "
                        "tabulated from the database); this request reads original.file")
    out_dir = _report_folder(req, cfg, out, database)
    with output_lock((out_dir, f"{req.name}: the report folder"), command=f"protab report {request}", wait=wait):
        return _run(req, cfg, out_dir, database)


def _run(req: _Request, cfg: Mapping[str, Any], out_dir: Path, database: str | os.PathLike[str] | None
         ) -> pl.DataFrame:
    """The report of a checked request, written into ``out_dir`` (whose lock the caller holds)."""
    _check_files(req, cfg)
    original, inner = _original(req, cfg, database)
    tables = _protected(req, cfg["protected"], cfg["dims"])
    mc = cfg.get("measures", {})
    try:
        result = compare(
            original, tables["protected"], dims=cfg["dims"], value=cfg["original"].get("value", "n"),
            protected_value=tables["pvals"] or None, expected=tables["expected"] or None,
            expected_value=tables["evals"] or None, inner=inner, ptables=tables["ptables"] or None,
            total=cfg.get("total", "Total"), small=mc.get("small", 2),
            sensitive=mc.get("sensitive"), quasi=mc.get("quasi"),
            know_yourself=mc.get("know_yourself", True), beta=float(mc.get("beta", 0.5)),
            coalition=mc.get("coalition", 1), two_way=mc.get("two_way"), groups=mc.get("groups"),
            risk=mc.get("risk"), utility=mc.get("utility", "hellinger_utility"), out_dir=out_dir,
            title=cfg.get("title", "Risk-utility comparison"),
        )
    except ProtabError as exc:
        raise req.fail(exc) from None
    print(f"protab report: {result.height} rows of measures; report written to {out_dir}/report.html")
    return result


def _report_folder(req: _Request, cfg: Mapping[str, Any], out: str | os.PathLike[str] | None,
                   database: str | os.PathLike[str] | None) -> Path:
    """The report folder: ``out``, else the request's ``output``, else ``report``; one that
    would replace none of the request's inputs."""
    out_dir = Path(out) if out is not None else req.base / cfg.get("output", "report")
    out_dir = Path(os.path.normpath(out_dir))  # "a/b/.." is a, not a folder named ".."
    try:
        check_output_folder(out_dir, ["report.html"])
        refuse_replacing(out_dir, _inputs(req, cfg, database), f"{req.name}: the report folder",
                         "give the report a folder of its own")
    except ProtabError as exc:
        raise req.fail(exc, "--out" if out is not None else "output") from None
    return out_dir


def _check_files(req: _Request, cfg: Mapping[str, Any]) -> None:
    """Every file the request names must exist before anything is read or tabulated."""
    for k, e in enumerate(cfg["protected"]):
        for key in ("file", "ptable", "expected"):
            if isinstance(e.get(key), str):
                req.file(f"protected[{k}].{key}", e[key])
        if isinstance(e.get("ptable"), dict) and "file" in e["ptable"]:
            req.file(f"protected[{k}].ptable.file", e["ptable"]["file"])
    oc = cfg["original"]
    for key in ("file", "inner"):
        if key in oc:
            req.file(f"original.{key}", oc[key])


def _original(req: _Request, cfg: Mapping[str, Any],
              database: str | os.PathLike[str] | None) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The original table, tabulated or read, and its inner cells when a file gives them (or
    when a method gives expected frequencies: then tabulated too)."""
    dims: list[str] = cfg["dims"]
    oc = cfg["original"]
    value = oc.get("value", "n")
    need_inner = any("expected" in e for e in cfg["protected"]) and "inner" not in oc
    if "table" in oc:
        original, inner = _tabulate(req, cfg, need_inner, database)
    else:
        original = req.load("original.file", oc["file"], lambda p: _read_table(p, dims))
        inner = None
    if value not in original.columns:
        where = f"original.file = {oc['file']!r}" if "file" in oc else f"the table {oc['table']!r}"
        raise InputError(f"{req.name}: {where} has no column {value!r} (original.value); columns: "
                         f"{show_values(original.columns, 12)}")
    if "inner" in oc:
        inner = req.load("original.inner", oc["inner"], lambda p: _read_table(p, dims))
        iv = oc.get("inner_value", value)
        if iv not in inner.columns:
            raise InputError(f"{req.name}: original.inner = {oc['inner']!r} has no column {iv!r} "
                             "(original.inner_value)")
        inner = inner.select(*[d for d in dims if d in inner.columns], pl.col(iv).alias(value))
    return original, inner


def _protected(req: _Request, entries: Sequence[Mapping[str, Any]], dims: list[str]) -> dict[str, dict[str, Any]]:
    """The tables of the [[protected]] entries by label: ``protected`` and ``expected`` frames,
    their value columns (``pvals``, ``evals``) and ``ptables``."""
    out: dict[str, dict[str, Any]] = {"protected": {}, "pvals": {}, "expected": {}, "evals": {}, "ptables": {}}
    for k, e in enumerate(entries):
        label = e["label"]
        if "file" in e:
            out["protected"][label] = req.load(f"protected[{k}].file", e["file"], lambda p: _read_table(p, dims))
            if "value" in e:
                out["pvals"][label] = e["value"]
        if "expected" in e:
            out["expected"][label] = req.load(f"protected[{k}].expected", e["expected"],
                                              lambda p: _read_table(p, dims))
            if "expected_value" in e:
                out["evals"][label] = e["expected_value"]
        if "ptable" in e:
            out["ptables"][label] = _ptable(req, f"protected[{k}].ptable", e["ptable"])
    return out
