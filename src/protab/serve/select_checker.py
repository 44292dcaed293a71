"""The clauses of one SELECT of the SQL gate checked against the catalogue and the user's
rights (:class:`SelectChecker`): the dataset, the select list, WHERE, GROUP BY (its grouping
sets counted on the syntax tree before any is expanded), ORDER BY and LIMIT."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping

from sqlglot import exp

from protab.errors import show_values
from protab.serve.query import (
    DatasetRights,
    Filter,
    Measure,
    QueryForbidden,
    QueryRefused,
    args_only,
    cut,
    match,
    node_sql,
    refused,
)

MAX_GROUPING_SETS = 4096  # a GROUP BY expanding to more grouping sets is refused (before expanding it)
MAX_CUBE = 12  # elements of one CUBE (2^12 = 4096 grouping sets)
_MANY = 10**12  # counts of grouping sets are not carried past this (a CUBE product can be astronomical)
MAX_ALIAS_LENGTH = 128
_INT = re.compile(r"-?[0-9]{1,38}")  # up to DuckDB's HUGEINT


class SelectChecker:
    """Walks the clauses of one SELECT, resolving names against the catalogue and the user's rights."""

    def __init__(
        self,
        select: exp.Select,
        catalog: Mapping[str, DatasetRights],
        rights: Mapping[str, DatasetRights] | None,
        max_limit: int,
    ):
        self.select = select
        self.max_limit = max_limit
        self.forbidden: list[str] = []
        self.dataset, self.ds_ident = self._dataset(catalog, rights)
        self.cat = catalog[self.dataset]
        allowed = catalog[self.dataset] if rights is None else rights[self.dataset]
        self.ok_dims = frozenset(allowed.dims) & frozenset(self.cat.dims)
        self.ok_measures = frozenset(allowed.measures) & frozenset(self.cat.measures)

    # -- names ---------------------------------------------------------------------------
    def _dataset(
        self, catalog: Mapping[str, DatasetRights], rights: Mapping[str, DatasetRights] | None
    ) -> tuple[str, exp.Identifier]:
        from_ = self.select.args.get("from_")
        if from_ is None:
            raise refused("FROM <dataset> is missing")
        table = from_.this
        if not isinstance(table, exp.Table) or not args_only(from_, "this"):
            raise refused(f"FROM takes one dataset name, not {node_sql(table)}")
        if table.args.get("alias"):
            raise refused("table aliases are not accepted: write FROM <dataset>")
        if table.args.get("db") or table.args.get("catalog"):
            raise refused(f"qualified table names are not accepted: write FROM <dataset>, not {node_sql(table)}")
        if not isinstance(table.this, exp.Identifier) or not args_only(table, "this"):
            raise refused(f"FROM takes one dataset name, not {node_sql(table)}")
        visible = sorted(catalog if rights is None else (d for d in rights if d in catalog))
        name = match(table.this, catalog, "dataset")
        if name is None:
            shown = show_values(visible, limit=20) if visible else "none"
            raise refused(f"unknown dataset {cut(table.this.this)!r}; datasets you may query: {shown}")
        if rights is not None and name not in rights:
            raise QueryForbidden(f"you have no rights to dataset {name!r}")
        return name, table.this

    def _unknown(self, text: str) -> QueryRefused:
        dims = show_values(sorted(self.ok_dims), limit=20) if self.ok_dims else "none"
        measures = show_values(sorted(self.ok_measures), limit=20) if self.ok_measures else "none"
        return refused(
            f"unknown column {cut(text)!r} in dataset {self.dataset!r}; "
            f"dimensions you may use: {dims}; measures: {measures}"
        )

    def column(self, node: exp.Expression, kind: str, place: str) -> str:
        """Resolve a plain (optionally dataset-qualified) column reference of ``kind`` "dim" or "measure"."""
        if type(node) is not exp.Column or not isinstance(node.this, exp.Identifier):
            if isinstance(node, (exp.Literal, exp.Neg)) and place in ("GROUP BY", "ORDER BY"):
                raise refused(f"{place} by position is not accepted: name the column ({node_sql(node)})")
            raise refused(f"{place} takes plain column names, not {node_sql(node)} (no functions or expressions)")
        if not args_only(node, "this", "table"):
            raise refused(f"qualified names other than the dataset are not accepted: {node_sql(node)}")
        qualifier = node.args.get("table")
        if qualifier is not None and match(qualifier, [self.dataset], "dataset") != self.dataset:
            raise refused(f"qualified names other than the dataset are not accepted: {node_sql(node)}")
        name = match(node.this, set(self.cat.dims) | set(self.cat.measures), "column")
        if name is None:
            raise self._unknown(node.this.this)
        if kind == "dim" and name not in self.cat.dims:
            raise refused(f"{name!r} is a measure; {place} takes dimensions")
        if kind == "measure" and name not in self.cat.measures:
            raise refused(f"sum and avg take measures only; {name!r} is not a measure of {self.dataset!r}")
        if name not in (self.ok_dims if kind == "dim" else self.ok_measures):
            self.forbidden.append(name)
        return name

    # -- clauses -------------------------------------------------------------------------
    def select_list(self) -> tuple[list[str], list[Measure], list[str]]:
        """The dimensions, the measures and the output column names, in SELECT order."""
        dims: list[str] = []
        measures: list[Measure] = []
        columns: list[str] = []
        for item in self.select.expressions:
            alias = None
            if isinstance(item, exp.Alias):
                alias, item = item.args.get("alias"), item.this
                if isinstance(item, exp.Column):
                    raise refused(f"aliases on dimensions are not accepted: {node_sql(item)}")
            if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
                raise refused("SELECT * is not accepted: list the dimensions and count(*)")
            if type(item) is exp.Column:
                name = self.column(item, "dim", "SELECT")
                if name in dims:
                    raise refused(f"dimension {name!r} is selected twice")
                dims.append(name)
                columns.append(name)
                continue
            measures.append(self.measure(item, alias))
            columns.append(measures[-1].alias)
        if sum(m.func == "count" for m in measures) != 1:
            raise refused("SELECT must hold count(*) exactly once")
        return dims, measures, columns

    def measure(self, node: exp.Expression, alias: exp.Identifier | None) -> Measure:
        if type(node) is exp.Count:
            inner = node.this
            if isinstance(inner, exp.Distinct):
                raise refused("count(DISTINCT ...) is not accepted; use count(*)")
            if type(inner) is not exp.Star or node.expressions or not args_only(inner):
                raise refused(f"only count(*) is accepted, not {node_sql(node)}")
            func, column = "count", None
        elif type(node) in (exp.Sum, exp.Avg):
            func = "sum" if type(node) is exp.Sum else "avg"
            if isinstance(node.this, exp.Distinct):
                raise refused(f"{func}(DISTINCT ...) is not accepted")
            if not args_only(node, "this"):
                raise refused(f"{func} takes one measure column: {node_sql(node)}")
            column = self.column(node.this, "measure", f"{func}()")
        else:
            raise refused(
                f"SELECT takes dimension columns and count(*), sum(<measure>), avg(<measure>) only, "
                f"not {node_sql(node)}"
            )
        if alias is None:
            return Measure(func, column, "n" if column is None else f"{func}_{column}")
        if not isinstance(alias, exp.Identifier):
            raise refused(f"an alias must be a name: {node_sql(node)}")
        text = alias.this
        if not text or len(text) > MAX_ALIAS_LENGTH or not text.isprintable():
            raise refused(f"an alias must be 1 to {MAX_ALIAS_LENGTH} printable characters: {cut(text)!r}")
        return Measure(func, column, text)

    def where(self) -> tuple[Filter, ...]:
        where = self.select.args.get("where")
        if where is None:
            return ()
        parts: dict[str, list[tuple[str, set[str]]]] = {}
        stack = [where.this]
        while stack:
            node = stack.pop()
            while type(node) is exp.Paren:
                node = node.this
            if type(node) is exp.And:
                stack.extend([node.expression, node.this])
                continue
            column, op, values = self.predicate(node)
            parts.setdefault(column, []).append((op, values))
        return tuple(self._merge(col, parts[col]) for col in sorted(parts))

    def predicate(self, node: exp.Expression) -> tuple[str, str, set[str]]:
        if isinstance(node, exp.Or):
            raise refused("OR is not accepted in WHERE; use <dim> IN (...)")
        if type(node) is exp.Not:
            if type(node.this) is not exp.In:
                raise refused(f"NOT (...) is not accepted in WHERE; use <> or NOT IN: {node_sql(node)}")
            column, _, values = self.predicate(node.this)
            return column, "not in", values
        if type(node) in (exp.EQ, exp.NEQ):
            if isinstance(node.this, exp.Column) and isinstance(node.expression, exp.Column):
                raise refused(f"column-to-column comparisons are not accepted: {node_sql(node)}")
            column = self.column(node.this, "dim", "WHERE")
            return column, "in" if type(node) is exp.EQ else "not in", {self.literal(node.expression)}
        if type(node) is exp.In:
            if not args_only(node, "this", "expressions") or not node.expressions:
                raise refused(f"IN takes a list of literals: {node_sql(node)}")
            column = self.column(node.this, "dim", "WHERE")
            return column, "in", {self.literal(v) for v in node.expressions}
        names = {exp.Like: "LIKE", exp.ILike: "ILIKE", exp.Between: "BETWEEN", exp.Is: "IS (NULL)"}
        what = next((v for k, v in names.items() if isinstance(node, k)), None)
        if what:
            raise refused(f"{what} is not accepted in WHERE: {node_sql(node)}")
        raise refused(f"WHERE takes only <dim> = / <> / IN / NOT IN literals joined by AND, not {node_sql(node)}")

    @staticmethod
    def literal(node: exp.Expression) -> str:
        if isinstance(node, exp.Column):
            raise refused(f"column-to-column comparisons are not accepted: {node_sql(node)}")
        negative = type(node) is exp.Neg
        inner = node.this if negative else node
        if type(inner) is exp.Literal and isinstance(inner.this, str):
            if inner.is_string and not negative:
                if not inner.this.isprintable():
                    raise refused("a string literal must be printable text on one line")
                return inner.this
            text = ("-" if negative else "") + inner.this
            if not inner.is_string and _INT.fullmatch(text):
                return str(int(text))
        raise refused(f"WHERE compares with string or integer literals only, not {node_sql(node)}")

    @staticmethod
    def _merge(column: str, parts: list[tuple[str, set[str]]]) -> Filter:
        """Predicates on one column joined by AND, as one filter: IN intersects, NOT IN unites."""
        ins = [v for op, v in parts if op == "in"]
        outs = set().union(*(v for op, v in parts if op == "not in"))
        if not ins:
            return Filter(column, "not in", tuple(sorted(outs)))
        keep = set.intersection(*ins) - outs
        if not keep:
            raise refused(f"the filters on {column!r} exclude every value")
        return Filter(column, "in", tuple(sorted(keep)))

    def group(self) -> list[frozenset[str]]:
        group = self.select.args.get("group")
        if group is None:
            return [frozenset()]
        if group.args.get("all"):
            raise refused("GROUP BY ALL is not accepted: name the dimensions")
        if not args_only(group, "expressions"):
            raise refused("GROUP BY ... WITH ROLLUP/CUBE/TOTALS is not accepted; write ROLLUP(...) or CUBE(...)")
        count = 1
        for item in group.expressions:  # counted on the syntax tree: nothing is expanded past the limit
            count = min(_MANY, count * count_sets(item))
        if count > MAX_GROUPING_SETS:
            shown = f"{count:,}" if count < _MANY else f"more than {_MANY:,}"
            raise refused(
                f"the GROUP BY would give {shown} grouping sets (CUBE of k elements gives 2^k, ROLLUP k + 1, "
                f"GROUPING SETS the sum of its elements, and the items of GROUP BY multiply); at most "
                f"{MAX_GROUPING_SETS} are accepted: ask for fewer"
            )
        factors = [self.group_item(item) for item in group.expressions]
        sets = [frozenset().union(*combo) for combo in itertools.product(*factors)]
        return list(dict.fromkeys(sets))

    def composite(self, node: exp.Expression) -> frozenset[str]:
        """A column or a parenthesised list of columns (one element of ROLLUP, CUBE or GROUPING SETS)."""
        if type(node) is exp.Paren:
            return frozenset([self.column(node.this, "dim", "GROUP BY")])
        if type(node) is exp.Tuple:
            return frozenset(self.column(c, "dim", "GROUP BY") for c in node.expressions)
        return frozenset([self.column(node, "dim", "GROUP BY")])

    def group_item(self, node: exp.Expression) -> list[frozenset[str]]:
        if type(node) in (exp.Rollup, exp.Cube):
            items = [self.composite(c) for c in node.expressions]
            if type(node) is exp.Rollup:
                return [frozenset().union(*items[:k]) for k in range(len(items), -1, -1)]
            return [
                frozenset().union(*(s for s, keep in zip(items, mask) if keep))
                for mask in itertools.product([True, False], repeat=len(items))
            ]
        if type(node) is exp.GroupingSets:
            sets: list[frozenset[str]] = []
            for item in node.expressions:
                sets.extend(self.group_item(item) if type(item) in (exp.Rollup, exp.Cube) else [self.composite(item)])
            return sets
        return [self.composite(node)]

    def order(self, columns: list[str]) -> tuple[tuple[str, bool], ...]:
        order = self.select.args.get("order")
        if order is None:
            return ()
        if not args_only(order, "expressions"):
            raise refused("ORDER BY takes output column names only")
        out: list[tuple[str, bool]] = []
        for item in order.expressions:
            if type(item) is not exp.Ordered or not args_only(item, "this", "desc", "nulls_first"):
                raise refused(f"ORDER BY takes output column names only, not {node_sql(item)}")
            if item.args.get("nulls_first"):
                raise refused("NULLS FIRST is not accepted in ORDER BY")
            node = item.this
            if isinstance(node, (exp.Literal, exp.Neg)):
                raise refused(f"ORDER BY by position is not accepted: name the output column ({node_sql(node)})")
            if type(node) is not exp.Column or not args_only(node, "this"):
                raise refused(f"ORDER BY takes output column names only, not {node_sql(node)}")
            name = match(node.this, columns, "output column")
            if name is None:
                raise refused(
                    f"ORDER BY {cut(node.this.this)!r} is not an output column; "
                    f"output columns: {show_values(columns, limit=20)}"
                )
            if any(name == n for n, _ in out):
                raise refused(f"ORDER BY names {name!r} twice")
            out.append((name, bool(item.args.get("desc"))))
        return tuple(out)

    def limit(self) -> int | None:
        limit = self.select.args.get("limit")
        if limit is None:
            return None
        value = limit.expression if type(limit) is exp.Limit else None
        if (
            value is None
            or not args_only(limit, "expression")
            or type(value) is not exp.Literal
            or value.is_string
            or not re.fullmatch(r"[0-9]{1,18}", str(value.this))
        ):
            raise refused("LIMIT takes a positive integer literal")
        n = int(value.this)
        if not 1 <= n <= self.max_limit:
            raise refused(f"LIMIT must be between 1 and {self.max_limit}, not {n}")
        return n


def count_sets(node: exp.Expression) -> int:
    """The grouping sets one GROUP BY item stands for, counted without expanding them (the SQL
    standard's definitions: CUBE of k elements 2^k, ROLLUP of k elements k + 1, GROUPING SETS
    the sum over its elements, anything else one), at most ``_MANY``; a CUBE of more than
    :data:`MAX_CUBE` elements is refused here."""
    if type(node) is exp.Cube:
        k = len(node.expressions)
        if k > MAX_CUBE:
            raise refused(f"CUBE of {k} elements is too large (at most {MAX_CUBE})")
        return 2**k
    if type(node) is exp.Rollup:
        return len(node.expressions) + 1
    if type(node) is exp.GroupingSets:
        total = 0
        for item in node.expressions:
            total = min(_MANY, total + (count_sets(item) if type(item) in (exp.Rollup, exp.Cube) else 1))
        return total
    return 1

