"""Request files of ``protab report REQUEST.toml``: reading the TOML and running compare (run_request)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from protab._io import read_toml
from protab.errors import InputError, SpecError, show_values
from protab.ptable import PTable
from protab.report.comparison import compare

__all__ = ["run_request"]


# --------------------------------------------------------------------------------------------
# request files (protab report)

_TOP_KEYS = {"title", "output", "dims", "total", "original", "protected", "measures"}
_ORIG_KEYS = {"file", "value", "inner", "inner_value"}
_PROT_KEYS = {"label", "file", "value", "ptable", "expected", "expected_value"}
_MEASURE_KEYS = {"small", "sensitive", "quasi", "know_yourself", "beta", "coalition", "two_way",
                 "groups", "risk", "utility"}


def _unknown_keys(cfg: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(cfg) - allowed)
    if extra:
        raise SpecError(f"request: unknown key(s) {show_values(extra)} in {where}; "
                        f"allowed: {show_values(sorted(allowed), 20)}")


def _read_table(path: Path, dims: Sequence[str]) -> pl.DataFrame:
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            return pl.read_csv(path, schema_overrides={d: pl.String for d in dims})
        if suffix in (".parquet", ".pq"):
            return pl.read_parquet(path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc}") from None
    raise InputError(f"cannot read {str(path)!r}: use a .csv or .parquet file")


def run_request(request: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> pl.DataFrame:
    """Run a report request file (TOML, format in the module docstring) and write the report
    folder (``out``, else the request's ``output``, else ``report`` beside the request)."""
    path = Path(request)
    cfg = read_toml(path, SpecError)
    base = path.parent
    _unknown_keys(cfg, _TOP_KEYS, "the request")
    dims = cfg.get("dims")
    if not dims or not isinstance(dims, list):
        raise SpecError("request: dims = [\"…\", …] names the dimension columns")
    oc = cfg.get("original")
    if not isinstance(oc, dict) or "file" not in oc:
        raise SpecError("request: [original] needs file = '…'")
    _unknown_keys(oc, _ORIG_KEYS, "[original]")
    entries = cfg.get("protected", [])
    if not entries:
        raise SpecError("request: list the protected tables as [[protected]] entries")
    mc = cfg.get("measures", {})
    _unknown_keys(mc, _MEASURE_KEYS, "[measures]")

    value = oc.get("value", "n")
    original = _read_table(base / oc["file"], dims)
    inner = None
    if "inner" in oc:
        inner = _read_table(base / oc["inner"], dims)
        iv = oc.get("inner_value", value)
        if iv not in inner.columns:
            raise InputError(f"{oc['inner']!r} has no column {iv!r} (inner_value)")
        inner = inner.select(*[d for d in dims if d in inner.columns], pl.col(iv).alias(value))
    protected: dict[str, pl.DataFrame] = {}
    pvals: dict[str, str] = {}
    expected: dict[str, pl.DataFrame] = {}
    evals: dict[str, str] = {}
    ptables: dict[str, PTable] = {}
    for e in entries:
        _unknown_keys(e, _PROT_KEYS, "a [[protected]] entry")
        label = e.get("label")
        if not label:
            raise SpecError(f"request: every [[protected]] entry needs label = '…' (entry {e})")
        if label in protected or label in expected or label == "original":
            raise SpecError(f"request: the label {label!r} is used twice (or is reserved)")
        if "file" not in e and "expected" not in e:
            raise SpecError(f"request: [[protected]] {label!r} needs file = '…' or expected = '…'")
        if "file" in e:
            protected[label] = _read_table(base / e["file"], dims)
            if "value" in e:
                pvals[label] = e["value"]
        if "expected" in e:
            expected[label] = _read_table(base / e["expected"], dims)
            if "expected_value" in e:
                evals[label] = e["expected_value"]
        if "ptable" in e:
            if "file" not in e:
                raise SpecError(f"request: [[protected]] {label!r} has a ptable but no file")
            ptables[label] = PTable.read(base / e["ptable"])
    out_dir = Path(out) if out is not None else base / cfg.get("output", "report")
    two_way = mc.get("two_way")
    result = compare(
        original, protected, dims=dims, value=value, protected_value=pvals or None,
        expected=expected or None, expected_value=evals or None, inner=inner,
        ptables=ptables or None, total=cfg.get("total", "Total"), small=int(mc.get("small", 2)),
        sensitive=mc.get("sensitive"), quasi=mc.get("quasi"),
        know_yourself=bool(mc.get("know_yourself", True)), beta=float(mc.get("beta", 0.5)),
        coalition=int(mc.get("coalition", 1)), two_way=two_way, groups=mc.get("groups"),
        risk=mc.get("risk"), utility=mc.get("utility", "hellinger_utility"), out_dir=out_dir,
        title=cfg.get("title", "Risk-utility comparison"),
    )
    print(f"protab report: {result.height} rows of measures; report written to {out_dir}/report.html")
    return result
