# The two commands: `make run` serves the app, `make test` runs the whole suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run cluster test chaos chromium bench lint clean translations messages

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

# The catalogs (translations/*/LC_MESSAGES/messages.po) are compiled here, never committed:
# `make run` and `make test` compile whichever .po changed since the last time.
MO := $(patsubst %.po,%.mo,$(wildcard translations/*/LC_MESSAGES/messages.po))
translations/%.mo: translations/%.po $(VENV)/.installed
	$(BIN)/pybabel -q compile -i $< -o $@
translations: $(MO)

# After changing user-facing strings: refresh the catalogs, then translate what is new.
messages: $(VENV)/.installed
	$(BIN)/pybabel -q extract -F babel.cfg -k _l -k N_ --sort-output --no-location \
		--omit-header -o translations/messages.pot .
	$(BIN)/pybabel -q update -w 100 -i translations/messages.pot -d translations --no-fuzzy-matching

# gunicorn.conf.py starts the embedded PostgreSQL when DATABASE_URL is unset
# and applies the migrations before the worker starts.
run: $(VENV)/.installed translations
	$(BIN)/gunicorn -c gunicorn.conf.py wsgi:app

# Two web instances (ports 8000 and 8001) and two queue workers from the Procfile, on the
# same database; each process migrates under one lock, Ctrl-C stops (and settles) them all.
cluster: $(VENV)/.installed translations
	JOB_EXECUTOR=procrastinate $(BIN)/honcho -f Procfile start

# TEST_WORKERS pytest-xdist processes share the tests (each its own database; 0: one process);
# a worker out of tests takes half of another's (worksteal): the slow ones end together.
TEST_WORKERS ?= 2
test: $(VENV)/.installed translations chromium
	LAYER_PROVIDER=demo $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# Not part of `make test`: two web instances and two queue workers killed CHAOS_KILLS times
# (SIGKILLs and failpoints), their PostgreSQL cut or stalled CHAOS_DB_FAULTS times and
# restarted CHAOS_RESTARTS times, CHAOS_DELIVERIES Stripe webhooks delivered (of which
# CHAOS_REFUND_EVENTS refunds, failed refunds and disputes), under paid work; then every
# job, sale and balance checked against the ledger. On 127.0.0.1 only,
# stopped when every target is met or after CHAOS_MINUTES (whole minutes). Writes
# bench/CHAOS.md; CHAOS_ARGS="--seed N" replays a schedule's choices.
CHAOS_KILLS ?= 1000
CHAOS_DB_FAULTS ?= 100
CHAOS_RESTARTS ?= 5
CHAOS_DELIVERIES ?= 2000
CHAOS_REFUND_EVENTS ?= 300
CHAOS_MINUTES ?= 40
chaos: $(VENV)/.installed translations
	timeout $$(( ($(CHAOS_MINUTES) + 10) * 60 )) $(BIN)/python -m bench.chaos \
		--kills $(CHAOS_KILLS) --db-faults $(CHAOS_DB_FAULTS) --restarts $(CHAOS_RESTARTS) \
		--deliveries $(CHAOS_DELIVERIES) --refund-events $(CHAOS_REFUND_EVENTS) \
		--minutes $(CHAOS_MINUTES) $(CHAOS_ARGS)

# Browser tests drive Debian's chromium (never Playwright's own download), with a Japanese
# font so reports render in screenshots. As root they are installed when missing;
# otherwise the browser tests skip and say how to install them.
JA_FONT := /usr/share/fonts/opentype/ipafont-gothic/ipag.ttf
chromium:
	@if { [ ! -x /usr/bin/chromium ] || [ ! -e $(JA_FONT) ]; } && [ "$$(id -u)" = 0 ] \
		&& command -v apt-get >/dev/null; then \
		echo "installing Debian's chromium and a Japanese font for the browser tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq chromium fonts-ipafont-gothic >/dev/null; \
	fi

# Benchmarks (not part of `make test`): bench-only Python packages, wrk from Debian when
# missing and we are root, then every benchmark; results in bench/RESULTS.md (~7 min).
bench: $(VENV)/.installed translations
	$(BIN)/python -m pip install -q -e '.[bench]'
	@command -v wrk >/dev/null || { [ "$$(id -u)" = 0 ] && \
		{ apt-get update -qq && apt-get install -y -qq wrk; } || \
		echo "wrk is missing: the closed-loop benchmark will be skipped"; }
	BENCH_VIA_MAKE=1 $(BIN)/python -m bench.run $(BENCH_ARGS)

lint: $(VENV)/.installed
	$(BIN)/ruff check app tests bench
	$(BIN)/ruff format --check app tests bench

# The generated session key goes with the database it signed sessions for.
clean:
	rm -rf $(VENV) .pgdata .pgdata-test .secret_key
