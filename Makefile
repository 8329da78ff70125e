# Everything runs inside .venv, made from the machine's python3 on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup test unit lint quickstart bench spec docs docs-serve clean

$(STAMP): pyproject.toml setup.py src/mongio/bson/_speedups.c src/mongio/connection/_speedups.c
	$(PYTHON) -m venv $(VENV)
	@# setuptools 77 or later reads the SPDX license string (for setup.py build_ext --inplace in the venv).
	$(BIN)/pip install --quiet --upgrade pip 'setuptools>=77'
	$(BIN)/pip install --quiet -e '.[test]'
	@# python-gssapi builds against the system's Kerberos: only where krb5-config exists, never failing setup.
	if command -v krb5-config >/dev/null 2>&1; then \
	    $(BIN)/pip install --quiet -e '.[gssapi]' \
	        || echo "python-gssapi could not be built: the GSSAPI tests will be skipped" >&2; \
	fi
	touch $(STAMP)

setup: $(STAMP)

# The spec suites that run on trio as well in `make test` (the pytest run is the asyncio run of every suite);
# `make test TRIO_SUITES=` leaves the trio run out.
TRIO_SUITES ?= crud sessions transactions retryable-reads retryable-writes change-streams \
	connection-monitoring-and-pooling server-discovery-and-monitoring client-side-operations-timeout

# The integration tests run once more on trio (pytest --backend trio, anyio's plugin; the tests of asyncio's own
# machinery are skipped there with their reasons, tests/support/backends.py); `make test TRIO_TESTS=` leaves
# them out.
TRIO_TESTS ?= tests/integration

## Lint, type-check, then every test (unit, spec suites, integration against an embedded SecantusDB), then
## the spec suites of TRIO_SUITES and the modules of TRIO_TESTS on trio.
test: $(STAMP)
	$(BIN)/ruff check src spec_runner compat_suites tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)
	$(if $(strip $(TRIO_SUITES)),$(BIN)/python -m spec_runner --backend trio --topology single $(TRIO_SUITES))
	$(if $(strip $(TRIO_TESTS)),$(BIN)/python -m pytest -q -p no:cacheprovider --backend trio $(TRIO_TESTS))

## The fast unit tests: no server, no spec suites, no test marked slow (the long property runs: make test).
unit: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow" tests/unit $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src spec_runner compat_suites tests benchmarks examples
	$(BIN)/mypy

## Run the quickstart; with MONGODB_URI unset it starts an embedded SecantusDB.
quickstart: $(STAMP)
	$(BIN)/python examples/quickstart.py

spec: $(STAMP)
	$(BIN)/python -m spec_runner $(SUITES)

bench: $(STAMP)
	$(BIN)/python benchmarks/bson_bench.py

## The documentation site into build/docs; any warning (a broken link, an unknown reference) fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --clean

## Serve the documentation on http://127.0.0.1:8000, rebuilt as files change.
docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

clean:
	rm -rf $(VENV) build src/*.egg-info src/mongio/bson/*.so
