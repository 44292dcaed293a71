"""Splitting a protect request's shared sections among included files, in any order and any
grouping, reads as the same request as the sections written inline (the merge of include)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from protab._io import read_toml
from protab.cli.protect_checks import read_request

SECTIONS = {
    "ptable": "[ptable]\nmaximum_entropy = { D = 5, V = 3, js = 2 }\n",
    "rules": "[rules]\nmin_frequency = 3\n",
    "hierarchies.municipality": '[hierarchies.municipality]\ncolumns = ["region", "municipality"]\n',
    "hierarchies.age": "[hierarchies.age]\ncode_lengths = [1, 2]\n",
    "swap": ('[swap]\nsource = "persons"\nout = "swapped"\nhousehold = "hid"\ngeography = ["region"]\n'
             'risk_variables = ["sex"]\nswap_rate = 0.05\nseed_env = "SWAP_SEED"\n'),
}
TABLE = '[[tables]]\nname = "by_sex"\nsource = "persons"\ndims = ["sex"]\n'


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=len(SECTIONS), max_size=len(SECTIONS)), st.booleans())
def test_sections_split_among_includes_read_as_inline(tmp_path_factory, groups, repeat):
    folder = tmp_path_factory.mktemp("split")
    inline = "".join(SECTIONS.values()) + TABLE
    files: dict[int, str] = {}
    for text, g in zip(SECTIONS.values(), groups):
        files[g] = files.get(g, "") + text
    if repeat:  # an identical repeat of a section in the request itself is fine
        files[-1] = SECTIONS["ptable"]
    own = files.pop(-1, "")
    for g, text in files.items():
        (folder / f"part{g}.toml").write_text(text, encoding="utf-8")
    includes = ", ".join(f'"part{g}.toml"' for g in sorted(files, reverse=repeat))
    request = folder / "request.toml"
    request.write_text(f"include = [{includes}]\n" + own + TABLE, encoding="utf-8")
    (folder / "inline.toml").write_text(inline, encoding="utf-8")
    assert read_request(request) == read_toml(folder / "inline.toml")
