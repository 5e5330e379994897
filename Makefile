# duetime: every target creates .venv and installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-unit test-contract test-integration lint typecheck clean chaos chaos-long

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[postgres,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

test: $(STAMP) lint typecheck
	$(BIN)/pytest tests

test-unit: $(STAMP)
	$(BIN)/pytest tests/unit

test-contract: $(STAMP)
	$(BIN)/pytest tests/contract

test-integration: $(STAMP)
	$(BIN)/pytest tests/integration

# fault-injection run on a private PostgreSQL, judged by the history checker (docs/chaos.md)
CHAOS_JOBS ?= 2000
CHAOS_DURATION ?= 45
CHAOS_WORKERS ?= 3
CHAOS_REPORT ?=
chaos: $(STAMP)
	$(BIN)/python -m duetime.chaos.run --jobs $(CHAOS_JOBS) --duration $(CHAOS_DURATION) \
		--workers $(CHAOS_WORKERS) $(if $(CHAOS_REPORT),--report $(CHAOS_REPORT))

chaos-long: $(STAMP)
	$(BIN)/python -m duetime.chaos.run --jobs 100000 --duration 600 --workers 4 \
		--concurrency 16 --drain-timeout 600 --report $(or $(CHAOS_REPORT),chaos-long-report.json)

lint: $(STAMP)
	$(BIN)/ruff check src tests examples
	$(BIN)/ruff format --check src tests examples

typecheck: $(STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
