"""A programme's output folder (and its staging folder) never replaces a file the programme
reads its labels from (``labels_file``, a name, a ``{ file = … }`` or ``{ sdmx = … }`` table or
a list of these), as protect's never does: the run is refused before any work, naming the file."""

from __future__ import annotations

import pytest

import protab as pt
from protab.cli import audit_programme
from protab.errors import InputError

PROGRAMME = """
database = "demo.duckdb"
source = "persons"
formats = ["csv"]
[ptable]
maximum_entropy = { D = 3, V = 1 }
[classifications.sex]
codes = ["F", "M"]
labels_file = LABELS
[[hypercubes]]
name = "HC"
dims = { sex = "sex" }
"""


@pytest.mark.parametrize("labels", ['"codes/sex.csv"', '{ file = "codes/sex.csv", language = "en", label = "label_en" }',
                                    '["codes/sex.csv"]'])
def test_an_output_folder_holding_a_labels_file_is_refused(workdir, labels):
    (workdir / "codes").mkdir()
    text = "code,label_en\nF,Female\nM,Male\n"
    (workdir / "codes" / "sex.csv").write_text(text, encoding="utf-8")
    prog = workdir / "p.toml"
    prog.write_text(PROGRAMME.replace("LABELS", labels), encoding="utf-8")
    with pytest.raises(InputError, match=r"programme: the output folder .*would replace the file 'codes/sex\.csv'"):
        pt.Programme(prog).run(out=workdir / "codes", quiet=True)
    assert (workdir / "codes" / "sex.csv").read_text(encoding="utf-8") == text
    assert not (workdir / "codes" / "HC.HC.csv").exists()
    # protab audit's report is kept off it the same way
    assert any("codes/sex.csv" in label for _, label in audit_programme.inputs(pt.Programme(prog), "demo.duckdb"))
