"""A Spark Connect server for the tests: pyspark's own ``sbin/start-connect-server.sh`` (the
package holds ``sbin/`` and ``jars/spark-connect_*.jar``) on 127.0.0.1 and a free port, its
pid and log files in a temporary folder, started once per test process and stopped with
``stop-connect-server.sh`` when the session ends; skipped without pyspark's Connect client
libraries (the ``spark-connect`` extra) or Java. Its SQL settings are the local test
session's (tests/spark_fixtures.py): no whole-stage code generation, no adaptive execution."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

#: how long the server may take to start (a JVM on a busy two-core machine)
START_TIMEOUT = 180.0

_SERVER: list[tuple[str, dict[str, str], Path]] = []  # (url, environment, SPARK_HOME) of the process's server
_CLIENT: list = []  # the process's Connect SparkSession


def require_connect() -> None:
    """Skip without pyspark, its Connect client libraries or a Java runtime (for the server)."""
    pytest.importorskip("pyspark", reason="pyspark (in the dev extra) is not installed")
    for module in ("grpc", "grpc_status", "google.rpc", "zstandard"):
        pytest.importorskip(module, reason="Spark Connect's client libraries (the spark-connect extra) are not installed")
    if shutil.which("java") is None:  # pragma: no cover - CI machines have Java 17 (make java)
        pytest.skip("the Spark Connect server needs a Java runtime (make java installs Java 17)",
                    allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str, timeout: float) -> bool:
    import grpc
    from pyspark.sql.connect.client import DefaultChannelBuilder

    channel = DefaultChannelBuilder(url).toChannel()
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
        return True
    except grpc.FutureTimeoutError:
        return False
    finally:
        channel.close()


def connect_url(tmp_path_factory) -> str:
    """The URL of the process's Spark Connect server, started on first use (``local[2]``)."""
    if _SERVER:
        return _SERVER[0][0]
    require_connect()
    import pyspark

    home = Path(pyspark.__file__).parent
    folder = tmp_path_factory.mktemp("spark-connect")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env.update(SPARK_HOME=str(home), SPARK_PID_DIR=str(folder), SPARK_LOG_DIR=str(folder),
               SPARK_IDENT_STRING="protab-tests")
    conf = {"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": str(port),
            "spark.ui.enabled": "false", "spark.sql.warehouse.dir": str(folder / "warehouse"),
            "spark.sql.codegen.wholeStage": "false", "spark.sql.adaptive.enabled": "false",
            "spark.sql.shuffle.partitions": "2"}
    args = [str(home / "sbin" / "start-connect-server.sh"), "--master", "local[2]"]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    subprocess.run(args, env=env, cwd=folder, check=True, capture_output=True)
    url = f"sc://127.0.0.1:{port}"
    _SERVER.append((url, env, home))
    atexit.register(stop_connect_server)
    deadline = time.monotonic() + START_TIMEOUT
    while not _answers(url, 2.0):
        if time.monotonic() > deadline:
            logs = "".join(p.read_text(errors="replace")[-3000:] for p in folder.glob("*.out"))
            stop_connect_server()
            pytest.fail(f"the Spark Connect server did not answer at {url} within {START_TIMEOUT:g} s:\n{logs}")
    return url


def stop_connect_server() -> None:
    """Stop the process's server (and its client), if one was started."""
    while _CLIENT:
        _CLIENT.pop().stop()
    if _SERVER:
        url, env, home = _SERVER.pop()
        subprocess.run([str(home / "sbin" / "stop-connect-server.sh")], env=env, check=False, capture_output=True)


def connect_spark(tmp_path_factory):
    """The process's Spark Connect SparkSession (a client of :func:`connect_url`'s server).
    pyspark marks the whole process as Connect's when it makes one (``SPARK_CONNECT_MODE_ENABLED``,
    which classic sessions of the other test modules must not see): the mark is taken back."""
    if not _CLIENT:
        from protab.engines import remote_session

        url = connect_url(tmp_path_factory)
        before = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
        _CLIENT.append(remote_session(url))
        if before is None:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    return _CLIENT[0]


def serve_connect(tmp_path_factory):
    """The body of the session fixture ``spark_connect_url`` (tests/conftest.py): the server's
    ``sc://127.0.0.1:PORT``, stopped when the session ends."""
    require_connect()
    try:
        yield connect_url(tmp_path_factory)
    finally:
        stop_connect_server()
