# make_reference_levels.R -- reference outputs of GaussSuppression for protection levels
# (IntervalLimits, protectionIntervals, interval suppression) and linked tables
# (SuppressLinkedTables / linkedGauss), used by protab's tests (tests/data/gauss_rules/levels).
#
# Usage: Rscript tests/data/gauss_rules/make_reference_levels.R [output_dir] [rlib]
# Defaults: output_dir = <this directory>/levels, rlib = /tmp/rlib
# Requirements as make_reference.R (GaussSuppression 1.2.3, SSBtools 1.8.6, Matrix >= 1.6),
# plus lpSolve and Rglpk for the interval runs.
#
# Every case writes <id>.csv (the published table, output = "publish" or the list of tables of
# SuppressLinkedTables, one file per table) and an entry in cases_levels.json.

args_cmd <- commandArgs(trailingOnly = TRUE)
script_dir <- tryCatch({
  f <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  if (length(f)) dirname(normalizePath(f)) else getwd()
}, error = function(e) getwd())
outdir <- if (length(args_cmd) >= 1) args_cmd[1] else file.path(script_dir, "levels")
rlib <- if (length(args_cmd) >= 2) args_cmd[2] else "/tmp/rlib"
.libPaths(c(rlib, .libPaths()))
suppressPackageStartupMessages({
  library(Matrix)
  library(SSBtools)
  library(GaussSuppression)
  library(jsonlite)
})
dir.create(outdir, showWarnings = FALSE, recursive = TRUE)

fmt_col <- function(v) {
  if (is.factor(v)) v <- as.character(v)
  if (is.logical(v)) return(ifelse(is.na(v), "", ifelse(v, "TRUE", "FALSE")))
  if (is.double(v)) {
    s <- as.character(v)
    ok <- !is.na(v)
    bad <- ok & (suppressWarnings(as.numeric(s)) != v)
    bad[is.na(bad)] <- TRUE & ok[is.na(bad)]
    s[which(bad)] <- sprintf("%.17g", v[which(bad)])
    s[!ok] <- ""
    return(s)
  }
  s <- as.character(v)
  s[is.na(s)] <- ""
  s
}
write_csv_exact <- function(df, file) {
  df <- as.data.frame(df, stringsAsFactors = FALSE)
  out <- as.data.frame(lapply(df, fmt_col), stringsAsFactors = FALSE, check.names = FALSE)
  names(out) <- names(df)
  write.table(out, file, sep = ",", quote = FALSE, row.names = FALSE, col.names = TRUE,
              na = "", fileEncoding = "UTF-8")
}

cases <- list()
run_case <- function(id, description, expr_text) {
  warns <- character(0)
  res <- withCallingHandlers(
    capture.output(out <- eval(parse(text = expr_text)), file = nullfile()),
    warning = function(w) { warns <<- c(warns, conditionMessage(w)); invokeRestart("muffleWarning") })
  res <- get("out")
  files <- character(0)
  if (is.data.frame(res)) {
    f <- paste0(id, ".csv")
    write_csv_exact(res, file.path(outdir, f))
    files <- f
  } else {
    for (nm in names(res)) {
      f <- paste0(id, "__", nm, ".csv")
      write_csv_exact(res[[nm]], file.path(outdir, f))
      files <- c(files, f)
    }
  }
  cases[[length(cases) + 1]] <<- list(id = id, description = description, call = expr_text,
                                       files = files, warnings = warns)
}

# ---- data -----------------------------------------------------------------------------------
dat <- SSBtoolsData("magnitude1")
dat["num2"] <- 1:nrow(dat)
write_csv_exact(dat, file.path(outdir, "input_magnitude1_num2.csv"))

dataset <- SSBtoolsData("example1")
dataset <- dataset[c(1, 2, 4, 6, 8, 10, 12, 13, 14, 15), ]
dataset$freq <- c(6, 8, 9, 1, 2, 4, 3, 7, 2, 2)
write_csv_exact(dataset, file.path(outdir, "input_example1_linked.csv"))

# ---- IntervalLimits examples (requirements only: no lpPackage) ------------------------------
f_form <- "~sector2 * geo + sector4 * eu"
run_case("il_ex1_dom_k80_99", "IntervalLimits example 1 (no lpPackage: requirement columns)",
  sprintf('SuppressDominantCells(data = dat, numVar = "value", formula = %s, contributorVar = "company",
           k = c(80, 99), rangePercent = 10, rangeMin = 1, protectionPercent = 3, protectionLimit = 5,
           loProtectionLimit = 4)', f_form))
run_case("il_ex2_pp10_three_vars", "IntervalLimits example 2 (no lpPackage)",
  sprintf('SuppressDominantCells(data = dat, dominanceVar = "value", numVar = "num2", formula = %s,
           contributorVar = "company", pPercent = 10, intervalVar = c("value", "freq", "num2"),
           rangePercent = c(10, 10, 30), rangeMin = c(1, 0.2222, 2.222))', f_form))
run_case("il_ex3_pp10_protectionIntervals", "IntervalLimits example 3 (MagnitudeRule protectionIntervals)",
  sprintf('SuppressDominantCells(data = dat, dominanceVar = "value", formula = %s, contributorVar = "company",
           pPercent = 10, protectionIntervals = TRUE)', f_form))
run_case("il_ex4_small_protectionIntervals", "IntervalLimits example 4 (PrimaryDefault protectionIntervals)",
  sprintf('SuppressSmallCounts(data = dat, formula = %s, maxN = 3, protectionIntervals = TRUE)', f_form))
run_case("il_ex5_small_protectionIntervals_pct50", "IntervalLimits example 5 (with protectionPercent = 50)",
  sprintf('SuppressSmallCounts(data = dat, formula = %s, maxN = 3, protectionIntervals = TRUE,
           protectionPercent = 50)', f_form))

# ---- the same with an LP package: the interval suppression ----------------------------------
for (lp in c("lpSolve")) {  # Rglpk 0.6-5 gives byte-identical files
  run_case(paste0("il_ex1_dom_k80_99_", lp), "IntervalLimits example 1 with lpPackage",
    sprintf('SuppressDominantCells(data = dat, numVar = "value", formula = %s, contributorVar = "company",
             k = c(80, 99), rangePercent = 10, rangeMin = 1, protectionPercent = 3, protectionLimit = 5,
             loProtectionLimit = 4, lpPackage = "%s")', f_form, lp))
  run_case(paste0("il_ex3_pp10_protectionIntervals_", lp), "IntervalLimits example 3 with lpPackage",
    sprintf('SuppressDominantCells(data = dat, dominanceVar = "value", formula = %s, contributorVar = "company",
             pPercent = 10, protectionIntervals = TRUE, lpPackage = "%s")', f_form, lp))
  run_case(paste0("il_ex4_small_protectionIntervals_", lp), "IntervalLimits example 4 with lpPackage",
    sprintf('SuppressSmallCounts(data = dat, formula = %s, maxN = 3, protectionIntervals = TRUE,
             lpPackage = "%s")', f_form, lp))
  run_case(paste0("il_ex5_small_protectionIntervals_pct50_", lp), "IntervalLimits example 5 with lpPackage",
    sprintf('SuppressSmallCounts(data = dat, formula = %s, maxN = 3, protectionIntervals = TRUE,
             protectionPercent = 50, lpPackage = "%s")', f_form, lp))
}

# ---- linked tables: the vignette's Tables 1-4 -----------------------------------------------
f1 <- ~age * eu * year
f2 <- ~geo * year
run_case("lk_vignette_t1_local_table1", "Linked vignette Table 1 (local), table 1 alone",
  'SuppressSmallCounts(data = dataset, formula = f1, freqVar = "freq", maxN = 2, extend0 = FALSE)')
run_case("lk_vignette_t1_local_table2", "Linked vignette Table 1 (local), table 2 alone",
  'SuppressSmallCounts(data = dataset, formula = f2, freqVar = "freq", maxN = 2, extend0 = FALSE)')
for (lg in c("local", "consistent", "super-consistent")) {
  run_case(paste0("lk_vignette_", gsub("-", "_", lg)), paste("Linked vignette, linkedGauss =", lg),
    sprintf('SuppressLinkedTables(data = dataset, fun = SuppressSmallCounts,
             withinArg = list(table_1 = list(formula = f1), table_2 = list(formula = f2)),
             freqVar = "freq", maxN = 2, extend0 = FALSE, linkedGauss = "%s")', lg))
}
for (lg in c("local", "consistent", "super-consistent")) {
  run_case(paste0("lk_vignette_formulas_", gsub("-", "_", lg)),
    paste("Linked vignette by SuppressSmallCounts(formula = list(...)), global candidate order, linkedGauss =", lg),
    sprintf('SuppressSmallCounts(data = dataset, formula = list(table_1 = f1, table_2 = f2), freqVar = "freq",
             maxN = 2, extend0 = FALSE, linkedGauss = "%s")', lg))
}
run_case("lk_vignette_global", "Linked vignette, global (formula list, linkedGauss = global)",
  'SuppressSmallCounts(data = dataset, formula = list(table_1 = f1, table_2 = f2), freqVar = "freq",
   maxN = 2, extend0 = FALSE, linkedGauss = "global")')
for (lp in c("lpSolve")) {  # Rglpk 0.6-5 gives byte-identical files
  run_case(paste0("lk_vignette_t4_super_consistent_range4_", lp), "Linked vignette Table 4 (rangeMin = 4)",
    sprintf('SuppressLinkedTables(data = dataset, fun = SuppressSmallCounts,
             withinArg = list(table_1 = list(formula = f1), table_2 = list(formula = f2)),
             freqVar = "freq", maxN = 2, extend0 = FALSE, linkedGauss = "super-consistent",
             lpPackage = "%s", rangeMin = 4)', lp))
}

# ---- SuppressLinkedTables examples ----------------------------------------------------------
mag <- SSBtoolsData("magnitude1")
for (lg in c("local", "consistent", "super-consistent")) {
  run_case(paste0("lk_ex1_", gsub("-", "_", lg)), paste("SuppressLinkedTables example 1, linkedGauss =", lg),
    sprintf('SuppressLinkedTables(data = mag, fun = SuppressDominantCells,
             withinArg = list(table_1 = list(formula = ~(geo + eu) * sector2 + sector4 - sector4),
                              table_2 = list(formula = ~eu:sector4 - 1 + geo - geo),
                              table_3 = list(formula = ~geo + eu + sector4 - 1)),
             dominanceVar = "value", pPercent = 10, contributorVar = "company", linkedGauss = "%s")', lg))
}
for (lp in c("lpSolve")) {  # Rglpk 0.6-5 gives byte-identical files
  run_case(paste0("lk_ex_intervals_k90_range50_", lp), "SuppressLinkedTables interval example (out1)",
    sprintf('SuppressLinkedTables(data = mag, fun = SuppressDominantCells,
             withinArg = list(table_1 = list(dimVar = c("geo", "sector2")),
                              table_2 = list(dimVar = c("eu", "sector4"))),
             dominanceVar = "value", k = 90, contributorVar = "company", lpPackage = "%s", rangeMin = 50)', lp))
}

writeLines(toJSON(list(
  generated_by = "tests/data/gauss_rules/make_reference_levels.R",
  R_version = R.version.string,
  packages = list(GaussSuppression = as.character(packageVersion("GaussSuppression")),
                  SSBtools = as.character(packageVersion("SSBtools")),
                  Matrix = as.character(packageVersion("Matrix")),
                  lpSolve = as.character(packageVersion("lpSolve")),
                  Rglpk = as.character(packageVersion("Rglpk"))),
  cases = cases), auto_unbox = TRUE, pretty = TRUE), file.path(outdir, "cases_levels.json"))
cat("wrote", length(cases), "cases to", outdir, "\n")
