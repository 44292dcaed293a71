"""The SQL gate of the analysts' query service: one restricted form of aggregate query.

An analyst's SQL is parsed with sqlglot (DuckDB dialect) and accepted only in the form of
:data:`ALLOWED_FORM` over a configured catalogue; everything else is refused before any
database sees it. The result is a :class:`Query`, the plain description of the table asked
for (dataset, dimensions, grouping sets, filters, measures), which the service turns into a
protected table request; nothing of the analyst's SQL text runs anywhere. The checks follow
the allow-list idea of differential-privacy SQL front ends (SmartNoise SQL, Qrlew): every
node of the syntax tree must be of a known, allowed shape, so new SQL features are refused
by default. Identifiers follow DuckDB: unquoted ones match case-insensitively (ASCII case
only), quoted ones exactly.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

from protab.errors import SpecError, show_values

__all__ = [
    "ALLOWED_FORM",
    "DatasetRights",
    "Filter",
    "Measure",
    "Query",
    "QueryError",
    "QueryForbidden",
    "QueryRefused",
    "validate",
]

ALLOWED_FORM = (
    "Allowed form: SELECT <dims>, count(*) [AS n] [, sum(<measure>) [AS a], avg(<measure>) [AS b]] "
    "FROM <dataset> [WHERE <dim> = | <> | IN (...) | NOT IN (...) <string or integer literals> [AND ...]] "
    "[GROUP BY <dims> | ROLLUP(...) | CUBE(...) | GROUPING SETS((...), ...)] "
    "[ORDER BY <output column> [ASC|DESC], ...] [LIMIT n]; no comments, one statement."
)

MAX_GROUPING_SETS = 4096  # a GROUP BY expanding to more grouping sets is refused (before expanding it)
MAX_CUBE = 12  # elements of one CUBE (2^12 = 4096 grouping sets)
_MANY = 10**12  # counts of grouping sets are not carried past this (a CUBE product can be astronomical)
MAX_ALIAS_LENGTH = 128
_ECHO = 200  # characters of the analyst's SQL echoed in a message
_INT = re.compile(r"-?[0-9]{1,38}")  # up to DuckDB's HUGEINT
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_DIALECT = Dialect.get_or_raise("duckdb")
_SELECT_ARGS = {"expressions", "from_", "where", "group", "order", "limit"}
_CLAUSE_NAMES = {
    "with_": "WITH (common table expressions)",
    "distinct": "DISTINCT",
    "laterals": "LATERAL",
    "having": "HAVING",
    "qualify": "QUALIFY",
    "windows": "WINDOW",
    "offset": "OFFSET",
    "into": "SELECT INTO",
    "sample": "TABLESAMPLE",
    "pivots": "PIVOT",
    "kind": "SELECT AS STRUCT/VALUE",
}


class QueryError(SpecError):
    """An analyst's query that the service does not answer; ``status`` is its HTTP status."""

    status = 400


class QueryRefused(QueryError):
    """HTTP 400: the query is not of the allowed form, or names an unknown dataset or column."""

    status = 400


class QueryForbidden(QueryError):
    """HTTP 403: a well-formed query that uses a dataset, dimension or measure outside the user's rights."""

    status = 403


class QueryThrottled(QueryError):
    """HTTP 429: the user has sent more requests than the service's per-user rate allows;
    ``retry_after``: whole seconds until the next one is admitted."""

    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Filter:
    """A WHERE predicate on one dimension: ``op`` is "in" or "not in"; values as text, sorted, distinct."""

    column: str
    op: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Measure:
    """An output aggregate: count(*) (column None), sum(column) or avg(column), named ``alias``."""

    func: str
    column: str | None
    alias: str


@dataclass(frozen=True)
class Query:
    """A validated query: what to tabulate, in the catalogue's spelling, and its canonical SQL."""

    dataset: str
    dims: tuple[str, ...]
    grouping_sets: tuple[tuple[str, ...], ...]
    filters: tuple[Filter, ...]
    measures: tuple[Measure, ...]
    columns: tuple[str, ...]
    order_by: tuple[tuple[str, bool], ...]
    limit: int | None
    normalised: str


@dataclass(frozen=True)
class DatasetRights:
    """The dimensions and measures of a dataset (in the catalogue: all; in a user's rights: those allowed)."""

    dims: frozenset[str] = field(default_factory=frozenset)
    measures: frozenset[str] = field(default_factory=frozenset)


def _cut(text: str, limit: int = _ECHO) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _refused(message: str) -> QueryRefused:
    return QueryRefused(f"{message}. {ALLOWED_FORM}")


def _sql(node: exp.Expression) -> str:
    """A node as SQL text for a message, cut to a short length."""
    try:
        return _cut(node.sql(dialect="duckdb"))
    except Exception:  # a message must not fail on a node sqlglot cannot render
        return _cut(type(node).__name__)


def _args_only(node: exp.Expression, *keys: str) -> bool:
    """True when ``node`` sets no argument other than ``keys``."""
    return all(k in keys or v in (None, False, []) for k, v in node.args.items())


def _lower(name: str) -> str:
    return name.translate(_LOWER)


def _match(ident: exp.Identifier, names: Iterable[str], what: str) -> str | None:
    """The name in ``names`` that an identifier denotes (DuckDB rules), or None."""
    text = ident.this
    names = list(names)
    if ident.quoted or text in names:
        return text if text in names else None
    hits = [n for n in names if _lower(n) == _lower(text)]
    if len(hits) > 1:
        raise _refused(f"{what} {_cut(text)!r} is ambiguous ({show_values(sorted(hits))}); quote it")
    return hits[0] if hits else None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _check_text(sql: object, max_length: int) -> str:
    if not isinstance(sql, str):
        raise _refused(f"the query must be SQL text (a string), not {type(sql).__name__}")
    if len(sql) > max_length:
        raise _refused(f"the SQL is {len(sql)} characters long; at most {max_length} are accepted")
    if not sql.replace("\t", " ").replace("\n", " ").replace("\r", " ").isprintable():
        pos, ch = next((i, c) for i, c in enumerate(sql) if not c.isprintable() and c not in "\t\n\r")
        raise _refused(
            f"the SQL contains the invisible or control character U+{ord(ch):04X} at position {pos}; "
            "type the query as plain text"
        )
    if not sql.strip():
        raise _refused("the SQL is empty")
    return sql


def _parse(sql: str) -> exp.Expression:
    """Tokenise (refusing comments and a second statement), then parse one statement."""
    try:
        tokens = _DIALECT.tokenize(sql)
    except sqlglot.errors.SqlglotError as e:
        raise _refused(f"the SQL could not be read: {_cut(str(e).splitlines()[0] if str(e) else 'bad token')}") from None
    if not tokens:
        raise _refused("the SQL holds no statement")
    first = tokens[0].token_type
    if first == TokenType.WITH:
        raise _refused("WITH (common table expressions) is not accepted in a query")
    if first not in (TokenType.SELECT, TokenType.FROM):  # also keeps sqlglot from parsing a Command
        raise _refused(f"only a SELECT query is accepted, not {_cut(tokens[0].text.upper(), 30)}")
    for i, tok in enumerate(tokens):
        if tok.comments:
            raise _refused(f"comments are not accepted (found one near line {tok.line}); remove them")
        if tok.token_type == TokenType.SEMICOLON and i < len(tokens) - 1:
            raise _refused("only one statement is accepted: nothing may follow ';'")
        if tok.token_type == TokenType.HINT:
            raise _refused("optimizer hints are not accepted")
    try:
        trees = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    except sqlglot.errors.ParseError as e:
        info = e.errors[0] if e.errors else {}
        where = f" (line {info.get('line')}, column {info.get('col')})" if info.get("line") else ""
        desc = info.get("description") or "syntax error"
        raise _refused(f"the SQL could not be parsed: {_cut(str(desc))}{where}") from None
    except sqlglot.errors.SqlglotError as e:
        raise _refused(f"the SQL could not be parsed: {_cut(str(e).splitlines()[0] if str(e) else 'error')}") from None
    if len(trees) != 1:
        raise _refused("exactly one statement is accepted" if trees else "the SQL holds no statement")
    return trees[0]


def _walk(node: exp.Expression) -> Iterator[exp.Expression]:
    """Every node below ``node`` (iterative: deep trees must not overflow the stack)."""
    stack = [node]
    while stack:
        cur = stack.pop()
        yield cur
        for value in cur.args.values():
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, exp.Expression):
                    stack.append(child)


def _check_shape(tree: exp.Expression) -> exp.Select:
    """The statement is one plain SELECT: no set operations, clauses, subqueries, windows, casts."""
    if isinstance(tree, exp.SetOperation):
        raise _refused("UNION, INTERSECT and EXCEPT are not accepted")
    if type(tree) is not exp.Select:
        raise _refused(f"only a SELECT query is accepted, not {type(tree).__name__.upper()}")
    if tree.args.get("joins"):
        raise _refused("joins are not accepted: query one dataset")
    for key, value in tree.args.items():
        if key not in _SELECT_ARGS and value not in (None, False, []):
            raise _refused(f"{_CLAUSE_NAMES.get(key, key.rstrip('_').upper())} is not accepted in a query")
    for node in _walk(tree):
        if node.comments:
            raise _refused("comments are not accepted; remove them")
        if node is not tree and isinstance(node, (exp.Query, exp.Subquery)):
            raise _refused("subqueries are not accepted")
        if isinstance(node, exp.Window):
            raise _refused("window functions (OVER) are not accepted")
        if isinstance(node, exp.Join):
            raise _refused("joins are not accepted: query one dataset")
        if isinstance(node, (exp.Cast, exp.TryCast)):
            raise _refused(f"casts are not accepted: {_sql(node)}")
    return tree


class _Checker:
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
            raise _refused("FROM <dataset> is missing")
        table = from_.this
        if not isinstance(table, exp.Table) or not _args_only(from_, "this"):
            raise _refused(f"FROM takes one dataset name, not {_sql(table)}")
        if table.args.get("alias"):
            raise _refused("table aliases are not accepted: write FROM <dataset>")
        if table.args.get("db") or table.args.get("catalog"):
            raise _refused(f"qualified table names are not accepted: write FROM <dataset>, not {_sql(table)}")
        if not isinstance(table.this, exp.Identifier) or not _args_only(table, "this"):
            raise _refused(f"FROM takes one dataset name, not {_sql(table)}")
        visible = sorted(catalog if rights is None else (d for d in rights if d in catalog))
        name = _match(table.this, catalog, "dataset")
        if name is None:
            shown = show_values(visible, limit=20) if visible else "none"
            raise _refused(f"unknown dataset {_cut(table.this.this)!r}; datasets you may query: {shown}")
        if rights is not None and name not in rights:
            raise QueryForbidden(f"you have no rights to dataset {name!r}")
        return name, table.this

    def _unknown(self, text: str) -> QueryRefused:
        dims = show_values(sorted(self.ok_dims), limit=20) if self.ok_dims else "none"
        measures = show_values(sorted(self.ok_measures), limit=20) if self.ok_measures else "none"
        return _refused(
            f"unknown column {_cut(text)!r} in dataset {self.dataset!r}; "
            f"dimensions you may use: {dims}; measures: {measures}"
        )

    def column(self, node: exp.Expression, kind: str, place: str) -> str:
        """Resolve a plain (optionally dataset-qualified) column reference of ``kind`` "dim" or "measure"."""
        if type(node) is not exp.Column or not isinstance(node.this, exp.Identifier):
            if isinstance(node, (exp.Literal, exp.Neg)) and place in ("GROUP BY", "ORDER BY"):
                raise _refused(f"{place} by position is not accepted: name the column ({_sql(node)})")
            raise _refused(f"{place} takes plain column names, not {_sql(node)} (no functions or expressions)")
        if not _args_only(node, "this", "table"):
            raise _refused(f"qualified names other than the dataset are not accepted: {_sql(node)}")
        qualifier = node.args.get("table")
        if qualifier is not None and _match(qualifier, [self.dataset], "dataset") != self.dataset:
            raise _refused(f"qualified names other than the dataset are not accepted: {_sql(node)}")
        name = _match(node.this, set(self.cat.dims) | set(self.cat.measures), "column")
        if name is None:
            raise self._unknown(node.this.this)
        if kind == "dim" and name not in self.cat.dims:
            raise _refused(f"{name!r} is a measure; {place} takes dimensions")
        if kind == "measure" and name not in self.cat.measures:
            raise _refused(f"sum and avg take measures only; {name!r} is not a measure of {self.dataset!r}")
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
                    raise _refused(f"aliases on dimensions are not accepted: {_sql(item)}")
            if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
                raise _refused("SELECT * is not accepted: list the dimensions and count(*)")
            if type(item) is exp.Column:
                name = self.column(item, "dim", "SELECT")
                if name in dims:
                    raise _refused(f"dimension {name!r} is selected twice")
                dims.append(name)
                columns.append(name)
                continue
            measures.append(self.measure(item, alias))
            columns.append(measures[-1].alias)
        if sum(m.func == "count" for m in measures) != 1:
            raise _refused("SELECT must hold count(*) exactly once")
        return dims, measures, columns

    def measure(self, node: exp.Expression, alias: exp.Identifier | None) -> Measure:
        if type(node) is exp.Count:
            inner = node.this
            if isinstance(inner, exp.Distinct):
                raise _refused("count(DISTINCT ...) is not accepted; use count(*)")
            if type(inner) is not exp.Star or node.expressions or not _args_only(inner):
                raise _refused(f"only count(*) is accepted, not {_sql(node)}")
            func, column = "count", None
        elif type(node) in (exp.Sum, exp.Avg):
            func = "sum" if type(node) is exp.Sum else "avg"
            if isinstance(node.this, exp.Distinct):
                raise _refused(f"{func}(DISTINCT ...) is not accepted")
            if not _args_only(node, "this"):
                raise _refused(f"{func} takes one measure column: {_sql(node)}")
            column = self.column(node.this, "measure", f"{func}()")
        else:
            raise _refused(
                f"SELECT takes dimension columns and count(*), sum(<measure>), avg(<measure>) only, "
                f"not {_sql(node)}"
            )
        if alias is None:
            return Measure(func, column, "n" if column is None else f"{func}_{column}")
        if not isinstance(alias, exp.Identifier):
            raise _refused(f"an alias must be a name: {_sql(node)}")
        text = alias.this
        if not text or len(text) > MAX_ALIAS_LENGTH or not text.isprintable():
            raise _refused(f"an alias must be 1 to {MAX_ALIAS_LENGTH} printable characters: {_cut(text)!r}")
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
            raise _refused("OR is not accepted in WHERE; use <dim> IN (...)")
        if type(node) is exp.Not:
            if type(node.this) is not exp.In:
                raise _refused(f"NOT (...) is not accepted in WHERE; use <> or NOT IN: {_sql(node)}")
            column, _, values = self.predicate(node.this)
            return column, "not in", values
        if type(node) in (exp.EQ, exp.NEQ):
            if isinstance(node.this, exp.Column) and isinstance(node.expression, exp.Column):
                raise _refused(f"column-to-column comparisons are not accepted: {_sql(node)}")
            column = self.column(node.this, "dim", "WHERE")
            return column, "in" if type(node) is exp.EQ else "not in", {self.literal(node.expression)}
        if type(node) is exp.In:
            if not _args_only(node, "this", "expressions") or not node.expressions:
                raise _refused(f"IN takes a list of literals: {_sql(node)}")
            column = self.column(node.this, "dim", "WHERE")
            return column, "in", {self.literal(v) for v in node.expressions}
        names = {exp.Like: "LIKE", exp.ILike: "ILIKE", exp.Between: "BETWEEN", exp.Is: "IS (NULL)"}
        what = next((v for k, v in names.items() if isinstance(node, k)), None)
        if what:
            raise _refused(f"{what} is not accepted in WHERE: {_sql(node)}")
        raise _refused(f"WHERE takes only <dim> = / <> / IN / NOT IN literals joined by AND, not {_sql(node)}")

    @staticmethod
    def literal(node: exp.Expression) -> str:
        if isinstance(node, exp.Column):
            raise _refused(f"column-to-column comparisons are not accepted: {_sql(node)}")
        negative = type(node) is exp.Neg
        inner = node.this if negative else node
        if type(inner) is exp.Literal and isinstance(inner.this, str):
            if inner.is_string and not negative:
                if not inner.this.isprintable():
                    raise _refused("a string literal must be printable text on one line")
                return inner.this
            text = ("-" if negative else "") + inner.this
            if not inner.is_string and _INT.fullmatch(text):
                return str(int(text))
        raise _refused(f"WHERE compares with string or integer literals only, not {_sql(node)}")

    @staticmethod
    def _merge(column: str, parts: list[tuple[str, set[str]]]) -> Filter:
        """Predicates on one column joined by AND, as one filter: IN intersects, NOT IN unites."""
        ins = [v for op, v in parts if op == "in"]
        outs = set().union(*(v for op, v in parts if op == "not in"))
        if not ins:
            return Filter(column, "not in", tuple(sorted(outs)))
        keep = set.intersection(*ins) - outs
        if not keep:
            raise _refused(f"the filters on {column!r} exclude every value")
        return Filter(column, "in", tuple(sorted(keep)))

    def group(self) -> list[frozenset[str]]:
        group = self.select.args.get("group")
        if group is None:
            return [frozenset()]
        if group.args.get("all"):
            raise _refused("GROUP BY ALL is not accepted: name the dimensions")
        if not _args_only(group, "expressions"):
            raise _refused("GROUP BY ... WITH ROLLUP/CUBE/TOTALS is not accepted; write ROLLUP(...) or CUBE(...)")
        count = 1
        for item in group.expressions:  # counted on the syntax tree: nothing is expanded past the limit
            count = min(_MANY, count * _count_sets(item))
        if count > MAX_GROUPING_SETS:
            shown = f"{count:,}" if count < _MANY else f"more than {_MANY:,}"
            raise _refused(
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
        if not _args_only(order, "expressions"):
            raise _refused("ORDER BY takes output column names only")
        out: list[tuple[str, bool]] = []
        for item in order.expressions:
            if type(item) is not exp.Ordered or not _args_only(item, "this", "desc", "nulls_first"):
                raise _refused(f"ORDER BY takes output column names only, not {_sql(item)}")
            if item.args.get("nulls_first"):
                raise _refused("NULLS FIRST is not accepted in ORDER BY")
            node = item.this
            if isinstance(node, (exp.Literal, exp.Neg)):
                raise _refused(f"ORDER BY by position is not accepted: name the output column ({_sql(node)})")
            if type(node) is not exp.Column or not _args_only(node, "this"):
                raise _refused(f"ORDER BY takes output column names only, not {_sql(node)}")
            name = _match(node.this, columns, "output column")
            if name is None:
                raise _refused(
                    f"ORDER BY {_cut(node.this.this)!r} is not an output column; "
                    f"output columns: {show_values(columns, limit=20)}"
                )
            if any(name == n for n, _ in out):
                raise _refused(f"ORDER BY names {name!r} twice")
            out.append((name, bool(item.args.get("desc"))))
        return tuple(out)

    def limit(self) -> int | None:
        limit = self.select.args.get("limit")
        if limit is None:
            return None
        value = limit.expression if type(limit) is exp.Limit else None
        if (
            value is None
            or not _args_only(limit, "expression")
            or type(value) is not exp.Literal
            or value.is_string
            or not re.fullmatch(r"[0-9]{1,18}", str(value.this))
        ):
            raise _refused("LIMIT takes a positive integer literal")
        n = int(value.this)
        if not 1 <= n <= self.max_limit:
            raise _refused(f"LIMIT must be between 1 and {self.max_limit}, not {n}")
        return n


def _count_sets(node: exp.Expression) -> int:
    """The grouping sets one GROUP BY item stands for, counted without expanding them (the SQL
    standard's definitions: CUBE of k elements 2^k, ROLLUP of k elements k + 1, GROUPING SETS
    the sum over its elements, anything else one), at most ``_MANY``; a CUBE of more than
    :data:`MAX_CUBE` elements is refused here."""
    if type(node) is exp.Cube:
        k = len(node.expressions)
        if k > MAX_CUBE:
            raise _refused(f"CUBE of {k} elements is too large (at most {MAX_CUBE})")
        return 2**k
    if type(node) is exp.Rollup:
        return len(node.expressions) + 1
    if type(node) is exp.GroupingSets:
        total = 0
        for item in node.expressions:
            total = min(_MANY, total + (_count_sets(item) if type(item) in (exp.Rollup, exp.Cube) else 1))
        return total
    return 1


def _normalised(q: Query) -> str:
    """Canonical one-line SQL of a query: quoted names, string literals, GROUPING SETS when not one set."""
    measures = {m.alias: m for m in q.measures}
    items = []
    for name in q.columns:  # dims and measures in SELECT order; output names are distinct
        m = measures.get(name)
        if m is None:
            items.append(_quote(name))
            continue
        call = "count(*)" if m.column is None else f"{m.func}({_quote(m.column)})"
        default = "n" if m.column is None else f"{m.func}_{m.column}"
        items.append(call if m.alias == default else f"{call} AS {_quote(m.alias)}")
    sql = f"SELECT {', '.join(items)} FROM {_quote(q.dataset)}"
    if q.filters:
        preds = [
            f"{_quote(f.column)} {f.op.upper()} ({', '.join(_string(v) for v in f.values)})" for f in q.filters
        ]
        sql += " WHERE " + " AND ".join(preds)
    if q.dims:
        if q.grouping_sets == (q.dims,):
            sql += " GROUP BY " + ", ".join(_quote(d) for d in q.dims)
        else:
            sets = ", ".join("(" + ", ".join(_quote(d) for d in s) + ")" for s in q.grouping_sets)
            sql += f" GROUP BY GROUPING SETS ({sets})"
    if q.order_by:
        sql += " ORDER BY " + ", ".join(f"{_quote(c)} {'DESC' if d else 'ASC'}" for c, d in q.order_by)
    if q.limit is not None:
        sql += f" LIMIT {q.limit}"
    return sql


def validate(
    sql: str,
    catalog: Mapping[str, DatasetRights],
    rights: Mapping[str, DatasetRights] | None = None,
    *,
    max_length: int = 10_000,
    max_limit: int = 1_000_000,
) -> Query:
    """Check an analyst's SQL against the allowed form, the catalogue and the user's rights.

    ``catalog`` maps every configured dataset to all its dimensions and measures; ``rights``
    maps the datasets this user may query to the dimensions and measures allowed (None: all
    of the catalogue). A dataset in ``rights`` may always be counted (``count(*)``).
    Raises :class:`QueryRefused` (400) for anything not of :data:`ALLOWED_FORM` and for
    unknown names (listing only what the user may use), :class:`QueryForbidden` (403) for
    known names outside the user's rights. Grouping sets come sorted, larger sets first and
    then in dimension order, so equivalent spellings give equal queries.
    """
    text = _check_text(sql, max_length)
    try:
        select = _check_shape(_parse(text))
        check = _Checker(select, catalog, rights, max_limit)
        dims, measures, columns = check.select_list()
        filters = check.where()
        sets = check.group()
    except RecursionError:
        raise _refused("the SQL is nested too deeply") from None
    grouped = frozenset().union(*sets)
    missing = [d for d in dims if d not in grouped]
    if missing:
        raise _refused(f"selected dimensions missing from GROUP BY: {show_values(missing)}")
    extra = sorted(grouped - set(dims))
    if extra:
        raise _refused(f"GROUP BY dimensions missing from SELECT: {show_values(extra)}")
    seen: dict[str, str] = {}
    for c in columns:
        if _lower(c) in seen:
            raise _refused(f"output column {c!r} appears twice (as {seen[_lower(c)]!r}); rename a measure with AS")
        seen[_lower(c)] = c
    order_by = check.order(columns)
    limit = check.limit()
    if check.forbidden:
        names = list(dict.fromkeys(check.forbidden))
        raise QueryForbidden(f"you may not use {show_values(names)} of dataset {check.dataset!r}")
    position = {d: i for i, d in enumerate(dims)}
    grouping = sorted(
        (tuple(sorted(s, key=position.__getitem__)) for s in sets),
        key=lambda s: (-len(s), [position[d] for d in s]),
    )
    query = Query(
        dataset=check.dataset,
        dims=tuple(dims),
        grouping_sets=tuple(grouping),
        filters=filters,
        measures=tuple(measures),
        columns=tuple(columns),
        order_by=order_by,
        limit=limit,
        normalised="",
    )
    return replace(query, normalised=_normalised(query))
