"""The one vocabulary of protab's TOML fronts (protect requests, programmes, serve.toml, report
requests): the value types (:mod:`.types`), the shared sections with their keys, types and
defaults (:mod:`.sections`), and ``include = [...]`` of shared files (:mod:`.include`).
Reference: docs/vocabulary.md."""
