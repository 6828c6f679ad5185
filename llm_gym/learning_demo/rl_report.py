"""What the RL demo shows at its end: a table (before, after and the reference rows: games won on the held-out
seeds with the Wilson 95% interval, mean return with its 95% t interval, and the exact expected return, win
probability and exploitability of each greedy policy), a verdict, the wall time of each phase, and a PNG of the
intervals and of the exact return during training."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from llm_gym.config import from_dict
from llm_gym.learning_demo.report import arm_row, plot_games_won, render_table, run_lines, save_plot
from llm_gym.learning_demo.rl import RLDemoResult, ScoredArm
from llm_gym.plugins import get_agent
from llm_gym.training.curves import pyplot

PLOT_FILE = "rl_demo.png"


def _exact_cells(arm: ScoredArm) -> list[str]:
    exact = arm.exact
    if exact is None:
        return ["-", "-", "-"]
    exploitability = "-" if exact.exploitability is None else f"{exact.exploitability:.3f}"
    return [f"{exact.expected_return:+.3f}", f"{exact.win:.0%}", exploitability]


def rl_summary_text(result: RLDemoResult) -> str:
    """The table and the lines under it, as plain text (what ``make demo`` ends with)."""
    config = result.config
    seeds = config.eval_seeds
    table = Table(
        "greedy play", "games won", "95% CI", "mean return ± 95% CI", "exact return", "exact win", "exploitability",
        title=f"{config.env_id} vs random: {result.after.n} held-out games (seeds {seeds.start}-{seeds.stop - 1}) "
        "and exact values over every deal and reply",
    )  # fmt: skip
    for arm in (result.before, result.after):
        table.add_row(*arm_row(arm), *_exact_cells(arm))
    table.add_section()
    for arm in result.references:
        table.add_row(*arm_row(arm), *_exact_cells(arm), style="dim")
    lines = [render_table(table, width=132)]
    before, after = result.before.win_rate(), result.after.win_rate()
    shown = "learning shown" if result.learning_shown() else "no learning shown"
    relation = "lies above" if result.learning_shown() else "does not lie above"
    lines.append(
        f"{shown}: after's interval [{after[1]:.0%}, {after[2]:.0%}] {relation} before's [{before[1]:.0%}, {before[2]:.0%}]"
    )
    best = result.references[-1].exact
    if best is not None and result.after.exact is not None and best.expected_return:
        share = result.after.exact.expected_return / best.expected_return
        lines.append(f"the trained model's exact return is {share:.2f}x the best response's")
    settings = result.ppo_config
    loss = from_dict(get_agent("ppo_lora").Config, settings).loss  # policy_loss=auto resolved by the action mode
    lines.append(
        f"trained by reinforcement learning alone (no demonstrations): ppo_lora, preset {config.preset}, "
        f"{settings['advantage']} advantages, {loss} loss, {result.env_steps} env steps in groups of "
        f"{settings['group_size']} games dealt from one seed (seeds {config.seed} on); model {config.model}, LoRA on "
        f"the top {settings['trainable_layers']} layers"
    )
    if result.machine:  # the wall times below are this machine's: bfloat16 (AVX512-BF16, AMX) or float32 (AVX2)
        m = result.machine
        load = m["load_average_1m_before_after"]
        lines.append(
            f"machine: {m['cpu']} ({', '.join(m['isa']) or 'no AVX2'}), {m['cores']} cores, {m['torch_threads']} torch "
            f"threads, load average {load[0]:.2f} before, {load[1]:.2f} after"
        )
    lines += run_lines(result, "llm-gym play --checkpoint ... --exact evaluates it again")
    return "\n".join(lines)


def write_rl_plot(result: RLDemoResult) -> Path:
    """Games won (Wilson 95% intervals) of every row, and the greedy policy's exact return during training against
    the best response's and random's, as a PNG in the run directory; returns its path."""
    plt = pyplot("the learning demo's plot", "lm")
    figure, (wins_axis, curve_axis) = plt.subplots(1, 2, figsize=(11, 4))
    plot_games_won(wins_axis, result, f"games won of {result.after.n} held-out (Wilson 95% CI)")
    if result.curve:
        steps = [row[0] for row in result.curve]
        curve_axis.plot(steps, [row[1] for row in result.curve], "o-", color="tab:green", label="greedy policy")
    for arm, style in zip(result.references, (":", "--"), strict=False):
        if arm.exact is not None:
            curve_axis.axhline(arm.exact.expected_return, linestyle=style, color="tab:gray", label=arm.label)
    curve_axis.set_xlabel("env steps")
    curve_axis.set_ylabel("exact expected return (chips a game)")
    curve_axis.set_title("exact return during training")
    curve_axis.legend(fontsize=8)
    curve_axis.grid(alpha=0.3)
    figure.suptitle(f"{Path(result.config.model).name} learns {result.config.env_id} by reinforcement learning")
    return save_plot(plt, figure, result.run_path / PLOT_FILE)
