"""A griffe extension of the documentation site (mkdocs.yml): protab's docstrings are written
for ``help()`` with a few reStructuredText habits, shown in the site as Markdown:

- Sphinx roles (``:class:`protab.Session```, ``:meth:`cell_key```) become the object's name in
  code, linked to its entry in the API reference when it has one (an optional cross-reference
  of mkdocs-autorefs: no entry, no link, no warning);
- doctest lines (``>>>`` and their output) become a fenced Python console block, not a quote;
- a paragraph ending in ``::`` ends in ``:`` (its indented literal block is a code block in
  Markdown too).
"""

from __future__ import annotations

import re
from typing import Any

from griffe import AliasResolutionError, CyclicAliasError, Extension, Object

_ROLE = re.compile(r":(?:class|meth|func|mod|data|attr|exc|obj|const):`(~?)([^`<>]+)`")


def _find(obj: Object, name: str) -> Object | None:
    """The object ``name`` (absolute, relative to ``obj``, its class or module, or ``.sibling``)."""
    collection = obj.modules_collection
    module = obj if obj.is_module else obj.module
    if name.startswith("."):
        package = module if module.is_package else module.parent
        candidates = [f"{package.path}{name}"] if package is not None else []
    else:
        scopes = [obj, obj.parent, module, module.parent]
        candidates = [name] + [f"{s.path}.{name}" for s in scopes if s is not None] + [f"protab.{name}"]
    for path in candidates:
        try:
            return collection[path]
        except (KeyError, ValueError, AttributeError, AliasResolutionError, CyclicAliasError):
            continue
    return None


def _rewrite(obj: Object, text: str) -> str:
    def role(m: re.Match[str]) -> str:
        short, name = m.group(1), m.group(2).rstrip("()")
        title = f"<code>{name.rsplit('.', 1)[-1] if short else name.lstrip('.')}</code>"
        found = _find(obj, name)
        if found is None:
            return title
        try:
            identifier = found.canonical_path
        except (AliasResolutionError, CyclicAliasError):  # an alias whose target is not loaded
            identifier = found.path
        return f'<autoref identifier="{identifier}" optional>{title}</autoref>'

    return _ROLE.sub(role, text)


def _markdown(text: str) -> str:
    """Doctest runs fenced, ``::`` literal-block markers as ``:``."""
    out: list[str] = []
    in_doctest = False
    for line in text.splitlines():
        if line.lstrip().startswith(">>>") and not in_doctest:
            out.append("```pycon")
            in_doctest = True
        elif in_doctest and not line.strip():
            out.append("```")
            in_doctest = False
        out.append(line[:-1] if line.rstrip().endswith("::") and not in_doctest else line)
    return "\n".join(out + (["```"] if in_doctest else []))


class SphinxRoles(Extension):
    """protab's reStructuredText habits in docstrings as Markdown."""

    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _markdown(_rewrite(obj, obj.docstring.value))
