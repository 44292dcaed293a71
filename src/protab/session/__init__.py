"""The Session: protab's one public door to a database (DuckDB) or a Spark session."""

from protab.session.core import DEFAULT_DATABASE, DEFAULT_MAX_CELLS, Session, model_matrix

__all__ = ["DEFAULT_DATABASE", "DEFAULT_MAX_CELLS", "Session", "model_matrix"]
