"""protab's DuckDB-dialect statements rendered for Spark SQL with sqlglot (parsed as DuckDB,
written as Spark, with the few DuckDB-only pieces rewritten on the syntax tree: ``?`` become
named parameters, so that a rewrite that repeats an expression repeats its parameter too;
``isinf``; ``MATERIALIZED`` common table expressions; the list pieces of magnitude tables,
:func:`_spark_lists`)."""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=4096)
def to_spark(sql: str) -> tuple[str, int]:
    """A DuckDB statement of protab as Spark SQL, and how many ``?`` it had (they become
    named parameters ``:p0``, ``:p1``, … in text order)."""
    tree, count = spark_tree(sql)
    return tree.sql(dialect="spark"), count


@functools.lru_cache(maxsize=4096)
def spark_tree(sql: str) -> tuple[Any, int]:
    """The syntax tree of :func:`to_spark` (shared: copy it before changing it). Spark SQL
    text is not parsed back: sqlglot would read ``max_by(x, x, n)`` as ``max_by(x, x)``."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.tokens import TokenType

    # number the ? in text order ($1, $2, …), then name them p0, p1, … for Spark
    tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(sql)
    marks = [t.start for t in tokens if t.token_type == TokenType.PLACEHOLDER]
    parts, last = [], 0
    for k, pos in enumerate(marks):
        parts += [sql[last:pos], f"${k + 1}"]
        last = pos + 1
    tree = sqlglot.parse_one("".join(parts) + sql[last:], read=_duckdb_as_written())
    count = len(marks)
    node: exp.Expression  # each loop below visits nodes of one kind
    for node in list(tree.find_all(exp.Placeholder)):
        node.replace(exp.Placeholder(this=f"p{int(str(node.this)) - 1}"))
    for cte in tree.find_all(exp.CTE):
        cte.set("materialized", None)
    for node in list(tree.find_all(exp.DataType)):  # unsigned and 128-bit integers: Spark has neither
        if node.this in (exp.DataType.Type.UINT, exp.DataType.Type.UBIGINT, exp.DataType.Type.USMALLINT,
                         exp.DataType.Type.UTINYINT):
            node.replace(exp.DataType.build("BIGINT"))
        elif node.this in (exp.DataType.Type.INT128, exp.DataType.Type.UINT128):
            node.replace(exp.DataType.build("DECIMAL(38, 0)"))
    for node in list(tree.find_all(exp.Anonymous)):
        name = str(node.this).lower()
        if name == "protab_record_key" and len(node.expressions) == 3:  # the key of an id is the key of its text
            ident = node.expressions[1]
            ident.replace(exp.cast(ident.copy(), "STRING"))
        elif name == "isfinite" and len(node.expressions) == 1:  # neither NaN nor ±infinity
            x = node.expressions[0]
            node.replace(exp.paren(exp.and_(
                exp.Not(this=exp.Anonymous(this="isnan", expressions=[x.copy()])),
                exp.NEQ(this=exp.Abs(this=x.copy()), expression=exp.cast(exp.Literal.string("Infinity"), "DOUBLE")))))
    for node in list(tree.find_all(exp.IsInf)):
        x = node.this
        node.replace(exp.paren(exp.EQ(this=exp.Abs(this=x.copy()),
                                      expression=exp.cast(exp.Literal.string("Infinity"), "DOUBLE"))))
    _spark_lists(tree)
    return tree, count


@functools.lru_cache(maxsize=1)
def _duckdb_as_written() -> Any:
    """sqlglot's DuckDB dialect, except that list indices stay as written (1-based): the
    stock dialect shifts some indices to 0-based (literals, expressions it knows are
    integers) and not others (plain columns), which :func:`_spark_lists` could not tell apart."""
    from sqlglot.dialects.duckdb import DuckDB

    class DuckDBAsWritten(DuckDB):
        INDEX_OFFSET = 0

    return DuckDBAsWritten


def _spark_lists(tree: Any) -> None:
    """DuckDB's list pieces of protab's magnitude SQL, rewritten for Spark on the syntax tree:

    - ``max(x, n)`` / ``min(x, n)`` (the n largest / smallest values of a group, in order)
      → ``max_by(x, x, n)`` / ``min_by(x, x, n)`` (the same list; NULL for no value);
      ``arg_max(x, y, n)`` / ``arg_min(x, y, n)`` → ``max_by(x, y, n)`` / ``min_by(x, y, n)``
      (``n`` a constant or a bound parameter: Spark needs a foldable one);
    - ``l[i]`` (NULL past the end in DuckDB; an error in Spark's ANSI mode) →
      ``try_element_at(l, i)`` (1-based, as DuckDB; a literal index below 1, which counts
      from the end in DuckDB, is refused);
    - ``list_slice(l, a, b)`` (elements a..b) → ``slice(l, a, b - a + 1)``;
    - several ``unnest`` in one SELECT (unnested side by side, the shorter padded with NULL)
      → one ``inline(arrays_zip(coalesce(l, array()), ...)) AS (names)``, which pads alike
      (Spark allows one generator per SELECT; a NULL list, which DuckDB pads as an empty
      one, would make ``arrays_zip`` NULL);
    - ``regexp_full_match(x, 'p')`` → ``x RLIKE '\\A(?:p)\\z'`` (the whole text, as RE2's)."""
    _top_lists(tree)
    _list_elements(tree)
    _whole_matches(tree)
    _list_slices(tree)
    _zipped_unnests(tree)


def _top_lists(tree: Any) -> None:
    """``max(x, n)``, ``min(x, n)``, ``arg_max(x, y, n)``, ``arg_min(x, y, n)`` → ``max_by`` / ``min_by``."""
    from sqlglot import exp

    for node in list(tree.find_all(exp.Max, exp.Min, exp.ArgMax, exp.ArgMin)):
        n = node.args.get("count")
        if n is None:
            continue
        fn = "max_by" if isinstance(node, (exp.Max, exp.ArgMax)) else "min_by"
        by = node.this if isinstance(node, (exp.Max, exp.Min)) else node.expression
        node.replace(exp.Anonymous(this=fn, expressions=[node.this.copy(), by.copy(), n.copy()]))


def _list_elements(tree: Any) -> None:
    """``l[i]`` → ``try_element_at(l, i)``; an index counting from the end is refused."""
    from sqlglot import exp

    for node in list(tree.find_all(exp.Bracket)):
        if len(node.expressions) == 1:
            idx = node.expressions[0]
            if isinstance(idx, exp.Neg) or (isinstance(idx, exp.Literal) and not idx.is_string and int(idx.this) < 1):
                raise ValueError(f"to_spark: list index {idx.sql()} counts from the end in DuckDB; not rendered")
            node.replace(exp.Anonymous(this="try_element_at", expressions=[node.this.copy(), idx.copy()]))


def _whole_matches(tree: Any) -> None:
    """``regexp_full_match(x, 'p')`` → ``x RLIKE '\\A(?:p)\\z'`` (Java's ``$`` also matches
    before a final newline, so ``\\z``)."""
    from sqlglot import exp

    for node in list(tree.find_all(exp.RegexpFullMatch)):
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise ValueError("to_spark: regexp_full_match needs a literal pattern")
        node.replace(exp.RegexpLike(this=node.this.copy(), expression=exp.Literal.string(f"\\A(?:{pattern.this})\\z")))


def _list_slices(tree: Any) -> None:
    """``list_slice(l, a, b)`` → ``slice(l, a, b - a + 1)`` (a literal start of 1 or more)."""
    from sqlglot import exp

    for node in list(tree.find_all(exp.Anonymous)):
        if str(node.this).lower() == "list_slice" and len(node.expressions) == 3:
            lst, a, b = (e.copy() for e in node.expressions)
            if not (isinstance(a, exp.Literal) and not a.is_string and int(a.this) >= 1):
                raise ValueError(f"to_spark: list_slice from {a.sql()}: only a literal start of 1 or more is rendered")
            length = exp.Add(this=exp.Sub(this=exp.paren(b), expression=exp.paren(a.copy())),
                             expression=exp.Literal.number(1))
            node.replace(exp.Anonymous(this="slice", expressions=[lst, a, length]))


def _zipped_unnests(tree: Any) -> None:
    """Several ``unnest`` of one SELECT → one ``inline(arrays_zip(coalesce(l, array()), ...))``."""
    from sqlglot import exp

    for select in list(tree.find_all(exp.Select)):
        gens = [e for e in select.expressions if isinstance(e, exp.Alias) and isinstance(e.this, exp.Explode)]
        if len(gens) < 2:
            continue
        if gens != select.expressions[-len(gens):]:
            raise ValueError("to_spark: unnest columns must come last in their SELECT")
        zipped = exp.Anonymous(this="arrays_zip", expressions=[
            exp.Coalesce(this=g.this.this.copy(), expressions=[exp.Array(expressions=[])]) for g in gens])
        inline = exp.Aliases(this=exp.Anonymous(this="inline", expressions=[zipped]),
                             expressions=[exp.to_identifier(g.alias) for g in gens])
        for g in gens[1:]:
            g.pop()
        gens[0].replace(inline)
