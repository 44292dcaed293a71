#' Table specifications
#'
#' `pt_spec()` says which cells a table publishes and what they count or sum (protab's
#' `TableSpec`). Every function that takes a `spec` also takes the `dims` alone.
#'
#' @param dims A character vector of column names (flat dimensions, codes from the data), or
#'   a named list: for each column `NULL` (flat), a character vector of codes (flat with that
#'   code list) or a [pt_hierarchy()].
#' @param formula Published crossings, e.g. `"region*sex + region*age"` (`NULL`: all of them).
#' @param weight A weight column (weighted counts beside the counts).
#' @param sums Numeric columns summed per cell (magnitudes).
#' @param drop_empty Leave out cells without records.
#' @param null_code The code of missing values (`NULL`: they are an error).
#' @param freq A column of frequencies when rows are already aggregated.
#' @param total The margin code of flat dimensions.
#' @param where Records to tabulate: a list of `list(column, "in" or "not in", values)`.
#' @param null_sums What a missing sums value means: `"error"`, `"zero"` or `"omit"`.
#' @return A `pt_spec`.
#' @export
#' @examples
#' \dontrun{
#' pt_spec(list(region = h, sex = NULL), formula = "region*sex")
#' }
pt_spec <- function(dims, formula = NULL, weight = NULL, sums = NULL, drop_empty = FALSE, null_code = NULL,
                    freq = NULL, total = NULL, where = NULL, null_sums = "error") {
  if (is.character(dims)) dims <- stats::setNames(vector("list", length(dims)), dims)
  if (!is.list(dims) || is.null(names(dims)) || !all(nzchar(names(dims)))) {
    stop("dims must be column names or a named list of NULL, codes or pt_hierarchy", call. = FALSE)
  }
  values <- lapply(dims, function(d) {
    if (inherits(d, "pt_hierarchy")) d$py else if (is.null(d)) NULL else as.list(as.character(d))
  })
  args <- list(formula = formula, weight = weight, sums = if (!is.null(sums)) as.list(sums),
               drop_empty = drop_empty, null_code = null_code, freq = freq, null_sums = null_sums,
               where = if (!is.null(where)) lapply(where, function(w) list(w[[1]], w[[2]], as.list(w[[3]]))))
  args$total <- total
  args <- Filter(Negate(is.null), args)  # protab's defaults for what is not given
  py <- do.call(.call, c(list(pt_python()$TableSpec, reticulate::py_dict(names(dims), unname(values))), args))
  structure(list(py = py, dims = names(dims)), class = "pt_spec")
}

.spec <- function(spec) if (inherits(spec, "pt_spec")) spec$py else pt_spec(spec)$py

#' Unprotected counts
#'
#' Every published cell of a table with its count `n` (and weighted count `w`, sums) as
#' they are: for trusted use only, never for publication.
#'
#' @param session A [pt_session()].
#' @param table The table of microdata.
#' @param spec A [pt_spec()] or its `dims`.
#' @return A data.frame: the dimensions (codes as character), `<dim>_level` and the counts.
#' @export
pt_tabulate <- function(session, table, spec) {
  .from_polars(.call(.session(session)$tabulate, table, .spec(spec)))
}

#' The cell key method
#'
#' `pt_cell_key()` publishes every cell of a table with its count perturbed by the cell key
#' method (docs/methods.md, section 1): `n_pert`, and `w_pert` with a weight; with `sums` in
#' the spec and `magnitude` the perturbed sums `<s>_pert` and means `<s>_mean_pert`, with
#' `rules` the flags `<s>_sensitive` (logical) and `<s>_rule`. The same records give the same
#' noise in every table.
#'
#' @inheritParams pt_tabulate
#' @param ptable A [pt_ptable()].
#' @param original Also return the original `n` (and `w`, sums).
#' @param threshold Publish perturbed counts below it as `NA` (the ONS rule).
#' @param magnitude A [pt_magnitude_ckm()] for the sums of the spec.
#' @param rules [pt_rules()] marking sensitive cells of the sums.
#' @return A data.frame.
#' @export
pt_cell_key <- function(session, table, spec, ptable, original = FALSE, threshold = NULL, magnitude = NULL,
                        rules = NULL) {
  .from_polars(.call(.session(session)$cell_key, table, .spec(spec), .py_of(ptable, "ptable", "pt_ptable"),
                     original = original, threshold = threshold,
                     magnitude = .py_of(magnitude, "magnitude", "pt_magnitude_ckm"),
                     rules = .py_of(rules, "rules", "pt_rules")))
}

#' Cell key method for magnitudes
#'
#' The parameters of the cell key method for sums (protab's `MagnitudeCKM`; R cellKey's
#' `ck_params_nums` with `ck_flexparams` or `ck_simpleparams`).
#'
#' @param ptable A [pt_magnitude_ptable()].
#' @param variant `"top_contr"`, `"mean"`, `"range"` or `"sum"`.
#' @param top_k The number of largest contributions (`"top_contr"`).
#' @param fp,p,q The flexible function's point, percentages (small, large) and exponent; without
#'   `fp`, `p` is one number (simple scaling).
#' @param epsilon One weight per top-k position.
#' @param mu_c Extra noise for sensitive cells.
#' @param same_key,zero_keys Key conventions (see protab's `MagnitudeCKM`).
#' @param small_cells A [pt_magnitude_ptable()] for values below the separation point.
#' @param decimals Decimals of the published sums and means (`NULL`: unrounded).
#' @return A `pt_magnitude_ckm`.
#' @export
pt_magnitude_ckm <- function(ptable, variant = "top_contr", top_k = NULL, fp = NULL, p = c(0.25, 0.05), q = 3,
                             epsilon = NULL, mu_c = 0, same_key = TRUE, zero_keys = FALSE, small_cells = NULL,
                             decimals = 2L) {
  py <- .call(pt_python()$MagnitudeCKM, .py_of(ptable, "ptable", "pt_magnitude_ptable"), variant = variant,
              top_k = .int(top_k), fp = fp, p = .listed(as.double(p)), q = as.double(q),
              epsilon = if (!is.null(epsilon)) as.list(as.double(epsilon)), mu_c = as.double(mu_c),
              same_key = same_key, zero_keys = zero_keys,
              small_cells = .py_of(small_cells, "small_cells", "pt_magnitude_ptable"), decimals = .int(decimals))
  structure(list(py = py), class = "pt_magnitude_ckm")
}

#' Sensitivity rules
#'
#' Primary sensitivity rules for the cells of a magnitude table (protab's
#' `SensitivityRules`; docs/methods.md, section 6.2).
#'
#' @param min_frequency Fewer contributors than this (and at least one) is sensitive.
#' @param dominance A list of `c(n, k)`: the n largest contributions make k per cent or more.
#' @param p_percent The p per cent rule.
#' @param pq The (p, q) rule, `c(p, q)`.
#' @param zero Cells with a total of zero are sensitive.
#' @param convention `"gauss"` (SSB GaussSuppression) or `"argus"` (tau-ARGUS).
#' @param weights `NULL`, `"default"` or `"tauargus"`.
#' @param holding A column of contributor groups (e.g. enterprise groups).
#' @return A `pt_rules`.
#' @export
pt_rules <- function(min_frequency = NULL, dominance = list(), p_percent = NULL, pq = NULL, zero = FALSE,
                     convention = "gauss", weights = NULL, holding = NULL) {
  if (is.numeric(dominance)) dominance <- list(dominance)
  py <- .call(pt_python()$SensitivityRules, min_frequency = .int(min_frequency),
              dominance = lapply(dominance, function(d) list(as.integer(d[[1]]), as.double(d[[2]]))),
              p_percent = p_percent, pq = if (!is.null(pq)) as.list(as.double(pq)), zero = zero,
              convention = convention, weights = weights, holding = holding)
  structure(list(py = py), class = "pt_rules")
}
