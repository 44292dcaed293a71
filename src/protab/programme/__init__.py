"""Census programmes (``protab programme``, docs/census.md): hypercubes over shared
classifications protected in one run from one copy of the records, resumable after a kill."""

from protab.programme.runner import Programme

__all__ = ["Programme"]
