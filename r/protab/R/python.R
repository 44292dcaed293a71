# The bridge to Python: protab and the package's helper (inst/python/protab_r.py) are imported
# once, without reticulate's automatic conversion; frames move column by column as plain lists.

.py <- new.env(parent = emptyenv())

#' The Python side of the package
#'
#' `pt_python()` imports the Python package protab (once per R session) from the interpreter
#' reticulate uses: the one named by the environment variable `RETICULATE_PYTHON` (set it
#' before the first call, e.g. to the `.venv/bin/python` of a protab clone) or reticulate's
#' own choice. It fails with an R error saying so when that Python has no protab.
#'
#' @return The Python module `protab` (unconverted), invisibly usable with `$`.
#' @export
#' @examples
#' \dontrun{
#' Sys.setenv(RETICULATE_PYTHON = "/path/to/protab/.venv/bin/python")
#' pt_python()$`__version__`
#' }
pt_python <- function() {
  if (is.null(.py$protab)) {
    if (!reticulate::py_module_available("protab")) {
      config <- tryCatch(reticulate::py_config()$python, error = function(e) "none found")
      stop("the Python package protab is not importable from ", config,
           "; set RETICULATE_PYTHON to a Python that has it (e.g. <protab clone>/.venv/bin/python) ",
           "before the first protab call", call. = FALSE)
    }
    .py$protab <- reticulate::import("protab", convert = FALSE)
    .py$helper <- reticulate::import_from_path("protab_r", system.file("python", package = "protab"),
                                               convert = FALSE)
    .py$polars <- reticulate::import("polars", convert = FALSE)
  }
  .py$protab
}

.helper <- function() {
  pt_python()
  .py$helper
}

# The text of a Python exception as protab wrote it: reticulate's "module.Class: " prefix and
# any traceback or hint removed.
.python_message <- function(e) {
  msg <- conditionMessage(e)
  last <- tryCatch(reticulate::py_last_error(), error = function(err) NULL)
  if (!is.null(last) && !is.null(last$value) && nzchar(last$type) &&
      grepl(last$type, msg, fixed = TRUE) && grepl(substr(last$value, 1, 40), msg, fixed = TRUE)) {
    return(list(message = last$value, type = last$type))
  }
  msg <- sub("\n+(Detailed traceback|Run `reticulate::py_last_error\\(\\)`).*$", "", msg)
  type <- regmatches(msg, regexpr("^[A-Za-z_][A-Za-z0-9_.]*(Error|Exception|Warning)(?=: )", msg, perl = TRUE))
  msg <- sub("^[A-Za-z_][A-Za-z0-9_.]*(Error|Exception|Warning): ", "", msg)
  list(message = sub("\n+$", "", msg), type = if (length(type)) sub(".*\\.", "", type) else "")
}

# fn(...) in Python: protab's warnings become R warnings, its errors R errors of class
# c(<Python class>, "protab_error", "error", "condition") with protab's message alone.
.call <- function(fn, ...) {
  args <- list(...)
  named <- if (is.null(names(args))) rep(FALSE, length(args)) else nzchar(names(args))
  helper <- .helper()  # outside tryCatch: a missing protab is not a protab error
  res <- tryCatch(
    helper$call(fn, unname(args[!named]), .dict(args[named])),
    error = function(e) {
      info <- .python_message(e)
      cond <- structure(class = c(if (nzchar(info$type)) info$type, "protab_error", "error", "condition"),
                        list(message = info$message, call = NULL))
      stop(cond)
    })
  for (w in reticulate::py_to_r(reticulate::py_get_item(res, "warnings"))) warning(w, call. = FALSE)
  reticulate::py_get_item(res, "value")
}

# -- frames -----------------------------------------------------------------------------------

.kind <- function(x) {
  if (is.logical(x)) "logical" else if (is.integer(x)) "integer" else if (is.double(x)) "double" else "character"
}

# A polars frame of an R data.frame, column by column (factors and dates as text).
.to_polars <- function(df) {
  if (!is.data.frame(df)) stop("expected a data.frame, got ", class(df)[1], call. = FALSE)
  cols <- list()
  kinds <- list()
  missing <- list()
  for (name in names(df)) {
    x <- df[[name]]
    if (is.factor(x) || inherits(x, c("Date", "POSIXt"))) x <- as.character(x)
    if (!is.atomic(x) || is.complex(x) || is.raw(x)) {
      stop("column ", name, " of the data.frame is a ", class(x)[1],
           "; protab takes logical, integer, double or character columns", call. = FALSE)
    }
    kind <- .kind(x)
    na <- if (kind == "double") is.na(x) & !is.nan(x) else is.na(x)
    if (kind == "character") x <- as.character(x)
    x[na] <- switch(kind, logical = FALSE, integer = 0L, double = 0, character = "")
    cols[[name]] <- as.list(x)
    kinds[[name]] <- kind
    missing[[name]] <- as.list(which(na))
  }
  .call(.helper()$to_polars, .dict(cols), .dict(kinds), .dict(missing))
}

# An R data.frame of a polars frame (Python object), column by column.
.from_polars <- function(frame) {
  parts <- reticulate::py_to_r(.call(.helper()$from_frame, frame))
  cols <- lapply(seq_along(parts$names), function(k) {
    kind <- parts$kinds[[k]]
    x <- switch(kind, logical = as.logical(unlist(parts$values[[k]])),
                integer = as.integer(unlist(parts$values[[k]])),
                double = as.double(unlist(parts$values[[k]])),
                as.character(unlist(parts$values[[k]])))
    if (length(x) != parts$rows) x <- rep(x, length.out = parts$rows)
    na <- as.integer(unlist(parts$missing[[k]]))
    if (length(na)) x[na] <- NA
    x
  })
  names(cols) <- parts$names
  as.data.frame(cols, stringsAsFactors = FALSE, check.names = FALSE,
                row.names = if (parts$rows) NULL else integer(0))
}

# A Python dict of a named R list (NULL values as None; an empty list an empty dict).
.dict <- function(x) reticulate::py_dict(as.character(names(x)), unname(x), convert = FALSE)

# Python's None for R's NULL; R's whole numbers as Python ints where protab wants integers.
.int <- function(x) if (is.null(x)) NULL else as.integer(x)
