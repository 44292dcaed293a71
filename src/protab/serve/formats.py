"""Answer formats: JSON (default), CSV, Parquet, Arrow IPC, SDMX-CSV 2.0 and JSON-stat 2.0
(dataflow/dataset ``ANSWER``; docs/exchange.md), chosen by ``?format=`` or the
``Accept`` header. JSON is ``{"columns": [...], "rows": [[...], ...]}``; blanked cells and the
dimensions a grouping set aggregates are null (an empty field in CSV). Every format is
written from the polars frame without a Python loop over cells."""

from __future__ import annotations

import io
from typing import Any

import polars as pl

from protab.errors import InputError

FORMATS = ("json", "csv", "parquet", "arrow", "sdmx-csv", "json-stat")

MEDIA_TYPES = {
    "json": "application/json",
    "csv": "text/csv; charset=utf-8",
    "parquet": "application/vnd.apache.parquet",
    "arrow": "application/vnd.apache.arrow.stream",
    "sdmx-csv": "application/vnd.sdmx.data+csv;version=2.0.0",
    "json-stat": "application/json",
}

#: the suffix of an answer's file name (Content-Disposition) per format
SUFFIXES = {"json": ".json", "csv": ".csv", "parquet": ".parquet", "arrow": ".arrow",
            "sdmx-csv": ".sdmx.csv", "json-stat": ".stat.json"}

#: Accept media types understood, and the format each asks for
_ACCEPT = {
    "application/json": "json",
    "text/csv": "csv",
    "application/csv": "csv",
    "application/vnd.apache.parquet": "parquet",
    "application/x-parquet": "parquet",
    "application/parquet": "parquet",
    "application/vnd.apache.arrow.stream": "arrow",
    "application/vnd.apache.arrow.file": "arrow",
    "application/x-arrow": "arrow",
    "application/vnd.sdmx.data+csv": "sdmx-csv",
}


def choose(query_format: str | None, accept: str | None) -> str:
    """The format of an answer: ``?format=`` first (an unknown one is an InputError), else the
    first type of the Accept header (by q-value) that is known, else JSON."""
    if query_format is not None:
        fmt = query_format.strip().lower()
        if fmt not in FORMATS:
            raise InputError(f"unknown format {query_format[:40]!r}; use one of {', '.join(FORMATS)}")
        return fmt
    if not accept:
        return "json"
    ranked = []
    for k, part in enumerate(accept.split(",")[:32]):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for p in params:
            if p.startswith("q="):
                try:
                    q = float(p[2:])
                except ValueError:
                    q = 0.0
        if media.lower() in _ACCEPT and q > 0:
            ranked.append((-q, k, _ACCEPT[media.lower()]))
    return min(ranked)[2] if ranked else "json"


def _json_values(frame: pl.DataFrame) -> list[pl.Expr]:
    """Per column the JSON text of each value (a struct's JSON with its key cut off)."""
    prefix = len('{"v":')
    return [
        pl.struct(pl.col(c).alias("v")).struct.json_encode().str.slice(prefix).str.head(-1)
        for c in frame.columns
    ]


def to_json(frame: pl.DataFrame, labels: Any = None) -> bytes:
    """``{"columns": [...], "rows": [[...], ...]}`` (non-finite numbers as null); with ``labels``
    (an answer's :class:`~protab.serve.code_labels.Labelling`) also ``"lang"`` and ``"names"``
    (dimension → its name in that language)."""
    import json

    head = '{"columns":' + json.dumps(frame.columns, ensure_ascii=False, separators=(",", ":"))
    if labels is not None:
        head += ',"lang":' + json.dumps(labels.lang) + ',"names":' + json.dumps(
            dict(labels.names), ensure_ascii=False, separators=(",", ":"))
    head += ',"rows":['
    if frame.height and frame.width:
        rows = frame.select(
            pl.concat_str([pl.lit("["), pl.concat_str(_json_values(frame), separator=","), pl.lit("]")])
        ).to_series().str.join(",")[0]
    else:
        rows = ",".join(["[]"] * frame.height)
    return (head + rows + "]}").encode("utf-8")


def render(frame: pl.DataFrame, fmt: str, labels: Any = None) -> bytes:
    """The bytes of ``frame`` in format ``fmt`` (``labels``: the answer's names in the language
    asked, :class:`~protab.serve.code_labels.Labelling`; its label columns are in ``frame``)."""
    if fmt == "json":
        return to_json(frame, labels)
    if fmt == "csv":  # text cells spreadsheet-safe, as protab's CSV files (docs/exchange.md)
        from protab.exchange import spreadsheet_safe

        return spreadsheet_safe(frame).write_csv().encode("utf-8")
    if fmt in ("sdmx-csv", "json-stat"):
        from protab.errors import ProtabError
        from protab.exchange import json_stat_text, sdmx_csv
        from protab.serve.code_labels import split_label_columns

        frame, found = split_label_columns(frame)  # labels as JSON-stat's category.label, not as dimensions
        names = {d: {labels.lang: n} for d, n in labels.names.items() if n != d} if labels is not None else None
        lang = labels.lang if labels is not None else None
        try:
            text = sdmx_csv(frame, "ANSWER") if fmt == "sdmx-csv" else json_stat_text(
                frame, "ANSWER", labels=found or None, names=names, language=lang)
        except ProtabError as exc:  # e.g. a column alias that is no SDMX id: the analyst's to fix
            raise InputError(f"format {fmt}: {exc}") from None
        return text.encode("utf-8")
    buf = io.BytesIO()
    if fmt == "parquet":
        frame.write_parquet(buf)
    elif fmt == "arrow":
        frame.write_ipc_stream(buf)
    else:  # pragma: no cover - choose() admits the formats above only
        raise InputError(f"unknown format {fmt!r}")
    return buf.getvalue()
