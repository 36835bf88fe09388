# The two commands: `make run` serves the app, `make test` runs the whole suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

# gunicorn.conf.py starts the embedded PostgreSQL when DATABASE_URL is unset
# and applies the migrations before the worker starts.
run: $(VENV)/.installed
	$(BIN)/gunicorn -c gunicorn.conf.py wsgi:app

test: $(VENV)/.installed
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(BIN)/ruff check app tests bench
	$(BIN)/ruff format --check app tests bench

clean:
	rm -rf $(VENV) .pgdata .pgdata-test
