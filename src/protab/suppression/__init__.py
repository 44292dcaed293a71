"""Cell suppression: secondary suppression by Gaussian elimination (:func:`gauss`) and the audit
of a pattern by the attacker's intervals (:func:`audit`, :func:`protect`)."""

from protab.suppression.gauss import candidates_default, candidates_num, derivable, gauss
from protab.suppression.intervals import audit, intervals, p_percent_protection, protect

__all__ = ["candidates_default", "candidates_num", "derivable", "gauss"]
__all__ += ["audit", "intervals", "p_percent_protection", "protect"]  # the audit of a pattern (intervals.py)
