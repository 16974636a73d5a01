# Two entry points a fresh machine needs: `make demo` and `make test`. Both are idempotent.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
EXAMPLE := data/example/factory

.PHONY: install demo test lint system-deps cli-agents

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

# The real CLI agents the command presets drive (tests run them against servers on 127.0.0.1),
# at exact versions: their flags and JSON output are what the presets parse. Node/npm from
# Debian when missing.
CLAUDE_CODE_VERSION := 2.1.332
CODEX_VERSION := 0.171.0
cli-agents:
	@if ! command -v npm >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; \
	  else echo "install node and npm to run the Claude Code and Codex CLI tests"; exit 0; fi; \
	fi
	@if claude --version 2>/dev/null | grep -qx '$(CLAUDE_CODE_VERSION) (Claude Code)' && \
	   codex --version 2>/dev/null | grep -qx 'codex-cli $(CODEX_VERSION)'; then :; \
	else npm install -g --no-fund --no-audit @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) \
	  @openai/codex@$(CODEX_VERSION); fi

# ruff, then the package layering (import-linter contracts in pyproject.toml).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

test: install system-deps cli-agents lint
	$(BIN)/python -m pytest -q
