# Two commands: `make demo` installs and runs the demo; `make test` installs and runs the tests.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench install clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check -U pip
	@echo "Installing Baton and its test tools into $(VENV) ..."
	@$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	@$(VENV)/bin/baton demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests examples benchmarks
	$(VENV)/bin/mypy

test: $(STAMP) lint
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/overhead.py

clean:
	rm -rf $(VENV) .baton .pytest_cache .mypy_cache .ruff_cache
