# suppression_vs_r.R -- the R side of benchmarks/suppression_vs_r.py.
#
#   Rscript benchmarks/suppression_vs_r.R inner.csv out.csv [rlib]
#
# Reads the inner cells written by suppression_vs_r.py (columns region, m, broad, a, s,
# freq: municipality m under region, age group a under broad group, sex s) and suppresses
# them with GaussSuppression's SuppressSmallCounts: maxN = 3 (counts 1..3 primary),
# protectZeros = FALSE, singletonMethod = "anySum", CandidatesDefault (frequency order),
# extend0 as the package's small-count default. The hierarchies m -> region -> Total and
# a -> broad -> Total are found from the nested columns given as dimVar.
# Writes every published cell (m, a, s, freq, primary, suppressed) to out.csv and prints
# one line "elapsed_s <seconds>" for the SuppressSmallCounts call alone.

args <- commandArgs(trailingOnly = TRUE)
if (length(args) < 2) stop("usage: Rscript suppression_vs_r.R inner.csv out.csv [rlib]")
rlib <- if (length(args) >= 3) args[3] else "/work/rlib_c"
.libPaths(c(rlib, .libPaths()))
suppressPackageStartupMessages(library(GaussSuppression))

inner <- read.csv(args[1], colClasses = c(rep("character", 5), "integer"))
t0 <- proc.time()[["elapsed"]]
out <- SuppressSmallCounts(inner, maxN = 3, freqVar = "freq",
                           dimVar = c("region", "m", "broad", "a", "s"),
                           protectZeros = FALSE, singletonMethod = "anySum", printInc = FALSE)
elapsed <- proc.time()[["elapsed"]] - t0
keep <- c("m", "a", "s", "freq", "primary", "suppressed")
missing <- setdiff(keep, names(out))
if (length(missing)) stop("output lacks columns: ", paste(missing, collapse = ", "),
                          " (has: ", paste(names(out), collapse = ", "), ")")
write.csv(out[keep], args[2], row.names = FALSE, quote = FALSE)
cat(sprintf("elapsed_s %.3f\n", elapsed))
cat(sprintf("versions R %s GaussSuppression %s SSBtools %s\n", getRversion(),
            packageVersion("GaussSuppression"), packageVersion("SSBtools")))
