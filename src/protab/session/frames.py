"""The model matrix of a frame of inner cells: the same SQL roll-up as
:meth:`protab.Session.model_matrix`, in a private in-memory session."""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any

import polars as pl
import pyarrow as pa
from scipy import sparse

from protab._frames import as_polars
from protab.errors import InputError, SpecError, show_values
from protab.session.session_class import Session
from protab.table import TableSpec


def model_matrix(
    inner: pl.DataFrame | pa.Table | Any,
    spec: TableSpec,
    *,
    freq: str | None = None,
    extend0: bool | str = True,
    structural_zeros: pl.DataFrame | None = None,
    nested: bool = False,
) -> tuple[sparse.csc_matrix, pl.DataFrame, pl.DataFrame]:
    """The dummy matrix X (inner × published, z = Xᵀy) of a table of inner cells.

    One idea under one name: this is :meth:`Session.model_matrix` for a frame instead of a
    table of the session's database, with the same keywords (``extend0``, ``structural_zeros``,
    ``nested``) and the same ``(X, inner, published)``; see there. ``inner`` is a frame with the
    dimension columns and a frequency column (``freq``, or the spec's ``freq``, or ``n``); the
    same SQL roll-up runs in an in-memory database.

    The in-memory database is private to protab and reused by every call of the process
    (one call at a time: calls from several threads wait for each other), with the frame
    registered as a view, not copied; a forked child makes its own.
    """
    if not isinstance(spec, TableSpec):
        raise SpecError(f"model_matrix: expected a protab.TableSpec, not {type(spec).__name__}")
    frame = as_polars(inner, "model_matrix: inner cells")
    col = freq or spec.freq or "n"
    if col not in frame.columns:
        raise InputError(
            f"model_matrix: the inner frame has no frequency column {col!r}; pass freq= "
            f"(columns: {show_values(frame.columns, 10)})"
        )
    spec = dataclasses.replace(spec, freq=col)
    data = frame.to_arrow()
    with _FRAMES.lock:
        s = _FRAMES.session()
        s.engine.register("inner", data)
        try:
            return s.model_matrix("inner", spec, extend0=extend0, structural_zeros=structural_zeros, nested=nested)
        finally:
            s.engine.unregister("inner")
            s.forget_hierarchies(_FRAMES.max_hierarchies)


class _FrameSession:
    """The private in-memory Session of :func:`model_matrix`: made on first use, remade in
    a forked child (a DuckDB connection must not cross a fork), guarded by a lock."""

    max_hierarchies = 32  # code and bridge tables kept for this many hierarchies

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._session: Session | None = None
        self._pid = -1

    def session(self) -> Session:
        if self._session is None or self._pid != os.getpid():
            self._session = Session(":memory:", progress=False)
            self._pid = os.getpid()
        return self._session


_FRAMES = _FrameSession()
