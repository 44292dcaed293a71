"""The runner of the documented examples (tests/docs/docs_fixtures.py) fails a block that fails: a
Python error, a failing shell command (also an HTTP error answered to curl), a failing SQL
statement, a request that protab refuses; and it reads fences and markers as documented."""

from __future__ import annotations

import http.server
import threading

import pytest
from docs_fixtures import Block, DocRun, blocks

import protab as pt

DOC = """# A document

<!-- not run: needs a cluster -->
```bash
spark-submit job.py
```

```python
x = 1
```

```
a synopsis [--option]
```
"""


def _block(lang: str, text: str) -> Block:
    return Block("test.md", 1, lang, text)


@pytest.fixture
def run(tmp_path):
    r = DocRun("test.md", tmp_path)
    yield r
    r.close()


def test_fences_and_markers_are_read():
    found = blocks("x.md", DOC)
    assert [(b.line, b.lang, b.not_run) for b in found] == [
        (4, "bash", "needs a cluster"), (8, "python", None), (12, "", None)]
    assert found[1].text == "x = 1\n"


def test_python_blocks_share_a_namespace_and_fail_on_errors(run, monkeypatch):
    run.run(_block("python", "y = 41\n"), monkeypatch)
    run.run(_block("python", "assert y + 1 == 42\n"), monkeypatch)
    with pytest.raises(NameError):
        run.run(_block("python", "print(undefined_name)\n"), monkeypatch)


def test_a_shell_block_fails_at_its_failing_command_and_keeps_its_variables(run, monkeypatch):
    run.run(_block("bash", "A=$(echo hello)\necho one > one.txt\n"), monkeypatch)
    with pytest.raises(AssertionError, match="false"):
        run.run(_block("bash", "echo two > two.txt\nfalse\necho three > three.txt\n"), monkeypatch)
    assert (run.folder / "two.txt").exists() and not (run.folder / "three.txt").exists()
    run.run(_block("bash", '[ "$A" = hello ]\n'), monkeypatch)  # the session lives on
    run.run(_block("bash", "TOKEN=ptk_...   # a placeholder: left out\nTOKEN=abc\n"), monkeypatch)
    run.run(_block("python", "import os\nassert os.environ['TOKEN'] == 'abc'\n"), monkeypatch)


def test_curl_fails_on_an_http_error(run, monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(AssertionError, match="status 22"):
            run.run(_block("bash", f"curl -s {url}/no-such-file\n"), monkeypatch)
        # with -f (a readiness loop) the document decides
        run.run(_block("bash", f"curl -sf {url}/no-such-file || echo not yet\n"), monkeypatch)
    finally:
        server.shutdown()
        server.server_close()


def test_sql_and_requests_fail_on_errors(run, monkeypatch):
    with pt.Session(run.folder / "protab.duckdb", progress=False) as s:  # a file the duckdb CLI reads
        s.con.execute("CREATE TABLE t AS SELECT 1 AS a")
    run.run(_block("sql", "SELECT a FROM t;\n"), monkeypatch)
    with pytest.raises(AssertionError, match="no_such_column"):
        run.run(_block("sql", "SELECT a FROM t;\nSELECT no_such_column FROM t;\n"), monkeypatch)
    request = ('database = "protab.duckdb"\n[ptable]\nmaximum_entropy = { D = 3, V = 1 }\n'
               '[[tables]]\nname = "x"\nsource = "t"\ndims = ["no_such_column"]\n')
    with pytest.raises(AssertionError, match="protab protect failed"):
        run.run(_block("toml", request), monkeypatch)
    with pytest.raises(AssertionError, match="neither a protect request"):
        run.run(_block("toml", "a = 1\n"), monkeypatch)


@pytest.mark.slow  # installs the R package and starts R and Python in it: about 20 s
def test_r_blocks_share_a_session_and_fail_on_an_r_or_protab_error(run, monkeypatch):
    run.run(_block("r", "x <- 41\n"), monkeypatch)
    run.run(_block("r", "stopifnot(x + 1 == 42)\nlibrary(protab)\n"), monkeypatch)
    with pytest.raises(AssertionError, match="object 'undefined_name' not found"):
        run.run(_block("r", "print(undefined_name)\n"), monkeypatch)
    with pytest.raises(AssertionError, match="no table named 'nope'"):
        run.run(_block("r", 'pt_tabulate(pt_session(), "nope", "sex")\n'), monkeypatch)
    run.run(_block("r", "stopifnot(x == 41)\n"), monkeypatch)
