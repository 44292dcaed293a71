"""The runner of R blocks in the documents (tests/docs/docs_fixtures.py): one R session per
document, fed through its standard input like a console, with the package r/protab installed
once into the document's folder and this interpreter as reticulate's Python
(RETICULATE_PYTHON, this checkout's protab on PYTHONPATH). A block is ``source()``d; an R
error fails it with R's message. Without Rscript (r-base-core and r-cran-reticulate) the
block is skipped, and fails under PROTAB_REQUIRE_TOOLS=1."""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "r" / "protab"
TIMEOUT = 300


class RSession:
    """One R process in ``folder``: blocks are sourced in its global environment."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        if shutil.which("R") is None:
            pytest.skip("R (Debian's r-base-core, r-cran-reticulate) is not installed")
        lib = folder / ".r-lib"
        lib.mkdir(exist_ok=True)
        self.env = dict(env, RETICULATE_PYTHON=sys.executable, R_LIBS=str(lib),
                        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p))
        done = subprocess.run(["R", "CMD", "INSTALL", "--no-test-load", "-l", str(lib), str(PACKAGE)],
                              env=self.env, capture_output=True, text=True, timeout=TIMEOUT)
        if done.returncode != 0 and "there is no package called" in done.stdout + done.stderr:
            pytest.skip(f"the R package reticulate (r-cran-reticulate) is not installed: {done.stderr[-300:]}")
        assert done.returncode == 0, done.stdout + done.stderr
        self.folder = folder
        self.proc = subprocess.Popen(["R", "--no-echo", "--no-save", "--no-restore", "--quiet"], cwd=folder,
                                     env=self.env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.n = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, text: str) -> tuple[int, str]:
        """Source ``text``: status (0 or 1 for an R error), output."""
        self.n += 1
        script = self.folder / f".docs-r-{self.n}.R"
        script.write_text(text, encoding="utf-8")
        marker = f"@@rc-{self.n}"
        command = (f'local({{ok <- tryCatch({{source("{script.as_posix()}", local = globalenv()); TRUE}}, '
                   'error = function(e) {cat("@@ R error:", conditionMessage(e), "\\n"); FALSE}); '
                   f'cat("\\n{marker}", if (ok) 0 else 1, "\\n")}})\n')
        assert self.proc.stdin is not None
        self.proc.stdin.write(command)
        self.proc.stdin.flush()
        out: list[str] = []
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                return -1, "".join(out) + f"\n(no end after {TIMEOUT} s)"
            if line is None:
                return -1, "".join(out) + "\n(R ended)"
            if line.startswith(marker + " "):
                return int(line.split()[1]), "".join(out)
            out.append(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
