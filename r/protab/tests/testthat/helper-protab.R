# The Python that has protab: RETICULATE_PYTHON (tests/r/test_r_package.py sets it to the
# interpreter running the Python tests). Without it every test is skipped, saying why.
skip_without_protab <- function() {
  if (!reticulate::py_module_available("protab")) {
    skip("the Python package protab is not importable: set RETICULATE_PYTHON to a Python that has it")
  }
}

# A small population: 240 persons in 4 municipalities of 2 regions, uneven cells, some NA ages.
persons <- function() {
  pid <- 1:240
  data.frame(
    pid = pid,
    region = ifelse(pid %% 3 == 0, "R2", "R1"),
    municipality = paste0(ifelse(pid %% 3 == 0, "R2", "R1"), ifelse(pid %% 5 < 2, "001", "002")),
    sex = ifelse(pid %% 7 < 3, "F", "M"),
    age = c("young", "middle", "old")[(pid * 7) %% 11 %% 3 + 1],
    income = (pid * 37) %% 1000 + 0.25,
    weight = 1 + (pid %% 4) / 4,
    stringsAsFactors = FALSE
  )
}

keyed_session <- function(data = persons()) {
  s <- pt_session(data, table = "persons")
  pt_add_record_keys(s, "persons", "pid", seed = "r-package-test-seed")
  s
}

# protab's count p-table of the tests (D = 3, V = 1: every row meets the variance, no warning).
test_ptable <- function() pt_ptable(D = 3, V = 1)

# A small magnitude p-table (D = 2, V = 1, step 2, classes 1 and 2); its class 1 cannot meet
# the variance, which protab warns about (as R ptable flags it).
test_magnitude_ptable <- function() suppressWarnings(pt_magnitude_ptable(D = 2, V = 1, step = 2, icat = c(1, 2)))
