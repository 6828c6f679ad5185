"""What running the last layer at the read slots only saves (llm_gym/lm/read_positions.py): the exact update's
training step (the trainable layers forward and backward from the stored frozen-layer output, the LM head, the loss,
an optimizer step) and a rollout pass (the same, no gradients) on ``--positions`` tic-tac-toe positions spread over the
tree, in batches of ``--batch-size``, with the whole last layer against the read slots only, the same model, batches
and adapter in the same run.

Each round times both arms on the same batches, the whole layer first; the speedup is the median of the per-round
ratios. The arms differ by rounding only: the largest difference between their choice probabilities is printed beside
the speedups. The optimizer's steps are undone after each arm (the adapter is restored), so both arms train from the
same weights.

Prints JSON.

    python benchmarks/read_positions.py [--positions 256] [--batch-size 64] [--rounds 3] [--dtype auto]
        [--trainable-layers 2] [--threads 0] [--out FILE]
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import time
from pathlib import Path

import torch
from lm_args import lm_parser, parse_lm_args
from tic_tac_toe_sample import ENV, exact_model, spread_positions

from llm_gym.agents.ppo_lora.acting import act, strategy_for
from llm_gym.agents.ppo_lora.strategies import choice_logprobs
from llm_gym.agents.ppo_lora.update import stored_batch
from llm_gym.bench.machine import timing_machine


def main() -> None:
    parser = lm_parser(__doc__)
    parser.add_argument("--positions", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--trainable-layers", type=int, default=2)
    parser.add_argument("--dtype", default="auto", help="auto: bfloat16 where the CPU has AVX512-BF16 or AMX")
    parser.add_argument("--out", type=Path, default=None)
    args = parse_lm_args(parser)
    load_before = os.getloadavg()[0]
    spread = spread_positions(args.positions)
    config, ac = exact_model(args, spread, args.dtype)
    if not ac.split.reads_fewer:
        raise SystemExit(f"{args.model}'s last layer is not of the shape llm_gym/lm/read_positions.py needs")
    flat: dict[str, list] = {key: [] for key in ("prompts", "uses_prefix", "continuations", "hidden")}
    with torch.no_grad():
        for lo in range(0, len(spread), args.batch_size):
            batch = spread[lo : lo + args.batch_size]
            decisions = act(ac, strategy_for(config), [o for o, _ in batch], [i for _, i in batch], ENV,
                            generator=torch.Generator().manual_seed(0), greedy=True, together=True)  # fmt: skip
            for key in flat:
                flat[key].extend(getattr(decisions, key))
    batches = [list(range(lo, min(lo + args.batch_size, len(spread)))) for lo in range(0, len(spread), args.batch_size)]
    params = ac.trainable_parameters()
    start_weights = [p.detach().clone() for p in params]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    start_state = copy.deepcopy(optimizer.state_dict())

    def train(reads_fewer: bool) -> float:
        ac.split.reads_fewer = reads_fewer
        with torch.no_grad():
            for p, w in zip(params, start_weights, strict=True):
                p.copy_(w)
        optimizer.load_state_dict(copy.deepcopy(start_state))
        ac.model.train()
        start = time.perf_counter()
        for index in batches:
            batch, hidden = stored_batch(ac, flat, index)
            out, _ = ac.top(hidden, batch, "train")
            logp = choice_logprobs(out, batch, len(index))
            loss = -torch.where(torch.isfinite(logp), logp, torch.zeros_like(logp)).sum(1).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        ac.model.eval()
        return time.perf_counter() - start

    def rollout(reads_fewer: bool) -> tuple[float, torch.Tensor]:
        ac.split.reads_fewer = reads_fewer
        with torch.no_grad():
            for p, w in zip(params, start_weights, strict=True):
                p.copy_(w)
        ac.refresh()
        probs = []
        start = time.perf_counter()
        with torch.no_grad():
            for index in batches:
                batch, hidden = stored_batch(ac, flat, index)
                out, _ = ac.top(hidden, batch, "rollout")
                probs.append(choice_logprobs(out, batch, len(index)).exp().flatten())
        return time.perf_counter() - start, torch.cat(probs)

    train(True)  # warm-up: kernels, allocator
    rollout(True)
    whole_train, read_train, whole_roll, read_roll = [], [], [], []
    gap = 0.0
    for _ in range(args.rounds):
        whole_train.append(train(False))
        read_train.append(train(True))
        seconds, whole = rollout(False)
        whole_roll.append(seconds)
        seconds, read = rollout(True)
        read_roll.append(seconds)
        gap = max(gap, float((whole.double() - read.double()).abs().max()))
    steps = len(batches)
    result = {
        "env": ENV, "model": args.model, "positions": len(spread), "batch_size": args.batch_size,
        "trainable_layers": args.trainable_layers, "dtype": str(ac.split.dtype),
        "train_step_s_whole_layer": statistics.median(whole_train) / steps,
        "train_step_s_read_slots": statistics.median(read_train) / steps,
        "speedup_train": statistics.median(w / r for w, r in zip(whole_train, read_train, strict=True)),
        "rollout_batch_s_whole_layer": statistics.median(whole_roll) / steps,
        "rollout_batch_s_read_slots": statistics.median(read_roll) / steps,
        "speedup_rollout": statistics.median(w / r for w, r in zip(whole_roll, read_roll, strict=True)),
        "choice_prob_max_difference": gap,
        "machine": timing_machine(load_before) | {"torch": torch.__version__},
    }  # fmt: skip
    text = json.dumps(result, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
