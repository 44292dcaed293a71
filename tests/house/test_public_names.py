"""Every subpackage and every public error and warning is an attribute of ``protab`` without
importing anything else first, and an unknown name is an AttributeError naming it."""

from __future__ import annotations

import subprocess
import sys

import pytest

NAMES = ["audit", "suppression", "fit", "rounding", "noise", "measures", "grid", "report", "postprocess",
         "ConvergenceError", "ConvergenceWarning", "NoRecordsError", "SwapRateWarning", "PTableWarning",
         "InputError", "SpecError", "HierarchyError", "PTableError", "RoundingError", "ProtabError"]


@pytest.mark.parametrize("name", NAMES)
def test_public_name_is_there_in_a_fresh_interpreter(name):
    code = f"import protab as pt; print(type(pt.{name}).__name__, '{name}' in pt.__all__)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[1] == "True"


def test_errors_and_warnings_have_their_bases():
    import protab as pt

    assert issubclass(pt.NoRecordsError, pt.InputError) and issubclass(pt.ConvergenceError, pt.ProtabError)
    assert issubclass(pt.SwapRateWarning, UserWarning) and issubclass(pt.ConvergenceWarning, UserWarning)


def test_an_unknown_name_is_refused_by_name():
    import protab as pt

    with pytest.raises(AttributeError, match="'no_such_thing'"):
        pt.no_such_thing  # noqa: B018
