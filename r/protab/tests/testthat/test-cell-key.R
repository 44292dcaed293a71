# The same table computed by protab in Python, from the same records written to CSV: the R
# package's frames (in and out) must not change a cell.
python_cell_key <- function(data, code) {
  input <- tempfile(fileext = ".csv")
  output <- tempfile(fileext = ".csv")
  utils::write.csv(data, input, row.names = FALSE)
  reticulate::py_run_string(paste(
    "import warnings, polars as pl, protab as pt",
    "warnings.simplefilter('ignore')",
    sprintf("records = pl.read_csv(%s, schema_overrides={'region': pl.String, 'municipality': pl.String})",
            encodeString(input, quote = "'")),
    "with pt.Session(':memory:') as s:",
    "    s.register('persons', records)",
    "    s.add_record_keys('persons', 'pid', seed='r-package-test-seed')",
    "    p = pt.PTable.maximum_entropy(D=3, V=1)",
    paste0("    ", code),
    sprintf("out.write_csv(%s)", encodeString(output, quote = "'")), sep = "\n"))
  header <- names(utils::read.csv(output, nrows = 1))
  codes <- intersect(header, c("region", "municipality", "sex", "age", "income_rule"))
  out <- utils::read.csv(output, colClasses = stats::setNames(rep("character", length(codes)), codes),
                         na.strings = "", stringsAsFactors = FALSE)
  flags <- vapply(out, function(x) is.character(x) && all(x %in% c("true", "false")), logical(1))
  out[flags] <- lapply(out[flags], function(x) x == "true")
  out
}

test_that("a count table equals protab's in Python cell for cell", {
  skip_without_protab()
  s <- keyed_session()
  on.exit(pt_close(s))
  h <- pt_hierarchy_from_columns(s, "persons", c("region", "municipality"))
  spec <- pt_spec(list(municipality = h, sex = NULL, age = NULL), formula = "municipality*sex + municipality*age")
  r <- pt_cell_key(s, "persons", spec, test_ptable(), original = TRUE)
  py <- python_cell_key(persons(), paste(
    "h = s.hierarchy_from_columns('persons', ['region', 'municipality'])",
    "spec = pt.TableSpec({'municipality': h, 'sex': None, 'age': None}, formula='municipality*sex + municipality*age')",
    "out = s.cell_key('persons', spec, p, original=True)", sep = "\n    "))
  expect_identical(names(r), names(py))
  expect_equal(nrow(r), 7 * 6)  # 7 municipality codes x (Total, F, M, young, middle, old)
  expect_identical(r, py)
  expect_type(r$n_pert, "integer")
  expect_true(any(r$n_pert != r$n))
})

test_that("a weighted magnitude table with rules equals protab's in Python", {
  skip_without_protab()
  s <- keyed_session()
  on.exit(pt_close(s))
  mp <- test_magnitude_ptable()
  ckm <- pt_magnitude_ckm(mp, top_k = 2, fp = 100, p = c(0.25, 0.05), epsilon = c(1, 0.5))
  rules <- pt_rules(min_frequency = 40, dominance = c(1, 60))
  spec <- pt_spec(c("region", "sex"), sums = "income", weight = "weight")
  r <- pt_cell_key(s, "persons", spec, test_ptable(), magnitude = ckm, rules = rules, original = TRUE)
  py <- python_cell_key(persons(), paste(
    "mp = pt.MagnitudePTable.maximum_entropy(2, 1, step=2, icat=[1, 2])  # warns, as in R",
    "ckm = pt.MagnitudeCKM(mp, top_k=2, fp=100, p=(0.25, 0.05), epsilon=[1, 0.5])",
    "rules = pt.SensitivityRules(min_frequency=40, dominance=[(1, 60)])",
    "spec = pt.TableSpec({'region': None, 'sex': None}, sums=['income'], weight='weight')",
    "out = s.cell_key('persons', spec, p, magnitude=ckm, rules=rules, original=True)", sep = "\n    "))
  expect_identical(names(r), names(py))
  expect_equal(r, py, tolerance = 1e-12)
  expect_type(r$income_sensitive, "logical")
  expect_identical(r$income_sensitive, r$n < 40)
})

test_that("a threshold publishes small perturbed counts as NA", {
  skip_without_protab()
  s <- keyed_session()
  on.exit(pt_close(s))
  out <- pt_cell_key(s, "persons", c("municipality", "sex", "age"), test_ptable(), threshold = 10)
  expect_true(any(is.na(out$n_pert)))
  expect_true(all(out$n_pert[!is.na(out$n_pert)] >= 10))
})
