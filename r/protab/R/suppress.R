#' Cell suppression
#'
#' Primary cells from a frequency rule (`min_frequency`) or sensitivity `rules` (sums), and
#' secondary cells by Gaussian elimination, as SSB's GaussSuppression (docs/methods.md,
#' section 6.4; protab's `Session.suppress`).
#'
#' @inheritParams pt_tabulate
#' @param rules [pt_rules()] for a magnitude table.
#' @param min_frequency Cells with `0 < n < min_frequency` are primary.
#' @param protect_zeros Empty cells are primary too.
#' @param audit Add the attacker's interval (`lo`, `up`) and `protected` (logical).
#' @param ... Further options of protab's `Session.suppress` (e.g. `method = "optimal"`,
#'   `singleton_method`, `protection_range`, `interval_protection`).
#' @return A data.frame of every published cell, `NA` where suppressed, and `suppressed`:
#'   `"primary"`, `"secondary"` or `"no"`.
#' @export
pt_suppress <- function(session, table, spec, rules = NULL, min_frequency = NULL, protect_zeros = FALSE,
                        audit = FALSE, ...) {
  .from_polars(.call(.session(session)$suppress, table, .spec(spec), rules = .py_of(rules, "rules", "pt_rules"),
                     min_frequency = .int(min_frequency), protect_zeros = protect_zeros, audit = audit, ...))
}

#' Small count rounding
#'
#' Small count rounding of a table of inner cells (Langsrud and Heldal 2018; the R package
#' SmallCountRounding's `PLSrounding`, re-implemented in protab's `rounding.small_count`):
#' inner cells of at most `max_round` are rounded to multiples of `base` so that no published
#' cell lies in 1..`max_round` unless it is a multiple of the base.
#'
#' @param data A data.frame of inner cells: the dimension columns and the counts `freq`.
#' @param spec A [pt_spec()] or its `dims` (hierarchies and formula say what is published).
#' @param base The rounding base.
#' @param freq The column of counts.
#' @param max_round Largest count rounded (`NULL`: `base - 1`).
#' @param seed Breaks ties (SmallCountRounding's `rndSeed`).
#' @param ... Further options of protab's `rounding.small_count`.
#' @return A `pt_small_count`: a list of `inner` (dims, `n`, `rounded`) and `published`
#'   (dims, `<dim>_level`, `n`, `rounded`) data.frames, `changed` (logical, per inner row),
#'   `hellinger_utility`, `iterations`.
#' @export
pt_small_count <- function(data, spec, base = 3L, freq = "n", max_round = NULL, seed = 123L, ...) {
  res <- .call(pt_python()$rounding$small_count, .to_polars(data), .spec(spec), .int(base), freq = freq,
               max_round = .int(max_round), seed = .int(seed), ...)
  structure(list(inner = .from_polars(res$inner), published = .from_polars(res$published),
                 changed = as.logical(unlist(reticulate::py_to_r(res$changed$tolist()))),
                 hellinger_utility = reticulate::py_to_r(res$hellinger_utility),
                 iterations = reticulate::py_to_r(res$iterations)),
            class = "pt_small_count")
}

#' @export
print.pt_small_count <- function(x, ...) {
  cat("<pt_small_count: ", nrow(x$inner), " inner cells, ", sum(x$changed), " changed, Hellinger utility ",
      format(x$hellinger_utility, digits = 4), ">\n", sep = "")
  invisible(x)
}
