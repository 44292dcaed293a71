"""The builder shows the office's labels, names and descriptions (and every text of an answer) as
text, never as HTML: its scripts build elements and set ``textContent`` and attributes, and none
parses a string as markup, so a label such as ``<b>North</b> & co`` shows as written."""

from __future__ import annotations

import re
from pathlib import Path

STATIC = Path(__file__).resolve().parents[2] / "src" / "protab" / "serve" / "static"
MARKUP = re.compile(r"\b(innerHTML|outerHTML|insertAdjacentHTML|document\.write|DOMParser|createContextualFragment"
                    r"|srcdoc)\b")


def test_no_script_of_the_builder_parses_text_as_html():
    scripts = sorted(STATIC.glob("*.js"))
    assert scripts
    found = [f"{p.name}:{n}: {line.strip()}" for p in scripts
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if MARKUP.search(line)]
    assert found == []
