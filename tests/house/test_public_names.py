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


def _type_checking_names() -> dict[str, str]:
    """name -> module of the ``if TYPE_CHECKING:`` block of protab/__init__.py."""
    import ast
    from pathlib import Path

    import protab

    tree = ast.parse(Path(protab.__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test))
    found = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module, ast.unparse(node)
        for alias in node.names:
            found[alias.asname or alias.name] = (f"protab.{alias.name}" if node.module == "protab" else node.module)
    return found


def test_all_the_lazy_loader_and_the_type_checking_block_name_the_same_names():
    import protab as pt

    assert pt.__all__ == sorted(pt.PUBLIC)
    assert _type_checking_names() == pt.PUBLIC


@pytest.mark.parametrize("name", sorted(__import__("protab").PUBLIC))
def test_every_public_name_loads_from_its_module(name):
    import importlib

    import protab as pt

    module = importlib.import_module(pt.PUBLIC[name])
    expected = module if pt.PUBLIC[name] == f"protab.{name}" else getattr(module, name)
    assert getattr(pt, name) is expected


@pytest.mark.parametrize("old", sorted(__import__("protab").DEPRECATED))
def test_an_old_name_warns_naming_the_new_and_gives_the_new(old):
    import protab as pt

    new = pt.DEPRECATED[old]
    with pytest.warns(DeprecationWarning, match=f"use protab.{new}"):
        value = getattr(pt, old)
    assert value is getattr(pt, new) and old not in pt.__all__


def test_numeric_ptable_of_the_ptable_package_warns_and_is_magnitude_ptable():
    from protab import ptable

    with pytest.warns(DeprecationWarning, match="MagnitudePTable"):
        assert ptable.NumericPTable is ptable.MagnitudePTable


def test_the_design_notes_list_every_old_name_with_its_new_name():
    from pathlib import Path

    import protab as pt

    text = (Path(__file__).parents[2] / "docs" / "design.md").read_text(encoding="utf-8")
    table = text[text.index("Renamed names."):]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    for old, new in pt.DEPRECATED.items():
        assert any(f"`protab.{old}`" in row and f"`protab.{new}`" in row for row in rows), old
    assert any("`protab.suppression.audit`" in r and "`protab.suppression.audit_pattern`" in r for r in rows)
    assert any("`app.state.engine`" in r and "`app.state.broker`" in r for r in rows)
