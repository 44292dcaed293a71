"""The built wheel (not the editable install) carries sql/ and runs the demo and the macros."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("hatchling", reason="hatchling (in the dev extra) builds the wheel")
    dist = tmp_path_factory.mktemp("dist")
    res = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(ROOT)],
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (whl,) = dist.glob("protab-*.whl")
    return whl


def test_wheel_carries_the_sql_files(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for f in ("protab/sql/protab.sql", "protab/sql/demo_population.sql", "protab/sql/spark/protab.sql"):
        assert f in names


def test_unpacked_wheel_runs_the_demo_from_another_folder(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=str(site), PROTAB_PROGRESS="0")

    def run(*args: str) -> str:
        res = subprocess.run([sys.executable, *args], cwd=work, env=env, capture_output=True, text=True,
                             check=False, timeout=300)
        assert res.returncode == 0, res.stdout + res.stderr
        return res.stdout

    where = run("-c", "import protab, protab.cli; print(protab.__file__); print(protab.cli.macro_path())")
    module, macros = where.split()
    assert module.startswith(str(site)) and macros.startswith(str(site))
    out = run("-m", "protab.cli", "demo", "--persons", "2000")
    assert "4 tables protected" in out
    assert sorted(p.name for p in (work / "protab_output").iterdir())[:2] == [
        "grid_sex.csv", "grid_sex.parquet"]
    assert (work / "protab.duckdb").exists()


def test_the_wheel_its_metadata_and_the_command_line_give_one_version(wheel, tmp_path):
    """The version lives in protab/_version.py alone: the wheel's metadata, ``pt.__version__``
    and ``protab --version`` agree, and the wheel carries the LICENSE that pyproject names."""
    import protab as pt

    z = zipfile.ZipFile(wheel)
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    version = next(line.split(":", 1)[1].strip() for line in z.read(meta).decode().splitlines()
                   if line.startswith("Version:"))
    assert version == pt.__version__
    assert f"protab-{version}-" in wheel.name
    assert any(n.endswith("LICENSE") for n in z.namelist())
    res = subprocess.run([sys.executable, "-m", "protab.cli", "--version"], capture_output=True, text=True,
                         check=False, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert res.returncode == 0 and res.stdout.strip() == f"protab {pt.__version__}", res.stdout + res.stderr
