"""Every documented example runs: the code blocks of README.md and docs/*.md, as written, on the
demo database (how they are run: tests/docs/docs_fixtures.py)."""

from __future__ import annotations

import pytest
from docs_fixtures import LANGUAGES, TEXT, Block, DocRun, blocks, doc_folder, documents, make_demo, not_run_markers

#: R blocks start R and reticulate (a whole process, ~15 s): slow, like tests/r, which runs the same calls
CASES = [pytest.param(b, marks=pytest.mark.slow) if b.lang == "r" else b
         for doc in documents() for b in blocks(doc) if b.lang not in TEXT]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return make_demo(tmp_path_factory.mktemp("docs") / "demo")


@pytest.fixture(scope="module")
def runs(demo, tmp_path_factory):
    """One DocRun per document, made when its first block runs; services stopped at the end."""
    made: dict[str, DocRun] = {}

    def get(doc: str) -> DocRun:
        if doc not in made:
            folder = tmp_path_factory.mktemp("doc") / doc.replace("/", "_").removesuffix(".md")
            made[doc] = DocRun(doc, doc_folder(demo, folder, doc))
        return made[doc]

    yield get
    for run in made.values():
        run.close()


@pytest.mark.parametrize("block", CASES, ids=lambda b: b.id)
def test_documented_block_runs(block: Block, runs, monkeypatch):
    if block.not_run is not None:
        pytest.skip(f"marked not run: {block.not_run}")
    runs(block.doc).run(block, monkeypatch)


def test_every_block_has_a_known_language_and_every_marker_a_reason():
    for doc in documents():
        found = blocks(doc)
        assert all(b.lang in LANGUAGES | TEXT for b in found), [
            b.id for b in found if b.lang not in LANGUAGES | TEXT]
        assert all(b.not_run for b in found if b.not_run is not None), doc
        marked = {b.line - 1 for b in found if b.not_run is not None}
        assert set(not_run_markers(doc)) == marked, f"{doc}: a '<!-- not run' comment not right before a fence"
