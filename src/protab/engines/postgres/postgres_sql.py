"""protab's DuckDB-dialect statements rendered for PostgreSQL with sqlglot (after
:mod:`protab.engines.spark_sql`: parsed as DuckDB, written as PostgreSQL, the DuckDB-only pieces
rewritten on the syntax tree; the list and struct pieces of magnitude tables in
:mod:`~protab.engines.postgres.postgres_lists`). What sqlglot cannot render is refused (a SpecError naming it),
never sent as something else."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from protab.engines.postgres.postgres_lists import materialize_ctes, rewrite_lists
from protab.engines.postgres.postgres_stars import expand_excludes, has_excludes
from protab.errors import SpecError

#: the mark a ``?`` of protab's SQL becomes in the rendered text, before the driver's placeholder
_MARK = "__protab_param_{}__"
_MARKS = re.compile(r"__protab_param_(\d+)__")
#: protab's SQL functions, installed per connection as pg_temp functions (postgres_support.PG_FUNCTIONS)
_OWN_FUNCTIONS = ("protab_record_key", "protab_row_class", "protab_round", "protab_units",
                  "protab_dominance_ratio", "protab_weighted_largest", "protab_frequency_rule")


@functools.lru_cache(maxsize=4096)
def to_postgres(sql: str) -> tuple[str, tuple[int, ...]]:
    """A DuckDB statement of protab as PostgreSQL text with psycopg's named placeholders
    ``%(p0)s``, ``%(p1)s``, … (every other ``%`` doubled), and the position in the statement's
    parameters of each placeholder, in text order."""
    return render(postgres_tree(sql))


@functools.lru_cache(maxsize=4096)
def needs_columns(sql: str) -> bool:
    """Whether ``sql`` holds a ``SELECT * EXCLUDE (…)``, which :func:`to_postgres_with_columns`
    renders with the columns PostgreSQL reports."""
    from sqlglot import exp

    return "exclude" in sql.lower() and has_excludes(postgres_tree(sql), exp)


def to_postgres_with_columns(sql: str, columns: Callable[[str, tuple[int, ...]], list[str]]) -> tuple[str, tuple[int, ...]]:
    """:func:`to_postgres` of a statement with ``* EXCLUDE (…)``: each such star as the columns
    of its source but the excluded ones; ``columns(text, order)``: the names of the columns
    of a rendered query (its parameters those of ``sql``), by PostgreSQL (never cached: the
    columns of the tables may change)."""
    from sqlglot import exp

    tree = postgres_tree(sql)
    materialize_ctes(tree, exp)  # a chain of steps, each read once (the cell key method's)
    expand_excludes(tree, exp, lambda probe: columns(*render(probe)))
    return render(tree)


def render(tree: Any) -> tuple[str, tuple[int, ...]]:
    """The text and placeholder order (:func:`to_postgres`) of a rewritten tree."""
    try:
        text = tree.sql(dialect="postgres", unsupported_level=_raise_level())
    except Exception as exc:  # sqlglot's UnsupportedError: a piece PostgreSQL lacks
        raise SpecError(f"this request is not supported on the PostgreSQL engine yet ({exc})") from None
    order = tuple(int(m) for m in _MARKS.findall(text))
    return _MARKS.sub(lambda m: f"%(p{m.group(1)})s", text.replace("%", "%%")), order


def _raise_level() -> Any:
    from sqlglot.errors import ErrorLevel

    return ErrorLevel.RAISE


def postgres_tree(sql: str) -> Any:
    """The syntax tree of :func:`to_postgres` (a fresh one each call)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.tokens import TokenType

    tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(sql)
    marks = [t.start for t in tokens if t.token_type == TokenType.PLACEHOLDER]
    parts, last = [], 0
    for k, pos in enumerate(marks):
        parts += [sql[last:pos], _MARK.format(k)]
        last = pos + 1
    try:
        tree = sqlglot.parse_one("".join(parts) + sql[last:], read="duckdb")
    except sqlglot.errors.ParseError as exc:
        raise SpecError(f"a statement could not be rendered for PostgreSQL: {str(exc).splitlines()[0]}") from None
    _group_by_all(tree, exp)  # first: DuckDB's rule reads DuckDB's aggregates
    _types(tree, exp)
    _functions(tree, exp)
    rewrite_lists(tree, exp)
    _subquery_aliases(tree, exp)
    return tree


def _subquery_aliases(tree: Any, exp: Any) -> None:
    """A name for every subquery in a FROM or JOIN that has none (PostgreSQL 15 wants one)."""
    for k, node in enumerate(list(tree.find_all(exp.Subquery))):
        if not node.alias and isinstance(node.parent, (exp.From, exp.Join)):
            node.set("alias", exp.TableAlias(this=exp.to_identifier(f"_protab_q{k}")))


def _types(tree: Any, exp: Any) -> None:
    """Unsigned and 128-bit integers (PostgreSQL has neither) as BIGINT and NUMERIC(38, 0); text
    casts collated "C" (DuckDB compares text byte by byte, PostgreSQL by the database's locale)."""
    T = exp.DataType.Type
    for node in list(tree.find_all(exp.DataType)):
        if node.this in (T.UINT, T.USMALLINT, T.UTINYINT):
            node.replace(exp.DataType.build("BIGINT"))
        elif node.this in (T.UBIGINT, T.INT128, T.UINT128):
            node.replace(exp.DataType.build("DECIMAL(38, 0)", dialect="postgres"))
    for node in list(tree.find_all(exp.Cast)):
        if node.to.this in (T.VARCHAR, T.TEXT) and not isinstance(node.parent, exp.Collate):
            node.replace(exp.Collate(this=node.copy(), expression=exp.Column(this=exp.to_identifier("C", quoted=True))))


def _functions(tree: Any, exp: Any) -> None:
    """protab's own functions from pg_temp (the id of a record key as text); ``sha256`` of the
    text's UTF-8 bytes (hex, as DuckDB's); ``any_value`` as ``min``; ``isnan``,
    ``isinf``, ``isfinite`` as comparisons; ``round`` of one argument half away from zero;
    ``unnest(range(a, b))`` as the series itself."""
    inf = exp.cast(exp.Literal.string("Infinity"), "DOUBLE")
    nan = exp.cast(exp.Literal.string("NaN"), "DOUBLE")
    for node in list(tree.find_all(exp.Anonymous)):
        name = str(node.this).lower()
        if name == "protab_record_key" and len(node.expressions) == 3:
            ident = node.expressions[1]
            ident.replace(exp.cast(ident.copy(), "VARCHAR"))
        if name in _OWN_FUNCTIONS:
            node.replace(exp.Dot(this=exp.to_identifier("pg_temp"),
                                 expression=exp.Anonymous(this=name, expressions=[e.copy() for e in node.expressions])))
        elif name == "isfinite" and len(node.expressions) == 1:
            x = node.expressions[0]
            node.replace(exp.paren(exp.and_(exp.NEQ(this=x.copy(), expression=nan.copy()),
                                            exp.NEQ(this=exp.Abs(this=x.copy()), expression=inf.copy()))))
    for node in list(tree.find_all(exp.IsNan)):
        node.replace(exp.paren(exp.EQ(this=node.this.copy(), expression=nan.copy())))
    for node in list(tree.find_all(exp.IsInf)):
        node.replace(exp.paren(exp.EQ(this=exp.Abs(this=node.this.copy()), expression=inf.copy())))
    for node in list(tree.find_all(exp.Round)):
        if node.args.get("decimals") is None:
            node.replace(exp.Dot(this=exp.to_identifier("pg_temp"),
                                 expression=exp.Anonymous(this="protab_round", expressions=[node.this.copy()])))
    for node in list(tree.find_all(exp.AnyValue)):  # any value of the group: its least (PostgreSQL 15 has none)
        least = exp.Min(this=node.this.copy())
        (node.parent if isinstance(node.parent, exp.IgnoreNulls) else node).replace(least)
    for node in list(tree.find_all(exp.SHA2)):  # DuckDB's sha256 of text: PostgreSQL's of its UTF-8 bytes
        node.set("this", exp.Anonymous(this="convert_to", expressions=[node.this.copy(), exp.Literal.string("UTF8")]))
    for node in list(tree.find_all(exp.Explode)):  # unnest(range(a, b)): a set already in PostgreSQL
        if isinstance(node.this, exp.GenerateSeries):
            node.replace(node.this.copy())


def _group_by_all(tree: Any, exp: Any) -> None:
    """``GROUP BY ALL`` → ``GROUP BY`` the positions of the SELECT's columns that hold no
    aggregate (DuckDB's rule); none of them: no GROUP BY (one group of all rows)."""
    for select in list(tree.find_all(exp.Select)):
        group = select.args.get("group")
        if group is None or not group.args.get("all"):
            continue
        keys = [exp.Literal.number(i + 1) for i, e in enumerate(select.expressions) if not _aggregates(e, exp)]
        if keys:
            select.set("group", exp.Group(expressions=keys))
        else:
            select.set("group", None)


def _aggregates(node: Any, exp: Any) -> bool:
    """Whether ``node`` holds an aggregate or a window function of its own SELECT (not of a subquery)."""
    own = node.find_ancestor(exp.Select)
    return any(isinstance(sub, (exp.AggFunc, exp.Window)) and sub.find_ancestor(exp.Select) is own
               for sub in node.walk())
