"""Model names resolve to local directories; the packaged GGUF is found without importing its package; nothing
downloads, and a missing model is one clear line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_gym.cli import build_app
from llm_gym.lm.model_names import MODEL_ALIASES, ModelNotFoundError, PackagedGGUF, model_cache_dir, resolve_model
from llm_gym.lm.models import load_causal_lm, resolve_dtype


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LLM_GYM_MODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model_cache_dir() == tmp_path / "xdg" / "llm-gym" / "models"
    monkeypatch.setenv("LLM_GYM_MODEL_CACHE", str(tmp_path / "mine"))
    assert model_cache_dir() == tmp_path / "mine"


def test_packaged_gguf_is_located_without_importing_the_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    package = tmp_path / "site" / "fake_gguf_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    (package / "model.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    found = PackagedGGUF("fake_gguf_pkg", "model.gguf", "pip install fake").locate()
    assert found == package / "model.gguf" and "fake_gguf_pkg" not in sys.modules
    with pytest.raises(ModelNotFoundError, match="pip install other"):
        PackagedGGUF("no_such_pkg_xyz", "model.gguf", "pip install other").locate()
    assert "smollm2-135m" in MODEL_ALIASES


def test_local_directories_and_bad_paths(tiny_model_dir: Path, tmp_path: Path) -> None:
    assert resolve_model(str(tiny_model_dir)) == tiny_model_dir
    with pytest.raises(ModelNotFoundError, match="without config.json"):
        resolve_model(str(tmp_path))
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        resolve_model(str(tmp_path / "missing"))
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        resolve_model(str(tmp_path / "missing.gguf"))


def test_uncached_hub_id_is_one_clear_error_and_no_download() -> None:
    with pytest.raises(ModelNotFoundError, match="not available locally and downloads are off"):
        load_causal_lm("nobody-xyz/not-a-model-123")


def test_cli_reports_a_missing_model_on_one_line() -> None:
    result = CliRunner().invoke(
        build_app(), ["play", "--agent", "lm", "--model", "nobody-xyz/not-a-model-123", "--env", "LLMBreakout-text-v0"]
    )
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: model 'nobody-xyz/not-a-model-123'")


def test_dtype_resolution() -> None:
    import torch

    assert resolve_dtype("float32") is torch.float32
    assert resolve_dtype("auto", "cpu") in (torch.float32, torch.bfloat16)


def test_tiny_model_loads_in_the_requested_dtype(tiny_model_dir: Path) -> None:
    import torch

    model, tokenizer = load_causal_lm(str(tiny_model_dir), dtype="bfloat16")
    assert model.dtype is torch.bfloat16 and not model.training and tokenizer.pad_token_id is not None
