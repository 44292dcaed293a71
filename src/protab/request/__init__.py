"""Request files (TOML) of protect, publish, report and serve: their schema (:mod:`.schema`) and
the loaders of their shared sections — p-tables, magnitudes, rules, hierarchies (:mod:`.loaders`)."""
