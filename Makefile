# Two entry points for a fresh machine: `make quickstart` and `make test`.
# Both create the virtual environment $(VENV) with pip when it is missing and install the package into it.
VENV ?= .venv
PYTHON ?= python3
PIP_FLAGS ?=

.PHONY: setup quickstart test test-slow lint format clean

setup:
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install $(PIP_FLAGS) -e ".[dev]"

quickstart: setup
	$(VENV)/bin/dandelion-quickstart $(ARGS)

test: setup
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(VENV)/bin/python -m pytest -q $(ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

test-slow: setup
	$(VENV)/bin/python -m pytest -q -m slow $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
