# Two commands set everything up on a fresh machine (each creates .venv when needed):
#   make demo   - installs protab (core) and runs the demo on its embedded default database
#   make test   - installs protab with the dev extra (and a Java runtime for the Spark tests
#                 where missing and possible) and runs the test suite
#   make docs   - builds the documentation site into site/ (open site/index.html)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_ARGS ?=
# test processes (pytest-xdist; each Spark test module's process runs one JVM of ~1.5 GB)
TEST_WORKERS ?= 2

.PHONY: demo test check lint docs java chromium node pgclients postgres r clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@ $(VENV)/.core

demo: $(VENV)/.core
	$(BIN)/protab demo $(DEMO_ARGS)

# Spark (dev extra) needs Java 17+: installed from Debian's packages when missing and we are root
java:
	@command -v java >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing a Java runtime for the Spark tests (openjdk-17-jre-headless)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	  else echo "note: no Java runtime; the Spark tests will be skipped (install openjdk-17-jre-headless)"; fi; }

# The table-builder browser test (tests/serve/test_serve_browser.py) drives Debian's chromium through
# chromium-driver: installed when missing and we are root
chromium:
	@{ command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium and chromium-driver for the table-builder browser test"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "note: no chromium/chromedriver; the browser test will be skipped (install chromium chromium-driver)"; fi; }

# The table builder's display rules (tests/serve/test_serve_builder_format.py) run the page's
# script under Debian's nodejs: installed when missing and we are root
node:
	@{ command -v node >/dev/null 2>&1 || command -v nodejs >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing nodejs for the table builder's script tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs >/dev/null; \
	  else echo "note: no node; the table builder's script tests will be skipped (install nodejs)"; fi; }

# The PostgreSQL front's tests (tests/serve/test_serve_pgwire.py) also run psql and the JDBC driver
# (DBeaver's): Debian's postgresql-client and libpostgresql-jdbc-java, installed when missing and root
pgclients:
	@{ command -v psql >/dev/null 2>&1 && [ -e /usr/share/java/postgresql.jar ]; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing postgresql-client and libpostgresql-jdbc-java for the PostgreSQL front's tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-client libpostgresql-jdbc-java >/dev/null; \
	  else echo "note: no psql/JDBC driver; those PostgreSQL-front tests will be skipped (install postgresql-client libpostgresql-jdbc-java)"; fi; }

# The PostgreSQL engine's tests (tests/postgres) start a server of their own with initdb and pg_ctl:
# Debian's postgresql package (the server, and the 'postgres' user it runs as under root), installed
# when initdb is missing and we are root
postgres:
	@{ ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing postgresql (initdb, pg_ctl) for the PostgreSQL engine's tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	  else echo "note: no PostgreSQL server; the PostgreSQL engine's tests will be skipped (install postgresql)"; fi; }

# The R package's tests (tests/r: R CMD build and check of r/protab, through reticulate) need
# Debian's R with reticulate and testthat: installed when Rscript (or one of them) is missing and root
r:
	@{ command -v Rscript >/dev/null 2>&1 && Rscript -e 'quit(status = !all(sapply(c("reticulate", "testthat"), requireNamespace, quietly = TRUE)))' >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing R with reticulate and testthat for the R package's tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq r-base-core r-cran-reticulate r-cran-testthat >/dev/null; \
	  else echo "note: no Rscript with reticulate and testthat; the R package's tests will be skipped (install r-base-core r-cran-reticulate r-cran-testthat)"; fi; }

# As root (CI) the tools above are installed, so a test skipped for want of one fails the run
# (PROTAB_REQUIRE_TOOLS, tests/conftest.py); skip reasons are printed either way (-rs)
test: $(VENV)/.dev java chromium node pgclients postgres r
	PROTAB_REQUIRE_TOOLS=$$( [ "$$(id -u)" = 0 ] && echo 1 || echo 0 ) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=40

lint: $(VENV)/.dev
	$(BIN)/python -m ruff check src tests benchmarks examples
	$(BIN)/python -m mypy
	$(BIN)/lint-imports

# The contributors' inner loop: lint (tests/house runs the lint gate) and the suite without the
# Spark matrix, the browser and the tests marked slow (markers in tests/conftest.py); `make test` runs everything
check: $(VENV)/.dev node pgclients
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not spark and not browser and not slow"

# The documentation site (mkdocs.yml): docs/, the README and the API reference from the docstrings,
# built offline into site/ (git-ignored); --strict fails on a broken link or a missing reference
docs: $(VENV)/.dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

clean:
	rm -rf $(VENV) protab.duckdb protab_output site
