"""Runs the code blocks of README.md and docs/*.md as written (tests/docs/test_docs_examples.py).

A small collector of fenced blocks rather than a library (Sybil, pytest's doctest-glob): each
language needs its own runner (protect requests, the duckdb CLI, a shell session with a service
in the background), which a library would leave to us anyway; fences and one marker are all
there is to read.

- A block is a fence with a language: python, bash / sh, toml, sql, json, r. A fence without one,
  or ``text``, is text (a synopsis, a file listing, a transcript) and is not run.
- ``<!-- not run: why -->`` on the line before a fence marks a block that cannot run here.
- The blocks of one document run in order, in one folder of their own: the demo of the test
  session (``protab demo --persons 20000``: ``protab.duckdb``, ``protab_output/``, and its
  persons also as ``persons/persons.parquet``), ``sql/``, ``benchmarks/`` and ``examples/``
  (links to the repository's). A
  document that runs ``protab demo`` itself starts from the folder without the demo.
- python: executed in one namespace per document (tracebacks give the document's lines), with
  ``PROTAB_SEED`` and ``SWAP_SEED`` set, and ``TOKEN`` as the shell has it.
- bash / sh: one bash session per document; a block is sourced and fails at its first failing
  command (a command that is not installed, exit status 127, skips the block instead). ``curl``
  gets ``--fail-with-body`` unless it is given ``-f``, so an HTTP error fails too. A service
  command (``protab serve …``, ``python -m protab.serve …``, with or without ``&``) runs in the
  background on 127.0.0.1 and free ports (``--port``, ``--pg-port``, ``--host`` replaced; the
  session waits until it answers) until the document ends; later blocks reach it at the
  documented ports, rewritten to the real ones. An assignment of a placeholder
  (``TOKEN=ptk_...``) is left out: the value is the one the document made before.
- toml: written to the file its first line names (``# serve.toml``), else ``request.toml`` for
  a request (``[[tables]]``: run by ``protab protect`` and ``protab publish``, every table's
  files written) or ``serve.toml`` for a service configuration (``[datasets.…]``: loaded); any
  other block that names its file is written there for later blocks (an included file, a
  programme, a report request).
- sql: the duckdb CLI on ``protab.duckdb`` (an error fails). json: parsed.
- r: one R session per document with the package r/protab (tests/docs/docs_r.py); an R error
  fails the block.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LANGUAGES = {"python", "bash", "sh", "toml", "sql", "json", "r"}
TEXT = {"", "text"}
DEMO_PERSONS = 20_000
SEEDS = {"PROTAB_SEED": "docs-example-seed", "SWAP_SEED": "docs-swap-seed"}
#: shell variables the Python blocks see as environment variables
SHARED = ("TOKEN",)
DEFAULT_PORT = 8000
TIMEOUT = 300

_FENCE = re.compile(r"^```(\S*)\s*$")
_NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.*?)\s*-->\s*$")
_PLACEHOLDER = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_]*=\S*\.\.\.\S*\s*(#.*)?$")
_SERVICE = re.compile(r"^\s*(protab serve|python -m protab\.serve)(\s|$)")

# the session's helpers: curl fails on HTTP errors unless the document says -f; waiting for a service
_PRELUDE = r"""
curl() {
  local a
  for a in "$@"; do case "$a" in --fail|--fail-with-body|-[a-zA-Z]*f*) command curl "$@"; return;; esac; done
  command curl --fail-with-body "$@"
}
__docs_wait() {  # port, pid[, PostgreSQL port]
  local i
  for i in $(seq 600); do
    if { command curl -s -f -o /dev/null "http://127.0.0.1:$1/healthz" ||
         command curl -s -f -k -o /dev/null "https://127.0.0.1:$1/healthz"; } &&
       { [ -z "$3" ] || (exec 3<>"/dev/tcp/127.0.0.1/$3") 2>/dev/null; }; then return 0; fi
    kill -0 "$2" 2>/dev/null || { echo "@@ the service stopped"; return 1; }
    sleep 0.1
  done
  echo "@@ the service did not answer"; return 1
}
__docs_pids=""
"""
_TRAP = "trap '__docs_rc=$?; echo \"@@failed $__docs_rc: $BASH_COMMAND\"; trap - ERR; return $__docs_rc' ERR\n"


@dataclass
class Block:
    """One fenced block: document (relative to the repository), line of its opening fence,
    language, text, and the reason it is not run (None: it runs)."""

    doc: str
    line: int
    lang: str
    text: str
    not_run: str | None = None

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}:{self.lang or 'text'}"


def documents() -> list[str]:
    """README.md and every docs/*.md, relative to the repository."""
    return ["README.md"] + sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))


def blocks(doc: str, text: str | None = None) -> list[Block]:
    """The fenced blocks of a document (``text``: its content, read from the repository if None)."""
    lines = (text if text is not None else (ROOT / doc).read_text(encoding="utf-8")).splitlines()
    found, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise AssertionError(f"{doc}:{i + 1}: a code fence is not closed")
        marker = _NOT_RUN.match(lines[i - 1]) if i > 0 else None
        found.append(Block(doc, i + 1, m.group(1).lower(), "\n".join(lines[i + 1:end]) + "\n",
                           marker.group(1) if marker else None))
        i = end + 1
    return found


def not_run_markers(doc: str) -> list[int]:
    """Lines that begin a ``<!-- not run`` comment (each must stand right before a fence)."""
    lines = (ROOT / doc).read_text(encoding="utf-8").splitlines()
    return [k + 1 for k, line in enumerate(lines) if line.lstrip().startswith("<!-- not run")]


def make_demo(folder: Path) -> Path:
    """The demo the documents assume (``make demo``, with fewer persons), generated once."""
    import duckdb

    from protab import cli

    folder.mkdir(parents=True, exist_ok=True)
    cli.demo(DEMO_PERSONS, str(folder / "protab.duckdb"), str(folder / "protab_output"), "docs-demo-seed")
    (folder / "persons").mkdir()
    with duckdb.connect(str(folder / "protab.duckdb"), read_only=True) as con:
        con.sql("SELECT * EXCLUDE (rkey) FROM persons").pl().write_parquet(folder / "persons" / "persons.parquet")
    return folder


def makes_its_demo(doc: str) -> bool:
    """Whether a document runs ``protab demo`` in a shell block of its own."""
    return any(re.search(r"^\s*protab demo\b", b.text, re.M) for b in blocks(doc)
               if b.lang in ("bash", "sh") and b.not_run is None)


def doc_folder(demo: Path, folder: Path, doc: str) -> Path:
    """The folder of one document: a copy of the demo (unless it makes its own), and ``sql/``."""
    if makes_its_demo(doc):
        folder.mkdir(parents=True)
    else:
        shutil.copytree(demo, folder)
    (folder / "sql").symlink_to(ROOT / "sql", target_is_directory=True)
    (folder / "benchmarks").symlink_to(ROOT / "benchmarks", target_is_directory=True)
    (folder / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Shell:
    """One bash session: blocks are sourced in it, their output read up to a marker line."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=folder, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.n = 0
        self.send(_PRELUDE)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, text: str, timeout: float = TIMEOUT) -> tuple[int, str]:
        """Run ``text`` (sourced from a file, so that it may span lines freely): status, output."""
        self.n += 1
        script = self.folder / f".docs-shell-{self.n}.sh"
        script.write_text(_TRAP + text + "\ntrap - ERR\n", encoding="utf-8")
        marker = f"@@rc-{self.n}"
        assert self.proc.stdin is not None
        self.proc.stdin.write(f'source {shlex.quote(str(script))} </dev/null; echo "{marker} $?"\n')
        self.proc.stdin.flush()
        out, deadline = [], time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                return -1, "".join(out) + f"\n(no end after {timeout} s)"
            if line is None:
                return -1, "".join(out) + "\n(the shell ended)"
            m = re.match(rf"(.*){marker} (\d+)$", line.rstrip("\n"), re.S)
            if m:  # the marker may follow output that did not end its line
                return int(m.group(2)), "".join(out) + m.group(1)
            out.append(line)

    def variable(self, name: str) -> str:
        _, out = self.send(f'printf "%s\\n" "${{{name}-}}"')
        return out.rstrip("\n")

    def close(self) -> None:
        """Stop the services this session started (by their process ids), then the session."""
        if self.proc.poll() is None:
            pids = [int(p) for p in self.variable("__docs_pids").split()]
            for pid in pids:
                _stop(pid)
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _stop(pid: int) -> None:
    """SIGTERM a service started by a document's shell, SIGKILL it if it does not end."""
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(150):
            time.sleep(0.1)
            os.kill(pid, 0)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@dataclass
class DocRun:
    """The state of one document's run: its folder, Python namespace, bash session, and the
    documented ports mapped to the real ones."""

    doc: str
    folder: Path
    namespace: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    ports: dict[int, int] = field(default_factory=dict)
    shell_: Shell | None = None
    r_: Any = None  # the document's R session (docs_r.RSession), made by its first R block

    def __post_init__(self) -> None:
        self.env = dict(os.environ, **SEEDS, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                        MPLBACKEND="Agg", PROTAB_PROGRESS="0")

    def close(self) -> None:
        if self.shell_ is not None:
            self.shell_.close()
            self.shell_ = None
        if self.r_ is not None:
            self.r_.close()
            self.r_ = None

    def ported(self, line: str) -> str:
        """The documented ports in ``line`` replaced by those of the running services."""
        for doc_port, real in self.ports.items():
            line = re.sub(rf"(127\.0\.0\.1|localhost):{doc_port}\b", rf"\g<1>:{real}", line)
            line = re.sub(rf"(\s-p\s+|\bport=){doc_port}\b", rf"\g<1>{real}", line)
        return line

    def run(self, block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(self.folder)
        for k in (*SEEDS, *SHARED, "MPLBACKEND", "PROTAB_PROGRESS"):
            if k in self.env:
                monkeypatch.setenv(k, self.env[k])
        runner = {"python": self.python, "bash": self.shell, "sh": self.shell, "toml": self.toml,
                  "sql": self.sql, "json": self.json, "r": self.r}[block.lang]
        runner(block)

    # -- the languages ------------------------------------------------------------------------
    def python(self, block: Block) -> None:
        text = "\n".join(self.ported(line) for line in block.text.splitlines())
        code = "\n" * block.line + text  # tracebacks give the document's lines
        exec(compile(code, str(ROOT / block.doc), "exec"), self.namespace)

    def json(self, block: Block) -> None:
        json.loads(block.text)

    def r(self, block: Block) -> None:
        from docs_r import RSession

        if self.r_ is None:
            self.r_ = RSession(self.folder, self.env)
        rc, out = self.r_.send(block.text)
        assert rc == 0, f"{block.id} failed (status {rc}):\n{out[-4000:]}"

    def sql(self, block: Block) -> None:
        duckdb = BIN / "duckdb" if (BIN / "duckdb").exists() else shutil.which("duckdb")
        if duckdb is None:
            pytest.skip("the duckdb CLI (pip package duckdb-cli) is not installed")
        res = subprocess.run([str(duckdb), "-bail", "protab.duckdb"], input=block.text, cwd=self.folder,
                             capture_output=True, text=True, timeout=TIMEOUT)
        assert res.returncode == 0 and "Error" not in res.stderr, f"{block.id}: {res.stderr}"

    def toml(self, block: Block) -> None:
        from protab._io import read_toml  # tomllib or tomli

        first = block.text.lstrip().splitlines()[0]
        name = first[1:].strip() if first.startswith("#") and first.rstrip().endswith(".toml") else None
        scratch = self.folder / ".docs-block.toml"
        scratch.write_text(block.text, encoding="utf-8")
        cfg = read_toml(scratch)
        if "tables" in cfg:
            self.request(block, name or "request.toml", cfg)
        elif "datasets" in cfg:
            from protab.serve.config import load_config

            path = self.folder / (name or "serve.toml")
            path.write_text(block.text, encoding="utf-8")
            load_config(path)
        elif name is not None:  # a file a later block reads (an included file, a programme, a report request)
            (self.folder / name).write_text(block.text, encoding="utf-8")
        else:
            raise AssertionError(f"{block.id}: a TOML block that is neither a protect request ([[tables]]) nor a "
                                 "service configuration ([datasets.…]) nor a named file (# NAME.toml): mark it "
                                 "<!-- not run: why -->")

    def request(self, block: Block, name: str, cfg: dict[str, Any]) -> None:
        """``protab protect`` and ``protab publish`` of a request; every table's files written."""
        from protab import cli

        path = self.folder / name
        path.write_text(block.text, encoding="utf-8")
        out = self.folder / cfg.get("output", cli.DEFAULT_OUTPUT)
        names = {t["name"] for t in cfg["tables"]}
        for f in list(out.glob("*")) if out.is_dir() else []:
            if f.stem in names:
                f.unlink()
        assert cli.main(["protect", str(path)]) == 0, f"{block.id}: protab protect failed"
        for t in names:
            for fmt in cfg.get("formats", cli.FORMATS):
                assert (out / cli.options.output_file(t, fmt)).is_file(), f"{block.id}: {t} as {fmt} not written"
        published = self.folder / "published.duckdb"
        assert cli.main(["publish", str(path), "--to", str(published), "--replace"]) == 0, (
            f"{block.id}: protab publish failed")

    def shell(self, block: Block) -> None:
        if self.shell_ is None:
            self.shell_ = Shell(self.folder, self.env)
        script = "\n".join(self.line(line) for line in block.text.splitlines())
        rc, out = self.shell_.send(script)
        if rc == 127:
            pytest.skip(f"{block.id}: a program is not installed: {out.strip().splitlines()[-1]}")
        assert rc == 0, f"{block.id} failed (status {rc}):\n{out[-4000:]}"
        for name in SHARED:
            value = self.shell_.variable(name)
            if value:
                self.env[name] = value

    def line(self, line: str) -> str:
        """A line of a shell block as run: ports rewritten, a service started in the background."""
        if _PLACEHOLDER.match(line):
            return "# (placeholder left out) " + line
        if not _SERVICE.match(line):
            return self.ported(line)
        args = [a for a in shlex.split(line, comments=True) if a != "&"]
        port, pg = free_port(), None
        k = args.index("--port") if "--port" in args else None
        self.ports[int(args[k + 1]) if k is not None else DEFAULT_PORT] = port
        if k is None:
            args += ["--port", str(port)]
        else:
            args[k + 1] = str(port)
        if "--host" in args:
            args[args.index("--host") + 1] = "127.0.0.1"
        if "--pg-port" in args:
            k = args.index("--pg-port")
            self.ports[int(args[k + 1])] = pg = free_port()
            args[k + 1] = str(pg)
        return (f"{shlex.join(args)} &\n__docs_pids=\"$__docs_pids $!\"\n"
                f"__docs_wait {port} $! {pg or ''}")
