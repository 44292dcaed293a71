"""protab: protected frequency tables from microdata in DuckDB.

>>> import protab as pt
>>> spec = pt.TableSpec({"sex": None, "age": None})

Names are imported on first use (PEP 562), so that ``import protab`` and the ``protab``
command's ``--help`` stay fast; ``pt.Session``, ``pt.fit`` … behave as ordinary attributes.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from protab._version import __version__ as __version__

#: the one list of protab's public names: name -> the module it comes from; a subpackage named
#: for itself (``"audit": "protab.audit"``) is the module. ``__all__`` and the lazy loader below
#: are derived from it, and tests/house/test_public_names.py checks the TYPE_CHECKING block
#: against it.
PUBLIC = {
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
    **{m: f"protab.{m}" for m in ("audit", "fit", "grid", "measures", "noise", "postprocess", "report",
                                   "rounding", "suppression")},
}
#: old names kept for one release: old -> new (docs/design.md, "Renamed names")
DEPRECATED = {"NumericPTable": "MagnitudePTable"}

__all__ = sorted(PUBLIC)


def __getattr__(name: str) -> Any:
    if name in DEPRECATED:
        new = DEPRECATED[name]
        warnings.warn(f"protab.{name} is deprecated; use protab.{new}", DeprecationWarning, stacklevel=2)
        return __getattr__(new)
    if name not in PUBLIC:
        raise AttributeError(f"module 'protab' has no attribute {name!r}")
    module = PUBLIC[name]
    value = importlib.import_module(module) if module == f"protab.{name}" else getattr(
        importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:  # pragma: no cover; ruff cannot read the derived __all__, hence the noqa
    from protab import audit, fit, grid, measures, noise, postprocess, report, rounding, suppression  # noqa: F401
    from protab.errors import (  # noqa: F401
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
    from protab.hierarchy import Hierarchy  # noqa: F401
    from protab.magnitude import MagnitudeCKM, SensitivityRules  # noqa: F401
    from protab.programme import Programme  # noqa: F401
    from protab.ptable import MagnitudePTable, PTable  # noqa: F401
    from protab.session import DEFAULT_DATABASE, Session, model_matrix  # noqa: F401
    from protab.sqltools import sql_text  # noqa: F401
    from protab.suppression import ProtectionLevels  # noqa: F401
    from protab.swapping import SwapSpec  # noqa: F401
    from protab.table import TableSpec  # noqa: F401
