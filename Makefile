# duetime: every target creates .venv and installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# the Django tests' venvs (make test-django): Django 6 on Python 3.12 or newer, and the
# django-tasks backport (Django 5.2) on $(PY), duetime's own Python (3.11 in CI)
DJANGO_VENV := .venv-django
DJANGO_STAMP := $(DJANGO_VENV)/.installed
BACKPORT_VENV := .venv-django-tasks
BACKPORT_STAMP := $(BACKPORT_VENV)/.installed

.PHONY: test-django demo browser broker netns faketime autofailover api-reference docs test test-long test-unit test-contract test-integration lint typecheck clean chaos chaos-deps chaos-seq chaos-outbox chaos-failover chaos-long bench

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[server,postgres,mysql,amqp,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# `make test`, the loop: lint, mypy, then every test not marked `long` (pytest.ini_options
# markers in pyproject.toml): tests/unit and tests/contract on TEST_PROCESSES processes
# (pytest-xdist; each process makes its own databases), then tests/integration on
# INTEGRATION_PROCESSES (its tests mostly wait on worker processes and databases, not on the
# CPU): the tests that share the RabbitMQ broker never overlap (a lock file held by each;
# tests/integration/conftest.py). `make test-long` runs the tests marked `long` (chaos, soak,
# fuzz, long multi-process runs); CI runs it after `make test` (.ci/run).
# PYTEST_ADDOPTS applies to every run (select with -k there: each run sets its own -m); a run
# whose tests it deselects all (exit 5) is no failure (without PYTEST_ADDOPTS, finding no test
# at all is one).
TEST_PROCESSES ?= 2
INTEGRATION_PROCESSES ?= 3
NONE_SELECTED_OK = || { rc=$$?; [ $$rc -eq 5 ] && [ -n "$$PYTEST_ADDOPTS" ]; }
test: $(STAMP) $(DJANGO_STAMP) $(BACKPORT_STAMP) browser broker netns faketime lint typecheck
	$(BIN)/pytest tests/unit tests/contract -n $(TEST_PROCESSES) -m "not long" $(NONE_SELECTED_OK)
	$(BIN)/pytest tests/integration -n $(INTEGRATION_PROCESSES) --dist loadgroup -m "not long" \
		$(NONE_SELECTED_OK)
	$(MAKE) --no-print-directory test-django

# the Django tasks backend (docs/django.md) with a real Django project (tests/django_backend), in
# venvs of their own: on Django 6, which needs Python 3.12 or newer, found by .ci/find-python312
# (PATH, pyenv's shims and versions, or PYTHON_DJANGO; none found fails the target, saying what
# to install), then on $(PY), where the django extra is the django-tasks backport on 3.11
$(DJANGO_STAMP): pyproject.toml
	py=$$(.ci/find-python312) && $$py -m venv $(DJANGO_VENV)
	$(DJANGO_VENV)/bin/pip install --quiet --upgrade pip
	$(DJANGO_VENV)/bin/pip install --quiet -e '.[django,postgres]' 'pytest>=8' 'pytest-timeout>=2.3'
	touch $(DJANGO_STAMP)

$(BACKPORT_STAMP): pyproject.toml
	$(PY) -m venv $(BACKPORT_VENV)
	$(BACKPORT_VENV)/bin/pip install --quiet --upgrade pip
	$(BACKPORT_VENV)/bin/pip install --quiet -e '.[django,postgres]' 'pytest>=8' 'pytest-timeout>=2.3'
	touch $(BACKPORT_STAMP)

DJANGO_PYTEST := pytest tests/django_backend --confcutdir=tests/django_backend -p no:cacheprovider
test-django: $(DJANGO_STAMP) $(BACKPORT_STAMP)
	$(DJANGO_VENV)/bin/$(DJANGO_PYTEST) $(NONE_SELECTED_OK)
	$(BACKPORT_VENV)/bin/$(DJANGO_PYTEST) $(NONE_SELECTED_OK)

test-long: $(STAMP) browser broker netns faketime autofailover
	$(BIN)/pytest tests -n $(TEST_PROCESSES) --dist loadgroup -m long $(NONE_SELECTED_OK)

# the dashboard's browser test drives Debian's Chromium (Playwright cannot download one here)
browser:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium for the dashboard browser test"; \
		apt-get install -y chromium || { apt-get update && apt-get install -y chromium; }; \
	else echo "no /usr/bin/chromium and no apt-get: install Chromium at /usr/bin/chromium" >&2; exit 1; fi

# the outbox tests run against RabbitMQ: DUETIME_TEST_AMQP_URL, else 127.0.0.1:5672, else the
# installed server started by the tests (tests/amqpbroker.py); Debian's is installed if missing
broker:
	@if [ -n "$$DUETIME_TEST_AMQP_URL" ] || command -v rabbitmq-server >/dev/null 2>&1 \
		|| [ -x /usr/sbin/rabbitmq-server ]; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "installing rabbitmq-server for the outbox tests"; \
		apt-get install -y rabbitmq-server || { apt-get update && apt-get install -y rabbitmq-server; }; \
	else echo "no rabbitmq-server and no apt-get: install RabbitMQ or set DUETIME_TEST_AMQP_URL" >&2; exit 1; fi

# the partition tests (tests/integration/test_partition.py) cut a worker off in a network
# namespace of their own: `ip` (iproute2) and `iptables`, installed with apt-get if missing
netns:
	@if command -v ip >/dev/null 2>&1 && command -v iptables >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "installing iproute2 and iptables for the partition tests"; \
		apt-get install -y iproute2 iptables || { apt-get update && apt-get install -y iproute2 iptables; }; \
	else echo "no ip or iptables and no apt-get: install iproute2 and iptables" >&2; exit 1; fi

# the clock skew tests (tests/integration/test_clock_skew.py) and make chaos-failover's skewed
# workers run under libfaketime (src/duetime/chaos/skew.py); Debian's is installed if missing
FAKETIME_LIB := /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
faketime:
	@if [ -e $(FAKETIME_LIB) ]; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "installing faketime (libfaketime) for the clock skew tests"; \
		apt-get install -y faketime || { apt-get update && apt-get install -y faketime; }; \
	else echo "no $(FAKETIME_LIB) and no apt-get: install libfaketime" >&2; exit 1; fi

# the automatic-failover drill (tests/integration/test_failover.py, long) runs pg_auto_failover;
# Debian's is installed if missing (its server-side package must match the PostgreSQL major)
autofailover:
	@if command -v pg_autoctl >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		major=$$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1); \
		echo "installing postgresql-$$major-auto-failover for the automatic-failover drill"; \
		apt-get install -y postgresql-$$major-auto-failover || { apt-get update && \
			apt-get install -y postgresql-$$major-auto-failover; }; \
	else echo "no pg_autoctl and no apt-get: install pg_auto_failover" >&2; exit 1; fi

test-unit: $(STAMP)
	$(BIN)/pytest tests/unit

test-contract: $(STAMP)
	$(BIN)/pytest tests/contract

test-integration: $(STAMP) browser broker netns faketime
	$(BIN)/pytest tests/integration

# fault-injection run on a private PostgreSQL, judged by the history checker (docs/chaos.md)
CHAOS_JOBS ?= 2000
CHAOS_DURATION ?= 45
CHAOS_WORKERS ?= 3
CHAOS_REPORT ?=
chaos: $(STAMP)
	$(BIN)/python -m duetime.chaos.run --jobs $(CHAOS_JOBS) --duration $(CHAOS_DURATION) \
		--workers $(CHAOS_WORKERS) $(if $(CHAOS_REPORT),--report $(CHAOS_REPORT))

# the outbox variant (docs/outbox.md): jobs through the local RabbitMQ, which it stops and restarts
# the dependencies variant: a share of the jobs come as groups with a callback and chains,
# another as jobs of sequences (docs/chaos.md, "Dependencies", "Sequences"); its short run is a
# test-long test. chaos-seq: the sequences alone.
chaos-deps: $(STAMP)
	$(BIN)/python -m duetime.chaos.run --dependencies --sequences --jobs $(CHAOS_JOBS) \
		--duration $(CHAOS_DURATION) --workers $(CHAOS_WORKERS) \
		$(if $(CHAOS_REPORT),--report $(CHAOS_REPORT))

chaos-seq: $(STAMP)
	$(BIN)/python -m duetime.chaos.run --sequences --jobs $(CHAOS_JOBS) \
		--duration $(CHAOS_DURATION) --workers $(CHAOS_WORKERS) \
		$(if $(CHAOS_REPORT),--report $(CHAOS_REPORT))

chaos-outbox: $(STAMP)
	$(BIN)/python -m duetime.chaos.run --outbox --jobs $(CHAOS_JOBS) --duration $(CHAOS_DURATION) \
		--workers $(CHAOS_WORKERS) $(if $(CHAOS_REPORT),--report $(CHAOS_REPORT))

# the failover variant (docs/production.md): a primary and a streaming standby on a multi-host
# URL; the primary is killed and the standby promoted (twice), instead of restarts; one more
# worker per CHAOS_SKEW value runs with its clock that many seconds off (libfaketime), and one
# in its own network namespace is cut off once past its leases (needs root, ip and iptables:
# the run fails saying what is missing; CHAOS_PARTITION=0 runs without the partition).
# CHAOS_REPLICATION=async shows what asynchronous replication may lose.
CHAOS_REPLICATION ?= sync
CHAOS_SKEW ?= 30 -30
CHAOS_PARTITION ?= 1
chaos-failover: $(STAMP) faketime
	$(BIN)/python -m duetime.chaos.run --failover $(CHAOS_REPLICATION) --jobs $(CHAOS_JOBS) \
		--duration $(CHAOS_DURATION) --workers $(CHAOS_WORKERS) \
		$(foreach s,$(CHAOS_SKEW),--skew=$(s)) $(if $(filter 1,$(CHAOS_PARTITION)),--partition) \
		$(if $(CHAOS_REPORT),--report $(CHAOS_REPORT))

chaos-long: $(STAMP)
	$(BIN)/python -m duetime.chaos.run --jobs 100000 --duration 600 --workers 4 \
		--concurrency 16 --drain-timeout 600 --report $(or $(CHAOS_REPORT),chaos-long-report.json)

# the REST API reference, generated from the server's OpenAPI document (not kept in git)
api-reference: $(STAMP)
	$(BIN)/python -m duetime.server.reference > docs/api-reference.md

# the documentation site (mkdocs.yml), strict: a broken link fails it. Built into site/, not
# kept in git; it includes the REST API reference generated above.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[server,postgres,mysql,amqp,dev,docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP) api-reference
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench
	$(BIN)/ruff format --check src tests examples bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# duetime against pgqueuer and procrastinate on this machine (docs/performance.md). The peers
# live in their own virtualenv, never in duetime's. BENCH_SIZE=tiny is the quick check CI runs.
BENCH_VENV := .bench-venv
BENCH_STAMP := $(BENCH_VENV)/.installed
BENCH_SIZE ?= 20000
BENCH_RUNS ?= 3
BENCH_STORES ?= postgres,sqlite,mysql
BENCH_PEERS ?= pgqueuer,procrastinate
BENCH_WORKLOADS ?= all
# the drain comparison: concurrency C values (auto: 10,50,100; 10,100 at BENCH_SIZE=tiny) and
# worker processes of each configuration (docs/performance.md)
BENCH_CONCURRENCY ?= auto
BENCH_PROCS ?= 1,2
BENCH_ARGS ?=

$(BENCH_STAMP): bench/requirements.txt
	$(PY) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/pip install --quiet --upgrade -r bench/requirements.txt
	touch $(BENCH_STAMP)

bench: $(STAMP) $(BENCH_STAMP)
	$(BIN)/python -m bench.run --size $(BENCH_SIZE) --runs $(BENCH_RUNS) \
		--stores $(BENCH_STORES) --peers $(BENCH_PEERS) --workloads $(BENCH_WORKLOADS) \
		--concurrency $(BENCH_CONCURRENCY) --procs $(BENCH_PROCS) $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(DJANGO_VENV) $(BACKPORT_VENV) $(BENCH_VENV) build dist site .pytest_cache .mypy_cache .ruff_cache .hypothesis \
		.import_linter_cache
