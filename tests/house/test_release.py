"""A release an office can install: the sdist carries everything a wheel needs, and the wheel
built from it installs into a clean virtual environment outside the repository, where
``protab --version`` and ``protab demo --persons 2000`` run (sql/ and the builder's files
included)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], cwd: Path, timeout: int = 900) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PROTAB_PROGRESS"] = "0"
    res = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=timeout)
    assert res.returncode == 0, " ".join(args) + "\n" + res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """(the sdist, the wheel built from that sdist alone)."""
    pytest.importorskip("hatchling", reason="hatchling (in the dev extra) builds the sdist")
    dist = tmp_path_factory.mktemp("dist")
    hatchling = Path(sys.executable).with_name("hatchling")
    _run([str(hatchling), "build", "-t", "sdist", "-d", str(dist)], cwd=ROOT)
    (sdist,) = dist.glob("protab-*.tar.gz")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
          str(sdist)], cwd=dist)
    (whl,) = dist.glob("protab-*.whl")
    return sdist, whl


def test_the_sdist_carries_the_sources_sql_license_and_docs(built):
    sdist, _ = built
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    for f in ("LICENSE", "README.md", "pyproject.toml", "sql/protab.sql", "src/protab/__init__.py",
              "src/protab/serve/static/index.html"):
        assert f in names, f


@pytest.mark.slow
def test_the_wheel_from_the_sdist_installs_in_a_clean_venv_and_runs_the_demo(built, tmp_path):
    _, whl = built
    names = set(zipfile.ZipFile(whl).namelist())
    assert {"protab/sql/protab.sql", "protab/serve/static/index.html", "protab/serve/static/app.js"} <= names
    env_dir = tmp_path / "clean-venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", str(whl)], cwd=tmp_path)
    work = tmp_path / "office"
    work.mkdir()
    import protab as pt

    assert _run([str(env_dir / "bin" / "protab"), "--version"], cwd=work).strip() == f"protab {pt.__version__}"
    where = _run([str(python), "-c", "import protab; print(protab.__file__)"], cwd=work).strip()
    assert where.startswith(str(env_dir)), where
    out = _run([str(env_dir / "bin" / "protab"), "demo", "--persons", "2000"], cwd=work)
    assert "4 tables protected" in out
    assert (work / "protab_output" / "grid_sex.csv").stat().st_size > 0
