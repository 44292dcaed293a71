"""The lint gate: ruff (configured in pyproject.toml, with the complexity and statement limits)
finds nothing, no module of the package passes 600 lines nor any function 60 lines, mypy finds
no type error ([tool.mypy]: strict on the packages whose classes share declared state), and the
floors of the house hold (import-linter: no import climbs a floor, no import circle)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "protab"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60


def _tool(module: str | None, command: str) -> list[str]:
    """The command of a dev-extra tool, or a failure saying how to install it."""
    ok = module is not None and subprocess.run(
        [sys.executable, "-m", module, "--version"], capture_output=True, check=False).returncode == 0
    if ok:
        return [sys.executable, "-m", module]
    found = shutil.which(command, path=str(Path(sys.executable).parent)) or shutil.which(command)
    if found is None:
        pytest.fail(f"{command} is not installed: install the dev extra (pip install -e '.[dev]')")
    return [found]


def test_ruff_finds_nothing():
    cmd = [*_tool("ruff", "ruff"), "check", "src", "tests", "benchmarks", "examples"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def _over_limits(name: str, text: str) -> list[str]:
    """The module of ``text`` past 600 lines, its functions (methods, nested ones) past 60."""
    over = []
    if len(text.splitlines()) > MAX_MODULE_LINES:
        over.append(f"{name}: {len(text.splitlines())} lines")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                over.append(f"{name}:{node.lineno}: {node.name} has {lines} lines")
    return over


def test_no_module_or_function_past_the_line_limits():
    over = [o for p in sorted(PACKAGE.rglob("*.py")) for o in _over_limits(str(p.relative_to(ROOT)),
                                                                            p.read_text(encoding="utf-8"))]
    assert not over, "past the limits of the house (docs/design.md):\n" + "\n".join(over)


def test_the_line_check_finds_long_functions_and_modules():
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    method = f"class C:\n    def short(self):\n        pass\n\n    def long(self):\n{body}\n"
    assert _over_limits("m.py", method) == []  # 60 lines: at the limit
    assert _over_limits("m.py", method + "        y = 1\n") == ["m.py:5: long has 61 lines"]
    module = "\n".join(f"x{i} = {i}" for i in range(MAX_MODULE_LINES + 1))
    assert _over_limits("big.py", module) == [f"big.py: {MAX_MODULE_LINES + 1} lines"]


def test_mypy_finds_nothing():
    # [tool.mypy] of pyproject.toml: strict on rollup, engines, session, ptable and the packages
    # listed with them, the rest checked as written (no module exempt)
    cmd = _tool("mypy", "mypy")
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Success: no issues found" in res.stdout, res.stdout


def test_import_floors_hold():
    cmd = [*_tool(None, "lint-imports"), "--no-cache"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 broken" in res.stdout, res.stdout


def test_no_file_holds_a_merge_conflict_marker():
    # a merge left half-done publishes both sides of a doc or breaks code
    marker = ("<" * 7 + " ", "=" * 7 + "\n", ">" * 7 + " ")
    found = []
    for path in sorted(ROOT.glob("**/*")):
        if (not path.is_file() or path.suffix not in {".py", ".md", ".toml", ".txt", ".cfg", ".R", ".sql"}
                or any(part.startswith(".") or part in {"build", "dist"} for part in path.relative_to(ROOT).parts)):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(True), 1):
            if line.startswith(marker):
                found.append(f"{path.relative_to(ROOT)}:{n}")
    assert not found, found
