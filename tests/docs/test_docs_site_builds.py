"""The documentation site builds (``make docs``: ``mkdocs build --strict``, mkdocs.yml): no
broken link or anchor, no missing reference, no docstring the build warns about; the API
reference has an entry for every public name, the Session's page its methods inherited from the
mixins, and the README and the repository files the pages link to are in the site."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="mkdocs (in the dev extra) builds the documentation site")
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                          "-d", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                         check=False)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert not re.search(r"^WARNING", res.stderr, re.M), res.stderr[-4000:]
    return out


def _anchors(site: Path) -> set[str]:
    html = "".join(p.read_text(encoding="utf-8") for p in (site / "reference").glob("*.html"))
    return set(re.findall(r'id="(protab\.[\w.]+)"', html))


def test_every_public_name_has_an_entry_in_the_api_reference(site):
    import protab

    missing = sorted(set(protab.PUBLIC) - {a.removeprefix("protab.") for a in _anchors(site)})
    assert not missing, f"public names without an entry in docs/reference/: {missing}"


def test_the_session_page_shows_the_methods_inherited_from_its_mixins(site):
    from protab.session.catalog import Catalog
    from protab.session.census import Census
    from protab.session.keys import Keys
    from protab.session.suppress import Suppression
    from protab.session.tables import Tables

    anchors = _anchors(site)
    inherited = [m for mixin in (Catalog, Keys, Tables, Suppression, Census) for m in vars(mixin)
                 if not m.startswith("_") and callable(vars(mixin)[m])]
    assert "cell_key" in inherited
    missing = [m for m in inherited if f"protab.Session.{m}" not in anchors]
    assert not missing, missing
    assert "protab.Session.cell_key" in anchors


def test_every_page_of_docs_and_the_readme_are_in_the_site(site):
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")} - {"README"}
    built = {p.stem for p in site.glob("*.html")}
    assert pages <= built, pages - built
    assert (site / "index.html").is_file()
    overview = (site / "overview.html").read_text(encoding="utf-8")
    assert "Two commands" in overview  # a heading of the README
    assert 'href="docs/' not in overview  # its links to docs/ lead to the site's pages


def test_repository_files_the_pages_link_to_are_copied_into_the_site(site):
    census = (ROOT / "docs" / "census.md").read_text(encoding="utf-8")
    linked = re.findall(r"\]\(\.\./(examples/[^)#\s]+)\)", census)
    assert linked
    for path in linked:
        copy = site / "repository" / path
        assert copy.read_bytes() == (ROOT / path).read_bytes(), path
