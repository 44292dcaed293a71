"""Starting the query service: the options of ``protab serve`` (:func:`add_options`), their
checks, :func:`serve`, which checks the config and the database and serves the ASGI app on
uvicorn until interrupted, and :func:`main`, ``protab serve`` alone. The PostgreSQL front is
attached, when asked for, by the function its caller gives (``protab.serve.pgwire.attach``),
so that the front's own ``python -m protab.serve.pgwire`` can start the service too. Nothing
here imports Starlette or uvicorn until the server starts."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from protab.errors import ProtabError

#: the longest --header-timeout and --body-timeout, in seconds
MAX_TIMEOUT = 3600.0

SERVE_EPILOG = """\
examples:
  protab serve --config serve.toml                      # http://127.0.0.1:8000/
  protab serve --db census.duckdb --config serve.toml --host 0.0.0.0 --port 8080
  protab serve --config serve.toml --pg-port 5432       # also psql -h 127.0.0.1 -p 5432 -U alice
  protab serve --config serve.toml --pg-port 5432 --tls-cert cert.pem --tls-key key.pem   # https, sslmode=require
  protab serve-token add --config serve.toml --user alice --expires 2027-06-30
  protab serve-token list --config serve.toml
  protab serve-token revoke --config serve.toml --id 3fa2c9e1

The configuration format is in docs/serve.md (python -m pydoc protab.serve.config).
"""

#: ``attach(app, host, port, max_connections_per_user=...)`` of the PostgreSQL front
Attach = Callable[..., Any]


def add_options(p: argparse.ArgumentParser) -> None:
    """The options of ``protab serve``."""
    p.add_argument("--config", required=True, help="the service's TOML configuration (serve.toml)")
    p.add_argument("--db", help="the microdata DuckDB file (overrides the config's database); opened read-only")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    p.add_argument("--pg-port", type=int, default=None,
                   help="also serve the PostgreSQL protocol on this port (psql, psycopg, JDBC); off by default")
    p.add_argument("--pg-connections-per-user", type=int, default=8, metavar="N",
                   help="PostgreSQL connections one user may hold at once (default 8; the others stay for "
                        "other users)")
    p.add_argument("--header-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="seconds a client has to send a request's headers before its connection is closed "
                        "(default 10)")
    p.add_argument("--body-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="seconds a client has to send a request's body before the request is refused with "
                        "408 (default 10)")
    p.add_argument("--tls-cert", metavar="FILE",
                   help="serve both fronts over TLS (1.2 and later) with this PEM certificate (chain); needs --tls-key")
    p.add_argument("--tls-key", metavar="FILE", help="the certificate's unencrypted PEM private key (with --tls-cert)")


def _check_limits(header_timeout: float, body_timeout: float, pg_connections_per_user: int) -> None:
    for name, value in (("--header-timeout", header_timeout), ("--body-timeout", body_timeout)):
        if not 0 < value <= MAX_TIMEOUT:  # NaN fails too
            raise ProtabError(f"{name} must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}, not {value}")
    if pg_connections_per_user < 1:
        raise ProtabError(f"--pg-connections-per-user must be 1 or more, not {pg_connections_per_user}")


def serve(
    config: str, database: str | None = None, host: str = "127.0.0.1", port: int = 8000, pg_port: int | None = None,
    *, header_timeout: float = 10.0, body_timeout: float = 10.0, pg_connections_per_user: int = 8,
    tls_cert: str | None = None, tls_key: str | None = None, attach: Attach,
) -> None:
    """Check the config and the database, then serve on uvicorn until interrupted; with
    ``pg_port``, also the PostgreSQL front, started by ``attach``; with ``tls_cert`` and
    ``tls_key``, both fronts over TLS (the files are checked before anything else)."""
    try:
        from protab.serve import httpd
        from protab.serve.app import create_app
        from protab.serve.config import load_config
        from protab.serve.tls import check_key_mode, tls_files
    except ModuleNotFoundError as exc:
        raise ProtabError(
            f"protab serve needs the serve extra (missing: {exc.name}); install it with "
            "pip install 'protab[serve]' (or make test, which installs the dev extra)"
        ) from None

    if not 0 < port < 65536:
        raise ProtabError(f"--port must be from 1 to 65535, not {port}")
    if pg_port is not None and not 0 < pg_port < 65536:
        raise ProtabError(f"--pg-port must be from 1 to 65535, not {pg_port}")
    _check_limits(header_timeout, body_timeout, pg_connections_per_user)
    tls = tls_files(tls_cert, tls_key)
    cfg = load_config(config, database=database)
    if cfg.require_tls and tls is None:
        raise ProtabError("require_tls = true in the serve config: start the service with --tls-cert and --tls-key")
    check_key_mode(tls, cfg.require_tls, lambda text: print(f"protab serve: {text}", file=sys.stderr, flush=True))
    app = create_app(cfg, body_timeout=body_timeout)
    for text in app.state.broker.warnings:  # the office's console only
        print(f"protab serve: warning: {text}", file=sys.stderr, flush=True)
    app.state.tls = tls  # the PostgreSQL front's TLS (protab.serve.pgwire.attach)
    pg = ""
    if pg_port is not None:
        front = attach(app, host, pg_port, max_connections_per_user=pg_connections_per_user)
        pg = f" and postgresql://{host}:{front.port}/" + (" (TLS)" if tls else "")
    print(f"protab serve: {len(cfg.datasets)} dataset(s) from {cfg.database}, audit log {cfg.audit_log}; "
          f"listening on http{'s' if tls else ''}://{host}:{port}/{pg}", file=sys.stderr, flush=True)
    # no access log: the audit log records every request (and uvicorn's would add nothing safe)
    httpd.run(app, host, port, header_timeout, tls=tls)


def serve_args(args: argparse.Namespace, attach: Attach) -> None:
    """:func:`serve` with the options of ``protab serve``."""
    serve(args.config, args.db, args.host, args.port, args.pg_port, header_timeout=args.header_timeout,
          body_timeout=args.body_timeout, pg_connections_per_user=args.pg_connections_per_user,
          tls_cert=args.tls_cert, tls_key=args.tls_key, attach=attach)


def main(argv: Sequence[str] | None, attach: Attach) -> int:
    """``python -m protab.serve``: the serve command alone (0, 2 for bad input, 1 for the disk)."""
    p = argparse.ArgumentParser(prog="python -m protab.serve", description="protab's query service",
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=SERVE_EPILOG)
    add_options(p)
    args = p.parse_args(argv)
    try:
        serve_args(args, attach)
    except ProtabError as exc:
        print(f"protab serve: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"protab serve: error: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # pragma: no cover
        return 130
    return 0
