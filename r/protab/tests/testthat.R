library(testthat)
library(protab)

test_check("protab")
