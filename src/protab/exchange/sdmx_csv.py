"""SDMX-CSV 2.0 data messages (SDMX 3.0): one dataflow per table, written from a protab frame.

Columns, in the order of the SDMX-CSV 2.0 field guide: ``STRUCTURE`` (``dataflow``),
``STRUCTURE_ID`` (``AGENCY:ID(VERSION)``), ``ACTION`` (``I``, information), one column per
dimension (upper-case ids; ``MEASURE`` when a table has several values per cell), ``OBS_VALUE``,
then the attributes ``OBS_STATUS`` and ``CONF_STATUS`` (see
:mod:`protab.exchange.observations`). RFC 4180: comma separated, CRLF line ends, UTF-8; text
cells spreadsheet-safe (``protab._io.spreadsheet_safe``: a code such as ``=HYPERLINK(…)`` gets a
leading ``'``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from protab._io import spreadsheet_safe
from protab.errors import SpecError
from protab.exchange.observations import check_id, observations

MEDIA_TYPE = "application/vnd.sdmx.data+csv;version=2.0.0"
_VERSION = re.compile(r"[0-9]+(\.[0-9]+){1,2}")


def structure_id(dataflow: str, agency: str = "PROTAB", version: str = "1.0") -> str:
    """``AGENCY:ID(VERSION)``, each part checked (an SDMX id; a version such as 1.0 or 1.0.0)."""
    check_id(dataflow, "SDMX dataflow id")
    check_id(agency, "SDMX agency id")
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise SpecError(f"SDMX version {version!r}: use numbers joined by dots, such as '1.0' or '1.0.0'")
    return f"{agency}:{dataflow}({version})"


def sdmx_csv(
    frame: Any, dataflow: str, *, agency: str = "PROTAB", version: str = "1.0",
    dims: Sequence[str] | None = None, measures: Sequence[str] | None = None, structural_zeros: Any = None,
) -> str:
    """The SDMX-CSV 2.0 text of a protected table (a frame of ``Session.cell_key``,
    ``Session.suppress``, ``protab protect`` or the query service) as dataflow ``dataflow``.
    ``dims``/``measures`` default as in :func:`protab.exchange.observations.pick_columns`;
    ``structural_zeros`` is a frame of the dimension codes of cells that cannot exist."""
    try:
        sid = structure_id(dataflow, agency, version)
    except SpecError as exc:
        raise SpecError(f"table {dataflow!r}: {exc}") from None
    obs, ids, _ = observations(frame, dataflow, dims=dims, measures=measures, structural_zeros=structural_zeros)
    keys = ids + (["MEASURE"] if "MEASURE" in obs.columns else [])
    out = obs.select(
        pl.lit("dataflow").alias("STRUCTURE"), pl.lit(sid).alias("STRUCTURE_ID"), pl.lit("I").alias("ACTION"),
        *keys, pl.col("OBS_TEXT").alias("OBS_VALUE"), "OBS_STATUS", "CONF_STATUS",
    )
    return spreadsheet_safe(out).write_csv(line_terminator="\r\n", quote_style="necessary")


def sdmx_csv_writer(frame: Any, dataflow: str, **kw: Any) -> Callable[[Path], None]:
    """A writer for ``protab._io.write_batch``: the text is made first (errors before any file)."""
    from protab._io import text_writer

    return text_writer(sdmx_csv(frame, dataflow, **kw))


def write_sdmx_csv(frame: Any, path: str | Path, dataflow: str, **kw: Any) -> Path:
    """Write :func:`sdmx_csv` to ``path`` atomically (a temporary file renamed when complete)."""
    from protab._io import write_text

    return write_text(path, sdmx_csv(frame, dataflow, **kw))
