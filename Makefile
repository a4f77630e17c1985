# Two entry points for a fresh machine: `make quickstart` and `make test`.
# Both create the virtual environment $(VENV) with pip when it is missing and install the package into it.
VENV ?= .venv
PYTHON ?= python3
PIP_FLAGS ?=

.PHONY: setup quickstart test test-slow lint format docs tutorial wheel-check clean

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

# the documentation site -> site/ (open site/index.html); a warning (a broken link, a missing API object) fails it
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/python -m mkdocs build --strict

# re-execute docs/tutorial.ipynb in place (the site shows the outputs committed with it)
tutorial: setup
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(VENV)/bin/python -m jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=900 docs/tutorial.ipynb

# build the wheel, install it into a fresh venv and run dandelion-quickstart --fast from it (.ci/wheel_check.sh)
wheel-check: setup
	VENV=$(VENV) bash .ci/wheel_check.sh

test-slow: setup
	$(VENV)/bin/python -m pytest -q -m slow $(ARGS)

clean:
	rm -rf $(VENV) build site *.egg-info
