"""A TLS private key that its group or others may read is a key others can take: ``protab
serve --tls-key`` warns at start-up (stderr, naming the file and its mode, advising chmod 600)
and serves; with ``require_tls = true`` it refuses to start. A key of mode 0600 passes in
silence. The certificate is a self-signed one made with Debian's ``openssl``."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import httpx
import pytest
import serve_fixtures as F

OPENSSL = shutil.which("openssl")
pytestmark = pytest.mark.skipif(OPENSSL is None, reason="openssl (Debian's openssl package) is not installed")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls_mode")
    cert, key = folder / "server.pem", folder / "server-key.pem"
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True, timeout=30)
    db = F.build_database(folder / "micro.duckdb", persons=300)
    return {"folder": folder, "cert": cert, "key": key, "db": db}


def _key(setup, tmp_path: Path, mode: int) -> Path:
    key = tmp_path / "key.pem"
    key.write_bytes(setup["key"].read_bytes())
    key.chmod(mode)
    return key


@pytest.mark.parametrize(("mode", "who"), [(0o644, "its group and others"), (0o640, "its group"),
                                           (0o604, "others"), (0o600, None)])
def test_the_key_modes_open_to_others_are_found(setup, tmp_path, mode, who):
    from protab.serve.tls import key_exposure

    problem = key_exposure(str(_key(setup, tmp_path, mode)))
    if who is None:
        assert problem is None
    else:
        assert f"mode {mode:04o}: {who} may read it" in problem and "chmod 600" in problem


def test_a_key_readable_by_others_gives_a_warning_at_start_up_and_the_service_serves(setup, tmp_path):
    key = _key(setup, tmp_path, 0o644)
    config, _ = F.write_setup(tmp_path, setup["db"], min_population=1)
    server = F.Server(config, tls=ssl.create_default_context(cafile=str(setup["cert"])),
                      extra=["--tls-cert", str(setup["cert"]), "--tls-key", str(key)])
    try:
        assert httpx.get(server.url + "/healthz", verify=ssl.create_default_context(cafile=str(setup["cert"]))
                         ).status_code == 200
        err = server.stderr()
    finally:
        server.stop()
    warning = [line for line in err.splitlines() if "warning" in line]
    assert len(warning) == 1, err
    assert str(key) in warning[0] and "mode 0644" in warning[0] and f"chmod 600 {key}" in warning[0]
    body = [x for x in key.read_text().splitlines() if x and not x.startswith("-----")]
    assert not any(x in err for x in body)  # never a line of the key


def test_with_require_tls_a_key_readable_by_others_stops_the_start_up(setup, tmp_path, capsys):
    from protab.serve.pgwire import main

    key = _key(setup, tmp_path, 0o640)
    config, _ = F.write_setup(tmp_path, setup["db"], min_population=1, require_tls=True)
    port = F.free_port()
    code = main(["--config", str(config), "--port", str(port), "--pg-port", str(F.free_port()),
                 "--tls-cert", str(setup["cert"]), "--tls-key", str(key)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("protab serve: error: --tls-key") and len(err.splitlines()) == 1, err
    assert "mode 0640" in err and "chmod 600" in err and "require_tls" in err
    with pytest.raises(httpx.TransportError):  # nothing listens
        httpx.get(f"https://127.0.0.1:{port}/healthz", verify=False, timeout=2)


def test_a_key_of_mode_0600_starts_without_a_warning(setup, tmp_path):
    key = _key(setup, tmp_path, 0o600)
    config, _ = F.write_setup(tmp_path, setup["db"], min_population=1, require_tls=True)
    server = F.Server(config, pg=True, tls=ssl.create_default_context(cafile=str(setup["cert"])),
                      extra=["--tls-cert", str(setup["cert"]), "--tls-key", str(key)])
    try:
        err = server.stderr()
    finally:
        server.stop()
    assert "warning" not in err and "chmod" not in err
