"""`make test` as root (CI) sets PROTAB_REQUIRE_TOOLS=1: a test skipped because a tool the
README promises is missing (Java, chromium, psql, JDBC, the duckdb CLI) fails the run; other
skips do not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
CASES = '''
import pytest

def test_runs():
    pass

def test_tool_missing():
    pytest.skip("psql (postgresql-client) is not installed")

def test_other_reason():
    pytest.skip("root writes into a folder of mode 0o500")
'''


def _run(tmp_path: Path, require: str | None, body: str = CASES) -> subprocess.CompletedProcess:
    (tmp_path / "test_cases.py").write_text(body, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PROTAB_REQUIRE_TOOLS"}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    if require is not None:
        env["PROTAB_REQUIRE_TOOLS"] = require
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_cases.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("require, code", [(None, 0), ("0", 0), ("1", 1)])
def test_a_tool_skip_fails_only_when_tools_are_required(tmp_path, require, code):
    res = _run(tmp_path, require)
    assert res.returncode == code, res.stdout + res.stderr
    if code:
        assert "test_tool_missing: Skipped: psql (postgresql-client) is not installed" in res.stdout
        assert "test_other_reason" not in res.stdout.split("PROTAB_REQUIRE_TOOLS=1")[-1]


def test_other_skips_pass_when_tools_are_required(tmp_path):
    body = CASES.replace('pytest.skip("psql (postgresql-client) is not installed")', "pass")
    assert _run(tmp_path, "1", body).returncode == 0
