# The two commands of the README: `make run` and `make test`. Both set everything up first.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup run demo test test-fast lint typecheck pytest pytest-fast pytest-slow bench clean

setup:
	@bash scripts/setup.sh

# With no model configured, parley says what to set and ends with status 78: no make error.
run: setup
	@$(BIN)/parley run || [ $$? -eq 78 ]

# Parley in this terminal with a scripted stand-in model: no API key, no Ollama.
demo: setup
	@$(BIN)/parley console --demo

test: setup lint typecheck pytest

# The tests that need no Redis, network or child process: under a minute, for every edit.
test-fast: setup pytest-fast

lint:
	$(BIN)/ruff check bot agent memory adapters loops replies tests bench
	$(BIN)/ruff format --check bot agent memory adapters loops replies tests bench

typecheck:
	$(BIN)/mypy

# The fast tier first (guarded: a test in it that opens a socket or starts a process fails),
# then the rest on parallel workers, each with its own Redis (tests/parallel.py), naming the
# 20 slowest. A shared PARLEY_TEST_REDIS_URL server runs serially.
pytest: pytest-fast pytest-slow

TEST_WORKERS ?= $(if $(PARLEY_TEST_REDIS_URL),0,3)

pytest-fast:
	$(BIN)/pytest -q -p no:cacheprovider --tier fast

pytest-slow:
	$(BIN)/pytest -q -p no:cacheprovider --tier slow --durations=20 -n $(TEST_WORKERS) --dist loadgroup

bench:
	@PARLEY_EXTRAS=test,bench bash scripts/setup.sh
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .parley .mypy_cache .ruff_cache
