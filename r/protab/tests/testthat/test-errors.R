test_that("a protab error is an R error with protab's message and class, without a traceback", {
  skip_without_protab()
  s <- pt_session(persons(), table = "persons")
  on.exit(pt_close(s))
  err <- tryCatch(pt_tabulate(s, "nope", "sex"), error = function(e) e)
  expect_s3_class(err, c("InputError", "protab_error", "error"))
  expect_match(conditionMessage(err), "^no table named 'nope' in ':memory:' \\(tables: 'persons'\\)")
  expect_false(grepl("Traceback|File \"|py_last_error|protab.errors", conditionMessage(err)))
  expect_null(conditionCall(err))
})

test_that("the message is the one Python gives for the same call", {
  skip_without_protab()
  reticulate::py_run_string(paste(
    "import protab as pt",
    "try:",
    "    pt.TableSpec({'a': None}, formula='a*b')",
    "except pt.SpecError as e:",
    "    r_test_message = str(e)", sep = "\n"))
  expected <- reticulate::py_eval("r_test_message")
  err <- tryCatch(pt_spec("a", formula = "a*b"), error = function(e) e)
  expect_s3_class(err, "SpecError")
  expect_identical(conditionMessage(err), expected)
})

test_that("protab's warnings are R warnings", {
  skip_without_protab()
  expect_warning(pt_ptable(D = 3, V = 1.5), "the variance target was not met for i = 1")
})

test_that("a session and a column of the wrong kind are refused naming them", {
  skip_without_protab()
  expect_error(protab:::.session(list()), "expected a pt_session")
  expect_error(pt_register(pt_session(), "t", data.frame(x = I(list(1, 2)))), "logical, integer, double or character")
})
