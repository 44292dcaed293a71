"""Cell suppression: secondary suppression by Gaussian elimination (:func:`gauss`) and the audit
of a pattern by the attacker's intervals (:func:`audit`, :func:`protect`)."""

from protab.suppression._interval_order import protect_in_order
from protab.suppression.gauss import candidates_default, candidates_num, derivable, gauss
from protab.suppression.intervals import audit, intervals, p_percent_protection, protect
from protab.suppression.levels import ProtectionLevels, rule_levels
from protab.suppression.optimal import OptimalSuppression, optimal

__all__ = ["candidates_default", "candidates_num", "derivable", "gauss"]
__all__ += ["audit", "intervals", "p_percent_protection", "protect"]  # the audit of a pattern (intervals.py)
__all__ += ["ProtectionLevels", "protect_in_order", "rule_levels"]  # protection levels (levels.py, _interval_order.py)
__all__ += ["OptimalSuppression", "optimal"]  # the optimal mode (optimal.py)
