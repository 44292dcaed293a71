same_ptable <- function(a, b) reticulate::py_to_r(a$py$`__eq__`(b$py))

test_that("a p-table reads as a data.frame in R ptable's layout", {
  skip_without_protab()
  f <- as.data.frame(test_ptable())
  expect_identical(names(f), c("i", "j", "p", "v", "p_int_lb", "p_int_ub", "type"))
  expect_type(f$i, "integer")
  expect_type(f$p, "double")
  expect_equal(unique(f$i), 0:3)
  expect_equal(as.vector(tapply(f$p, f$i, sum)), rep(1, 4), tolerance = 1e-8)
  expect_equal(f$v, f$j - f$i)
  expect_true(all(f$type == "all"))
  # unbiased, variance 1 from row 1 on (ptable's create_cnt_ptable(D = 3, V = 1))
  for (i in 1:3) {
    row <- f[f$i == i, ]
    expect_equal(sum(row$p * row$v), 0, tolerance = 1e-7)
    expect_equal(sum(row$p * row$v^2), 1, tolerance = 5e-4)
  }
})

test_that("a data.frame as R ptable writes it is the same p-table", {
  skip_without_protab()
  ptable_df <- data.frame(
    i = c(0L, 1L, 1L, 1L, 2L, 2L, 2L, 2L),
    j = c(0L, 0L, 1L, 2L, 0L, 1L, 2L, 3L),
    p = c(1, 0.25, 0.5, 0.25, 0.1, 0.2, 0.5, 0.2),
    v = c(0L, -1L, 0L, 1L, -2L, -1L, 0L, 1L),
    p_int_lb = c(0, 0, 0.25, 0.75, 0, 0.1, 0.3, 0.8),
    p_int_ub = c(1, 0.25, 0.75, 1, 0.1, 0.3, 0.8, 1),
    type = "all")
  p <- pt_ptable_from_frame(ptable_df)
  expect_equal(as.data.frame(p), ptable_df)
  expect_true(same_ptable(p, pt_ptable_from_frame(ptable_df[, c("i", "v", "p")])))
})

test_that("a p-table file read in R or by protab is the same p-table", {
  skip_without_protab()
  p <- test_ptable()
  path <- tempfile(fileext = ".csv")
  p$py$write(path, "ptable")
  expect_true(same_ptable(pt_ptable_read(path), p))
  expect_true(same_ptable(pt_ptable_from_frame(utils::read.csv(path)), p))
  expect_false(same_ptable(pt_ptable(D = 2, V = 0.5), p))
})

test_that("a bad p-table frame is refused in protab's words", {
  skip_without_protab()
  expect_error(pt_ptable_from_frame(data.frame(i = 0L, v = 0L)), "needs interval bounds", class = "PTableError")
})

test_that("a magnitude p-table has ptable's layout and classes", {
  skip_without_protab()
  mp <- test_magnitude_ptable()
  f <- as.data.frame(mp)
  expect_identical(names(f), c("i", "j", "p", "v", "p_int_lb", "p_int_ub", "type"))
  expect_equal(sort(unique(f$i)), c(0, 1, 2))
  expect_equal(f$v[f$i == 2], seq(-2, 2, by = 0.5))
  expect_true(all(f$type == "all"))
  back <- pt_magnitude_ptable_from_frame(f)
  expect_s3_class(back, "pt_magnitude_ptable")
  expect_equal(as.data.frame(back), f)
})
