"""The query service computes no protected number itself, custom groups included (issue 38): the
modules of the group path (protab.serve.groups, atoms, atom_ledger, saved_groups, table_plan,
table_request) run no SQL of their own and perturb nothing. Their counts and perturbed values
come from Session methods (Session.cell_key_groups: the roll-up and p-table join of every
table, on any engine); the differencing rule in them is a policy on those values.

Read from the modules' syntax trees: a call of a statement-running method (``.sql``,
``.execute``, ``.rows`` ...) or of the engine, SQL text in a string (docstrings aside), the
SQL helpers of protab.sqltools, a p-table lookup or the record keys (``.lookup``,
``.record_key``) fail the test, naming the module and line. The last test shows the check
catches the shape of what the group path did before (its own GROUP BY of the records with
their keys and a NumPy p-table lookup), so that it cannot pass vacuously."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import protab

SERVE = Path(protab.__file__).parent / "serve"
GROUP_PATH = ("groups", "atoms", "atom_ledger", "saved_groups", "table_plan", "table_request")
#: methods that run statements (Session, Engine, DuckDB connections), read the record keys or perturb
CALLS = {"sql", "execute", "executemany", "rows", "fetchall", "fetchone", "insert", "create_view",
         "create_table", "lookup", "record_key", "perturb", "perturb_inner"}
ATTRIBUTES = {"engine", "con"}  # the Session's engine and DuckDB connection
SQL = re.compile(r"\b(SELECT|GROUP BY|HUGEINT|COALESCE|INSERT INTO|CREATE (TEMP |OR REPLACE )?(TABLE|VIEW))\b")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def computations(source: str, name: str) -> list[str]:
    """What in ``source`` (module ``name``) runs SQL, reads record keys or perturbs, one line each."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        where = f"{name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CALLS:
            found.append(f"{where} calls .{node.func.attr}()")
        elif isinstance(node, ast.Attribute) and node.attr in ATTRIBUTES:
            found.append(f"{where} reaches .{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                and SQL.search(node.value):
            found.append(f"{where} holds SQL text {node.value[:40]!r}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                                                    else [])
            if any(n == "protab.sqltools" or n in ("quote_ident", "quote_literal") for n in names):
                found.append(f"{where} imports the SQL helpers")
    return found


@pytest.mark.parametrize("module", GROUP_PATH)
def test_the_group_path_of_the_service_runs_no_sql_and_perturbs_nothing(module):
    path = SERVE / f"{module}.py"
    assert path.exists(), f"{path} is gone: update GROUP_PATH"
    assert computations(path.read_text(encoding="utf-8"), module) == []


def test_the_check_catches_the_group_paths_own_sql_and_lookup():
    """The shape of the group path before issue 38: a GROUP BY of the records with their key sums
    run through the Session, and the p-table looked up in NumPy."""
    before = '''
from protab.sqltools import quote_ident

def leaf_counts(s, table):
    """Records and key sums per leaf."""
    key, modulus = s.record_key(table)
    sql = (f"SELECT c0, count(*) AS n, CAST(sum(CAST({quote_ident(key)} AS HUGEINT)) % {modulus} AS BIGINT) AS k "
           f"FROM {quote_ident(table)} GROUP BY ALL")
    return s.sql(sql, [])

def fails(ptable, n, k, modulus):
    return ptable.lookup(n, k, modulus) < 10
'''
    found = computations(before, "before")
    assert any("imports the SQL helpers" in f for f in found)
    assert any(".record_key()" in f for f in found) and any(".sql()" in f for f in found)
    assert any("holds SQL text" in f for f in found) and any(".lookup()" in f for f in found)
