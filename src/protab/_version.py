"""protab's version, in one place: the package, the wheel's metadata (hatch reads this file) and
``protab --version`` take it from here."""

__version__ = "0.1.0"
