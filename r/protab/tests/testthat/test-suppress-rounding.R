test_that("cells under the minimum frequency are suppressed with their secondaries", {
  skip_without_protab()
  data <- data.frame(pid = 1:23, a = c(rep("x", 20), rep("y", 3)), b = c(rep(c("1", "2"), 10), "1", "1", "2"))
  s <- pt_session(data, table = "t")
  on.exit(pt_close(s))
  out <- pt_suppress(s, "t", c("a", "b"), min_frequency = 3)
  primary <- out$suppressed == "primary"
  expect_equal(out[primary, c("a", "b")], data.frame(a = c("y", "y"), b = c("1", "2"), row.names = which(primary)),
               ignore_attr = TRUE)
  expect_true(all(out$suppressed %in% c("primary", "secondary", "no")))
  expect_true(all(is.na(out$n[out$suppressed != "no"])))
  expect_true(sum(out$suppressed == "secondary") >= 2)  # y alone leaves both y cells derivable
  expect_equal(out$n[out$a == "Total" & out$b == "Total"], 23L)
})

test_that("an audit adds the attacker's intervals and a logical verdict", {
  skip_without_protab()
  data <- data.frame(pid = 1:23, a = c(rep("x", 20), rep("y", 3)), b = c(rep(c("1", "2"), 10), "1", "1", "2"))
  s <- pt_session(data, table = "t")
  on.exit(pt_close(s))
  out <- pt_suppress(s, "t", c("a", "b"), min_frequency = 3, audit = TRUE)
  expect_type(out$protected, "logical")
  expect_true(all(out$lo[out$suppressed != "no"] < out$up[out$suppressed != "no"]))
})

test_that("small count rounding leaves no published cell in 1..base-1", {
  skip_without_protab()
  inner <- expand.grid(a = c("p", "q", "r"), b = c("1", "2", "3"), stringsAsFactors = FALSE)
  inner$n <- c(1L, 5L, 2L, 7L, 1L, 0L, 4L, 2L, 9L)
  r <- pt_small_count(inner, c("a", "b"), base = 3L)
  expect_s3_class(r, "pt_small_count")
  expect_true(all(r$published$rounded == 0 | r$published$rounded >= 3 | r$published$rounded %% 3 == 0))
  expect_true(all(r$inner$rounded %% 3 == 0 | r$inner$n > 2))
  expect_equal(sum(r$inner$n), 31L)
  expect_lte(abs(r$published$rounded[r$published$a == "Total" & r$published$b == "Total"] - 31), 1.5)
  expect_type(r$changed, "logical")
  expect_equal(sum(r$changed), sum(r$inner$n != r$inner$rounded))
  expect_gt(r$hellinger_utility, 0.5)
})
