"""protab: protected frequency tables from microdata in DuckDB.

>>> import protab as pt
>>> spec = pt.TableSpec({"sex": None, "age": None})

Names are imported on first use (PEP 562), so that ``import protab`` and the ``protab``
command's ``--help`` stay fast; ``pt.Session``, ``pt.fit`` … behave as ordinary attributes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_NAMES = {
    "DEFAULT_DATABASE": "protab.session",
    "Session": "protab.session",
    "model_matrix": "protab.session",
    "TableSpec": "protab.table",
    "MagnitudeCKM": "protab.magnitude",
    "SensitivityRules": "protab.magnitude",
    "ProtectionLevels": "protab.suppression",
    "SwapSpec": "protab.swapping",
    "Hierarchy": "protab.hierarchy",
    "PTable": "protab.ptable",
    "MagnitudePTable": "protab.ptable",
    "NumericPTable": "protab.ptable",
    "Programme": "protab.programme",
    "HierarchyError": "protab.errors",
    "InputError": "protab.errors",
    "ProtabError": "protab.errors",
    "PTableError": "protab.errors",
    "PTableWarning": "protab.errors",
    "RoundingError": "protab.errors",
    "SpecError": "protab.errors",
    "NoRecordsError": "protab.errors",
    "ConvergenceError": "protab.errors",
    "ConvergenceWarning": "protab.errors",
    "SwapRateWarning": "protab.errors",
    "sql_text": "protab.sqltools",
}
_MODULES = {"audit", "fit", "grid", "measures", "noise", "postprocess", "rounding", "report", "suppression"}

__all__ = [
    "DEFAULT_DATABASE",
    "ConvergenceError",
    "ConvergenceWarning",
    "Hierarchy",
    "HierarchyError",
    "InputError",
    "MagnitudePTable",
    "NoRecordsError",
    "NumericPTable",
    "PTable",
    "PTableError",
    "PTableWarning",
    "Programme",
    "ProtabError",
    "ProtectionLevels",
    "RoundingError",
    "SensitivityRules",
    "Session",
    "SpecError",
    "SwapRateWarning",
    "SwapSpec",
    "TableSpec",
    "audit",
    "fit",
    "grid",
    "measures",
    "model_matrix",
    "noise",
    "postprocess",
    "report",
    "sql_text",
    "rounding",
    "suppression",
]


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
    elif name in _MODULES:
        value = importlib.import_module(f"protab.{name}")
    else:
        raise AttributeError(f"module 'protab' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:  # pragma: no cover
    from protab import audit, fit, grid, measures, noise, postprocess, report, rounding, suppression
    from protab.errors import (
        ConvergenceError,
        ConvergenceWarning,
        HierarchyError,
        InputError,
        NoRecordsError,
        ProtabError,
        PTableError,
        PTableWarning,
        RoundingError,
        SpecError,
        SwapRateWarning,
    )
    from protab.hierarchy import Hierarchy
    from protab.programme import Programme
    from protab.ptable import MagnitudePTable, NumericPTable, PTable
    from protab.session import DEFAULT_DATABASE, Session, model_matrix
    from protab.suppression import ProtectionLevels
    from protab.table import TableSpec
