"""The commands of the query service: ``protab serve`` and ``protab serve-token``.

``add_parsers(subparsers)`` adds both to an argparse sub-command set (the ``protab``
command's); ``run(args)`` runs the chosen one. ``python -m protab.serve`` is ``protab serve``
alone. Nothing here imports Starlette or uvicorn until the server starts, so that
``protab --help`` stays fast. A new token is printed once, on stdout; only its hash is kept.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from protab.errors import ProtabError

#: the longest --header-timeout and --body-timeout, in seconds
MAX_TIMEOUT = 3600.0

SERVE_EPILOG = """\
examples:
  protab serve --config serve.toml                      # http://127.0.0.1:8000/
  protab serve --db census.duckdb --config serve.toml --host 0.0.0.0 --port 8080
  protab serve --config serve.toml --pg-port 5432       # also psql -h 127.0.0.1 -p 5432 -U alice
  protab serve-token add --config serve.toml --user alice --expires 2027-06-30
  protab serve-token list --config serve.toml
  protab serve-token revoke --config serve.toml --id 3fa2c9e1

The configuration format is in docs/serve.md (python -m pydoc protab.serve.config).
"""


def _serve_options(p: argparse.ArgumentParser) -> None:
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


def add_parsers(subparsers: Any) -> None:
    """Add ``serve`` and ``serve-token`` to the ``protab`` command's sub-commands."""
    fmt = argparse.RawDescriptionHelpFormatter
    sp = subparsers.add_parser("serve", help="the query service for SQL analysts (HTTP, tokens, audit log)",
                               formatter_class=fmt, epilog=SERVE_EPILOG,
                               description="Answer analysts' SQL and table requests with counts protected by "
                                           "the cell key method, over HTTP, with bearer tokens and an audit log.")
    _serve_options(sp)
    tp = subparsers.add_parser("serve-token", help="give, list and revoke the query service's tokens",
                               formatter_class=fmt, epilog=SERVE_EPILOG,
                               description="Tokens live in the config's tokens_file as SHA-256 hashes; a new "
                                           "token is printed once. The running service sees changes at once.")
    tsub = tp.add_subparsers(dest="tcmd", required=True, metavar="{add,revoke,list}")
    add = tsub.add_parser("add", help="a new token for a user of the config (printed once)",
                          description="Make a new token for a user of the config; it is printed once, only its "
                                      "hash is kept.")
    add.add_argument("--config", required=True, help="the service's configuration (serve.toml)")
    add.add_argument("--user", required=True, help="a user of the config ([users.NAME])")
    add.add_argument("--expires", help="last day the token works (UTC), e.g. 2027-06-30; default: no expiry")
    rev = tsub.add_parser("revoke", help="revoke a token (--id) or every token of a user (--user)",
                          description="Revoke one token by its id, or every token of a user; the running "
                                      "service refuses them at once.")
    rev.add_argument("--config", required=True, help="the service's configuration (serve.toml)")
    rev.add_argument("--id", dest="token_id", help="the token's id (see list)")
    rev.add_argument("--user", help="revoke every token of this user")
    ls = tsub.add_parser("list", help="the tokens: id, user, created, expires, state (no hashes)",
                         description="List the tokens of the config's tokens file: id, user, created, expiry "
                                     "(a date given stays valid until the end of that day, UTC) and effective "
                                     "state (active, expired or revoked: the token's own or its user's in the "
                                     "config); never the tokens or their hashes.")
    ls.add_argument("--config", required=True, help="the service's configuration (serve.toml)")


def _check_limits(header_timeout: float, body_timeout: float, pg_connections_per_user: int) -> None:
    for name, value in (("--header-timeout", header_timeout), ("--body-timeout", body_timeout)):
        if not 0 < value <= MAX_TIMEOUT:  # NaN fails too
            raise ProtabError(f"{name} must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}, not {value}")
    if pg_connections_per_user < 1:
        raise ProtabError(f"--pg-connections-per-user must be 1 or more, not {pg_connections_per_user}")


def serve(
    config: str, database: str | None = None, host: str = "127.0.0.1", port: int = 8000, pg_port: int | None = None,
    *, header_timeout: float = 10.0, body_timeout: float = 10.0, pg_connections_per_user: int = 8,
) -> None:
    """Check the config and the database, then serve on uvicorn until interrupted."""
    try:
        from protab.serve import httpd
        from protab.serve.app import create_app
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
    app = create_app(config, database=database, body_timeout=body_timeout)
    pg = ""
    if pg_port is not None:
        from protab.serve.pgwire import attach

        front = attach(app, host, pg_port, max_connections_per_user=pg_connections_per_user)
        pg = f" and postgresql://{host}:{front.port}/"
    cfg = app.state.config
    print(f"protab serve: {len(cfg.datasets)} dataset(s) from {cfg.database}, audit log {cfg.audit_log}; "
          f"listening on http://{host}:{port}/{pg}", file=sys.stderr, flush=True)
    # no access log: the audit log records every request (and uvicorn's would add nothing safe)
    httpd.run(app, host, port, header_timeout)


def run(args: argparse.Namespace) -> None:
    """Run ``protab serve`` or ``protab serve-token`` (ProtabError for bad input)."""
    if args.cmd == "serve":
        serve(args.config, args.db, args.host, args.port, args.pg_port, header_timeout=args.header_timeout,
              body_timeout=args.body_timeout, pg_connections_per_user=args.pg_connections_per_user)
        return
    from protab.serve import auth
    from protab.serve.config import load_config

    config = load_config(args.config, database=":memory:")  # the token commands never open the database
    if args.tcmd == "add":
        ident, token = auth.add_token(config, args.user, args.expires)
        print(f"token {ident} for {args.user} (shown once; keep it secret, give it to the user only):",
              file=sys.stderr)
        print(token)
    elif args.tcmd == "revoke":
        n = auth.revoke_tokens(config, token_id=args.token_id, user=args.user)
        print(f"revoked {n} token(s)")
    else:
        print(auth.list_tokens(config))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m protab.serve``: the serve command alone."""
    p = argparse.ArgumentParser(prog="python -m protab.serve", description="protab's query service",
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=SERVE_EPILOG)
    _serve_options(p)
    args = p.parse_args(argv)
    args.cmd = "serve"
    try:
        run(args)
    except ProtabError as exc:
        print(f"protab serve: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"protab serve: error: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # pragma: no cover
        return 130
    return 0
