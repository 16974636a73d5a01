# Two entry points a fresh machine needs: `make demo` and `make test`. Both are idempotent.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
EXAMPLE := data/example/factory

.PHONY: install demo test lint system-deps

$(BIN)/python:
	$(PY) -m venv $(VENV)

# Reinstall when pyproject.toml changes; `pip check` keeps the Dagster family consistent.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/python -m pip check
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/python data/seed.py
	$(BIN)/bench run $(EXAMPLE)/launches/demo.yaml

# Browser (chromium) and broker (redis) for the UI and scale-out tests, from Debian.
# bubblewrap (/usr/bin/bwrap): the `sandbox` isolation of agents and graders.
system-deps:
	@if command -v chromium >/dev/null && command -v redis-server >/dev/null && [ -x /usr/bin/bwrap ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium redis-server bubblewrap >/dev/null; \
	else echo "install chromium, redis-server and bubblewrap to run the browser, celery and sandbox tests"; fi

# ruff, then the package layering (import-linter contracts in pyproject.toml).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

test: install system-deps lint
	$(BIN)/python -m pytest -q
