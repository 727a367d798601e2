# The set-up behind the README's two commands. Everything a fresh clone needs is here.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build. On a CUDA machine
# set TORCH_SPEC (and TORCH_INDEX) to the build you want.
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
SWEEP ?= sweeps/gates.yaml
export DS_ACCELERATOR ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo cuda || echo cpu)
export RAY_AUTH_MODE ?= disabled
export TORCH_EXTENSIONS_DIR ?= $(HOME)/.cache/gatesweep/torch_extensions
export PYTHONUNBUFFERED := 1

.PHONY: setup run test test-fast system-deps clean

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]" "$(TORCH_SPEC)"
	touch $@

setup: $(VENV)/.installed

# Debian packages the full test suite uses: a PostgreSQL server, Chromium for the browser test,
# Slurm (slurmctld, slurmd, the clients) and munge for the Slurm test (tests/e2e/test_slurm.py
# starts its own daemons; the packages' own services are not needed). Installs only what is
# missing, so a second run changes nothing.
system-deps:
	@if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  missing=""; \
	  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	  command -v chromium >/dev/null || missing="$$missing chromium"; \
	  for b in slurmctld slurmd sbatch; do \
	    PATH="$$PATH:/usr/sbin" command -v $$b >/dev/null || { missing="$$missing slurm-wlm"; break; }; done; \
	  PATH="$$PATH:/usr/sbin" command -v munged >/dev/null || missing="$$missing munge"; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi; \
	else echo "system-deps: not root or no apt-get; PostgreSQL, browser and Slurm tests will skip"; fi

# (1) the main job: the gate sweep on the embedded defaults (SQLite results.db, local Ray, CPU).
run: setup
	$(VENV)/bin/orchestrator submit $(SWEEP)

# Test workers (pytest-xdist; the rest of the options are pyproject's addopts): each test
# module runs whole on one worker (its module fixtures are built once), the fault matrix is
# split over two (tests/conftest.py). PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2
PYTEST_PAR := -n $(PYTEST_WORKERS)

# (2) the whole test suite, slow end-to-end tests included; the 30 slowest tests are listed at
# the end, so the log of every run says where its time went (budget: <= 20 min, docs/testing.md).
test: setup system-deps
	$(PY) -m pytest -m "slow or not slow" -q $(PYTEST_PAR) --durations=30

# The fast subset, for development.
test-fast: setup
	$(PY) -m pytest -q $(PYTEST_PAR)

clean:
	rm -rf $(VENV) .pytest_cache results.db results.db-* runs/
