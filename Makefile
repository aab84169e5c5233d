# harel stores — the README's commands. `make test` on a fresh clone does all the set-up.
PYTHON ?= python3
UV_VERSION ?= 0.13.9
UV := .uv/bin/uv
VENV := .venv
BIN := $(VENV)/bin
export UV_PROJECT_ENVIRONMENT := $(abspath $(VENV))
# HYPOTHESIS_PROFILE: "fast" in make test, "thorough" in make conformance-thorough.

.PHONY: install lock test lint api-docs typecheck demo conformance-thorough reliability bench clean

install: $(VENV)/.installed

$(UV):
	$(PYTHON) -m venv .uv
	.uv/bin/pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"

# --locked: a uv.lock that no longer matches the pyproject files fails here (run `make lock`).
# Every distribution of the workspace: a new backend folder joins without editing this file.
MEMBERS := harel-core $(wildcard harel-store-*) harel-testing conformance/example-store conformance/tutorial-store

$(VENV)/.installed: $(UV) pyproject.toml uv.lock $(addsuffix /pyproject.toml,$(MEMBERS))
	$(UV) sync --all-packages --all-extras --locked --python $(PYTHON)
	touch $@

lock: $(UV)
	$(UV) lock --python $(PYTHON)

# Two pytest workers (pytest-xdist): the suites wait on fsync, servers and child processes as
# much as they compute, so two workers keep both cores busy.  PYTEST_WORKERS=0 runs serially.
PYTEST_WORKERS ?= 2

test: install
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-fast} $(BIN)/pytest --harel-strict --harel-trio=loop -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

# The kit against every backend in this repository, hypothesis' thorough profile (many examples).
KIT_SUITES := $(wildcard $(addsuffix /tests/test*conformance.py,$(MEMBERS)))

conformance-thorough: install
	HYPOTHESIS_PROFILE=thorough $(BIN)/pytest --harel-strict -n $(PYTEST_WORKERS) $(KIT_SUITES) $(PYTEST_ARGS)

# The attack suite at full size over every installed backend; writes conformance/RELIABILITY.md.
reliability: install
	$(BIN)/python conformance/reliability.py $(RELIABILITY_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The store-author API reference (docs/store-author-api.md), from harel.store.author's docstrings.
api-docs: install
	$(BIN)/python docs/author_api.py

typecheck: install
	$(BIN)/mypy

demo: install
	$(BIN)/python -m harel.demo

bench: install
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .uv build dist .pytest_cache .mypy_cache .ruff_cache
