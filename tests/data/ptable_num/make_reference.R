# Reference outputs of R ptable's create_num_ptable (numeric / magnitude p-tables) for
# tests/test_ptable_numeric.py. The tests read only the files written here; R is not needed
# to run them.
#
# Rerun (from the repository root) with R, data.table, nloptr and ptable 1.0.0 installed
# (CRAN, or the public sources of cran/ptable; ptable also imports flexdashboard etc.):
#   R_LIBS=<library with ptable> Rscript tests/data/ptable_num/make_reference.R
# It overwrites the files in tests/data/ptable_num/ (see README.md there).

suppressPackageStartupMessages({
  library(data.table)
  library(ptable)
})

out_dir <- "tests/data/ptable_num"
stopifnot(dir.exists(out_dir))

save_case <- function(pt, name) {
  tab <- copy(pt@pTable)
  # full precision: fwrite writes the shortest decimal that reads back to the same double
  fwrite(tab, file.path(out_dir, paste0(name, ".csv")))
  emp <- copy(pt@empResults)
  fwrite(emp, file.path(out_dir, paste0(name, "_empResults.csv")))
  invisible(pt)
}

cases <- list()
# pt_ex_nums(): the "all" table
cases$all <- pt_ex_nums()
# pt_ex_nums(separation = TRUE)$small_cells: D = 5, V = 1, step = 5, icat = c(1, 3, 5)
cases$small_cells <- pt_ex_nums(separation = TRUE)$small_cells
# pt_ex_nums(parity = FALSE): even and odd
par <- pt_ex_nums(parity = FALSE)
cases$even <- par$even
cases$odd <- par$odd
# more cases
cases$step1 <- create_num_ptable(D = 5, V = 2, step = 1, icat = c(1, 3, 5))
cases$step4 <- create_num_ptable(D = 5, V = 2, step = 4, icat = c(1, 3, 5))
cases$mono_false <- create_num_ptable(D = 6, V = 3, step = 2, icat = c(1, 2, 4, 6),
                                      mono = c(FALSE, TRUE, TRUE, TRUE))
# pstay is accepted, but ignored for magnitude tables (a message says so)
cases$pstay <- suppressMessages(
  create_num_ptable(D = 5, V = 1.5, step = 2, icat = c(1, 5), pstay = 0.5))
cases$optim4 <- create_num_ptable(D = 4, V = 1.2, step = 3, icat = c(1, 2, 4), optim = 4)
# rows whose variance cannot be reached (iter = 20 in empResults)
cases$var_missed <- create_num_ptable(D = 2, V = 3, step = 2, icat = c(1, 2))

for (nm in names(cases)) save_case(cases[[nm]], nm)

# the parameters of each case, so that the tests rebuild the same tables
params <- rbindlist(lapply(names(cases), function(nm) {
  p <- cases[[nm]]@pParams
  data.table(
    case = nm, D = p@D, V = p@V, step = p@step,
    icat = paste(p@icat, collapse = " "),
    optim = paste(p@optim, collapse = " "),
    mono = paste(p@mono, collapse = " "),
    pstay = if (nm == "pstay") "0.5" else "",
    type = p@type)
}))
fwrite(params, file.path(out_dir, "cases.csv"))

# tau-ARGUS exports (pt_export writes <file>.txt)
suppressMessages({
  pt_export(cases$all, file = file.path(out_dir, "argus_all.txt"), SDCtool = "TauArgus")
  pt_export(cases$even, cases$odd, file = file.path(out_dir, "argus_even_odd.txt"),
            SDCtool = "TauArgus")
  pt_export(cases$all, file = file.path(out_dir, "sas_all.txt"), SDCtool = "SAS")
})

writeLines(c(
  paste("R", paste(R.version$major, R.version$minor, sep = ".")),
  paste("ptable", as.character(packageVersion("ptable"))),
  paste("nloptr", as.character(packageVersion("nloptr"))),
  paste("data.table", as.character(packageVersion("data.table")))
), file.path(out_dir, "versions.txt"))

# The magnitude lookup of R cellKey (.lookup_v_flex in cellKey 1.0.2, restated here with the
# same data.table filters so that cellKey need not be installed): cap the ratio a at max(i);
# a row equal to a: the first entry with ck < ub; else interpolate linearly between the rows
# a0 < a < a1 with the same key. Cell keys are k / M for integer k.
lookup_v <- function(ptab, a, ck) {
  i <- ub <- v <- NULL
  d <- max(ptab$i)
  poss <- sort(unique(ptab$i))
  a <- min(a, d)
  if (a %in% poss) {
    return(ptab[i == a & ck < ub, v][1])
  }
  a0 <- min(poss[which(a < poss) - 1])
  a1 <- poss[max(which(a > poss)) + 1]
  lambda <- (a - a0) / (a1 - a0)
  v_low <- ptab[i == a0 & ck < ub, v][1]
  v_up <- ptab[i == a1 & ck < ub, v][1]
  (1 - lambda) * v_low + lambda * v_up
}
set.seed(20261123)
M <- 100000L
keys <- c(0L, 1L, M - 1L, sample.int(M - 2L, 37L) + 1L)
ratios <- c(0, 0.2, 0.5, 1, 1.7, 3, 5, 6.25, 9.9, 10, 15)
lk <- rbindlist(lapply(c("all", "small_cells"), function(nm) {
  ptab <- copy(cases[[nm]]@pTable)
  setnames(ptab, c("p_int_lb", "p_int_ub"), c("lb", "ub"))
  grid <- CJ(a = ratios, k = keys)
  grid[, v := mapply(function(a, k) lookup_v(ptab, a, k / M), a, k)]
  grid[, `:=`(case = nm, modulus = M)]
  grid[, .(case, a, k, modulus, v)]
}))
fwrite(lk, file.path(out_dir, "lookup_reference.csv"))
