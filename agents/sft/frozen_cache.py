"""The frozen layers' output of an sft run's demos, kept on disk so that ``--resume`` (and a later run on the same
demos, e.g. ``init_adapter`` for one more epoch) reads it instead of running those layers again.

On a 2-core CPU that pass is the dominant cost of starting a run: 7-12 minutes for the 1,090 tic-tac-toe demos under
LoRA on the top 8 layers, 36 minutes for 2,400 Trace demos, paid again by every resume. It depends only on the
weights below the split, the cached system prompt and the demos' packed rows, so one file per split of the demos
holds it, named by a hash of all three (and of the torch and transformers versions, the device and the batching, so a
file is only read where recomputing would give the same tensors). Reading it gives exactly the tensors the pass
computes (tests check equal tensors, and a resumed run's adapter against an uninterrupted run's).

A file is written atomically (temporary name, then rename), so a run killed while writing leaves none; one that does
not read back as expected (truncated, other shapes) is reported, recomputed and written again.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import transformers
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

FORMAT = "1"
"""Part of the key: bump it when what a file holds, or how the pass batches, changes."""

CACHE_DIR = "frozen_cache"
"""The run directory's cache (``frozen_cache=run``)."""


def cache_dir(setting: str, run_dir: Path) -> Path | None:
    """Where the files live for the ``frozen_cache`` setting: ``run`` (the run directory), ``off``, or a directory
    (shared by every run that names it, e.g. a sweep's)."""
    if setting == "off":
        return None
    return run_dir / CACHE_DIR if setting == "run" else Path(setting).expanduser()


def bottom_fingerprint(ac: Any) -> str:
    """A hash of everything the frozen layers' output depends on besides the rows: the embeddings, the layers below
    the split and the rotary embedding (their weights, buffers and any LoRA on them, by name, shape and dtype), the
    cached system prompt, the device and the library versions."""
    decoder = ac.split.decoder
    digest = hashlib.sha256()
    modules = [("embed_tokens", decoder.embed_tokens), ("rotary_emb", decoder.rotary_emb)]
    modules += [(f"layers.{i}", decoder.layers[i]) for i in range(ac.split_layer)]
    for prefix, module in modules:
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
            data = tensor.detach().contiguous().cpu()
            digest.update(f"{prefix}.{name}:{tuple(data.shape)}:{data.dtype};".encode())
            digest.update(memoryview(data.reshape(-1).view(torch.uint8).numpy()))
    prefix_ids = ac.bottom_prefix.ids if ac.bottom_prefix is not None else ()
    context = (FORMAT, torch.__version__, transformers.__version__, ac.split.device.type, prefix_ids, ac.pad_id)
    digest.update(repr(context).encode())
    return digest.hexdigest()


def rows_key(fingerprint: str, rows: Sequence[tuple[Any, ...]], batch_size: int) -> str:
    """The file's key: the fingerprint, the distinct rows in the order the pass runs them (each row's prompt ids,
    whether it uses the cached prefix, its continuations' ids) and the pass's batch size (its batches pad rows to a
    common width)."""
    digest = hashlib.sha256(f"{fingerprint}:{batch_size}:{len(rows)};".encode())
    for row in rows:
        digest.update(repr(row).encode())
    return digest.hexdigest()[:32]


def load_or_compute(
    directory: Path,
    key: str,
    lengths: Sequence[int],
    compute: Callable[[], list[torch.Tensor]],
    device: torch.device,
) -> list[torch.Tensor]:
    """The hidden states of each row (``lengths[i]`` x H): read from ``directory``'s file for ``key``, else computed
    and written there."""
    if not lengths:
        return compute()
    path = directory / f"{key}.safetensors"
    if path.exists():
        hidden = _read(path, lengths)
        if hidden is not None:
            return [h.to(device) for h in hidden]
    hidden = compute()
    _write(path, hidden)
    return hidden


def _read(path: Path, lengths: Sequence[int]) -> list[torch.Tensor] | None:
    try:
        data = load_file(str(path))
        stored = [int(n) for n in data["lengths"].tolist()]
        if stored != list(lengths):
            raise ValueError(f"it holds {len(stored)} rows of other lengths than the {len(lengths)} expected")
        return list(torch.split(data["hidden"], stored))
    except (OSError, KeyError, ValueError, RuntimeError, SafetensorError) as exc:
        print(f"frozen-layer cache {path} unreadable ({exc}); recomputing it", file=sys.stderr)
        return None


def _write(path: Path, hidden: Sequence[torch.Tensor]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lengths = torch.tensor([h.shape[0] for h in hidden], dtype=torch.int64)
    tensors = {"hidden": torch.cat([h.detach().cpu() for h in hidden]).contiguous(), "lengths": lengths}
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    os.close(handle)
    try:
        save_file(tensors, temporary)
        os.replace(temporary, path)
    except OSError as exc:  # a full disk costs the next run the pass again, never this one
        Path(temporary).unlink(missing_ok=True)
        print(f"frozen-layer cache not written to {path} ({exc}); the next run computes it again", file=sys.stderr)
