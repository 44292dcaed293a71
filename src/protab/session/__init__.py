"""The Session: protab's one public door to microdata in DuckDB or Spark (:class:`Session`),
and the model matrix of a frame of inner cells (:func:`model_matrix`)."""

from protab.session.arguments import DEFAULT_DATABASE, DEFAULT_MAX_CELLS
from protab.session.frames import model_matrix
from protab.session.groupings import grouping_hierarchy
from protab.session.session_class import Session

__all__ = ["DEFAULT_DATABASE", "DEFAULT_MAX_CELLS", "Session", "grouping_hierarchy", "model_matrix"]
