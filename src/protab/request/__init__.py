"""Request files (TOML) of protect, publish, report and serve: their schema (:mod:`.schema`, the
types of a section: ``schema.Table``, ``schema.Str`` …, used as a namespace), the loaders of
their shared sections — p-tables, magnitudes, rules, hierarchies (:mod:`.loaders`) — and the
``[swap]`` section (:mod:`.swap_section`). Other packages import these names from here."""

from protab.request import schema
from protab.request.loaders import (
    check_decimals,
    hierarchy,
    load_magnitude,
    load_ptable,
    load_rules,
    read_toml,
    reading,
)
from protab.request.swap_section import keep_swap, read_seed, run_swap, swap_line

__all__ = ["schema"]  # a namespace of section types: schema.Table, schema.Str …
__all__ += ["check_decimals", "hierarchy", "load_magnitude", "load_ptable", "load_rules", "read_toml", "reading"]
__all__ += ["keep_swap", "read_seed", "run_swap", "swap_line"]  # the [swap] section (swap_section.py)
