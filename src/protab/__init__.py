"""protab: protected frequency tables from microdata in DuckDB.

>>> import protab as pt
>>> spec = pt.TableSpec({"sex": None, "age": None})
"""

from protab import fit, measures, noise, postprocess, rounding
from protab.errors import (
    HierarchyError,
    InputError,
    ProtabError,
    PTableError,
    PTableWarning,
    RoundingError,
    SpecError,
)
from protab.hierarchy import Hierarchy
from protab.ptable import PTable
from protab.session import DEFAULT_DATABASE, Session, model_matrix
from protab.table import TableSpec

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_DATABASE",
    "Hierarchy",
    "HierarchyError",
    "InputError",
    "PTable",
    "PTableError",
    "PTableWarning",
    "ProtabError",
    "RoundingError",
    "Session",
    "SpecError",
    "TableSpec",
    "fit",
    "measures",
    "noise",
    "postprocess",
    "rounding",
    "model_matrix",
]
