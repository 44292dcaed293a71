# make_reference.R -- regenerate the GaussSuppression / SSBtools reference data
# used by protab's tests (tests/data/gauss_rules/).
#
# Usage (from the repository root or from this directory):
#   Rscript tests/data/gauss_rules/make_reference.R [output_dir] [rlib]
# Defaults: output_dir = directory of this script, rlib = /work/rlib_c
#
# Requirements: SSBtools (>= 1.8.6), RegSDC, GaussSuppression (>= 1.2.3),
# jsonlite, lpSolve, and Matrix >= 1.6 (Matrix 1.5-3 breaks
# SSBtools::max_contribution() when `id`/contributorVar is used, because
# abs() of a dgTMatrix returns a dgCMatrix there).
#
# What is produced
#   inputs/<dataset>.csv       the microdata every case runs on (full precision)
#   primary/<case>.csv         per published cell: dims, value(s), counts, rule
#                              statistics, primary, suppressed, secondary
#   secondary/<case>.csv       full output of secondary-suppression cases
#   cases.json                 every case with its exact function and arguments
#
# All runs use output = "all" only to get the inner data/model matrix needed
# for the extra `n_records` column; the published table is identical to the
# default output = "publish".

args_cmd <- commandArgs(trailingOnly = TRUE)
script_dir <- tryCatch({
  f <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  if (length(f)) dirname(normalizePath(f)) else getwd()
}, error = function(e) getwd())
outdir <- if (length(args_cmd) >= 1) args_cmd[1] else script_dir
rlib <- if (length(args_cmd) >= 2) args_cmd[2] else "/work/rlib_c"
.libPaths(c(rlib, .libPaths()))

suppressPackageStartupMessages({
  library(Matrix)
  library(SSBtools)
  library(GaussSuppression)
  library(jsonlite)
})
options(GaussSuppression.action_unused_dots = "warn")

dir.create(file.path(outdir, "inputs"), showWarnings = FALSE, recursive = TRUE)
dir.create(file.path(outdir, "primary"), showWarnings = FALSE)
dir.create(file.path(outdir, "secondary"), showWarnings = FALSE)

# ---------------------------------------------------------------------------
# Full-precision CSV writer: doubles are written with the shortest of
# 15 significant digits (if that round-trips exactly) or 17 digits.
# NA is written as an empty field. No quoting (asserted: no commas/quotes).
# ---------------------------------------------------------------------------
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
  out <- as.data.frame(lapply(df, fmt_col), stringsAsFactors = FALSE,
                       check.names = FALSE)
  names(out) <- names(df)
  if (any(grepl("[,\"]", unlist(out))) || any(grepl("[,\"]", names(out))))
    stop("comma or quote in field: ", file)
  write.table(out, file, sep = ",", quote = FALSE, row.names = FALSE,
              col.names = TRUE, na = "", fileEncoding = "UTF-8")
}

# ---------------------------------------------------------------------------
# Input data sets (all deterministic; RNG-based ones reproduce the package
# examples exactly and are saved, so the CSV is the ground truth).
# ---------------------------------------------------------------------------
datasets <- list()

# 1. magnitude1 (20 records, 4 companies) -- the package's main magnitude
#    example. Extra columns added by us (documented in README):
#    rec_id     : record index 1..20 (also the "contributor" when no charVar)
#    sw         : deterministic sampling weights >= 1
#    value_neg  : value with records 2, 9, 16, 18 negated (negative-value tests;
#                 company B has +9.6 (Iceland) and -25.7 (Portugal) in Industry)
#    value0     : value with records 6, 7, 12, 17 set to 0 (zero tests;
#                 Entertainment:Portugal becomes a zero cell with 2 records)
mag <- SSBtoolsData("magnitude1")
mag$rec_id <- seq_len(nrow(mag))
mag$sw <- c(1, 2, 1.5, 3, 1, 1, 2, 1, 4, 1, 2, 1, 1, 2.5, 1, 1, 3, 1, 2, 1)
mag$value_neg <- mag$value
mag$value_neg[c(2, 9, 16, 18)] <- -mag$value[c(2, 9, 16, 18)]
mag$value0 <- mag$value
mag$value0[c(6, 7, 12, 17)] <- 0
datasets$magnitude1 <- mag

# 2. sprt_emp_withEU (18 records) as in the Ncontributors/MaxContribution
#    examples: age recoded young/old, `groups` = contributor code recycled
#    c("A","A","B","A","B","C").
z <- SSBtoolsData("sprt_emp_withEU")
z$age[z$age == "Y15-29"] <- "young"
z$age[z$age == "Y30-64"] <- "old"
z$groups <- rep(c("A", "A", "B", "A", "B", "C"), length.out = nrow(z))
z$rec_id <- seq_len(nrow(z))
datasets$sprt_emp_withEU <- z

# 3. dom_example: the 18-record data from the MagnitudeRule /
#    SuppressDominantCells / SuppressFewContributors examples.
num <- c(100, 90, 10, 80, 20, 70, 30, 50, 25, 25, 40, 20, 20, 20, 25, 25, 25, 25)
v1 <- c("v1", rep(c("v2", "v3", "v4"), each = 2), rep("v5", 3),
        rep(c("v6", "v7"), each = 4))
sweight <- c(1, 2, 1, 2, 1, 2, 1, 2, 1, 1, 2, 1, 1, 1, 2, 1, 1, 1)
datasets$dom_example <- data.frame(v1 = v1, num = num, sweight = sweight,
                                   rec_id = seq_along(num))

# 4. dom_test: data of tests/testthat/test-DominanceRule.R
num_t <- as.numeric(c(100, 90, 10, 80, 20, 70, 30, 80, 10, 10, 70, 10, 10, 10,
                      60, 20, 10, 10))
datasets$dom_test <- data.frame(
  v1 = v1, num = num_t, sw1 = 1,
  sw2 = c(1, 2, 1, 2, 1, 2, 1, 2, 1, 1, 2, 1, 1, 1, 2, 1, 1, 1),
  sw3 = c(1, 0.9, 1, 2, 1, 2, 1, 2, 1, 1, 2, 1, 1, 1, 2, 1, 1, 1),
  char0 = paste0("char", 1:18),
  char = c("A", "C", "B", "A", "C", "C", "C", "C", "B", "A", "A", "B",
           "A", "A", "C", "A", "B", "A"),
  rec_id = 1:18, stringsAsFactors = FALSE)

# 5. d2_few: SuppressFewContributors example data (d2 without freq,
#    v = round(rnorm^2, 1), family_id), set.seed(123)
d2 <- SSBtoolsData("d2")[-5]
set.seed(123)
d2$v <- round(rnorm(nrow(d2))^2, 1)
d2$family_id <- round(2 * as.integer(factor(d2$region)) + runif(nrow(d2)))
d2$rec_id <- seq_len(nrow(d2))
datasets$d2_few <- d2

# 6. d2_dom: SuppressDominantCells example data (d2[1:4], v = rnorm^2)
d2 <- SSBtoolsData("d2")[1:4]
set.seed(123)
d2$v <- rnorm(nrow(d2))^2
d2$rec_id <- seq_len(nrow(d2))
datasets$d2_dom <- d2

# 7. z2_micro: MagnitudeRule example (MakeMicro of z2, random values)
set.seed(123)
zz <- SSBtools::MakeMicro(SSBtoolsData("z2"), "ant")
zz$value <- sample(1:1000, nrow(zz), replace = TRUE)
zz$ant <- NULL
zz$rec_id <- seq_len(nrow(zz))
datasets$z2_micro <- zz

# 8. mun_accidents (frequency table; SuppressSmallCounts example)
datasets$mun_accidents <- SSBtoolsData("mun_accidents")

# 9. d2_freq: SuppressSmallCounts example (d2 with f = round(freq/10))
d2 <- SSBtoolsData("d2")
d2$f <- round(d2$freq / 10)
datasets$d2_freq <- d2

for (nm in names(datasets)) {
  write_csv_exact(datasets[[nm]], file.path(outdir, "inputs", paste0(nm, ".csv")))
}

# ---------------------------------------------------------------------------
# Cases. args are exactly what is passed (besides data, printInc = FALSE and
# output = "all"). `formula` given as a string is converted by as.formula();
# `primary` given as a character vector is converted to the function(s) of
# that name; a list `formula` (linked tables) is a named list of strings.
# ---------------------------------------------------------------------------
cases <- list()
add <- function(id, dataset, fun, args, part = "primary", description = "") {
  cases[[length(cases) + 1]] <<- list(id = id, part = part, dataset = dataset,
                                      fun = fun, args = args,
                                      description = description)
}

mag_tabs <- list(
  d1 = list(dimVar = c("sector4", "geo")),
  hier = list(dimVar = c("sector4", "sector2", "geo", "eu")),
  form = list(formula = "~sector2*geo + sector4*eu"))

# --- NContributorsRule via SuppressFewContributors -------------------------
for (tb in names(mag_tabs)) for (maxN in 1:3) for (cv in c("none", "company")) {
  a <- c(mag_tabs[[tb]], list(numVar = "value", maxN = maxN))
  if (cv != "none") a$contributorVar <- cv
  add(sprintf("mag_ncontr_%s_maxN%d_%s", tb, maxN, cv), "magnitude1",
      "SuppressFewContributors", a,
      description = "NContributorsRule; contributors = records (none) or distinct company")
}
add("mag_ncontr_hier_maxN2_company_removeB", "magnitude1", "SuppressFewContributors",
    list(dimVar = c("sector4", "sector2", "geo", "eu"), numVar = "value", maxN = 2,
         contributorVar = "company", removeCodes = "B"),
    description = "removeCodes: company B not counted in nRule (nAll counts it)")
add("mag_ncontr_hier_maxN1_removeRows", "magnitude1", "SuppressFewContributors",
    list(dimVar = c("sector4", "sector2", "geo", "eu"), numVar = "value", maxN = 1,
         removeCodes = c(15, 20)),
    description = "removeCodes without contributorVar = record indices")
add("mag_ncontr_hier_maxN2_value0", "magnitude1", "SuppressFewContributors",
    list(dimVar = c("sector4", "sector2", "geo", "eu"), numVar = "value0", maxN = 2),
    description = "remove0 = TRUE (default): records with value0 == 0 not counted")
add("mag_ncontr_hier_maxN2_value0_keep0", "magnitude1", "SuppressFewContributors",
    list(dimVar = c("sector4", "sector2", "geo", "eu"), numVar = "value0", maxN = 2,
         remove0 = FALSE),
    description = "remove0 = FALSE: zero records counted")
add("mag_ncontr_hier_maxN2_value0_company", "magnitude1", "SuppressFewContributors",
    list(dimVar = c("sector4", "sector2", "geo", "eu"), numVar = "value0", maxN = 2,
         contributorVar = "company"),
    description = "remove0 with contributorVar: applied after pre-aggregation to (inner cell x company)")
add("mag_ncontr_d1_maxN1_two_charvars", "magnitude1", "SuppressFewContributors",
    list(dimVar = c("sector4", "geo"), numVar = "value", maxN = list(company = 1, sector2 = 1),
         contributorVar = c("company", "sector2")),
    description = "two charVar: rule applied per variable, primary = OR")

# --- DominanceRule via SuppressDominantCells -------------------------------
nk <- list(n1k80 = list(n = 1, k = 80), n2k90 = list(n = 2, k = 90),
           n12k80_99 = list(n = 1:2, k = c(80, 99)),
           n12k80_70 = list(n = 1:2, k = c(80, 70)))
for (tb in c("d1", "hier", "form")) for (nkn in names(nk)) for (cv in c("none", "company")) {
  a <- c(mag_tabs[[tb]], list(numVar = "value"), nk[[nkn]], list(allDominance = TRUE))
  if (cv != "none") a$contributorVar <- cv
  add(sprintf("mag_dom_%s_%s_%s", tb, nkn, cv), "magnitude1", "SuppressDominantCells", a,
      description = "DominanceRule (n,k); contributions = records (none) or company totals")
}
# sampling weights
for (wm in c("default", "tauargus")) for (nkn in c("n1k80", "n2k90", "n12k80_70")) {
  a <- c(mag_tabs$hier, list(numVar = "value"), nk[[nkn]],
         list(sWeightVar = "sw", domWeightMethod = wm, allDominance = TRUE))
  add(sprintf("mag_dom_hier_%s_sw_%s", nkn, wm), "magnitude1", "SuppressDominantCells", a,
      description = paste("sampling weights, domWeightMethod =", wm))
}
for (nkn in c("n1k80", "n2k90")) {
  a <- c(mag_tabs$hier, list(numVar = "value"), nk[[nkn]],
         list(sWeightVar = "sw", contributorVar = "company", allDominance = TRUE))
  add(sprintf("mag_dom_hier_%s_sw_default_company", nkn), "magnitude1", "SuppressDominantCells", a,
      description = "sampling weights with contributorVar (weighted holding totals)")
}
# negative values
for (cv in c("none", "company")) for (aad in c(FALSE, TRUE)) {
  a <- c(mag_tabs$hier, list(numVar = "value_neg", n = 1:2, k = c(80, 99), allDominance = TRUE))
  if (cv != "none") a$contributorVar <- cv
  if (aad) a$apply_abs_directly <- TRUE
  add(sprintf("mag_dom_hier_neg_%s%s", cv, if (aad) "_absdirect" else ""), "magnitude1",
      "SuppressDominantCells", a, description = "negative values")
}
add("mag_dom_hier_neg_sw_default", "magnitude1", "SuppressDominantCells",
    c(mag_tabs$hier, list(numVar = "value_neg", n = 1:2, k = c(80, 99), sWeightVar = "sw",
                          allDominance = TRUE)),
    description = "negative values with weights (signed values in weighted path)")
# zeros
for (pz in c(FALSE, TRUE)) for (cv in c("none", "company")) {
  a <- c(mag_tabs$hier, list(numVar = "value0", n = 1, k = 80, allDominance = TRUE,
                             protectZeros = pz))
  if (cv != "none") a$contributorVar <- cv
  add(sprintf("mag_dom_hier_zero_pz%s_%s", pz, cv), "magnitude1", "SuppressDominantCells", a,
      description = "zero cells with protectZeros")
}
add("mag_dom_hier_zero_pzTRUE_none_structEmpty", "magnitude1", "SuppressDominantCells",
    c(mag_tabs$hier, list(numVar = "value0", n = 1, k = 80, allDominance = TRUE,
                          protectZeros = TRUE, structuralEmpty = TRUE)),
    description = "protectZeros with structuralEmpty: empty cells (no records) not primary")
add("mag_pp_hier_zero_p10_company", "magnitude1", "SuppressDominantCells",
    c(mag_tabs$hier, list(numVar = "value0", pPercent = 10, contributorVar = "company",
                          allDominance = TRUE)),
    description = "p% rule with zero contributions")
# removeCodes and fractions, min_n_contr
for (rf in c(1, 0.5, 0)) {
  add(sprintf("mag_dom_hier_n12k80_99_company_removeB_f%s", rf), "magnitude1",
      "SuppressDominantCells",
      c(mag_tabs$hier, list(numVar = "value", n = 1:2, k = c(80, 99), contributorVar = "company",
                            removeCodes = "B", removeCodesFraction = rf, allDominance = TRUE)),
      description = "removeCodes/removeCodesFraction")
}
add("mag_dom_hier_n1k80_company_min_n_contr3", "magnitude1", "SuppressDominantCells",
    c(mag_tabs$hier, list(numVar = "value", n = 1, k = 80, contributorVar = "company",
                          min_n_contr = 3, allDominance = TRUE)),
    description = "min_n_contr: primary also when 0 < n_contr < 3")
add("mag_dom_hier_n12k80_70_plus_ncontr_maxN2", "magnitude1", "SuppressDominantCells",
    c(mag_tabs$hier, list(numVar = "value", n = 1:2, k = c(80, 70),
                          primary = c("DominanceRule", "NContributorsRule"), maxN = 2,
                          allDominance = TRUE)),
    description = "two primary functions combined (OR)")

# --- PPercentRule -----------------------------------------------------------
for (tb in c("d1", "hier", "form")) for (p in c(10, 20)) for (cv in c("none", "company")) {
  a <- c(mag_tabs[[tb]], list(numVar = "value", pPercent = p, allDominance = TRUE))
  if (cv != "none") a$contributorVar <- cv
  add(sprintf("mag_pp_%s_p%d_%s", tb, p, cv), "magnitude1", "SuppressDominantCells", a,
      description = "p% rule")
}
add("mag_pp_hier_p10_sw_default", "magnitude1", "SuppressDominantCells",
    c(mag_tabs$hier, list(numVar = "value", pPercent = 10, sWeightVar = "sw", allDominance = TRUE)),
    description = "p% rule with weights (default method)")
add("mag_pp_hier_p10_sw_tauargus", "magnitude1", "SuppressDominantCells",
    c(mag_tabs$hier, list(numVar = "value", pPercent = 10, sWeightVar = "sw",
                          domWeightMethod = "tauargus", allDominance = TRUE)),
    description = "p% rule with weights (tauargus method)")
add("mag_pp_hier_p10_neg_company", "magnitude1", "SuppressDominantCells",
    c(mag_tabs$hier, list(numVar = "value_neg", pPercent = 10, contributorVar = "company",
                          allDominance = TRUE)),
    description = "p% rule, negative values, holdings")
add("mag_pp_hier_p10_company_intervals", "magnitude1", "SuppressDominantCells",
    c(mag_tabs$hier, list(numVar = "value", pPercent = 10, contributorVar = "company",
                          allDominance = TRUE, protectionIntervals = TRUE,
                          intervalSuppression = FALSE)),
    description = "p% rule with protectionIntervals (lomax_/upmin_ columns); no lp solver")
add("mag_dom_hier_n12k80_99_company_intervals", "magnitude1", "SuppressDominantCells",
    c(mag_tabs$hier, list(numVar = "value", n = 1:2, k = c(80, 99), contributorVar = "company",
                          allDominance = TRUE, protectionIntervals = TRUE,
                          intervalSuppression = FALSE)),
    description = "(n,k) rule with protectionIntervals (lomax_/upmin_ columns)")

# --- sprt_emp_withEU --------------------------------------------------------
sp_tabs <- list(dim = list(dimVar = c("age", "geo", "eu", "year")),
                form = list(formula = "~age*eu + geo + year"))
for (tb in names(sp_tabs)) {
  for (maxN in 1:3) for (cv in c("none", "groups")) {
    a <- c(sp_tabs[[tb]], list(numVar = "ths_per", maxN = maxN))
    if (cv != "none") a$contributorVar <- cv
    add(sprintf("sprt_ncontr_%s_maxN%d_%s", tb, maxN, cv), "sprt_emp_withEU",
        "SuppressFewContributors", a, description = "NContributorsRule")
  }
  for (nkn in c("n1k80", "n2k90", "n12k80_70")) for (cv in c("none", "groups")) {
    a <- c(sp_tabs[[tb]], list(numVar = "ths_per"), nk[[nkn]], list(allDominance = TRUE))
    if (cv != "none") a$contributorVar <- cv
    add(sprintf("sprt_dom_%s_%s_%s", tb, nkn, cv), "sprt_emp_withEU",
        "SuppressDominantCells", a, description = "DominanceRule")
  }
  for (p in c(10, 20)) for (cv in c("none", "groups")) {
    a <- c(sp_tabs[[tb]], list(numVar = "ths_per", pPercent = p, allDominance = TRUE))
    if (cv != "none") a$contributorVar <- cv
    add(sprintf("sprt_pp_%s_p%d_%s", tb, p, cv), "sprt_emp_withEU",
        "SuppressDominantCells", a, description = "p% rule")
  }
}

# --- package examples (MagnitudeRule / SuppressDominantCells / SuppressFewContributors)
add("ex_dom_v1_n12k80_70", "dom_example", "SuppressDominantCells",
    list(n = c(1, 2), k = c(80, 70), numVar = "num", formula = "~v1 -1", allDominance = TRUE),
    description = "SuppressDominantCells example 'basic use'")
add("ex_pp_v1_p7", "dom_example", "SuppressDominantCells",
    list(pPercent = 7, numVar = "num", formula = "~v1 -1", allDominance = TRUE),
    description = "SuppressDominantCells example pPercent = 7")
add("ex_dom_v1_n12k80_70_sw_default", "dom_example", "SuppressDominantCells",
    list(n = c(1, 2), k = c(80, 70), numVar = "num", dimVar = "v1", sWeightVar = "sweight",
         allDominance = TRUE),
    description = "SuppressDominantCells example with weights")
add("ex_dom_v1_n12k80_70_sw_tauargus", "dom_example", "SuppressDominantCells",
    list(n = c(1, 2), k = c(80, 70), numVar = "num", dimVar = "v1", sWeightVar = "sweight",
         domWeightMethod = "tauargus", allDominance = TRUE),
    description = "SuppressDominantCells example with weights, tauargus")
for (maxN in c(3, 4)) {
  add(sprintf("ex_dom_plus_ncontr_maxN%d", maxN), "dom_example", "SuppressDominantCells",
      list(n = c(1, 2), k = c(80, 70), numVar = "num", formula = "~v1 -1",
           primary = c("DominanceRule", "NContributorsRule"), maxN = maxN, allDominance = TRUE),
      description = "SuppressDominantCells example: dominance + few contributors")
}
for (maxN in 1:3) {
  add(sprintf("ex_ncontr_v1_maxN%d", maxN), "dom_example", "SuppressFewContributors",
      list(formula = "~v1", maxN = maxN, numVar = "num"),
      description = "SuppressFewContributors example")
}
for (pp in list(list(n = 1:2, k = c(80, 70)))) {
  add("ex_gsfd_dom_v1_n12k80_70", "dom_example", "GaussSuppressionFromData",
      list(formula = "~v1 - 1", numVar = "num", n = c(1, 2), k = c(80, 70), preAggregate = FALSE,
           allDominance = TRUE, candidates = "CandidatesNum", primary = "DominanceRule"),
      description = "MagnitudeRule example without weights (GaussSuppressionFromData)")
  add("ex_gsfd_dom_v1_n12k80_70_sw_default", "dom_example", "GaussSuppressionFromData",
      list(formula = "~v1 - 1", numVar = "num", n = c(1, 2), k = c(80, 70), sWeightVar = "sweight",
           preAggregate = FALSE, allDominance = TRUE, candidates = "CandidatesNum",
           primary = "DominanceRule"),
      description = "MagnitudeRule example with weights, standard method")
  add("ex_gsfd_dom_v1_n12k80_70_sw_tauargus", "dom_example", "GaussSuppressionFromData",
      list(formula = "~v1 - 1", numVar = "num", n = c(1, 2), k = c(80, 70), sWeightVar = "sweight",
           preAggregate = FALSE, allDominance = TRUE, candidates = "CandidatesNum",
           primary = "DominanceRule", domWeightMethod = "tauargus"),
      description = "MagnitudeRule example with weights, tauargus method")
}
# test-DominanceRule.R settings, through GaussSuppressionFromData
gs_dt <- function(id, extra, description) {
  add(id, "dom_test", "GaussSuppressionFromData",
      modifyList(list(formula = "~v1 - 1", numVar = "num", preAggregate = FALSE,
                      allDominance = TRUE, candidates = "CandidatesNum",
                      primary = "DominanceRule"), extra),
      description = description)
}
gs_dt("test_dom_n2k90", list(n = 2, k = 90), "test-DominanceRule: unweighted")
gs_dt("test_dom_n2k90_char0", list(n = 2, k = 90, charVar = "char0"), "unique charVar = unweighted")
gs_dt("test_dom_n2k98_char", list(n = 2, k = 98, charVar = "char"), "holdings A/B/C")
gs_dt("test_dom_n12k70_90_sw2_default", list(n = 1:2, k = c(70, 90), sWeightVar = "sw2"),
      "default weighted dominance")
gs_dt("test_dom_n12k70_90_sw2_default_char", list(n = 1:2, k = c(70, 90), sWeightVar = "sw2",
                                                   charVar = "char"),
      "default weighted dominance with holdings")
gs_dt("test_dom_n2k90_sw2_tauargus", list(n = 2, k = 90, sWeightVar = "sw2",
                                          domWeightMethod = "tauargus"),
      "tauargus weighted dominance")
gs_dt("test_dom_n1k60_sw2_tauargus", list(n = 1, k = 60, sWeightVar = "sw2",
                                          domWeightMethod = "tauargus"),
      "tauargus weighted dominance n = 1")
gs_dt("test_pp_p20_sw2_tauargus", list(pPercent = 20, sWeightVar = "sw2", primary = "PPercentRule",
                                       domWeightMethod = "tauargus"),
      "tauargus weighted p% rule")
gs_dt("test_dom_n2k90_sw3_tauargus", list(n = 2, k = 90, sWeightVar = "sw3",
                                          domWeightMethod = "tauargus"),
      "tauargus with a weight < 1 (warning)")
# d2 examples
add("ex_d2_ncontr_dim_maxN2_family", "d2_few", "SuppressFewContributors",
    list(maxN = 2, numVar = "v", contributorVar = "family_id",
         dimVar = c("region", "county", "k_group")),
    description = "SuppressFewContributors example, hierarchical region/county")
add("ex_d2_ncontr_form_maxN1_family_remove1to9", "d2_few", "SuppressFewContributors",
    list(maxN = 1, numVar = "v", contributorVar = "family_id",
         formula = "~main_income * k_group + region + county - k_group", removeCodes = 1:9),
    description = "SuppressFewContributors example, formula and removeCodes 1:9")
add("ex_d2_dom_dim_n12k70_95", "d2_dom", "SuppressDominantCells",
    list(n = c(1, 2), k = c(70, 95), numVar = "v", dimVar = c("region", "county", "k_group"),
         allDominance = TRUE),
    description = "SuppressDominantCells example, hierarchical")
add("ex_d2_dom_form_n12k70_95", "d2_dom", "SuppressDominantCells",
    list(n = c(1, 2), k = c(70, 95), numVar = "v",
         formula = "~main_income * k_group + region + county - k_group", allDominance = TRUE),
    description = "SuppressDominantCells example, formula")
add("ex_z2_gsfd_dom_n12k65_85_sub2Sum", "z2_micro", "GaussSuppressionFromData",
    list(dimVar = c("region", "fylke", "kostragr", "hovedint"), numVar = "value",
         candidates = "CandidatesNum", primary = "DominanceRule", preAggregate = FALSE,
         singletonMethod = "sub2Sum", n = c(1, 2), k = c(65, 85), allDominance = TRUE),
    description = "MagnitudeRule example (z2 micro, hierarchical region/fylke/kostragr)")
add("ex_mag_pp_d1_p10_company", "magnitude1", "SuppressDominantCells",
    list(numVar = "value", dimVar = c("sector4", "geo"), contributorVar = "company",
         pPercent = 10, allDominance = TRUE),
    description = "SuppressDominantCells example 'With contributorVar and p% rule'")
add("ex_mag_dom_form_k80_99_company", "magnitude1", "SuppressDominantCells",
    list(numVar = "value", formula = "~sector2 * geo + sector4 * eu", contributorVar = "company",
         k = c(80, 99), allDominance = TRUE),
    description = "SuppressDominantCells example (n defaults to 1:length(k))")

# --- secondary suppression cases (part b) -----------------------------------
add("sec_vignette_fewcontr_d1_maxN1", "magnitude1", "SuppressFewContributors",
    list(numVar = "value", dimVar = c("sector4", "geo"), maxN = 1), part = "secondary",
    description = "Magnitude vignette Table 2")
add("sec_vignette_dom_d1_n1k80", "magnitude1", "SuppressDominantCells",
    list(numVar = "value", dimVar = c("sector4", "geo"), n = 1, k = 80, allDominance = TRUE),
    part = "secondary", description = "Magnitude vignette Table 3")
add("sec_vignette_dom_hier_n12k80_99", "magnitude1", "SuppressDominantCells",
    list(numVar = "value", dimVar = c("sector4", "sector2", "geo", "eu"), n = 1:2, k = c(80, 99)),
    part = "secondary", description = "Magnitude vignette Table 4 (hierarchical)")
add("sec_vignette_fewcontr_form_maxN2", "magnitude1", "SuppressFewContributors",
    list(numVar = "value", formula = "~sector2*geo + sector4*eu", maxN = 2, removeEmpty = FALSE),
    part = "secondary", description = "Magnitude vignette Table 5 (formula, removeEmpty = FALSE)")
add("sec_vignette_dom_form_company_n12k80_99", "magnitude1", "SuppressDominantCells",
    list(numVar = "value", formula = "~sector2*geo + sector4*eu", contributorVar = "company",
         n = 1:2, k = c(80, 99)),
    part = "secondary", description = "Magnitude vignette Table 8 (formula + contributorVar)")
add("sec_vignette_dom_form2_company_n12k80_99", "magnitude1", "SuppressDominantCells",
    list(numVar = "value", formula = "~sector4*geo + sector2*eu", contributorVar = "company",
         n = 1:2, k = c(80, 99)),
    part = "secondary", description = "Magnitude vignette Table 9 (singleton problem)")
add("sec_vignette_dom_form2_company_n12k80_99_nosingleton", "magnitude1", "SuppressDominantCells",
    list(numVar = "value", formula = "~sector4*geo + sector2*eu", contributorVar = "company",
         n = 1:2, k = c(80, 99), singletonMethod = "none"),
    part = "secondary", description = "Table 9 with singletonMethod = 'none'")
add("sec_smallcounts_mun_accidents_maxN3", "mun_accidents", "SuppressSmallCounts",
    list(maxN = 3, dimVar = 1:2, freqVar = 3), part = "secondary",
    description = "SuppressSmallCounts example")
add("sec_smallcounts_mun_accidents_maxN3_pzF", "mun_accidents", "SuppressSmallCounts",
    list(maxN = 3, dimVar = 1:2, freqVar = 3, protectZeros = FALSE), part = "secondary",
    description = "SuppressSmallCounts example, protectZeros = FALSE")
add("sec_smallcounts_d2_form_maxN3", "d2_freq", "SuppressSmallCounts",
    list(maxN = 3, freqVar = "f", formula = "~main_income * k_group + region + county - k_group"),
    part = "secondary", description = "SuppressSmallCounts example with formula")
add("sec_smallcounts_d2_dim_maxN2", "d2_freq", "SuppressSmallCounts",
    list(maxN = 2, freqVar = "f", dimVar = c("region", "county", "k_group")),
    part = "secondary", description = "SuppressSmallCounts example hierarchical")
add("sec_linked_consistent_pp10_company", "magnitude1", "SuppressDominantCells",
    list(formula = list(table_1 = "~(geo + eu) * sector2", table_2 = "~eu:sector4 - 1",
                        table_3 = "~(geo + eu) + sector4 - 1"),
         dominanceVar = "value", pPercent = 10, contributorVar = "company",
         linkedGauss = "consistent"),
    part = "secondary", description = "SuppressLinkedTables doc example a1 (linkedGauss = consistent)")
add("sec_linked_global_pp10_company", "magnitude1", "SuppressDominantCells",
    list(formula = list(table_1 = "~(geo + eu) * sector2", table_2 = "~eu:sector4 - 1",
                        table_3 = "~(geo + eu) + sector4 - 1"),
         dominanceVar = "value", pPercent = 10, contributorVar = "company"),
    part = "secondary", description = "same tables, ordinary (global) suppression for comparison")
add("sec_intervals_pp30_lpSolve", "magnitude1", "SuppressDominantCells",
    list(numVar = "value", dimVar = c("geo", "sector2", "sector4"), pPercent = 30,
         lpPackage = "lpSolve"),
    part = "secondary", description = "intervals lo_1/up_1 with lpSolve (no additional suppression)")
add("sec_intervals_pp30_range_lpSolve", "magnitude1", "SuppressDominantCells",
    list(numVar = "value", dimVar = c("geo", "sector2", "sector4"), pPercent = 30,
         rangePercent = 70, rangeMin = 80, lpPackage = "lpSolve"),
    part = "secondary", description = "Magnitude vignette Table 10 with lpSolve instead of Rglpk")

# ---------------------------------------------------------------------------
# Runner
# ---------------------------------------------------------------------------
to_call_args <- function(a) {
  if (!is.null(a$formula)) {
    if (is.list(a$formula)) a$formula <- lapply(a$formula, as.formula)
    else a$formula <- as.formula(a$formula)
  }
  for (fn in c("primary", "candidates")) {
    if (!is.null(a[[fn]]) && is.character(a[[fn]])) {
      f <- lapply(a[[fn]], function(nm) get(nm, envir = asNamespace("GaussSuppression")))
      a[[fn]] <- if (length(f) == 1) f[[1]] else f
    }
  }
  a
}

n_records_of <- function(res) {
  inner <- res$inner
  x <- res$x
  fv <- attr(inner, "freqVar")
  if (length(fv) && fv %in% names(inner)) {
    w <- inner[[fv]]
  } else if ("nUnique" %in% names(inner)) {
    w <- inner[["nUnique"]]
  } else {
    w <- rep(1, nrow(inner))
  }
  as.vector(as.matrix(crossprod(x, as.matrix(w))))
}

summary_rows <- list()
for (cs in cases) {
  data <- datasets[[cs$dataset]]
  a <- to_call_args(cs$args)
  warns <- character(0)
  res <- tryCatch(
    withCallingHandlers(
      do.call(cs$fun, c(list(data = data), a, list(printInc = FALSE, output = "all"))),
      warning = function(w) {
        warns <<- c(warns, conditionMessage(w))
        invokeRestart("muffleWarning")
      },
      message = function(m) invokeRestart("muffleMessage")),
    error = function(e) e)
  entry <- list(id = cs$id, part = cs$part, dataset = cs$dataset,
                input_file = paste0("inputs/", cs$dataset, ".csv"),
                fun = cs$fun, args = cs$args,
                fixed_args = list(printInc = FALSE, output = "all (publish element saved)"),
                description = cs$description)
  if (inherits(res, "error")) {
    entry$error <- conditionMessage(res)
    entry$warnings <- warns
    summary_rows[[length(summary_rows) + 1]] <- entry
    message("ERROR in ", cs$id, ": ", conditionMessage(res))
    next
  }
  pub <- res$publish
  attr(pub, "totCode") <- NULL
  pub$n_records <- tryCatch(n_records_of(res), error = function(e) NA_real_)
  pub$secondary <- pub$suppressed & !pub$primary
  last <- intersect(c("primary", "suppressed", "secondary"), names(pub))
  pub <- pub[c(setdiff(names(pub), last), last)]
  sub <- if (cs$part == "primary") "primary" else "secondary"
  of <- file.path(sub, paste0(cs$id, ".csv"))
  write_csv_exact(pub, file.path(outdir, of))
  entry$output_file <- of
  entry$n_cells <- nrow(pub)
  entry$n_primary <- sum(pub$primary)
  entry$n_suppressed <- sum(pub$suppressed, na.rm = TRUE)
  entry$columns <- names(pub)
  entry$warnings <- unique(warns)
  summary_rows[[length(summary_rows) + 1]] <- entry
}

# ---------------------------------------------------------------------------
# Standalone ComputeIntervals (lpSolve) on the vignette Table 4 result:
# x = model matrix (inner cells after extraAggregate -> published cells),
# z = published values, primary/suppressed from that run.
# lo/up = bounds of each suppressed cell given all published cells and
# non-negative inner cells (NA for published cells).
# ---------------------------------------------------------------------------
ci_args <- list(numVar = "value", dimVar = c("sector4", "sector2", "geo", "eu"),
                n = 1:2, k = c(80, 99))
ci_run <- do.call("SuppressDominantCells",
                  c(list(data = datasets$magnitude1), ci_args,
                    list(printInc = FALSE, output = "publish_x")))
ci <- ComputeIntervals(x = ci_run$x, z = ci_run$publish$value,
                       primary = ci_run$publish$primary,
                       suppressed = ci_run$publish$suppressed,
                       lpPackage = "lpSolve")
ci_out <- cbind(ci_run$publish[c("sector4", "geo", "value", "primary", "suppressed")],
                as.data.frame(ci))
write_csv_exact(ci_out, file.path(outdir, "secondary", "computeintervals_vignette_dom_hier.csv"))
summary_rows[[length(summary_rows) + 1]] <- list(
  id = "computeintervals_vignette_dom_hier", part = "secondary", dataset = "magnitude1",
  input_file = "inputs/magnitude1.csv", fun = "ComputeIntervals",
  args = list(run = c(list(fun = "SuppressDominantCells"), ci_args),
              ComputeIntervals = list(x = "model matrix of that run (output = 'publish_x')",
                                      z = "published value", primary = "primary column",
                                      suppressed = "suppressed column", lpPackage = "lpSolve")),
  description = "ComputeIntervals on the result of sec_vignette_dom_hier_n12k80_99",
  output_file = "secondary/computeintervals_vignette_dom_hier.csv",
  n_cells = nrow(ci_out), columns = names(ci_out), warnings = list())

meta <- list(
  generated_by = "make_reference.R",
  R_version = R.version.string,
  packages = list(
    SSBtools = as.character(packageVersion("SSBtools")),
    GaussSuppression = as.character(packageVersion("GaussSuppression")),
    RegSDC = as.character(packageVersion("RegSDC")),
    Matrix = as.character(packageVersion("Matrix")),
    lpSolve = as.character(packageVersion("lpSolve"))),
  conventions = list(
    csv = "comma separated, header, no quoting, NA = empty field, doubles exact (15 or 17 significant digits)",
    formula = "string, converted with as.formula(); list of strings = linked tables",
    primary_candidates = "character names of GaussSuppression functions",
    always_added = "printInc = FALSE, output = 'all' (only $publish written)"),
  cases = summary_rows)
writeLines(toJSON(meta, auto_unbox = TRUE, pretty = TRUE, null = "null", digits = NA),
           file.path(outdir, "cases.json"))
cat("cases:", length(cases), " errors:", sum(sapply(summary_rows, function(e) !is.null(e$error))), "\n")
