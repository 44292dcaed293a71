test_that("a data.frame becomes a table of an in-memory session", {
  skip_without_protab()
  s <- pt_session(persons(), table = "persons")
  on.exit(pt_close(s))
  expect_equal(pt_tables(s), "persons")
  cells <- pt_tabulate(s, "persons", "sex")
  expect_equal(cells$n[cells$sex == "Total"], 240L)
  expect_equal(cells$n[cells$sex == "F"], sum(persons()$pid %% 7 < 3))
})

test_that("a DuckDB file keeps its tables for the next session", {
  skip_without_protab()
  db <- tempfile(fileext = ".duckdb")
  s <- pt_session(db)
  pt_register(s, "people", persons())
  pt_close(s)
  s <- pt_session(db, read_only = TRUE)
  on.exit(pt_close(s))
  expect_equal(pt_tables(s), "people")
  expect_equal(pt_tabulate(s, "people", "region")$n, c(240L, 160L, 80L))
})

test_that("columns keep R's types both ways, NA included", {
  skip_without_protab()
  df <- data.frame(i = c(1L, NA, 3L), d = c(1.5, NA, NaN), b = c(TRUE, NA, FALSE),
                   s = c("a", NA, ""), f = factor(c("x", "y", NA)), stringsAsFactors = FALSE)
  back <- protab:::.from_polars(protab:::.to_polars(df))
  expect_identical(back$i, c(1L, NA, 3L))
  expect_identical(back$d[1:2], c(1.5, NA))
  expect_true(is.nan(back$d[3]))
  expect_identical(back$b, c(TRUE, NA, FALSE))
  expect_identical(back$s, c("a", NA, ""))
  expect_identical(back$f, c("x", "y", NA))
  empty <- protab:::.from_polars(protab:::.to_polars(df[0, ]))
  expect_equal(nrow(empty), 0)
  expect_identical(names(empty), names(df))
})

test_that("integers beyond R's integer range come back as doubles", {
  skip_without_protab()
  frame <- reticulate::py_eval("__import__('polars').DataFrame({'k': [2**40, 1, None]})", convert = FALSE)
  back <- protab:::.from_polars(frame)
  expect_identical(back$k, c(2^40, 1, NA))
})

test_that("record keys are refused without a seed, in protab's words", {
  skip_without_protab()
  s <- pt_session(persons(), table = "persons")
  on.exit(pt_close(s))
  expect_error(pt_add_record_keys(s, "persons", "pid", seed = "   "), "seed", class = "protab_error")
  pt_add_record_keys(s, "persons", "pid", seed = "r-package-test-seed")
  expect_equal(nrow(pt_cell_key(s, "persons", "sex", test_ptable())), 3)
})

test_that("unsigned and small integer columns come back as integers", {
  skip_without_protab()
  frame <- reticulate::py_eval(paste0("__import__('polars').DataFrame({'u': [0, 3, None], 'b': [1, 2, 3]}, ",
                                      "schema={'u': __import__('polars').UInt8, 'b': __import__('polars').Int16})"),
                               convert = FALSE)
  back <- protab:::.from_polars(frame)
  expect_identical(back$u, c(0L, 3L, NA))
  expect_identical(back$b, 1:3)
})
