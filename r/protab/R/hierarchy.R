#' Hierarchies
#'
#' Hierarchies of codes for the dimensions of a table, from data.frames or code vectors:
#'
#' - `pt_hierarchy()`: a data.frame of (parent, child) links; with `sign` a column of +1/-1
#'   (a code minus another). A data.frame with SSBtools' columns `mapsFrom` and `mapsTo`
#'   (and optional `sign`, `level`) is read as such.
#' - `pt_hierarchy_code_lengths()`: positional codes whose prefixes are their ancestors, as
#'   sdcHierarchies' `hier_compute(method = "len")`.
#' - `pt_hierarchy_flat()`: one level under `root`, as sdcHierarchies' `hier_create()`.
#' - `pt_hierarchy_levels()`: sdcHierarchies' data.frame form (`hier_convert(h, as = "df")`:
#'   columns `level`, "@" per level, and `name`) or tau-ARGUS' .hrc text.
#' - `pt_hierarchy_from_columns()`: from columns of a session's table, coarsest first.
#'
#' @param data A data.frame.
#' @param parent,child Its columns of parent and child codes.
#' @param sign Its column of signs (+1, -1), or `NULL`.
#' @param root The code of the total (`NULL`: found or "Total").
#' @param codes A character vector of codes.
#' @param lengths Characters each level adds.
#' @param session A [pt_session()].
#' @param table,columns The table and its columns, coarsest first.
#' @return A `pt_hierarchy`; `as.data.frame()` gives its codes, parents and levels.
#' @export
#' @examples
#' \dontrun{
#' h <- pt_hierarchy(data.frame(parent = c("Total", "Total", "R1", "R1", "R2"),
#'                              child = c("R1", "R2", "R1001", "R1002", "R2001")))
#' as.data.frame(h)
#' }
pt_hierarchy <- function(data, parent = "parent", child = "child", sign = NULL, root = NULL) {
  frame <- .to_polars(data)
  Hierarchy <- pt_python()$Hierarchy
  h <- if (all(c("mapsFrom", "mapsTo") %in% names(data))) {
    .call(Hierarchy$from_frame, frame, root = root)
  } else {
    .call(Hierarchy$from_parent_child, frame, root = root, parent = parent, child = child, sign = sign)
  }
  .hierarchy(h)
}

#' @rdname pt_hierarchy
#' @export
pt_hierarchy_code_lengths <- function(codes, lengths, root = "Total") {
  .hierarchy(.call(pt_python()$Hierarchy$from_code_lengths, as.list(as.character(codes)),
                   as.list(as.integer(lengths)), root = root))
}

#' @rdname pt_hierarchy
#' @export
pt_hierarchy_flat <- function(codes, root = "Total") {
  .hierarchy(.call(pt_python()$Hierarchy$flat, as.list(as.character(codes)), root = root))
}

#' @rdname pt_hierarchy
#' @param leadstring The level marker of `data`'s `level` column or of .hrc text.
#' @export
pt_hierarchy_levels <- function(data, root = "Total", leadstring = "@") {
  if (is.data.frame(data)) {
    depth <- nchar(data$level) / nchar(leadstring)
    top <- min(depth)
    keep <- depth > top  # the root row of sdcHierarchies' form is the total itself
    if (sum(!keep) == 1 && missing(root)) root <- as.character(data$name[!keep])
    lines <- strrep(leadstring, depth[keep] - top - 1)
    data <- paste0(lines, as.character(data$name[keep]), collapse = "\n")
  }
  .hierarchy(.call(pt_python()$Hierarchy$read_hrc, paste0(paste(data, collapse = "\n"), "\n"), root = root,
                   leadstring = leadstring))
}

#' @rdname pt_hierarchy
#' @export
pt_hierarchy_from_columns <- function(session, table, columns, root = "Total") {
  .hierarchy(.call(.session(session)$hierarchy_from_columns, table, as.list(columns), root = root))
}

.hierarchy <- function(py) structure(list(py = py), class = "pt_hierarchy")

#' @export
as.data.frame.pt_hierarchy <- function(x, ...) .from_polars(.call(x$py$to_frame))

#' @export
print.pt_hierarchy <- function(x, ...) {
  cat(reticulate::py_repr(x$py), "\n")
  invisible(x)
}
