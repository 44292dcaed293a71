#' P-tables
#'
#' The perturbation tables of the cell key method (docs/methods.md, section 1.2):
#'
#' - `pt_ptable()`: a count p-table by maximum entropy, as R ptable's
#'   `create_cnt_ptable(D, V, js, pstay, mono, optim)`.
#' - `pt_ptable_from_frame()`: a p-table from a data.frame in R ptable's layout (columns `i`,
#'   `j`, `p`, `v`, `p_int_lb`, `p_int_ub`, `type`: the slot `@pTable` of a ptable object, or
#'   its `pt_export` CSV read back), or with columns `i`, `v` and `p` only.
#' - `pt_ptable_read()`: a p-table file (R ptable's CSV, tau-ARGUS, the ONS layout).
#' - `pt_magnitude_ptable()`: a magnitude p-table by maximum entropy, as ptable's
#'   `create_num_ptable(D, V, step, icat)`; `pt_magnitude_ptable_from_frame()` from a data.frame
#'   in ptable's layout (`type` "all", "even", "odd" or "small_cells").
#' - `as.data.frame()` of a p-table: its rows in ptable's layout.
#'
#' A p-table is a secret of the office: keep it out of outputs.
#'
#' @param D Largest noise.
#' @param V Variance of the noise.
#' @param js Counts 1..js never published.
#' @param pstay Lowest probability of no noise (`NULL`: none).
#' @param mono Probabilities non-decreasing up to no noise.
#' @param optim Objective (1 to 4), as ptable.
#' @param data A data.frame.
#' @param imax,period Rows for counts above the last row (`NULL`: the last row's i).
#' @param interval Which interval bounds hold: `"[lb,ub)"` (default) or `"(lb,ub]"`.
#' @param path A p-table file.
#' @param format `"auto"`, `"ptable"`, `"tauargus"` or `"ons"`.
#' @param step,icat Noise steps per unit and the size classes, as `create_num_ptable`.
#' @param type The type a magnitude p-table is (or is read as).
#' @param x A p-table.
#' @param ... Ignored.
#' @return A `pt_ptable` (counts) or `pt_magnitude_ptable`.
#' @export
#' @examples
#' \dontrun{
#' p <- pt_ptable(D = 5, V = 3, js = 2)
#' head(as.data.frame(p))
#' }
pt_ptable <- function(D, V, js = 0L, pstay = NULL, mono = TRUE, optim = 1L) {
  .ptable(.call(pt_python()$PTable$maximum_entropy, .int(D), as.double(V), .int(js),
                pstay = .listed(pstay), mono = .listed(mono), optim = .listed(.int(optim))))
}

#' @rdname pt_ptable
#' @export
pt_ptable_from_frame <- function(data, imax = NULL, period = 1L, interval = "[lb,ub)") {
  .ptable(.call(pt_python()$PTable$from_frame, .to_polars(as.data.frame(data)), imax = .int(imax),
                period = .int(period), interval = interval))
}

#' @rdname pt_ptable
#' @export
pt_ptable_read <- function(path, format = "auto", period = NULL, interval = "[lb,ub)") {
  .ptable(.call(pt_python()$PTable$read, path.expand(path), format, period = .int(period), interval = interval))
}

#' @rdname pt_ptable
#' @export
pt_magnitude_ptable <- function(D, V, step = 2L, icat, pstay = NULL, mono = TRUE, optim = 1L, type = "all") {
  .ptable(.call(pt_python()$MagnitudePTable$maximum_entropy, .int(D), as.double(V), step = .int(step),
                icat = as.list(as.integer(icat)), pstay = .listed(pstay), mono = .listed(mono),
                optim = .listed(.int(optim)), type = type), "pt_magnitude_ptable")
}

#' @rdname pt_ptable
#' @export
pt_magnitude_ptable_from_frame <- function(data, type = NULL) {
  .ptable(.call(pt_python()$MagnitudePTable$from_frame, .to_polars(as.data.frame(data)), type = type),
          "pt_magnitude_ptable")
}

#' @rdname pt_ptable
#' @export
as.data.frame.pt_ptable <- function(x, ...) {
  f <- .from_polars(.call(x$py$frame$select, as.list(intersect(
    c("i", "j", "p", "v", "lb", "ub", "type"), .frame_names(x$py$frame)))))
  names(f)[names(f) == "lb"] <- "p_int_lb"
  names(f)[names(f) == "ub"] <- "p_int_ub"
  if (is.null(f$type)) f$type <- rep("all", nrow(f))
  f
}

#' @export
as.data.frame.pt_magnitude_ptable <- as.data.frame.pt_ptable

#' @export
print.pt_ptable <- function(x, ...) {
  cat(reticulate::py_repr(x$py), "\n")
  invisible(x)
}

#' @export
print.pt_magnitude_ptable <- print.pt_ptable

.ptable <- function(py, class = "pt_ptable") structure(list(py = py), class = class)

.frame_names <- function(frame) as.character(unlist(reticulate::py_to_r(frame$columns)))

# A scalar as it is, a vector of several values as a Python list (per-row options).
.listed <- function(x) if (length(x) > 1) as.list(x) else x

.py_of <- function(x, what, class) {
  if (is.null(x)) return(NULL)
  if (!inherits(x, class)) stop(what, " must be a ", class, call. = FALSE)
  x$py
}
