codes_of <- function(h) {
  f <- as.data.frame(h)
  stats::setNames(f$parent, f$code)
}

test_that("a parent-child data.frame is a hierarchy", {
  skip_without_protab()
  h <- pt_hierarchy(data.frame(up = c("Total", "Total", "A", "A"), down = c("A", "B", "A1", "A2")),
                    parent = "up", child = "down")
  expect_equal(codes_of(h), c(Total = NA, A = "Total", B = "Total", A1 = "A", A2 = "A"))
  expect_identical(as.data.frame(h)$level, c(0L, 1L, 1L, 2L, 2L))
})

test_that("an SSBtools frame with a minus sign publishes a difference", {
  skip_without_protab()
  h <- pt_hierarchy(data.frame(mapsFrom = c("a", "b", "c", "a", "b"), mapsTo = c("ab", "ab", "all", "all", "all"),
                               sign = c(1, 1, 1, 1, 1)))
  expect_true("ab" %in% as.data.frame(h)$code)
  s <- pt_session(data.frame(x = c("a", "a", "b", "c", "c", "c")), table = "t")
  on.exit(pt_close(s))
  h2 <- pt_hierarchy(data.frame(mapsFrom = c("a", "b", "c", "b"), mapsTo = c("all", "all", "all", "notb"),
                                sign = c(1, 1, 1, 1)))
  cells <- pt_tabulate(s, "t", list(x = h2))
  expect_equal(cells$n[match(c("all", "a", "b", "c"), cells$x)], c(6L, 2L, 1L, 3L))
  signed <- pt_hierarchy(data.frame(mapsFrom = c("a", "b", "c", "all", "b"), mapsTo = c("all", "all", "all", "nob", "nob"),
                                    sign = c(1, 1, 1, 1, -1)))
  cells <- pt_tabulate(s, "t", list(x = signed))
  expect_equal(cells$n[cells$x == "nob"], 5L)
})

test_that("positional codes, flat codes and sdcHierarchies' levels make the same trees as R", {
  skip_without_protab()
  expect_equal(codes_of(pt_hierarchy_code_lengths(c("R1001", "R1002", "R2001"), c(2, 3))),
               c(Total = NA, R1 = "Total", R2 = "Total", R1001 = "R1", R1002 = "R1", R2001 = "R2"))
  expect_equal(codes_of(pt_hierarchy_flat(c("F", "M"), root = "all")), c(all = NA, F = "all", M = "all"))
  # sdcHierarchies::hier_convert(h, as = "df")
  sdc <- data.frame(level = c("@", "@@", "@@@", "@@@", "@@"), name = c("Total", "A", "A1", "A2", "B"))
  expect_equal(codes_of(pt_hierarchy_levels(sdc)), c(Total = NA, A = "Total", B = "Total", A1 = "A", A2 = "A"))
  expect_equal(codes_of(pt_hierarchy_levels(c("A", "@A1", "@A2", "B"))),
               c(Total = NA, A = "Total", B = "Total", A1 = "A", A2 = "A"))
})

test_that("a hierarchy from a session's columns follows the records", {
  skip_without_protab()
  s <- pt_session(persons(), table = "persons")
  on.exit(pt_close(s))
  h <- pt_hierarchy_from_columns(s, "persons", c("region", "municipality"))
  expect_equal(codes_of(h)[c("R1001", "R2002")], c(R1001 = "R1", R2002 = "R2"))
})

test_that("a code with two parents in a parent-child frame is refused naming it", {
  skip_without_protab()
  expect_error(pt_hierarchy(data.frame(parent = c("Total", "Total", "A", "B"), child = c("A", "B", "x", "x"))),
               "'x'", class = "HierarchyError")
})
