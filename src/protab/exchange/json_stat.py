"""JSON-stat 2.0 datasets (class "dataset") written from a protab frame.

``id`` and ``size`` list the dimensions (``MEASURE`` last when a table has several values per
cell, with role ``metric``); each dimension's categories are its codes in publication order
(``category.index`` a list, ``category.label`` code → label: the code's label in ``labels`` in
one language, else the code; the total is ``_T``, as in SDMX, labelled by its root's label,
else with its own name, e.g. "Total"; a dimension's ``label`` its name in ``names``, else its
column). ``value`` is in row-major order
(the last dimension varies fastest): an array when at least half the positions hold a cell,
else an object of position → value. Cells a table does not publish, and withheld cells, are
null. ``status`` is an object of position → flag: the CONF_STATUS code of a withheld cell
(``C``, ``D``), ``M`` for a structural zero (see :mod:`protab.exchange.observations`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from protab.errors import SpecError
from protab.exchange.labels import Labels, Names, in_language
from protab.exchange.observations import TOTAL, check_id, observations_and_totals, pick_columns

MEDIA_TYPE = "application/json"
#: the largest cube a value index addresses exactly (positions are JSON numbers, i.e. doubles)
_MAX_POSITIONS = 2**53


def positions(obs: pl.DataFrame, ids: list[str]) -> tuple[np.ndarray, list[list[str]]]:
    """Each observation's row-major position in the cube of ``ids``, and the categories."""
    cats = [obs[i].unique(maintain_order=True).to_list() for i in ids]
    size = [len(c) for c in cats]
    if int(np.prod([float(s) for s in size])) >= _MAX_POSITIONS:
        raise SpecError(f"JSON-stat: a cube of {' × '.join(map(str, size))} positions is too large to index; "
                        "publish fewer dimensions per dataset")
    pos = np.zeros(obs.height, dtype=np.int64)
    for i, c in zip(ids, cats):
        ordinal = obs[i].replace_strict(c, list(range(len(c))), return_dtype=pl.Int64).to_numpy()
        pos = pos * len(c) + ordinal
    return pos, cats


def _numbers(values: pl.Series) -> list[Any]:
    """The values as a list, whole numbers as integers (counts print as 12, not 12.0)."""
    v = values.drop_nulls()
    if (v == v.round()).all() and (v.abs() < 2**53).all():
        return values.cast(pl.Int64).to_list()
    return values.to_list()


def json_stat(frame: Any, dataset: str, *, label: str | None = None, labels: Labels | None = None,
              names: Names | None = None, language: str | None = None, **kw: Any) -> dict[str, Any]:
    """The JSON-stat 2.0 dataset of a protected table (``kw``: ``dims``, ``measures``,
    ``structural_zeros`` as for :func:`protab.exchange.sdmx_csv`); ``labels`` and ``names`` (by
    dimension column, then language) in ``language``, by default each one's first language."""
    from protab._frames import as_polars

    try:
        check_id(dataset, "JSON-stat dataset id")
    except SpecError as exc:
        raise SpecError(f"table {dataset!r}: {exc}") from None
    frame = as_polars(frame, f"table {dataset!r}")
    dims, kw["measures"] = pick_columns(frame, kw.pop("dims", None), kw.get("measures"), dataset)
    obs, ids, measures, totals = observations_and_totals(frame, dataset, dims=dims, **kw)
    column = dict(zip(ids, dims))
    own = {i: dict(in_language((labels or {}).get(column[i], {}), language) or {}) for i in ids}
    for i in ids:  # the total: its root's label, else the root's name
        own[i][TOTAL] = own[i].get(totals[i], totals[i])
    titles = {i: in_language((names or {}).get(column[i], {}), language) or i for i in ids}
    keys = ids + (["MEASURE"] if "MEASURE" in obs.columns else [])
    pos, cats = positions(obs, keys)
    total = int(np.prod([len(c) for c in cats]))
    at = pl.Series("pos", pos).cast(pl.String)
    flag = obs.select(at, pl.when(pl.col("CONF_STATUS") != "F").then(pl.col("CONF_STATUS"))
                      .when(pl.col("OBS_STATUS") != "A").then(pl.col("OBS_STATUS")).alias("flag")).drop_nulls()
    if 2 * obs.height >= total:
        dense = np.full(total, np.nan)
        dense[pos] = obs["OBS_VALUE"].fill_null(np.nan).to_numpy()
        value: Any = _numbers(pl.Series(dense).fill_nan(None))
    else:
        value = dict(zip(at.to_list(), _numbers(obs["OBS_VALUE"])))
    status = dict(zip(flag["pos"].to_list(), flag["flag"].to_list()))
    dimension = {
        k: {"label": titles.get(k, "measure"),
            "category": {"index": c, "label": {x: own[k].get(x, x) if k in own else measures.get(x, x) for x in c}}}
        for k, c in zip(keys, cats)
    }
    out: dict[str, Any] = {
        "version": "2.0", "class": "dataset", "id": keys, "size": [len(c) for c in cats],
        "label": label or dataset, "dimension": dimension, "value": value,
    }
    if "MEASURE" in keys:
        out["role"] = {"metric": ["MEASURE"]}
    if status:
        out["status"] = status
    return out


def json_stat_text(frame: Any, dataset: str, **kw: Any) -> str:
    """:func:`json_stat` as compact JSON text (non-finite numbers are null already)."""
    return json.dumps(json_stat(frame, dataset, **kw), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def json_stat_writer(frame: Any, dataset: str, **kw: Any) -> Callable[[Path], None]:
    """A writer for ``protab._io.write_batch``: the text is made first (errors before any file)."""
    from protab._io import text_writer

    return text_writer(json_stat_text(frame, dataset, **kw))


def write_json_stat(frame: Any, path: str | Path, dataset: str, **kw: Any) -> Path:
    """Write :func:`json_stat_text` to ``path`` atomically."""
    from protab._io import write_text

    return write_text(path, json_stat_text(frame, dataset, **kw))
