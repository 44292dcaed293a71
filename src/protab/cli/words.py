"""What the command line says: progress lines on stderr, warnings as one line, and the Python
API's messages in the command line's words (options instead of arguments)."""

from __future__ import annotations

import re
import sys
from typing import Any


def say(msg: str) -> None:
    """A progress line on stderr (stdout holds the results)."""
    print(msg, file=sys.stderr, flush=True)


def warn(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """Warnings as one line for people, not a Python file path and source line."""
    print(f"protab: warning: {cli_words(str(message))}", file=sys.stderr)


# the Python API's wording of an option, and the command line's
_CLI_WORDS = (
    ("pass replace=True", "pass --replace"),
    ("name= to choose", "--name to choose"),
    ("TableSpec(..., null_code='Unknown')", "null_code = 'Unknown' in its [[tables]] entry"),
    ("Session.register, or `protab register NAME SOURCE`", "`protab register NAME SOURCE`"),
    ("Session.add_record_keys", "`protab keys`"),
    ("Session.install_ptable", "`protab ptable install`"),
    ("see MagnitudePTable.diagnostics", "see the variance per class of `protab ptable show --reveal-parameters`"),
    ("set mono=False or optim for those classes", "pass --mono false or --optim for those classes"),
    ("e.g. icat = [1, D]", "e.g. --icat 1 … D"),
    ("built with infeasible='warn'", "built with --infeasible warn (infeasible = \"warn\" in a request)"),
)


_KEYS_HINT = re.compile(r"call Session\.add_record_keys\(('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"), "
                        r"id_column=\.\.\., seed=\.\.\.\) or add_record_keys\(\.\.\., record_key_column=\.\.\.\)")


def _keys_hint(match: re.Match[str]) -> str:
    """The command line's form of the hint to add record keys: a whole `protab keys` command."""
    import ast
    import shlex

    table = shlex.quote(ast.literal_eval(match.group(1)))
    return (f"add them with `protab keys {table} --id ID_COLUMN --seed-env VAR` (or `--seed-file FILE`; "
            f"existing keys: `protab keys {table} --record-key-column COLUMN`)")


def cli_words(text: str) -> str:
    """A message of the Python API in the command line's words (options instead of arguments)."""
    text = _KEYS_HINT.sub(_keys_hint, text)
    for api, flag in _CLI_WORDS:
        text = text.replace(api, flag)
    return text
