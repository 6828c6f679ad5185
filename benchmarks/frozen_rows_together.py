"""What asking rows ``together`` saves the exact update's walk over the tic-tac-toe tree: the frozen layers over
``--positions`` asked positions spread evenly over the tree, in the update's order (``ask_order``: one shape side by
side) and batches of ``--batch-size``, each row alone (what every other caller does) against the rows of one shape in
one batch (agents/ppo_lora/frozen_rows.py), the same model, positions and batches, the store kept empty, in the same
run. A sample of the tree has fewer rows of one shape per batch than the whole tree: the speedup of a whole first
collection is at least this.

Each round times both arms on the same batches, alone first; the speedup is the median of the per-round ratios. The
two arms' choice probabilities differ by rounding only; to say by how much, each arm's largest and mean difference
from the same model run in float32 (rows alone) is printed beside the speedup. In
float32 a matmul of a hundred tokens is already efficient and the gain is small; in bfloat16 on AMX or AVX512-BF16
(``dtype=auto`` there) most of a row alone is overhead. The first collection of an exact run on tic-tac-toe runs
all 12,418 asked positions through the frozen layers this way.

Prints JSON.

    python benchmarks/frozen_rows_together.py [--positions 512] [--batch-size 64] [--rounds 2] [--dtype auto]
        [--trainable-layers 2] [--threads 0] [--out FILE]
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import torch
from lm_args import lm_parser, parse_lm_args
from tic_tac_toe_sample import ENV, exact_model, spread_positions

from llm_gym.agents.ppo_lora.acting import act, strategy_for
from llm_gym.agents.ppo_lora.exact_update import ask_order
from llm_gym.bench.machine import timing_machine


def differences(probs: list[torch.Tensor], reference: list[torch.Tensor]) -> dict[str, float]:
    gaps = torch.cat([(p.double() - r.double()).abs() for p, r in zip(probs, reference, strict=True)])
    return {"max": float(gaps.max()), "mean": float(gaps.mean())}


def float32_probs(args, asked, batches) -> list[torch.Tensor]:  # noqa: ANN001
    """The same positions' choice probabilities from the model in float32, rows alone."""
    config, ac = exact_model(args, asked, "float32")
    probs: list[torch.Tensor] = []
    with torch.no_grad():
        for batch in batches:
            probs.extend(act(ac, strategy_for(config), [o for o, _ in batch], [i for _, i in batch], ENV,
                             generator=torch.Generator().manual_seed(0), greedy=True).probs)  # fmt: skip
    return probs


def main() -> None:
    parser = lm_parser(__doc__)
    parser.set_defaults(rounds=2)
    parser.add_argument("--positions", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--trainable-layers", type=int, default=2)
    parser.add_argument("--dtype", default="auto", help="auto: bfloat16 where the CPU has AVX512-BF16 or AMX")
    parser.add_argument("--out", type=Path, default=None)
    args = parse_lm_args(parser)
    load_before = os.getloadavg()[0]
    spread = spread_positions(args.positions)
    config, ac = exact_model(args, spread, args.dtype)
    order = ask_order(ac, [o for o, _ in spread], [i for _, i in spread])
    asked = [spread[k] for k in order]
    strategy = strategy_for(config)
    batches = [asked[lo : lo + args.batch_size] for lo in range(0, len(asked), args.batch_size)]

    def walk(together: bool) -> tuple[float, list[torch.Tensor]]:
        probs: list[torch.Tensor] = []
        start = time.perf_counter()
        with torch.no_grad():
            for batch in batches:
                decisions = act(ac, strategy, [o for o, _ in batch], [i for _, i in batch], ENV,
                                generator=torch.Generator().manual_seed(0), greedy=True, together=together)  # fmt: skip
                probs.extend(decisions.probs)
        return time.perf_counter() - start, probs

    walk(True)  # warm-up: kernels, allocator
    alone_s, together_s = [], []
    for _ in range(args.rounds):
        seconds, alone = walk(False)
        alone_s.append(seconds)
        seconds, together = walk(True)
        together_s.append(seconds)
    reference = float32_probs(args, asked, batches) if ac.split.dtype != torch.float32 else alone
    result = {
        "env": ENV, "model": args.model, "positions": len(asked), "batch_size": args.batch_size,
        "frozen_layers": ac.split_layer, "dtype": str(ac.split.dtype),
        "alone_s": statistics.median(alone_s), "together_s": statistics.median(together_s),
        "speedup_together_vs_alone": statistics.median(a / t for a, t in zip(alone_s, together_s, strict=True)),
        "positions_per_s_alone": len(asked) / statistics.median(alone_s),
        "positions_per_s_together": len(asked) / statistics.median(together_s),
        "choice_prob_difference_from_float32": {
            "alone": differences(alone, reference), "together": differences(together, reference)},
        "machine": timing_machine(load_before) | {"torch": torch.__version__},
    }  # fmt: skip
    text = json.dumps(result, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
