"""The R package r/protab: `R CMD build` and `R CMD check --no-manual` (its testthat tests
included) with this interpreter as the package's Python (RETICULATE_PYTHON), as an R user
would run it. Needs Debian's r-base-core, r-cran-reticulate and r-cran-testthat (`make r`);
without them the tests are skipped, and fail under PROTAB_REQUIRE_TOOLS=1 (tests/conftest.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "r" / "protab"
#: R CMD build and check of the package took 32 to 53 s on the two-core machine
TIMEOUT = 600
# a whole-process run of about a minute: make test runs it, make check leaves it out (docs/design.md)
pytestmark = pytest.mark.slow


def _missing_r() -> str | None:
    """What of R is missing (None: Rscript with reticulate and testthat is there)."""
    if shutil.which("Rscript") is None or shutil.which("R") is None:
        return "R (Debian's r-base-core) is not installed"
    probe = subprocess.run(["Rscript", "-e", 'cat(Filter(function(p) !requireNamespace(p, quietly = TRUE), '
                            'c("reticulate", "testthat")))'], capture_output=True, text=True, timeout=120)
    lacking = probe.stdout.split()
    if probe.returncode != 0 or lacking:
        names = " and ".join(f"{p} (r-cran-{p})" for p in lacking) or "reticulate and testthat"
        return f"the R packages {names}: not installed"
    return None


def _env() -> dict[str, str]:
    """The environment of the R commands: this Python for reticulate, with this checkout's protab."""
    env = dict(os.environ, RETICULATE_PYTHON=sys.executable, PROTAB_PROGRESS="0")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p)
    return env


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The package built and checked once in a folder of its own: (folder, the check's result)."""
    missing = _missing_r()
    if missing:
        pytest.skip(missing)
    folder = tmp_path_factory.mktemp("rcheck")
    build = subprocess.run(["R", "CMD", "build", str(PACKAGE)], cwd=folder, env=_env(), capture_output=True,
                           text=True, timeout=TIMEOUT)
    assert build.returncode == 0, build.stdout + build.stderr
    tarballs = list(folder.glob("protab_*.tar.gz"))
    assert len(tarballs) == 1, build.stdout
    check = subprocess.run(["R", "CMD", "check", "--no-manual", tarballs[0].name], cwd=folder, env=_env(),
                           capture_output=True, text=True, timeout=TIMEOUT)
    return folder, check


def test_r_cmd_check_passes_without_warnings_or_notes(checked):
    folder, check = checked
    log = check.stdout + check.stderr
    assert check.returncode == 0, log[-6000:]
    assert "Status: OK" in check.stdout, log[-6000:]


def test_the_r_tests_ran_and_none_was_skipped(checked):
    folder, _ = checked
    out = (folder / "protab.Rcheck" / "tests" / "testthat.Rout").read_text(encoding="utf-8")
    m = re.search(r"\[ FAIL (\d+) \| WARN (\d+) \| SKIP (\d+) \| PASS (\d+) \]", out)
    assert m, out[-4000:]
    fail, warn, skip, passed = map(int, m.groups())
    assert (fail, warn, skip) == (0, 0, 0), out[-4000:]
    assert passed >= 80, out[-4000:]


def test_without_protab_in_its_python_the_package_says_how_to_choose_one(checked, tmp_path):
    folder, _ = checked
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    env = {k: v for k, v in _env().items() if k != "PYTHONPATH"}
    env["RETICULATE_PYTHON"] = str(bare / "bin" / "python")
    res = subprocess.run(["Rscript", "-e", 'library(protab, lib.loc = "protab.Rcheck"); pt_session()'], cwd=folder,
                         env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert res.returncode != 0
    assert "the Python package protab is not importable from" in res.stderr, res.stderr
    assert "set RETICULATE_PYTHON to a Python that has it" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
