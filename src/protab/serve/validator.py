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

from collections.abc import Iterator, Mapping
from dataclasses import replace

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

from protab.errors import show_values
from protab.serve.query import (
    ALLOWED_FORM,
    DatasetRights,
    Filter,
    Measure,
    Query,
    QueryError,
    QueryForbidden,
    QueryRefused,
    QueryThrottled,
    cut,
    lower,
    node_sql,
    refused,
)
from protab.serve.select_checker import MAX_CUBE, MAX_GROUPING_SETS, SelectChecker

__all__ = [
    "ALLOWED_FORM",
    "MAX_CUBE",
    "MAX_GROUPING_SETS",
    "DatasetRights",
    "Filter",
    "Measure",
    "Query",
    "QueryError",
    "QueryForbidden",
    "QueryRefused",
    "QueryThrottled",
    "validate",
]

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


#: string literals of other spellings than '...', with what they are
_OTHER_STRINGS = {
    TokenType.HEREDOC_STRING: "{text} is a PostgreSQL dollar-quoted string ($$...$$ or $tag$...$tag$); only string "
                              "literals in single quotes are accepted: write {value} (a quote inside doubled: 'O''Brien')",
    TokenType.BYTE_STRING: "{text} is an escape string (E'...'); only plain string literals in single quotes are "
                           "accepted: write {value}",
}


def _check_string(sql: str, tok: sqlglot.tokens.Token) -> None:
    """Refuse a string literal spelled otherwise than '...' (``$$R1$$``, ``E'R1'``), saying what it is."""
    if tok.token_type in _OTHER_STRINGS:
        raise refused(_OTHER_STRINGS[tok.token_type].format(text=cut(sql[tok.start:tok.end + 1], 60),
                                                            value=_string(cut(tok.text, 60))))


def check_strings(sql: str) -> None:
    """QueryRefused for a dollar-quoted or escape string in ``sql`` (the PostgreSQL front checks a
    statement so before it binds parameters into it, which would rewrite such strings as '...')."""
    try:
        tokens = _DIALECT.tokenize(sql)
    except sqlglot.errors.SqlglotError:
        return  # the validator says what cannot be read
    for tok in tokens:
        _check_string(sql, tok)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _check_text(sql: object, max_length: int) -> str:
    if not isinstance(sql, str):
        raise refused(f"the query must be SQL text (a string), not {type(sql).__name__}")
    if len(sql) > max_length:
        raise refused(f"the SQL is {len(sql)} characters long; at most {max_length} are accepted")
    if not sql.replace("\t", " ").replace("\n", " ").replace("\r", " ").isprintable():
        pos, ch = next((i, c) for i, c in enumerate(sql) if not c.isprintable() and c not in "\t\n\r")
        raise refused(
            f"the SQL contains the invisible or control character U+{ord(ch):04X} at position {pos}; "
            "type the query as plain text"
        )
    if not sql.strip():
        raise refused("the SQL is empty")
    return sql


def _parse(sql: str) -> exp.Expr:
    """Tokenise (refusing comments and a second statement), then parse one statement."""
    try:
        tokens = _DIALECT.tokenize(sql)
    except sqlglot.errors.SqlglotError as e:
        raise refused(f"the SQL could not be read: {cut(str(e).splitlines()[0] if str(e) else 'bad token')}") from None
    if not tokens:
        raise refused("the SQL holds no statement")
    first = tokens[0].token_type
    if first == TokenType.WITH:
        raise refused("WITH (common table expressions) is not accepted in a query")
    if first not in (TokenType.SELECT, TokenType.FROM):  # also keeps sqlglot from parsing a Command
        raise refused(f"only a SELECT query is accepted, not {cut(tokens[0].text.upper(), 30)}")
    for i, tok in enumerate(tokens):
        if tok.comments:
            raise refused(f"comments are not accepted (found one near line {tok.line}); remove them")
        if tok.token_type == TokenType.SEMICOLON and i < len(tokens) - 1:
            raise refused("only one statement is accepted: nothing may follow ';'")
        if tok.token_type == TokenType.HINT:
            raise refused("optimizer hints are not accepted")
        _check_string(sql, tok)
    try:
        trees = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    except sqlglot.errors.ParseError as e:
        info = e.errors[0] if e.errors else {}
        where = f" (line {info.get('line')}, column {info.get('col')})" if info.get("line") else ""
        desc = info.get("description") or "syntax error"
        raise refused(f"the SQL could not be parsed: {cut(str(desc))}{where}") from None
    except sqlglot.errors.SqlglotError as e:
        raise refused(f"the SQL could not be parsed: {cut(str(e).splitlines()[0] if str(e) else 'error')}") from None
    if len(trees) != 1:
        raise refused("exactly one statement is accepted" if trees else "the SQL holds no statement")
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


def _check_shape(tree: exp.Expr) -> exp.Select:
    """The statement is one plain SELECT: no set operations, clauses, subqueries, windows, casts."""
    if isinstance(tree, exp.SetOperation):
        raise refused("UNION, INTERSECT and EXCEPT are not accepted")
    if type(tree) is not exp.Select:
        raise refused(f"only a SELECT query is accepted, not {type(tree).__name__.upper()}")
    if tree.args.get("joins"):
        raise refused("joins are not accepted: query one dataset")
    for key, value in tree.args.items():
        if key not in _SELECT_ARGS and value not in (None, False, []):
            raise refused(f"{_CLAUSE_NAMES.get(key, key.rstrip('_').upper())} is not accepted in a query")
    for node in _walk(tree):
        if node.comments:
            raise refused("comments are not accepted; remove them")
        if node is not tree and isinstance(node, (exp.Query, exp.Subquery)):
            raise refused("subqueries are not accepted")
        if isinstance(node, exp.Window):
            raise refused("window functions (OVER) are not accepted")
        if isinstance(node, exp.Join):
            raise refused("joins are not accepted: query one dataset")
        if isinstance(node, (exp.Cast, exp.TryCast)):
            raise refused(f"casts are not accepted: {node_sql(node)}")
    return tree


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
        check = SelectChecker(select, catalog, rights, max_limit)
        dims, measures, columns = check.select_list()
        filters = check.where()
        sets = check.group()
    except RecursionError:
        raise refused("the SQL is nested too deeply") from None
    _check_outputs(dims, sets, columns)
    order_by = check.order(columns)
    limit = check.limit()
    if check.forbidden:
        names = list(dict.fromkeys(check.forbidden))
        raise QueryForbidden(f"you may not use {show_values(names)} of dataset {check.dataset!r}")
    query = Query(
        dataset=check.dataset,
        dims=tuple(dims),
        grouping_sets=_sorted_sets(sets, dims),
        filters=filters,
        measures=tuple(measures),
        columns=tuple(columns),
        order_by=order_by,
        limit=limit,
        normalised="",
    )
    return replace(query, normalised=_normalised(query))


def _check_outputs(dims: list[str], sets: list[frozenset[str]], columns: list[str]) -> None:
    """The selected dimensions are those grouped by, and the output names are distinct."""
    grouped = frozenset().union(*sets)
    missing = [d for d in dims if d not in grouped]
    if missing:
        raise refused(f"selected dimensions missing from GROUP BY: {show_values(missing)}")
    extra = sorted(grouped - set(dims))
    if extra:
        raise refused(f"GROUP BY dimensions missing from SELECT: {show_values(extra)}")
    seen: dict[str, str] = {}
    for c in columns:
        if lower(c) in seen:
            raise refused(f"output column {c!r} appears twice (as {seen[lower(c)]!r}); rename a measure with AS")
        seen[lower(c)] = c


def _sorted_sets(sets: list[frozenset[str]], dims: list[str]) -> tuple[tuple[str, ...], ...]:
    """Grouping sets in a canonical order: larger sets first, then in dimension order."""
    position = {d: i for i, d in enumerate(dims)}
    return tuple(sorted(
        (tuple(sorted(s, key=position.__getitem__)) for s in sets),
        key=lambda s: (-len(s), [position[d] for d in s]),
    ))
