"""The commands of the query service: ``protab serve`` and ``protab serve-token``.

``add_parsers(subparsers)`` adds both to an argparse sub-command set (the ``protab``
command's); ``run(args)`` runs the chosen one. ``python -m protab.serve`` is ``protab serve``
alone (:mod:`protab.serve.service` starts the service). Nothing here imports Starlette or
uvicorn until the server starts, so that ``protab --help`` stays fast. A new token is printed
once, on stdout; only its hash is kept.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from protab.serve import service
from protab.serve.service import SERVE_EPILOG, add_options, serve_args


def add_parsers(subparsers: Any) -> None:
    """Add ``serve`` and ``serve-token`` to the ``protab`` command's sub-commands."""
    fmt = argparse.RawDescriptionHelpFormatter
    sp = subparsers.add_parser("serve", help="the query service for SQL analysts (HTTP, tokens, audit log)",
                               formatter_class=fmt, epilog=SERVE_EPILOG,
                               description="Answer analysts' SQL and table requests with counts protected by "
                                           "the cell key method, over HTTP, with bearer tokens and an audit log.")
    add_options(sp)
    sp.set_defaults(run=run)
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
    tp.set_defaults(run=run)


def pg_front(app: Any, host: str, port: int, *, max_connections_per_user: int) -> Any:
    """The PostgreSQL front attached to ``app`` (:func:`protab.serve.pgwire.attach`), imported
    only when asked for."""
    from protab.serve.pgwire import attach

    return attach(app, host, port, max_connections_per_user=max_connections_per_user)


def run(args: argparse.Namespace) -> None:
    """Run ``protab serve`` or ``protab serve-token`` (ProtabError for bad input)."""
    if args.cmd == "serve":
        serve_args(args, pg_front)
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
    return service.main(argv, pg_front)
