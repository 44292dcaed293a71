"""DuckDB's list and struct pieces of protab's magnitude SQL (the top-k lists of
protab.rollup.scan, levels, cells, magnitude_rules, magnitude_ckm, partials, order) rewritten
for PostgreSQL on sqlglot's syntax tree, each with DuckDB's result (docs/postgres.md):

- ``max(x, n)`` / ``min(x, n)`` (the n largest / smallest values of a group, in order, NULLs
  skipped, NULL for no value) → ``(array_agg(x ORDER BY x DESC) FILTER (WHERE num_nulls(x) = 0
  AND …))[1:n]`` (``num_nulls``: a struct with a NULL field is a value, as in DuckDB);
- structs ``{'a': …, 'w': …, 'x': …}`` and ``{'a': …, 'x': …}`` → rows of the composite types
  pg_temp.protab_awx and pg_temp.protab_ax (fields of double precision; made per connection:
  postgres_support.PG_FUNCTIONS), which PostgreSQL orders field by field as DuckDB orders
  structs; ``l[i].x`` → ``(l[i]).x``;
- ``list_transform(l, lambda e: f(e))``, ``list_filter(l, lambda e: p(e))``, ``list_sort(l,
  'DESC')`` → an ``ARRAY(SELECT … FROM generate_subscripts(l, 1) ORDER BY …)`` over the list's
  positions (order kept; NULL for a NULL list, as DuckDB);
- ``list_slice(l, a, b)`` → ``l[a:b]``; ``[]`` → ``'{}'`` (its type from the other branch);
  ``flatten(list(l))`` → the pg_temp aggregate ``protab_concat(l)`` (array_cat of the lists);
- ``l[i]`` (1-based, NULL past the end: the same in both) as it is; an index that counts from
  the end in DuckDB is refused;
- the common table expressions of a statement with lists fenced: streamed when read once,
  else ``MATERIALIZED`` (:func:`materialize_ctes`).

Several ``unnest`` in one SELECT need nothing: PostgreSQL runs them side by side and pads the
shorter with NULL, as DuckDB does. ``arg_max(x, y, n)`` and structs of other fields are
refused (a SpecError), never rendered as something else."""

from __future__ import annotations

import itertools
from typing import Any

from protab.errors import SpecError

#: struct fields → the composite type of pg_temp that holds them (postgres_support.PG_FUNCTIONS)
STRUCT_TYPES = {("a", "w", "x"): "protab_awx", ("a", "x"): "protab_ax"}


def rewrite_lists(tree: Any, exp: Any) -> None:
    """Every list and struct piece of ``tree`` rewritten for PostgreSQL (in place)."""
    names = itertools.count()
    if any(True for _ in tree.find_all(exp.Transform, exp.ArrayFilter, exp.ArraySort)):
        materialize_ctes(tree, exp)
    _elements(tree, exp)
    _top_lists(tree, exp)
    _structs(tree, exp)
    _per_element(tree, exp, names)
    _slices(tree, exp)
    _concats(tree, exp)
    for node in list(tree.find_all(exp.Array)):
        if not node.expressions:
            node.replace(exp.Literal.string("{}"))


def materialize_ctes(tree: Any, exp: Any) -> None:
    """Each common table expression fenced: PostgreSQL would inline one read once into its
    reader, each column's expression in its place — a list rewritten into subqueries planned
    again at every use, and a chain of steps (the cell key method's) whose expressions grow
    exponentially. One read once is ``NOT MATERIALIZED`` with ``OFFSET 0`` (a subquery that the
    planner does not pull up: its rows stream to the reader), one read more than once (or not a
    plain SELECT) ``MATERIALIZED`` (benchmarks/postgres_scale.py --magnitudes times the cell key
    method's chain of sixteen steps, docs/postgres.md)."""
    reads: dict[str, int] = {}
    for table in tree.find_all(exp.Table):
        reads[table.name] = reads.get(table.name, 0) + 1
    for cte in tree.find_all(exp.CTE):
        body = cte.this
        once = reads.get(cte.alias, 0) == 1 and isinstance(body, exp.Select)
        cte.set("materialized", not once)
        if once and not body.args.get("limit") and not body.args.get("offset"):
            body.set("offset", exp.Offset(expression=exp.Literal.number(0)))


def _top_lists(tree: Any, exp: Any) -> None:
    """``max(x, n)`` / ``min(x, n)`` (within any FILTER) → the sliced, ordered array_agg;
    ``arg_max(x, y, n)`` / ``arg_min(x, y, n)`` → the values of ``x`` ordered by ``y`` (rows
    where either is NULL left out, as DuckDB's; ties in ``y`` are in no defined order on either
    engine: the swap's ``y`` is a keyed hash, without ties)."""
    for node in list(tree.find_all(exp.ArgMax, exp.ArgMin)):
        n = node.args.get("count")
        if n is None:
            continue
        if isinstance(node.parent, exp.Filter):
            raise SpecError("arg_max(x, y, n) FILTER (…) is not supported on the PostgreSQL engine yet")
        x, y = node.this, node.expression
        present = exp.EQ(this=exp.Anonymous(this="num_nulls", expressions=[x.copy(), y.copy()]),
                         expression=exp.Literal.number(0))
        order = exp.Ordered(this=y.copy(), desc=isinstance(node, exp.ArgMax), nulls_first=False)
        agg = exp.Filter(this=exp.ArrayAgg(this=exp.Order(this=x.copy(), expressions=[order])),
                         expression=exp.Where(this=present))
        node.replace(exp.Bracket(this=exp.paren(agg), expressions=[
            exp.Slice(this=exp.Literal.number(1), expression=n.copy())]))
    for node in list(tree.find_all(exp.Max, exp.Min)):
        n = node.args.get("count")
        if n is None:
            continue
        x = node.this
        present = exp.EQ(this=exp.Anonymous(this="num_nulls", expressions=[x.copy()]),
                         expression=exp.Literal.number(0))
        outer = node.parent if isinstance(node.parent, exp.Filter) else node
        if outer is not node:
            present = exp.and_(present, exp.paren(outer.expression.this.copy()))
        order = exp.Ordered(this=x.copy(), desc=isinstance(node, exp.Max), nulls_first=False)
        agg = exp.Filter(this=exp.ArrayAgg(this=exp.Order(this=x.copy(), expressions=[order])),
                         expression=exp.Where(this=present))
        outer.replace(exp.Bracket(this=exp.paren(agg), expressions=[
            exp.Slice(this=exp.Literal.number(1), expression=n.copy())]))


def _structs(tree: Any, exp: Any) -> None:
    """``{'a': …, 'w': …, 'x': …}`` → ``CAST((…, …, …) AS pg_temp.protab_awx)`` (and ``protab_ax``)."""
    for node in list(tree.find_all(exp.Struct)):
        fields = [e for e in node.expressions if isinstance(e, exp.PropertyEQ)]
        names = tuple(str(e.this.name if isinstance(e.this, exp.Expression) else e.this).lower() for e in fields)
        if len(fields) != len(node.expressions) or names not in STRUCT_TYPES:
            raise SpecError(f"structs of fields {names} are not supported on the PostgreSQL engine")
        row = exp.Tuple(expressions=[e.expression.copy() for e in fields])
        node.replace(exp.cast(row, exp.DataType.build(f"pg_temp.{STRUCT_TYPES[names]}", udt=True)))
    for node in list(tree.find_all(exp.Dot)):  # a field of a list's element: (l[i]).x
        if isinstance(node.this, exp.Bracket):
            node.set("this", exp.paren(node.this.copy()))


def _per_element(tree: Any, exp: Any, names: Any) -> None:
    """``list_transform``, ``list_filter``, ``list_sort`` → a subquery over the list's
    positions (innermost first, so that an outer one takes the inner one's rewriting):
    ``(SELECT CASE WHEN l IS NULL THEN NULL ELSE ARRAY(SELECT f(l[i]) FROM
    generate_subscripts(l, 1) AS i WHERE … ORDER BY i) END FROM (SELECT <list> AS l) AS q)``."""
    for node in reversed(list(tree.find_all(exp.Transform, exp.ArrayFilter, exp.ArraySort))):
        k = next(names)
        lst, pos = f"_protab_l{k}", f"_protab_i{k}"
        element = exp.Bracket(this=exp.column(lst), expressions=[exp.column(pos)])
        inner = exp.select(_bound(node.expression, element, exp) if isinstance(node, exp.Transform) else element)
        inner = inner.from_(exp.Table(this=exp.Anonymous(this="generate_subscripts", expressions=[
            exp.column(lst), exp.Literal.number(1)]), alias=exp.TableAlias(this=exp.to_identifier(pos))))
        if isinstance(node, exp.ArrayFilter):
            inner = inner.where(_bound(node.expression, element, exp))
        if isinstance(node, exp.ArraySort):
            desc = node.args.get("asc") is not None and not node.args["asc"].this
            first = node.args.get("nulls_first") is not None and bool(node.args["nulls_first"].this)
            inner = inner.order_by(exp.Ordered(this=element.copy(), desc=desc, nulls_first=first))
        else:
            inner = inner.order_by(exp.Ordered(this=exp.column(pos), desc=False))
        case = exp.Case(ifs=[exp.If(this=exp.Is(this=exp.column(lst), expression=exp.Null()), true=exp.Null())],
                        default=exp.Array(expressions=[inner]))
        source = exp.select(exp.alias_(node.this.copy(), lst)).subquery(f"_protab_q{k}")
        node.replace(exp.paren(exp.select(case).from_(source).subquery()))


def _bound(lam: Any, element: Any, exp: Any) -> Any:
    """The body of a one-argument lambda with its argument replaced by ``element`` (a field
    of it, ``e.x``, by ``(element).x``)."""
    if not isinstance(lam, exp.Lambda) or len(lam.expressions) != 1:
        raise SpecError("list functions with a lambda of several arguments are not supported on the PostgreSQL "
                        "engine")
    arg = lam.expressions[0].name
    body = lam.this.copy()
    for ident in list(body.find_all(exp.Identifier)):
        parent = ident.parent
        if ident.name != arg or (isinstance(parent, exp.Dot) and parent.expression is ident) or \
                isinstance(parent, exp.Column) and parent.this is not ident:
            continue
        target = parent if isinstance(parent, exp.Column) else ident
        if target is body:
            return element.copy()
        target.replace(exp.paren(element.copy()) if isinstance(target.parent, exp.Dot) else element.copy())
    return body


def _slices(tree: Any, exp: Any) -> None:
    """``list_slice(l, a, b)`` → ``(l)[a:b]``."""
    for node in list(tree.find_all(exp.Anonymous)):
        if str(node.this).lower() == "list_slice" and len(node.expressions) == 3:
            lst, a, b = (e.copy() for e in node.expressions)
            node.replace(exp.Bracket(this=exp.paren(lst), expressions=[exp.Slice(this=a, expression=b)]))


def _elements(tree: Any, exp: Any) -> None:
    """``l[i]``: refused where DuckDB counts from the end or reads nothing (a literal index below 1)."""
    for node in list(tree.find_all(exp.Bracket)):
        if len(node.expressions) != 1 or isinstance(node.expressions[0], exp.Slice):
            continue
        idx = node.expressions[0]
        if isinstance(idx, exp.Neg):  # sqlglot's DuckDB reader makes l[1] l[0] and l[0] l[-1]
            raise SpecError("a list index below 1 (DuckDB counts from the end) is not supported on the PostgreSQL "
                            "engine")


def _concats(tree: Any, exp: Any) -> None:
    """``flatten(list(l) FILTER (…))`` → ``pg_temp.protab_concat(l) FILTER (…)``; ``list_concat``
    of more than two lists refused."""
    for node in list(tree.find_all(exp.Flatten)):
        inner = node.this
        agg = inner.this if isinstance(inner, exp.Filter) else inner
        if not isinstance(agg, exp.ArrayAgg):
            raise SpecError("flatten of anything but list(l) is not supported on the PostgreSQL engine")
        concat = exp.Dot(this=exp.to_identifier("pg_temp"),
                         expression=exp.Anonymous(this="protab_concat", expressions=[agg.this.copy()]))
        node.replace(exp.Filter(this=concat, expression=inner.expression.copy()) if inner is not agg else concat)
    for node in list(tree.find_all(exp.ArrayConcat)):
        if len(node.expressions) != 1:
            raise SpecError("list_concat of more than two lists is not supported on the PostgreSQL engine")
