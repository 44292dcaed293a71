"""Cell suppression: secondary suppression by Gaussian elimination (:func:`gauss`) and the audit
of a pattern by the attacker's intervals (:func:`audit_pattern`, :func:`protect`).

``audit``, the name of :func:`audit_pattern` before (it read as the feasibility audit of
:mod:`protab.audit`), is a deprecated alias for one release."""


from protab._deprecated import renamed
from protab.suppression._interval_order import protect_in_order
from protab.suppression.disclosure import direct_disclosure, disclosure_candidates, k_disclosure_columns, previous_masks
from protab.suppression.gauss import candidates_default, candidates_num, derivable, gauss
from protab.suppression.levels import ProtectionLevels, rule_levels
from protab.suppression.linked import (
    INTERVAL_SYSTEMS,
    LINKED_MODES,
    check_shared_cells,
    copies_by_records,
    gauss_linked,
    linked_intervals,
)
from protab.suppression.modular import ModularSuppression, modular, subtables
from protab.suppression.optimal import OptimalSuppression, optimal
from protab.suppression.pattern_audit import audit_pattern, intervals, p_percent_protection, protect

__all__ = ["candidates_default", "candidates_num", "derivable", "gauss"]
__all__ += ["audit_pattern", "intervals", "p_percent_protection", "protect"]  # the audit of a pattern (pattern_audit.py)
__all__ += ["ProtectionLevels", "protect_in_order", "rule_levels"]  # protection levels (levels.py, _interval_order.py)
__all__ += ["OptimalSuppression", "optimal"]  # the optimal mode (optimal.py)
__all__ += ["ModularSuppression", "modular", "subtables"]  # the modular mode (modular.py)
__all__ += ["direct_disclosure", "disclosure_candidates", "k_disclosure_columns", "previous_masks"]  # disclosure.py
__all__ += ["INTERVAL_SYSTEMS", "LINKED_MODES", "check_shared_cells", "copies_by_records", "gauss_linked",
            "linked_intervals"]  # linked tables (linked.py)


#: ``audit``: the old name of :func:`audit_pattern`, deprecated.
__getattr__ = renamed("protab.suppression", {"audit": ("audit_pattern", audit_pattern)})
