"""Census programmes (``protab programme``, docs/census.md): hypercubes over shared
classifications protected in one run from one copy of the records, resumable after a kill."""

from protab.programme.cube_run import plan_table
from protab.programme.runner import Programme

__all__ = ["Programme", "plan_table"]
