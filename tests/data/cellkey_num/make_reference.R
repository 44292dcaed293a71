# make_reference.R -- regenerate the cellKey (sdcTools) magnitude-perturbation
# reference data in this directory (tests/data/cellkey_num/).
#
# How to run (from anywhere):
#   Rscript tests/data/cellkey_num/make_reference.R [OUTDIR]
# OUTDIR defaults to the directory of this script (or the working directory).
# Required R packages: cellKey 1.0.2, ptable 1.0.0, sdcHierarchies, sdcTable,
# data.table, jsonlite. They are looked up first in the library given by the
# environment variable CK_RLIB (default /work/rlib_b), then in the default
# libraries. See README.md for the exact versions used and how they were built.
#
# What it does: builds one synthetic-but-fixed microdata set from
# cellKey::ck_create_testdata() (seeded), fixes record keys explicitly, builds
# a 3-dimensional table sex x age (hierarchical) x water and perturbs numeric
# variables under many parameter settings ("cases"). For every case it writes
#   case_<id>_numtab.csv.gz      per cell x variable: uws, ws, pws, keys, flags
#   case_<id>_components.csv.gz  per cell x variable x noise component j: the
#                                inputs/outputs of each component, captured by
#                                trace()-ing cellKey's internal functions
#   case_<id>_mod_nums.csv.gz    $mod_nums() exactly as cellKey returns it
# plus shared inputs (microdata, hierarchies, p-tables, top-k contributions)
# and cases.json. All doubles are written so that they round-trip exactly
# (integers as integers, other doubles with 17 significant digits).

args <- commandArgs(trailingOnly = TRUE)
rlib <- Sys.getenv("CK_RLIB", "/work/rlib_b")
if (dir.exists(rlib)) .libPaths(c(rlib, .libPaths()))

suppressPackageStartupMessages({
  library(data.table)
  library(cellKey)
  library(jsonlite)
})

script_dir <- tryCatch({
  f <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  if (length(f) == 1) dirname(normalizePath(f)) else getwd()
}, error = function(e) getwd())
outdir <- if (length(args) >= 1) args[1] else script_dir
dir.create(outdir, showWarnings = FALSE, recursive = TRUE)
Sys.setenv(CK_RUN_PARALLEL = FALSE)  # single core: needed for trace() capture

# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
# exact decimal representation of doubles: integers (|x| < 1e15) as plain
# integers, everything else with 17 significant digits. (A shorter string that
# round-trips through R's own parser is NOT safe: R's strtod is not always
# correctly rounded, so e.g. "%.16g" may parse to a different double in Python.)
fmt_num <- function(x) {
  out <- sprintf("%.17g", x)
  int <- !is.na(x) & is.finite(x) & x == round(x) & abs(x) < 1e15
  out[int] <- sprintf("%.0f", x[int])
  out[is.na(x)] <- NA_character_
  out[is.nan(x)] <- "NaN"
  out[is.infinite(x) & x > 0] <- "Inf"
  out[is.infinite(x) & x < 0] <- "-Inf"
  out
}
write_exact <- function(dt, file) {
  dt <- as.data.table(copy(dt))
  for (cn in names(dt)) {
    if (is.double(dt[[cn]])) set(dt, j = cn, value = fmt_num(dt[[cn]]))
    if (is.factor(dt[[cn]])) set(dt, j = cn, value = as.character(dt[[cn]]))
  }
  fwrite(dt, file.path(outdir, file), na = "NA", quote = FALSE)
  invisible(file)
}
hier_to_df <- function(h) {
  # sdc_hierarchy is a data.table with columns root / leaf / level
  data.table(code = h$leaf,
             parent = ifelse(h$leaf == h$root, "", h$root),
             level = h$level)
}

# ---------------------------------------------------------------------------
# 1. microdata (main table)
# ---------------------------------------------------------------------------
# ck_create_testdata() draws `sampling_weight` with sample() -> seed it.
set.seed(20240101)
dat <- ck_create_testdata()
dat <- dat[, c("sex", "age", "water", "savings", "income", "sampling_weight")]
dat[, sex := as.character(sex)]
dat[, age := as.character(age)]
dat[, water := paste0("w", water)]              # 8 codes w1..w7, w9; w6/w7/w9 are rare
dat[, savings_small := round(savings / 200)]    # 0..5, many zeros -> small cells / separation
dat[, income_neg := income - 5000]              # mixed signs -> sign behaviour, zero-cross cap
dat[, rec_id := .I]                             # 1-based row number of this file
# record keys: explicit, 8 digits, fixed seed
dat$rkey <- ck_generate_rkeys(dat[, c("sex", "age", "water", "income")], nr_digits = 8, seed = 12345)

d_sex <- hier_create(root = "Total", nodes = c("male", "female"))
d_age <- hier_create(root = "Total", nodes = c("young", "old"))
d_age <- hier_add(d_age, root = "young", nodes = paste0("age_group", 1:3))
d_age <- hier_add(d_age, root = "old", nodes = paste0("age_group", 4:6))
d_water <- hier_create(root = "Total", nodes = sort(unique(dat$water)))
dims_main <- list(sex = d_sex, age = d_age, water = d_water)

numvars_main <- c("income", "savings", "savings_small", "income_neg")

# ---------------------------------------------------------------------------
# 2. p-tables
# ---------------------------------------------------------------------------
pt_all   <- ptable::pt_ex_nums(parity = TRUE, separation = FALSE)  # single "all" table
pt_sep   <- ptable::pt_ex_nums(parity = TRUE, separation = TRUE)   # list(all, small_cells)
pt_par   <- ptable::pt_ex_nums(parity = FALSE, separation = FALSE) # list(even, odd)
pt_cnts  <- ptable::pt_ex_cnts()

write_exact(pt_all@pTable, "ptable_nums_all.csv")
write_exact(pt_sep$all@pTable, "ptable_nums_sep_all.csv")
write_exact(pt_sep$small_cells@pTable, "ptable_nums_small_cells.csv")
write_exact(pt_par$even@pTable, "ptable_nums_even.csv")
write_exact(pt_par$odd@pTable, "ptable_nums_odd.csv")
write_exact(pt_cnts@pTable, "ptable_cnts.csv")
stopifnot(isTRUE(all.equal(pt_all@pTable, pt_sep$all@pTable, tolerance = 0)))
ptparams <- function(p) {
  pp <- p@pParams
  list(D = pp@D, V = pp@V, js = pp@js, optim = pp@optim, mono = pp@mono,
       icat = pp@icat, step = pp@step, type = pp@type, table = pp@table, label = pp@label)
}
ptable_info <- list(
  nums_all = list(file = "ptable_nums_all.csv", call = "ptable::pt_ex_nums(parity = TRUE, separation = FALSE)", params = ptparams(pt_all)),
  nums_sep_all = list(file = "ptable_nums_sep_all.csv", call = "ptable::pt_ex_nums(parity = TRUE, separation = TRUE)$all (identical to nums_all)", params = ptparams(pt_sep$all)),
  nums_small_cells = list(file = "ptable_nums_small_cells.csv", call = "ptable::pt_ex_nums(parity = TRUE, separation = TRUE)$small_cells", params = ptparams(pt_sep$small_cells)),
  nums_even = list(file = "ptable_nums_even.csv", call = "ptable::pt_ex_nums(parity = FALSE, separation = FALSE)$even", params = ptparams(pt_par$even)),
  nums_odd = list(file = "ptable_nums_odd.csv", call = "ptable::pt_ex_nums(parity = FALSE, separation = FALSE)$odd", params = ptparams(pt_par$odd)),
  cnts = list(file = "ptable_cnts.csv", call = "ptable::pt_ex_cnts()", params = ptparams(pt_cnts))
)

# ---------------------------------------------------------------------------
# 3. capture of per-component internals via trace()
# ---------------------------------------------------------------------------
cap <- new.env()
reset_capture <- function() {
  cap$cells <- list()   # one entry per call of .perturb_cell_flex/.perturb_cell_simple
  cap$lookups <- list() # one entry per call of .lookup_v_flex
  cap$cell_no <- 0L
}
reset_capture()
ns <- asNamespace("cellKey")
tr_cell_entry <- quote({
  .cap <- get("cap", envir = globalenv())
  .cap$cell_no <- .cap$cell_no + 1L
  .cap$cells[[.cap$cell_no]] <- list(cv = cv, x = x, ck = ck, lookup_in = lookup, prot_req = prot_req)
})
tr_cell_exit <- quote({
  .cap <- get("cap", envir = globalenv())
  .rv <- returnValue()
  .cap$cells[[.cap$cell_no]]$out <- .rv
})
tr_lookup_exit <- quote({
  .cap <- get("cap", envir = globalenv())
  # the calling frame of .perturb_cell_*: the innermost frame holding `x_hats`
  .pf <- NULL
  for (.f in rev(sys.frames())) if (exists("x_hats", envir = .f, inherits = FALSE)) { .pf <- .f; break }
  .cap$lookups[[length(.cap$lookups) + 1L]] <- list(
    cell_no = .cap$cell_no,
    j = get("j", envir = .pf),
    xj_used = get("xj", envir = .pf),
    xo_before = get("xo", envir = .pf),
    mu = get("mu", envir = .pf),
    ck = cellkeys,
    a_in = params$a,
    a_capped = if (exists("a", inherits = FALSE)) a else params$a,
    lookup = params$lookup,
    max_i = params$max_i,
    v = returnValue())
})
suppressMessages({
  for (fn in c(".perturb_cell_flex", ".perturb_cell_simple")) {
    trace(fn, tracer = tr_cell_entry, exit = tr_cell_exit, where = ns, print = FALSE)
  }
  trace(".lookup_v_flex", exit = tr_lookup_exit, where = ns, print = FALSE)
})

# ---------------------------------------------------------------------------
# 4. running one case
# ---------------------------------------------------------------------------
new_tab <- function(x, dims, w = NULL, countvars = NULL, numvars) {
  suppressMessages(ck_setup(x = x, rkey = "rkey", dims = dims, w = w,
                            countvars = countvars, numvars = numvars))
}
priv_of <- function(tab) tab$.__enclos_env__$private

dimnames_of <- function(tab) priv_of(tab)$.ck_vars("dimvars")

# run perturbation of variables `vars` with params `par` on `tab`, collect output
run_case <- function(id, tab, vars, par, notes = "", supp = NULL, extra = list()) {
  priv <- priv_of(tab)
  dv <- names(priv$.results$dims)[-1]
  dv <- setdiff(dv, "is_bogus")
  supp_log <- list()
  if (!is.null(supp)) {
    for (s in supp) {
      before <- priv$.results[[s$v]]$special_protection
      suppressMessages(do.call(tab[[s$fun]], s$args))
      after <- priv$.results[[s$v]]$special_protection
      supp_log[[length(supp_log) + 1]] <- c(s[c("fun", "v")], list(args = s$args,
        n_new_flags = sum(after & !before), n_flags_total = sum(after)))
    }
  }
  numtabs <- list(); comps <- list(); mods <- list()
  for (v in vars) {
    pv <- if (is.list(par) && !inherits(par, "ck_params")) par[[v]] else par
    tab$params_nums_set(val = pv, v = v)
    reset_capture()
    suppressMessages(tab$perturb(v = v))
    # --- numtab + keys + flags
    nt <- tab$numtab(v = v)
    nt_mbs <- tab$numtab(v = v, mean_before_sum = TRUE)
    res <- priv$.results[[v]]
    dims <- priv$.results$dims
    stopifnot(nrow(nt) == nrow(res))
    nt <- cbind(strID = dims$strID, nt,
                pws_mean_before_sum = nt_mbs$pws,
                pert = res$pert_total,
                ck = res[[paste0("ck_", v)]], ck_nz = res[[paste0("ck_nz_", v)]],
                special_protection = res$special_protection,
                is_bogus = priv$.dupsinfo$is_bogus)
    # freq (unweighted number of records)
    nt$n_records <- priv$.results$total$uwc
    numtabs[[v]] <- nt
    vars_this <- v
    # --- components from the trace capture
    nondup <- dims[!priv$.dupsinfo$is_bogus]
    ids <- names(priv$.max_contributions)
    stopifnot(length(cap$cells) == length(ids))
    lk <- rbindlist(lapply(cap$lookups, function(l) data.table(
      cell_no = l$cell_no, j = l$j, xj_used = l$xj_used, xo_before = l$xo_before, mu = l$mu,
      ck_lookup = l$ck, a = l$a_in, a_capped = l$a_capped, lookup_used = l$lookup,
      max_i = l$max_i, v_lookup = l$v)))
    cc <- rbindlist(lapply(seq_along(cap$cells), function(i) {
      ce <- cap$cells[[i]]
      k <- length(ce$x)
      o <- ce$out
      nrow_c <- max(1L, k)
      data.table(
        cell_no = i, strID = ids[i], j = seq_len(nrow_c),
        n_x = k,
        x = if (k > 0) ce$x else NA_real_,
        ck_j = if (length(ce$ck) >= nrow_c) ce$ck[seq_len(nrow_c)] else c(ce$ck, rep(NA, nrow_c - length(ce$ck))),
        lookup_in = rep_len(ce$lookup_in, nrow_c),
        prot_req = ce$prot_req,
        cv = ce$cv,
        x_delta = rep_len(o$x_delta, nrow_c),
        x_hat = if (length(o$x_hats) == nrow_c) o$x_hats else c(o$x_hats, rep(NA, nrow_c - length(o$x_hats))),
        cv_p = o$cv_p,
        lookup_final = o$lookup)
    }))
    cc <- merge(cc, lk, by = c("cell_no", "j"), all.x = TRUE, sort = FALSE)
    # cells for which the perturbation function returned its "empty" result
    # (no .lookup_v_flex call at all and cv_p == 0): no perturbation, pws = 0
    nl <- lk[, .N, by = cell_no]
    cc[, n_lookups := 0L]
    cc[nl, n_lookups := i.N, on = "cell_no"]
    cc[, early_return := n_lookups == 0L & cv_p == 0 & x_hat %in% 0]
    setorder(cc, cell_no, j)
    cc <- merge(nondup[, c("strID", dv), with = FALSE], cc, by = "strID", sort = FALSE)
    setorder(cc, cell_no, j)
    cc[, vname := rep(vars_this, .N)]
    cc[, cell_no := NULL]
    setcolorder(cc, c("strID", dv, "vname", "j"))
    # consistency check: per cell, sum of x_hat == pert in numtab
    chk <- data.table(strID = ids, s = vapply(cap$cells, function(ce) sum(ce$out$x_hats), 0))
    chk <- merge(chk, nt[, .(strID, pert)], by = "strID")
    stopifnot(isTRUE(all.equal(chk$s, chk$pert, tolerance = 0)))
    comps[[v]] <- cc
  }
  md <- tab$mod_nums()
  write_exact(rbindlist(numtabs), sprintf("case_%s_numtab.csv.gz", id))
  write_exact(rbindlist(comps), sprintf("case_%s_components.csv.gz", id))
  write_exact(md, sprintf("case_%s_mod_nums.csv.gz", id))
  pinfo <- lapply(vars, function(v) {
    pv <- if (is.list(par) && !inherits(par, "ck_params")) par[[v]] else par
    p <- pv$params
    mp <- p$mult_params
    list(vname = v, type = p$type, top_k = p$top_k, mu_c = p$mu_c, same_key = p$same_key,
         use_zero_rkeys = p$use_zero_rkeys, even_odd = p$even_odd, separation = p$separation,
         mult_params_class = pv$type, mult_params = unclass(mp),
         derived = list(E = p$E, m1_sq = p$m_fixed_sq, zs = p$zs),
         ptab_types = sort(unique(p$ptab$type)))
  })
  list(id = id,
       files = list(numtab = sprintf("case_%s_numtab.csv.gz", id),
                    components = sprintf("case_%s_components.csv.gz", id),
                    mod_nums = sprintf("case_%s_mod_nums.csv.gz", id)),
       variables = vars, params = pinfo, sensitive_flags = supp_log, notes = notes, extra = extra)
}

# export top-k contributions / cell statistics (independent of the parameters)
export_contrib <- function(tab, file) {
  priv <- priv_of(tab)
  mc <- priv$.max_contributions
  dims <- priv$.results$dims
  dv <- setdiff(names(dims), c("strID", "is_bogus"))
  out <- rbindlist(lapply(names(mc), function(id) {
    rbindlist(lapply(names(mc[[id]]), function(v) {
      m <- mc[[id]][[v]]
      k <- length(m$uw_vals)
      data.table(strID = id, vname = v, rank = seq_len(k),
                 raw_row = m$uw_ids, uw_val = m$uw_vals, w_val = m$w_vals,
                 uw_sum = m$uw_sum, w_sum = m$w_sum, uw_mean = m$uw_mean, w_mean = m$w_mean,
                 uw_spread = m$uw_spread, w_spread = m$w_spread,
                 even_contributors = m$even_contributors)
    }))
  }))
  out <- merge(dims[, c("strID", dv), with = FALSE], out, by = "strID", sort = FALSE)
  write_exact(out, file)
}

# export the raw-data row order of sdcTable (top-k ids refer to it)
raw_order <- function(tab, x) {
  raw <- priv_of(tab)$.prob@dataObj@rawData
  rk <- raw[["tmprkeyfortabulation"]]
  # sdcTable sorts the microdata by the dimension codes; reproduce and verify
  dv <- names(priv_of(tab)$.results$dims)
  dv <- setdiff(dv, c("strID", "is_bogus"))
  o <- do.call(order, c(lapply(dv, function(d) x[[d]]), list(method = "radix")))
  stopifnot(isTRUE(all.equal(x$rkey[o], rk, tolerance = 0)))
  for (d in dv) stopifnot(identical(as.character(x[[d]][o]), as.character(raw[[d]])))
  r <- integer(nrow(x)); r[o] <- seq_len(nrow(x)); r
}

# count perturbation of the same table
export_counts <- function(tab, prefix) {
  tab$params_cnts_set(val = ck_params_cnts(ptab = pt_cnts), v = "total")
  suppressMessages(tab$perturb(v = "total"))
  write_exact(tab$freqtab(v = "total"), paste0(prefix, "_freqtab.csv"))
  write_exact(tab$mod_cnts(), paste0(prefix, "_mod_cnts.csv"))
}

# ---------------------------------------------------------------------------
# 5. main table, record order, hierarchies, contributions
# ---------------------------------------------------------------------------
tab0 <- new_tab(dat, dims_main, numvars = numvars_main)
dat$raw_row <- raw_order(tab0, dat)
write_exact(dat[, c("rec_id", "raw_row", "sex", "age", "water", "income", "savings",
                    "savings_small", "income_neg", "sampling_weight", "rkey")], "microdata.csv")
write_exact(hier_to_df(d_sex), "hier_sex.csv")
write_exact(hier_to_df(d_age), "hier_age.csv")
write_exact(hier_to_df(d_water), "hier_water.csv")
export_contrib(tab0, "contributions_unweighted.csv.gz")
export_counts(tab0, "counts_unweighted")
tabw0 <- new_tab(dat, dims_main, w = "sampling_weight", numvars = numvars_main)
stopifnot(identical(raw_order(tabw0, dat), dat$raw_row))
export_contrib(tabw0, "contributions_weighted.csv.gz")
export_counts(tabw0, "counts_weighted")
tab2d <- new_tab(dat, list(sex = d_sex, age = d_age), numvars = numvars_main)
export_contrib(tab2d, "contributions_2d_unweighted.csv.gz")
tab2dw <- new_tab(dat, list(sex = d_sex, age = d_age), w = "sampling_weight", numvars = numvars_main)
export_contrib(tab2dw, "contributions_2d_weighted.csv.gz")

# ---------------------------------------------------------------------------
# 6. parameter sets and cases
# ---------------------------------------------------------------------------
eps3 <- c(1, 0.5, 0.2)
fp_k3 <- ck_flexparams(fp = 1000, p = c(0.3, 0.03), epsilon = eps3, q = 3)
fp_k1 <- ck_flexparams(fp = 1000, p = c(0.3, 0.03), epsilon = 1, q = 3)
sp_k3 <- ck_simpleparams(p = 0.05, epsilon = eps3)

P <- function(...) suppressMessages(ck_params_nums(...))
vars_std <- c("income", "savings", "savings_small")
cases <- list()
add <- function(res, call_txt) {
  res$call <- call_txt
  cases[[res$id]] <<- res
  message("case ", res$id, " done")
  if (nzchar(Sys.getenv("CK_ONLY_FIRST")) && length(cases) >= as.integer(Sys.getenv("CK_ONLY_FIRST"))) {
    save_manifest(); quit(save = "no")
  }
}

save_manifest <- function() {
  man <- list(
    description = "cellKey (sdcTools) magnitude (numeric) perturbation reference outputs; see README.md",
    generator = "make_reference.R",
    versions = list(R = R.version.string,
                    cellKey = as.character(packageVersion("cellKey")),
                    ptable = as.character(packageVersion("ptable")),
                    sdcHierarchies = as.character(packageVersion("sdcHierarchies")),
                    sdcTable = as.character(packageVersion("sdcTable")),
                    data.table = as.character(packageVersion("data.table"))),
    data = list(
      main = list(microdata = "microdata.csv",
                  construction = "set.seed(20240101); ck_create_testdata()[, c(sex, age, water, savings, income, sampling_weight)]; water -> paste0('w', water); savings_small = round(savings/200); income_neg = income - 5000; rkey = ck_generate_rkeys(dat[, c('sex','age','water','income')], nr_digits = 8, seed = 12345)",
                  dims = list(sex = "hier_sex.csv", age = "hier_age.csv", water = "hier_water.csv"),
                  contributions = list(unweighted = "contributions_unweighted.csv.gz", weighted = "contributions_weighted.csv.gz",
                                       unweighted_2d = "contributions_2d_unweighted.csv.gz", weighted_2d = "contributions_2d_weighted.csv.gz"),
                  dims_2d = "cases a2, b2, l3 use only dims = list(sex = hier_sex, age = hier_age)",
                  counts = list(unweighted = c("counts_unweighted_freqtab.csv", "counts_unweighted_mod_cnts.csv"),
                                weighted = c("counts_weighted_freqtab.csv", "counts_weighted_mod_cnts.csv"),
                                ptable = "ptable_cnts.csv")),
      vignette = vig_info),
    ptables = ptable_info,
    cases = unname(cases))
  write(toJSON(man, auto_unbox = TRUE, pretty = TRUE, digits = NA, null = "null", na = "null"),
        file.path(outdir, "cases.json"))
}
vig_info <- NULL

# (a) flex, top_contr k=3, same_key TRUE, use_zero_rkeys FALSE
add(run_case("a", new_tab(dat, dims_main, numvars = numvars_main), vars_std,
  P(type = "top_contr", top_k = 3, ptab = pt_all, mult_params = fp_k3, mu_c = 0,
    same_key = TRUE, use_zero_rkeys = FALSE),
  notes = "baseline flex case; numtab also has pws_mean_before_sum (= pws*pws/ws)"),
  "ck_params_nums(type='top_contr', top_k=3, ptab=pt_ex_nums(parity=TRUE, separation=FALSE), mult_params=ck_flexparams(fp=1000, p=c(0.3,0.03), epsilon=c(1,0.5,0.2), q=3), mu_c=0, same_key=TRUE, use_zero_rkeys=FALSE)")
# (g) separation
add(run_case("g", new_tab(dat, dims_main, numvars = numvars_main), vars_std,
  P(type = "top_contr", top_k = 3, ptab = pt_sep, mult_params = fp_k3, mu_c = 0,
    same_key = TRUE, use_zero_rkeys = FALSE),
  notes = "separation: ptab list(all, small_cells); zs = sqrt(m1_sq)/(sqrt(E)*p_small)"),
  "ck_params_nums(type='top_contr', top_k=3, ptab=pt_ex_nums(parity=TRUE, separation=TRUE), mult_params=ck_flexparams(fp=1000, p=c(0.3,0.03), epsilon=c(1,0.5,0.2), q=3), mu_c=0, same_key=TRUE, use_zero_rkeys=FALSE)")
# (j) mu_c > 0 with sensitive cells
pj <- P(type = "top_contr", top_k = 3, ptab = pt_all, mult_params = fp_k3, mu_c = 2,
        same_key = TRUE, use_zero_rkeys = FALSE)
add(run_case("j", new_tab(dat, dims_main, numvars = numvars_main), vars_std, pj,
  supp = list(
    list(fun = "supp_freq", v = "income", args = list(v = "income", n = 15, weighted = FALSE)),
    list(fun = "supp_p", v = "savings", args = list(v = "savings", p = 20)),
    list(fun = "supp_nk", v = "savings_small", args = list(v = "savings_small", n = 2, k = 85))),
  notes = "mu_c=2; flags: income by supp_freq(n=15, unweighted), savings by supp_p(p=20), savings_small by supp_nk(n=2,k=85); column special_protection in numtab"),
  "ck_params_nums(type='top_contr', top_k=3, ptab=pt_ex_nums(parity=TRUE, separation=FALSE), mult_params=ck_flexparams(fp=1000, p=c(0.3,0.03), epsilon=c(1,0.5,0.2), q=3), mu_c=2, same_key=TRUE, use_zero_rkeys=FALSE)")
# (j2) mu_c with separation + supp_freq on all
add(run_case("j2", new_tab(dat, dims_main, numvars = numvars_main), vars_std,
  P(type = "top_contr", top_k = 3, ptab = pt_sep, mult_params = fp_k3, mu_c = 2,
    same_key = TRUE, use_zero_rkeys = FALSE),
  supp = list(
    list(fun = "supp_freq", v = "income", args = list(v = "income", n = 15, weighted = FALSE)),
    list(fun = "supp_freq", v = "savings", args = list(v = "savings", n = 15, weighted = FALSE)),
    list(fun = "supp_freq", v = "savings_small", args = list(v = "savings_small", n = 15, weighted = FALSE))),
  notes = "mu_c=2 together with separation; all three variables flagged by supp_freq(n=15, unweighted)"),
  "ck_params_nums(type='top_contr', top_k=3, ptab=pt_ex_nums(parity=TRUE, separation=TRUE), mult_params=ck_flexparams(fp=1000, p=c(0.3,0.03), epsilon=c(1,0.5,0.2), q=3), mu_c=2, same_key=TRUE, use_zero_rkeys=FALSE)")
# (l) weights
add(run_case("l", new_tab(dat, dims_main, w = "sampling_weight", numvars = numvars_main), vars_std,
  P(type = "top_contr", top_k = 3, ptab = pt_all, mult_params = fp_k3, mu_c = 0,
    same_key = TRUE, use_zero_rkeys = FALSE),
  notes = "as (a) but ck_setup(w='sampling_weight'); x_j are weighted values (value*weight) of the top-k records ranked by |unweighted value| then weight"),
  "ck_setup(..., w='sampling_weight'); ck_params_nums as in case a")
# (l2) weights + separation + mu_c with weighted supp_freq
add(run_case("l2", new_tab(dat, dims_main, w = "sampling_weight", numvars = numvars_main), vars_std,
  P(type = "top_contr", top_k = 3, ptab = pt_sep, mult_params = fp_k3, mu_c = 1,
    same_key = TRUE, use_zero_rkeys = FALSE),
  supp = list(list(fun = "supp_freq", v = "income", args = list(v = "income", n = 500, weighted = TRUE))),
  notes = "weighted table with separation and mu_c=1; income flagged by supp_freq(n=500, weighted=TRUE)"),
  "ck_setup(..., w='sampling_weight'); ck_params_nums(type='top_contr', top_k=3, ptab=pt_ex_nums(TRUE,TRUE), mult_params=fp_k3, mu_c=1)")
save_manifest()

# (a2)/(b2)/(l3) the same parameters on the 2-dimensional table sex x age
# (no small cells): every cell has >= 6 records, so all cells really use
# top_k = 3 components (see README: in the 3-dim table cellKey truncates the
# top-k list to the running minimum of the record counts of earlier cells).
dims_2d <- list(sex = d_sex, age = d_age)
add(run_case("a2", new_tab(dat, dims_2d, numvars = numvars_main), c(vars_std, "income_neg"),
  P(type = "top_contr", top_k = 3, ptab = pt_all, mult_params = fp_k3, mu_c = 0,
    same_key = TRUE, use_zero_rkeys = FALSE),
  notes = "as (a) on the 2-dim table sex x age (27 cells, all with many records)"),
  "as a, dims = list(sex, age)")
add(run_case("b2", new_tab(dat, dims_2d, numvars = numvars_main), c(vars_std, "income_neg"),
  P(type = "top_contr", top_k = 3, ptab = pt_sep, mult_params = fp_k3, mu_c = 2,
    same_key = FALSE, use_zero_rkeys = TRUE),
  supp = list(list(fun = "supp_freq", v = "income", args = list(v = "income", n = 200, weighted = FALSE))),
  notes = "2-dim table; separation, mu_c=2 (income cells with <= 200 records flagged), same_key=FALSE, use_zero_rkeys=TRUE"),
  "ck_params_nums(type='top_contr', top_k=3, ptab=pt_ex_nums(TRUE,TRUE), mult_params=fp_k3, mu_c=2, same_key=FALSE, use_zero_rkeys=TRUE), dims = list(sex, age)")
add(run_case("l3", new_tab(dat, dims_2d, w = "sampling_weight", numvars = numvars_main), c(vars_std, "income_neg"),
  P(type = "top_contr", top_k = 3, ptab = pt_all, mult_params = fp_k3, mu_c = 0,
    same_key = TRUE, use_zero_rkeys = FALSE),
  notes = "2-dim table, weighted (w='sampling_weight'), parameters as (a)"),
  "as a, dims = list(sex, age), w='sampling_weight'")

# (b) same_key FALSE
add(run_case("b", new_tab(dat, dims_main, numvars = numvars_main), vars_std,
  P(type = "top_contr", top_k = 3, ptab = pt_all, mult_params = fp_k3, mu_c = 0,
    same_key = FALSE, use_zero_rkeys = FALSE), notes = "as (a) with same_key=FALSE"),
  "as a, same_key=FALSE")
# (c) use_zero_rkeys TRUE
add(run_case("c", new_tab(dat, dims_main, numvars = numvars_main), vars_std,
  P(type = "top_contr", top_k = 3, ptab = pt_all, mult_params = fp_k3, mu_c = 0,
    same_key = TRUE, use_zero_rkeys = TRUE), notes = "as (a) with use_zero_rkeys=TRUE (base key = ck over all records of the cell)"),
  "as a, use_zero_rkeys=TRUE")
# (d) mean, (e) range, (f) sum  (k = 1, epsilon must have length 1)
for (tp in c(d = "mean", e = "range", f = "sum")) {
  id <- names(which(c(d = "mean", e = "range", f = "sum") == tp))
  add(run_case(id, new_tab(dat, dims_main, numvars = numvars_main), vars_std,
    P(type = tp, ptab = pt_all, mult_params = fp_k1, mu_c = 0, same_key = TRUE, use_zero_rkeys = FALSE),
    notes = paste0("type='", tp, "' (top_k forced to 1), flex params with epsilon=1")),
    sprintf("ck_params_nums(type='%s', ptab=pt_ex_nums(parity=TRUE, separation=FALSE), mult_params=ck_flexparams(fp=1000, p=c(0.3,0.03), epsilon=1, q=3), mu_c=0, same_key=TRUE, use_zero_rkeys=FALSE)", tp))
}
# (h) parity even/odd, top_k = 1
add(run_case("h", new_tab(dat, dims_main, numvars = numvars_main), vars_std,
  P(type = "top_contr", top_k = 1, ptab = pt_par, mult_params = fp_k1, mu_c = 0,
    same_key = TRUE, use_zero_rkeys = FALSE),
  notes = "parity: ptab list(even, odd) from pt_ex_nums(parity=FALSE, separation=FALSE); table chosen by the parity of the number of records in the cell"),
  "ck_params_nums(type='top_contr', top_k=1, ptab=pt_ex_nums(parity=FALSE, separation=FALSE), mult_params=ck_flexparams(fp=1000, p=c(0.3,0.03), epsilon=1, q=3))")
# (h2) parity + same_key FALSE + type sum
add(run_case("h2", new_tab(dat, dims_main, numvars = numvars_main), vars_std,
  P(type = "sum", ptab = pt_par, mult_params = fp_k1, mu_c = 0,
    same_key = FALSE, use_zero_rkeys = FALSE),
  notes = "parity tables with type='sum' and same_key=FALSE (component 1 uses the once-rotated key)"),
  "ck_params_nums(type='sum', ptab=pt_ex_nums(parity=FALSE, separation=FALSE), mult_params=ck_flexparams(fp=1000, p=c(0.3,0.03), epsilon=1, q=3), same_key=FALSE)")
# (i) simple params. NOTE: with top_k > 1 cellKey 1.0.2 fails under R >= 4.2
# (`if (ck == 0)` in .perturb_cell_simple gets the vector of top_k keys:
# "the condition has length > 1"). We record that error and run top_k = 1.
err_i <- tryCatch({
  run_case("i_k3", new_tab(dat, dims_main, numvars = numvars_main), "income",
    P(type = "top_contr", top_k = 3, ptab = pt_all, mult_params = sp_k3, mu_c = 0,
      same_key = TRUE, use_zero_rkeys = FALSE))
  "no error"
}, error = function(e) conditionMessage(e))
cases[["i_k3"]] <- list(id = "i_k3", files = NULL, error = err_i,
  call = "ck_params_nums(type='top_contr', top_k=3, ptab=pt_ex_nums(parity=TRUE, separation=FALSE), mult_params=ck_simpleparams(p=0.05, epsilon=c(1,0.5,0.2)))",
  notes = "NOT PRODUCED: cellKey errors for simple params with top_k > 1 on R >= 4.2; error message in `error`")
sp_k1 <- ck_simpleparams(p = 0.05, epsilon = 1)
add(run_case("i", new_tab(dat, dims_main, numvars = numvars_main), vars_std,
  P(type = "top_contr", top_k = 1, ptab = pt_all, mult_params = sp_k1, mu_c = 0,
    same_key = TRUE, use_zero_rkeys = FALSE),
  notes = "ck_simpleparams(p=0.05, epsilon=1), top_k=1"),
  "ck_params_nums(type='top_contr', top_k=1, ptab=pt_ex_nums(parity=TRUE, separation=FALSE), mult_params=ck_simpleparams(p=0.05, epsilon=1))")
# (i2) simple params with separation
add(run_case("i2", new_tab(dat, dims_main, numvars = numvars_main), vars_std,
  P(type = "top_contr", top_k = 1, ptab = pt_sep, mult_params = sp_k1, mu_c = 0,
    same_key = TRUE, use_zero_rkeys = FALSE),
  notes = "simple params with separation, top_k=1 (simple zeroes a component after rescaling into the small-cell range even for j = 1)"),
  "ck_params_nums(type='top_contr', top_k=1, ptab=pt_ex_nums(parity=TRUE, separation=TRUE), mult_params=ck_simpleparams(p=0.05, epsilon=1))")
# (i3) simple params, type sum, mu_c with supp_freq
add(run_case("i3", new_tab(dat, dims_main, numvars = numvars_main), vars_std,
  P(type = "sum", ptab = pt_sep, mult_params = sp_k1, mu_c = 1,
    same_key = FALSE, use_zero_rkeys = FALSE),
  supp = list(list(fun = "supp_freq", v = "savings_small", args = list(v = "savings_small", n = 15, weighted = FALSE))),
  notes = "simple params, type sum, separation, mu_c=1, same_key=FALSE; savings_small flagged by supp_freq(n=15)"),
  "ck_params_nums(type='sum', ptab=pt_ex_nums(parity=TRUE, separation=TRUE), mult_params=ck_simpleparams(p=0.05, epsilon=1), mu_c=1, same_key=FALSE)")
# (k) negative values
add(run_case("k", new_tab(dat, dims_main, numvars = numvars_main), c("income_neg"),
  P(type = "top_contr", top_k = 3, ptab = pt_all, mult_params = fp_k3, mu_c = 0,
    same_key = TRUE, use_zero_rkeys = FALSE),
  notes = "income_neg = income - 5000 (mixed signs): sign of the noise follows sign(xo)*sign(v); the zero-cross cap applies"),
  "as a, variable income_neg")
add(run_case("k2", new_tab(dat, dims_main, numvars = numvars_main), c("income_neg"),
  P(type = "top_contr", top_k = 3, ptab = pt_sep, mult_params = fp_k3, mu_c = 2,
    same_key = FALSE, use_zero_rkeys = FALSE),
  supp = list(list(fun = "supp_freq", v = "income_neg", args = list(v = "income_neg", n = 15, weighted = FALSE))),
  notes = "income_neg with separation, mu_c=2 (supp_freq n=15) and same_key=FALSE"),
  "ck_params_nums(type='top_contr', top_k=3, ptab=pt_ex_nums(TRUE,TRUE), mult_params=fp_k3, mu_c=2, same_key=FALSE)")

# ---------------------------------------------------------------------------
# 7. the vignette example (vignettes/introduction.Rmd.orig), as written.
#    Only differences: set.seed() before ck_create_testdata() (the vignette
#    draws sampling weights unseeded); ck_generate_rkeys(nr_digits = 7) uses
#    its hash-derived seed, exactly as in the vignette.
# ---------------------------------------------------------------------------
set.seed(20240102)
vdat <- ck_create_testdata()
vdat <- vdat[, c("sex", "age", "savings", "income", "sampling_weight")]
vdat[, cnt_highincome := ifelse(income >= 9000, 1, 0)]
vdat$rkeys <- ck_generate_rkeys(dat = vdat, nr_digits = 7)
vdim_sex <- hier_create(root = "Total", nodes = c("male", "female"))
vdim_age <- hier_create(root = "Total", nodes = paste0("age_group", 1:6))
vdims <- list(sex = vdim_sex, age = vdim_age)
vtab <- suppressMessages(ck_setup(x = vdat, rkey = "rkeys", dims = vdims, w = "sampling_weight",
                 countvars = "cnt_highincome", numvars = c("income", "savings")))
vdat2 <- copy(vdat); vdat2[, sex := as.character(sex)]; vdat2[, age := as.character(age)]
vdat2[, rec_id := .I]
setnames(vdat2, "rkeys", "rkey")
vdat2$raw_row <- raw_order(vtab, vdat2)
write_exact(vdat2[, c("rec_id", "raw_row", "sex", "age", "savings", "income", "sampling_weight",
                      "cnt_highincome", "rkey")], "vignette_microdata.csv")
write_exact(hier_to_df(vdim_sex), "vignette_hier_sex.csv")
write_exact(hier_to_df(vdim_age), "vignette_hier_age.csv")
export_contrib(vtab, "vignette_contributions.csv.gz")
ptab1 <- ptable::pt_ex_cnts()
para2 <- ptable::create_cnt_ptable(D = 8, V = 3, js = 2, pstay = 0.5, optim = 1, mono = TRUE)
write_exact(para2@pTable, "vignette_ptable_cnts_para2.csv")
vtab$params_cnts_set(val = ck_params_cnts(ptab = ptab1), v = "total")
vtab$params_cnts_set(val = ck_params_cnts(ptab = para2), v = "cnt_highincome")
p_flex <- ck_flexparams(fp = 1000, p = c(0.3, 0.03), epsilon = c(1, 0.5, 0.2))
p_simple <- ck_simpleparams(p = 0.05, epsilon = 1)
ex_ptab1 <- ptable::pt_ex_nums(parity = TRUE, separation = TRUE)
p_nums1 <- P(type = "top_contr", top_k = 3, ptab = ex_ptab1, mult_params = p_flex, mu_c = 2,
             same_key = FALSE, use_zero_rkeys = TRUE)
ex_ptab2 <- ptable::pt_ex_nums(parity = FALSE, separation = FALSE)
p_nums2 <- P(type = "mean", ptab = ex_ptab2, mult_params = p_simple, mu_c = 1.5,
             same_key = FALSE, use_zero_rkeys = TRUE)
suppressMessages(vtab$perturb(v = c("total", "cnt_highincome")))
write_exact(vtab$freqtab(v = c("total", "cnt_highincome")), "vignette_freqtab.csv")
write_exact(vtab$mod_cnts(), "vignette_mod_cnts.csv")
add(run_case("m1", vtab, c("income", "savings"), p_nums1,
  supp = list(list(fun = "supp_freq", v = "income", args = list(v = "income", n = 15, weighted = FALSE))),
  notes = "vignette: p_nums1 set for income and savings, tab$supp_freq(v='income', n=15, weighted=FALSE), then perturb(c('cnt_highincome','savings','income'))"),
  "vignette p_nums1: ck_params_nums(type='top_contr', top_k=3, ptab=pt_ex_nums(parity=TRUE, separation=TRUE), mult_params=ck_flexparams(fp=1000, p=c(0.3,0.03), epsilon=c(1,0.5,0.2)), mu_c=2, same_key=FALSE, use_zero_rkeys=TRUE)")
vtab2 <- suppressMessages(ck_setup(x = vdat, rkey = "rkeys", dims = vdims, w = "sampling_weight",
                 countvars = "cnt_highincome", numvars = c("income", "savings")))
add(run_case("m2", vtab2, c("income", "savings"), p_nums2,
  supp = list(list(fun = "supp_freq", v = "income", args = list(v = "income", n = 15, weighted = FALSE))),
  notes = "vignette's p_nums2 (defined there but not applied): type mean, simple params p=0.05, even/odd p-tables, mu_c=1.5, same_key=FALSE, use_zero_rkeys=TRUE; same supp_freq as m1"),
  "vignette p_nums2: ck_params_nums(type='mean', ptab=pt_ex_nums(parity=FALSE, separation=FALSE), mult_params=ck_simpleparams(p=0.05, epsilon=1), mu_c=1.5, same_key=FALSE, use_zero_rkeys=TRUE)")
vig_info <- list(microdata = "vignette_microdata.csv",
  construction = "set.seed(20240102); ck_create_testdata()[, c(sex, age, savings, income, sampling_weight)]; cnt_highincome = income >= 9000; rkeys = ck_generate_rkeys(dat, nr_digits = 7) (hash seed)",
  dims = list(sex = "vignette_hier_sex.csv", age = "vignette_hier_age.csv"),
  contributions = "vignette_contributions.csv.gz",
  counts = list(freqtab = "vignette_freqtab.csv", mod_cnts = "vignette_mod_cnts.csv",
                ptables = list(total = "ptable_cnts.csv (pt_ex_cnts())",
                               cnt_highincome = "vignette_ptable_cnts_para2.csv (create_cnt_ptable(D=8, V=3, js=2, pstay=0.5, optim=1, mono=TRUE))")),
  w = "sampling_weight")
save_manifest()
message("all done")
