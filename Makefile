# Two entry points that work on a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs the project on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
PLAYGROUND_STAMP := $(VENV)/.installed-playground

.PHONY: demo playground test test-citus lint types bench bench-pg install system-deps browser-deps clean

# mysqlclient (the `mysql` extra, used by the test suite) compiles against the
# MariaDB client headers; on Debian they come from libmariadb-dev.
system-deps:
	@pkg-config --exists libmariadb 2>/dev/null || pkg-config --exists mysqlclient 2>/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libmariadb-dev pkg-config >/dev/null)

$(STAMP): pyproject.toml | system-deps
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The playground needs the app, the embedded server and Redis' client only: no dev tool
# chain, no system packages.
$(PLAYGROUND_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[playground]'
	touch $(PLAYGROUND_STAMP)

# The admin's browser tests drive Debian's chromium (Playwright is pointed at it: no
# browser download); only the tests need it.
browser-deps:
	@test -x /usr/bin/chromium || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null)

## Run the example project's main job on the embedded PostgreSQL.
demo: $(STAMP)
	$(BIN)/python manage.py migrate --database=owner --verbosity=0
	$(BIN)/python manage.py tulip_demo

## The agent playground at http://127.0.0.1:8000/ with a Celery worker (or, with no broker,
## background extraction), on the embedded PostgreSQL. Ctrl-C stops it. The broker is
## REDIS_URL (default redis://127.0.0.1:6379/0).
playground: $(PLAYGROUND_STAMP)
	$(BIN)/python manage.py migrate --database=owner --verbosity=0
	$(BIN)/python manage.py tulip_playground $(ADDRPORT)

## Lint (ruff), type-check (mypy), layer contracts (import-linter), then the whole test suite
## (starts an embedded PostgreSQL; uses the machine's MariaDB and Redis).
test: $(STAMP) browser-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## The suites that must hold on a Citus cluster (a coordinator and two workers of the embedded
## PostgreSQL, Citus built into it from CITUS_BUILD; or the existing cluster of TULIP_CITUS_URL:
## tests/settings.py). Without either it says so and succeeds: Citus is optional.
CITUS_BUILD ?= ../shared/citus/build.sh
CITUS_TESTS ?= tests/store/test_contract.py tests/store/pg \
  tests/tenancy tests/postgres \
  tests/backends/test_contract.py tests/checks/test_citus.py \
  tests/store/test_contract_ttl.py tests/langgraph/test_store_contract.py \
  tests/manager/extraction tests/manager/test_llm_celery.py tests/manager/test_sweep_tasks_on_workers.py \
  tests/langgraph/test_conformance.py tests/langgraph/test_saver.py tests/langgraph/test_migration.py \
  tests/delta/test_checkpointer.py tests/delta/test_concurrency.py tests/chains tests/erasure \
  tests/retention tests/management tests/admin tests/testing/test_citus_drills.py
test-citus: $(STAMP)
	@if [ -z "$$TULIP_CITUS_URL" ] && [ ! -f "$(CITUS_BUILD)" ]; then \
	  echo "make test-citus: no TULIP_CITUS_URL and no Citus build script at $(CITUS_BUILD), so no Citus cluster here: skipped"; \
	  exit 0; \
	fi; \
	TULIP_TEST_BACKEND=citus TULIP_CITUS_BUILD="$(abspath $(CITUS_BUILD))" \
	  $(BIN)/python -m pytest $(CITUS_TESTS) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(STAMP)
	$(BIN)/mypy

## Benchmarks of every layer (bench-pg loads a 1M-row table and takes a while).
bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python bench/conversation.py
	$(BIN)/python bench/store.py
	$(BIN)/python bench/checkpoint.py
	$(BIN)/python bench/manager.py

bench-pg: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python bench/pg_store.py

clean:
	rm -rf $(VENV) .pgdata .pytest_cache .mypy_cache .ruff_cache .screenshots
