"""The pieces of a request file that ``protab protect`` and ``protab report`` share: the
p-table section, hierarchy sections, and the files they name (read with errors that name the
key and the file)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protab._io import read_toml as read_toml  # a request file as a dict (serve reads its config with it)
from protab.errors import InputError, ProtabError, SpecError, show_values

if TYPE_CHECKING:  # pragma: no cover
    import os

    import polars as pl

    from protab.hierarchy import Hierarchy
    from protab.magnitude import MagnitudeCKM, SensitivityRules
    from protab.ptable import PTable
    from protab.session import Session


@contextmanager
def reading(path: str | os.PathLike[str], what: str) -> Iterator[None]:
    """Turn a file that cannot be read into a protab error naming the file and what it is."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{what} {str(p)!r} is a folder, not a file")
    try:
        yield
    except FileNotFoundError:
        raise InputError(f"{what} {str(p)!r} does not exist") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {str(p)!r} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except PermissionError:
        raise InputError(f"{what} {str(p)!r} cannot be read (permission denied)") from None
    except IsADirectoryError:
        raise InputError(f"{what} {str(p)!r} is a folder, not a file") from None


def load_ptable(cfg: dict[str, Any], base: Path) -> PTable:
    from protab.ptable import PTable

    if "file" in cfg:
        path = base / cfg["file"]
        with reading(path, "the p-table file ([ptable] file)"):
            return PTable.read(path, format=cfg.get("format", "auto"))
    try:
        return PTable.maximum_entropy(**cfg["maximum_entropy"])
    except ProtabError as exc:
        raise type(exc)(f"[ptable] of the request: {exc}") from None


def load_magnitude(cfg: dict[str, Any], base: Path) -> MagnitudeCKM:
    """The [magnitude] section: numeric p-tables and the parameters of the cell key method
    for magnitudes; errors name the section."""
    from protab.magnitude import MagnitudeCKM
    from protab.ptable.magnitude_ptable import MagnitudePTable

    def table(key: str, default_type: str) -> MagnitudePTable:
        t = cfg[key]
        if "file" in t:
            path = base / t["file"]
            with reading(path, f"the numeric p-table file ([magnitude] {key})"):
                return MagnitudePTable.read(path, format=t.get("format", "auto"), type=t.get("type"))
        return MagnitudePTable.maximum_entropy(**t["maximum_entropy"], type=t.get("type", default_type))

    try:
        if "ptable" in cfg:
            if "even" in cfg or "odd" in cfg:
                raise SpecError("give either ptable or the pair even and odd, not both")
            ptable: Any = table("ptable", "all")
        elif "even" in cfg and "odd" in cfg:
            ptable = {"even": table("even", "even"), "odd": table("odd", "odd")}
        else:
            raise SpecError("needs ptable = {…} (or the pair even and odd)")
        small = table("small_cells", "small_cells") if "small_cells" in cfg else None
        kw = {k: cfg[k] for k in ("variant", "top_k", "fp", "p", "q", "epsilon", "mu_c", "same_key",
                                  "zero_keys", "decimals") if k in cfg}
        if isinstance(kw.get("p"), list):
            kw["p"] = tuple(kw["p"])
        return MagnitudeCKM(ptable, small_cells=small, **kw)
    except ProtabError as exc:
        raise type(exc)(f"[magnitude] of the request: {exc}") from None


def check_decimals(cfg: dict[str, Any], sums: Sequence[str], where: str) -> None:
    """SpecError when a magnitude section's ``decimals = {column = d}`` names a column that is
    none of the sums it protects (a misspelt name would silently take the default)."""
    decimals = cfg.get("decimals")
    if isinstance(decimals, dict):
        unknown = [c for c in decimals if c not in sums]
        if unknown:
            raise SpecError(f"{where} names {show_values(unknown)}, not among the sums "
                            f"({show_values(list(sums)) if sums else 'none'})")


def load_rules(cfg: dict[str, Any]) -> SensitivityRules:
    from protab.magnitude import SensitivityRules

    kw = dict(cfg)
    if "dominance" in kw:
        kw["dominance"] = [tuple(d) for d in kw["dominance"]]
    if "pq" in kw:
        kw["pq"] = tuple(kw["pq"])
    try:
        return SensitivityRules(**kw)
    except ProtabError as exc:
        raise type(exc)(f"[rules] of the request: {exc}") from None


def hierarchy(s: Session, cfg: dict[str, Any], source: str, column: str, base: Path) -> Hierarchy:
    """A request's hierarchy; its errors say which [hierarchies.…] section they come from."""
    try:
        return _load_hierarchy(s, cfg, source, column, base)
    except ProtabError as exc:
        msg = str(exc)
        if f"hierarchies.{column}" in msg:
            raise
        raise type(exc)(f"[hierarchies.{column}] of the request: {msg}") from None


def _load_hierarchy(s: Session, cfg: dict[str, Any], source: str, column: str, base: Path) -> Hierarchy:
    import polars as pl

    from protab.hierarchy import Hierarchy

    root = cfg.get("root", "Total")
    if "columns" in cfg:
        return s.hierarchy_from_columns(source, cfg["columns"], root=root)
    if "grid" in cfg:
        return s.hierarchy_from_grid(source, column, cfg["grid"], form=cfg.get("grid_form", "short"), root=root)
    if "code_lengths" in cfg:
        return Hierarchy.from_code_lengths(s.codes(source, column), cfg["code_lengths"], root=root)
    if "hrc" in cfg:
        path = base / cfg["hrc"]
        with reading(path, f"the .hrc file (hierarchies.{column}.hrc)"):
            return Hierarchy.read_hrc(path, root=root)
    if "parent_child" in cfg:
        frame = _read_csv(base / cfg["parent_child"], f"hierarchies.{column}.parent_child", infer_schema=False)
        return Hierarchy.from_parent_child(frame, root=cfg.get("root"))
    frame = _read_csv(base / cfg["ssb_frame"], f"hierarchies.{column}.ssb_frame",
                      schema_overrides={"mapsFrom": pl.String, "mapsTo": pl.String})
    return Hierarchy.from_frame(frame)


def _read_csv(path: Path, key: str, **kwargs: Any) -> pl.DataFrame:
    import polars as pl

    with reading(path, f"the hierarchy file ({key})"):
        path.read_bytes().decode("utf-8-sig")  # not UTF-8: a clear error, not mojibake codes
        try:
            return pl.read_csv(path, **kwargs)
        except pl.exceptions.PolarsError as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InputError(f"cannot read the hierarchy file ({key}) {str(path)!r} as CSV: {first}") from None
