"""Grid tools: INSPIRE grid codes (EPSG:3035) as hierarchies, centroids, maps, and re-distribution.

* :func:`parse_codes`, :func:`format_codes`, :func:`coarsen_codes`: long
  (``CRS3035RES1000mN2689000E4337000``) and short (``1kmN2689E4337``) codes at 100 m, 1 km,
  10 km and 100 km, vectorised with polars; coarser squares by flooring the corners.
* :func:`coarser_code_sql`, :func:`valid_code_sql`, :func:`code_parts_sql`: the same as DuckDB
  SQL text over a quoted column, so a session derives parent columns in its scan (this
  package holds no connection).
* :func:`grid_hierarchy`: Total > 100 km > 10 km > the codes, a :class:`~protab.Hierarchy`.
* :func:`centroids`, :func:`laea_inverse`, :func:`laea_forward`: square centres in EPSG:3035
  and ETRS89 longitude/latitude (EPSG Guidance Note 7-2, closed form).
* :func:`grid_map`: a PNG map of a grid table, blanked squares shown apart.
* :func:`redistribute`: mass-preserving re-distribution of small counts to the nearest safe
  squares (Lee, Choi & O'Keefe 2012), with measures of change and risk.

docs/grid.md describes the codes, the algorithm and its measures.
"""

from protab.grid._codes import (
    RESOLUTIONS,
    VALID_PATTERN,
    coarsen_codes,
    coarser_code_sql,
    code_parts_sql,
    format_codes,
    malformed_codes_error,
    parse_codes,
    valid_code_sql,
)
from protab.grid._hierarchy import grid_hierarchy
from protab.grid._map import grid_map
from protab.grid._project import centroids, laea_forward, laea_inverse
from protab.grid._redistribute import redistribute

__all__ = [
    "RESOLUTIONS",
    "VALID_PATTERN",
    "centroids",
    "coarsen_codes",
    "coarser_code_sql",
    "code_parts_sql",
    "format_codes",
    "grid_hierarchy",
    "grid_map",
    "laea_forward",
    "laea_inverse",
    "malformed_codes_error",
    "parse_codes",
    "redistribute",
    "valid_code_sql",
]
