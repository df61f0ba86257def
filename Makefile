# The two commands of the README: `make run` and `make test`. Both set everything up first.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup run test lint typecheck pytest bench clean

setup:
	@bash scripts/setup.sh

run: setup
	$(BIN)/parley run

test: setup lint typecheck pytest

lint:
	$(BIN)/ruff check bot agent memory adapters tests bench
	$(BIN)/ruff format --check bot agent memory adapters tests bench

typecheck:
	$(BIN)/mypy

pytest:
	$(BIN)/pytest -q -p no:cacheprovider

bench:
	@PARLEY_EXTRAS=test,bench bash scripts/setup.sh
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .parley .mypy_cache .ruff_cache
