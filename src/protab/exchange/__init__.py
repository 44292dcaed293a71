"""Exchange formats for protected tables (docs/exchange.md): SDMX-CSV 2.0 data messages and
their SDMX-ML 2.1 structure messages (the sdmx1 library, ``protab[sdmx]``),
JSON-stat 2.0 datasets, and grid tables as GeoPackages of EPSG:3035 squares or as CSV with the
INSPIRE ``GRD_ID``. Frames in (of ``Session.cell_key``, ``Session.suppress``, ``protab protect``
or the query service), text or files out; no session, no SQL. ``spreadsheet_safe`` is the
neutraliser every CSV of protab goes through (docs/exchange.md).
"""

from protab._io import spreadsheet_safe
from protab.exchange.geopackage import grid_arrow, grid_csv, write_geopackage, write_grid_csv
from protab.exchange.json_stat import json_stat, json_stat_text, json_stat_writer, write_json_stat
from protab.exchange.labels import with_label_columns
from protab.exchange.observations import check_id, observations
from protab.exchange.sdmx_csv import sdmx_csv, sdmx_csv_writer, structure_id, write_sdmx_csv
from protab.exchange.sdmx_structure import sdmx_library, sdmx_structure, sdmx_structure_writer, write_sdmx_structure

#: media types of the two table formats
SDMX_CSV_MEDIA_TYPE = "application/vnd.sdmx.data+csv;version=2.0.0"
JSON_STAT_MEDIA_TYPE = "application/json"

__all__ = [
    "JSON_STAT_MEDIA_TYPE",
    "SDMX_CSV_MEDIA_TYPE",
    "check_id",
    "grid_arrow",
    "grid_csv",
    "json_stat",
    "json_stat_text",
    "json_stat_writer",
    "observations",
    "sdmx_csv",
    "sdmx_csv_writer",
    "sdmx_library",
    "sdmx_structure",
    "sdmx_structure_writer",
    "spreadsheet_safe",
    "structure_id",
    "with_label_columns",
    "write_geopackage",
    "write_grid_csv",
    "write_json_stat",
    "write_sdmx_csv",
    "write_sdmx_structure",
]
