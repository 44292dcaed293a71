"""Cell suppression: secondary suppression by Gaussian elimination (:func:`gauss`)."""

from protab.suppression.gauss import candidates_default, candidates_num, derivable, gauss

__all__ = ["candidates_default", "candidates_num", "derivable", "gauss"]
