"""mkdocs hooks of the documentation site (mkdocs.yml): the pages of docs/ are written for the
repository, so the site adds what they link to outside docs/.

- The repository's README.md becomes the page ``overview.md``; its links ``docs/X`` lead to the
  pages ``X``, and ``../README.md`` in a page of docs/ leads to it.
- Any other repository file a page links to (``../examples/…``) is copied into the site under
  ``repository/`` and the link leads there.

A link to a file that is in neither place is left as written, so that ``mkdocs build --strict``
reports it as broken.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
README = "overview.md"
COPIES = "repository"
_LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")


def _repository_path(page: str, target: str) -> str | None:
    """The repository path a relative link of a page (``docs/…`` or ``README.md``) leads to."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
        return None
    path = posixpath.normpath(posixpath.join(posixpath.dirname(page), target))
    return None if path.startswith("..") else path


def _site_target(page: str, target: str) -> str | None:
    """Where a link leads in the site when its target is outside docs/ (None: as written)."""
    path = _repository_path(page, target)
    if path is None or path.startswith("docs/") or not (ROOT / path).is_file():
        return None
    return README if path == "README.md" else f"{COPIES}/{path}"


def _rewrite(page: str, site_page: str, markdown: str) -> str:
    """``markdown`` of repository page ``page`` (shown at ``site_page``) with its links to files
    outside docs/ rewritten to where they are in the site."""

    def link(m: re.Match[str]) -> str:
        target = m.group(2)
        path = _repository_path(page, target)
        if path is not None and path.startswith("docs/"):
            new = posixpath.relpath(path.removeprefix("docs/"), posixpath.dirname(site_page) or ".")
        else:
            found = _site_target(page, target)
            if found is None:
                return m.group(0)
            new = posixpath.relpath(found, posixpath.dirname(site_page) or ".")
        return f"{m.group(1)}{new}{m.group(3) or ''}{m.group(4)}"

    return _LINK.sub(link, markdown)


def on_files(files: Files, config) -> Files:
    """The README as a page, and copies of the repository files the pages link to."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    files.append(File.generated(config, README, content=_rewrite("README.md", README, readme)))
    pages = [("README.md", readme)] + [
        (f"docs/{f.src_uri}", Path(f.abs_src_path).read_text(encoding="utf-8"))
        for f in files if f.src_uri.endswith(".md") and f.abs_src_path]
    copies = {found for page, text in pages for m in _LINK.finditer(text)
              if (found := _site_target(page, m.group(2))) is not None and found != README}
    for found in sorted(copies):
        files.append(File.generated(config, found, abs_src_path=str(ROOT / found.removeprefix(f"{COPIES}/"))))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    """A page of docs/ with its links outside docs/ leading into the site."""
    if page.file.src_uri == README or not page.file.abs_src_path:
        return markdown
    return _rewrite(f"docs/{page.file.src_uri}", page.file.src_uri, markdown)
