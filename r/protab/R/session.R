#' A protab session
#'
#' `pt_session()` opens a protab `Session` (Python) on a DuckDB database file, or in memory,
#' and may register data frames as tables of it. Microdata stay in DuckDB; the functions of
#' this package send only table names and specifications, and bring back protected tables.
#'
#' @param db A DuckDB file (created if missing), `":memory:"`, or a data.frame: then an
#'   in-memory session with that data.frame registered as table `table`.
#' @param table The table name a data.frame `db` is registered as.
#' @param read_only Open the database file read-only.
#' @param threads DuckDB threads (`NULL`: DuckDB's default).
#' @param ... Further options of protab's `Session` (e.g. `max_cells`, `memory_limit`).
#' @return A `pt_session`: pass it to the other `pt_` functions; close it with [pt_close()].
#' @seealso [pt_register()], [pt_add_record_keys()], [pt_cell_key()]
#' @export
#' @examples
#' \dontrun{
#' persons <- data.frame(pid = 1:6, sex = c("F", "M", "F", "M", "F", "F"))
#' s <- pt_session(persons, table = "persons")
#' pt_tables(s)
#' pt_close(s)
#' }
pt_session <- function(db = ":memory:", table = "microdata", read_only = FALSE, threads = NULL, ...) {
  data <- NULL
  if (is.data.frame(db)) {
    data <- db
    db <- ":memory:"
  }
  if (!is.character(db) || length(db) != 1) stop("db must be a file name, \":memory:\" or a data.frame", call. = FALSE)
  py <- .call(pt_python()$Session, path.expand(db), read_only = read_only, threads = .int(threads), ...)
  s <- structure(list(py = py, db = db), class = "pt_session")
  if (!is.null(data)) pt_register(s, table, data)
  s
}

#' @export
print.pt_session <- function(x, ...) {
  cat("<pt_session on ", x$db, ": ", length(pt_tables(x)), " tables>\n", sep = "")
  invisible(x)
}

#' Close a session
#'
#' @param session A [pt_session()].
#' @return `NULL`, invisibly.
#' @export
pt_close <- function(session) {
  .call(.session(session)$close)
  invisible(NULL)
}

#' Register a table
#'
#' Makes `data` table `name` of the session: a data.frame (copied into DuckDB column by
#' column), a Parquet or CSV path or glob (a view over the files), or the name of a table
#' already there.
#'
#' @param session A [pt_session()].
#' @param name The table's name.
#' @param data A data.frame, a file path or glob, or a table name.
#' @param replace Replace a table of that name.
#' @return The session, invisibly.
#' @export
pt_register <- function(session, name, data, replace = FALSE) {
  source <- if (is.data.frame(data)) .to_polars(data) else data
  .call(.session(session)$register, name, source, replace = replace)
  invisible(session)
}

#' Tables of a session
#'
#' @param session A [pt_session()].
#' @return A character vector of table names.
#' @export
pt_tables <- function(session) {
  as.character(unlist(reticulate::py_to_r(.call(.session(session)$tables))))
}

#' Record keys
#'
#' Gives every record of `table` a record key, stored as the integer column `name`: a keyed
#' hash of (`seed`, `id_column`) modulo 2^`bits`, or existing keys (`record_key_column`),
#' integers or, with `decimals`, decimal keys in \[0, 1\] as R's cellKey and tau-ARGUS make
#' them. The seed is a secret: protab never stores or shows it.
#'
#' @param session A [pt_session()].
#' @param table The table.
#' @param id_column The column of record ids.
#' @param seed The secret seed (a non-empty string).
#' @param bits Key bits (32: keys below 2^32).
#' @param record_key_column A column of existing record keys.
#' @param decimals Digits of decimal record keys (cellKey's `rkey` column: e.g. 8).
#' @param name The name of the key column.
#' @param replace Replace an existing key column of that name.
#' @return The session, invisibly.
#' @export
pt_add_record_keys <- function(session, table, id_column = NULL, seed = NULL, bits = 32L,
                               record_key_column = NULL, decimals = NULL, name = "rkey", replace = FALSE) {
  .call(.session(session)$add_record_keys, table, id_column, seed, .int(bits),
        record_key_column = record_key_column, decimals = .int(decimals), name = name, replace = replace)
  invisible(session)
}

.session <- function(session) {
  if (!inherits(session, "pt_session")) stop("expected a pt_session (see pt_session())", call. = FALSE)
  session$py
}
