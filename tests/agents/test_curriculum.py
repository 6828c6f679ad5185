"""The curriculum agent on real OpenSpiel games with tiny learners: the stage advances at its threshold, the failure
buffer replays at the configured share, a killed run resumes with the same stage and buffer, bad stage files fail
in one line, and the learners take the sampler through their own stepping path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_gym.agent import EnvConfig
from llm_gym.agents.curriculum import CurriculumAgent, CurriculumConfig
from llm_gym.agents.nanogpt_ppo.testing import TINY_SETTINGS
from llm_gym.cli import build_app
from llm_gym.config import to_dict
from llm_gym.runs import Run
from llm_gym.testing import cli_command, kill_once_written

ENV = "OpenSpiel-v0"
TIC_TAC_TOE, KUHN = 2_200_000_000, 2_400_000_000  # this project's extra games (task ids past affinetes' 22)
NANOGPT = {**TINY_SETTINGS, "update_epochs": 1, "eval_max_steps": 20}
STAGES = (
    # threshold 0: met as soon as the window is full (the stage must move on after exactly 2 episodes)
    {"name": "first", "tasks": str(TIC_TAC_TOE), "opponent": "random", "threshold": 0.0, "window": 2},
    {"name": "second", "tasks": f"{KUHN}-{KUHN + 999}", "opponent": "mcts", "threshold": 1.0, "window": 1000},
)


def train(tmp_path: Path, name: str, **settings) -> dict:
    config = CurriculumConfig(**settings)
    run = Run.create(ENV, "curriculum", to_dict(config), path=tmp_path / name)
    try:
        return CurriculumAgent(config).train(EnvConfig(ENV), run)
    finally:
        run.close()


def test_stage_advances_at_the_threshold_with_a_tiny_lm(tmp_path: Path) -> None:
    from llm_gym.agents.ppo_lora.testing import tiny_settings
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path / "model", layers=1, hidden=32)
    rollout = dict(num_envs=2, num_steps=16, minibatch_size=16, update_epochs=1, lora_rank=4, checkpoint_every=0)
    base = tiny_settings(model, **rollout)
    summary = train(tmp_path, "lm", base="ppo_lora", base_config=base, total_steps=64, stages=STAGES, replay_share=0,
                    final_eval_episodes=6)  # fmt: skip
    curriculum = summary["curriculum"]
    # The curriculum's own before and after: both policies on the same held-out episodes of every stage.
    rows = curriculum["stage_evaluation"]
    assert [row["stage"] for row in rows] == ["first", "second"] and all(row["episodes"] == 6 for row in rows)
    for row in rows:
        for when in ("before", "after"):
            assert row[when]["wins"] + row[when]["draws"] + row[when]["losses"] == 6
    first, advance = curriculum["events"]
    assert (first["name"], first["episode"], first["env_step"]) == ("first", 0, 0)
    assert (advance["name"], advance["kind"], advance["episode"]) == ("second", "advance", 2)
    assert advance["env_step"] in (32, 64) and "time" in advance
    assert curriculum["final_stage"] == "second" and curriculum["episodes"] > 2


def test_a_group_estimator_base_follows_the_curriculum(tmp_path: Path) -> None:
    """ppo_lora's default estimator under a curriculum: each group starts from the options the sampler drew for it,
    and its finished episodes still move the stage on."""
    from llm_gym.agents.ppo_lora.testing import tiny_settings
    from llm_gym.lm.testing import make_tiny_model

    model = make_tiny_model(tmp_path / "model", layers=1, hidden=32)
    rollout = dict(num_envs=4, group_size=2, num_steps=8, minibatch_size=16, update_epochs=1, lora_rank=4,
                   checkpoint_every=0, advantage="group", policy_loss="auto")  # fmt: skip
    summary = train(tmp_path, "lm", base="ppo_lora", base_config=tiny_settings(model, **rollout), total_steps=64,
                    stages=STAGES, replay_share=0, final_eval_episodes=6)  # fmt: skip
    curriculum = summary["curriculum"]
    assert summary["advantage"] == "group"
    assert [(e["name"], e["kind"], e["episode"]) for e in curriculum["events"]] == [
        ("first", "start", 0), ("second", "advance", 2)
    ]  # fmt: skip
    assert curriculum["final_stage"] == "second"
    for row in curriculum["stage_evaluation"]:
        assert sum(row["after"][k] for k in ("wins", "draws", "losses")) == row["episodes"] == 6
    assert summary["agent"] == "curriculum" and summary["base"] == "ppo_lora"
    saved = json.loads((tmp_path / "lm" / "summary.json").read_text())
    assert saved["curriculum"]["events"] == curriculum["events"]


def test_failure_buffer_replays_at_the_configured_share(tmp_path: Path) -> None:
    stages = ({"name": "kuhn", "tasks": f"{KUHN}-{KUHN + 999}", "opponent": "mcts", "threshold": 1.0},)
    summary = train(
        tmp_path, "replay", base="nanogpt_ppo", base_config=NANOGPT, total_steps=640, stages=stages, replay_share=0.5
    )
    counts = summary["curriculum"]["replay_counts"]
    drawn = counts["fresh"] + counts["replayed"]
    # Kuhn poker against MCTS: the untrained learner loses most hands, so the buffer fills at once and about half
    # of the episodes are replays (Binomial(n >= 150, 0.5): within 0.5 +- 0.15 with overwhelming probability).
    assert drawn >= 150 and counts["added"] > 0
    assert abs(counts["replayed"] / drawn - 0.5) < 0.15
    assert summary["curriculum"]["buffer_size"] == counts["added"] - counts["solved"] - counts["evicted"]

    # The run's checkpoint is the learner's own: play evaluates it per game.
    args = ["play", "--checkpoint", str(tmp_path / "replay"), "--env", ENV, "--task-ids", f"{KUHN}-{KUHN + 1}"]
    result = CliRunner().invoke(build_app(), [*args, "--opponent", "mcts", "--episodes", "4", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["agent"] == "curriculum" and [row["game"] for row in report["per_game"]] == ["kuhn_poker"]


@pytest.mark.timeout(600)
def test_sigkill_then_resume_keeps_stage_and_buffer(tmp_path: Path) -> None:
    stages_file = tmp_path / "stages.toml"
    lines = ['base = "nanogpt_ppo"', "replay_share = 0.5", "[base_config]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in {**NANOGPT, "checkpoint_every": 64}.items()]
    for stage in STAGES:
        lines += ["[[stages]]", *(f"{key} = {json.dumps(value)}" for key, value in stage.items())]
    stages_file.write_text("\n".join(lines) + "\n")
    run_dir = tmp_path / "killed"
    command = cli_command("train", "--agent", "curriculum", "--env", ENV, "--config", str(stages_file))
    command += ["--run-dir", str(run_dir), "--set", "total_steps=100000"]
    wanted = run_dir / "checkpoints" / "step_192" / "tasks.json"
    stderr = kill_once_written(command, wanted, timeout=400, poll=0.05)
    assert wanted.exists(), stderr
    assert not (run_dir / "summary.json").exists(), "the run finished before it could be killed"

    step, checkpoint = Run.open(run_dir).checkpoints()[-1]
    saved = json.loads((checkpoint / "tasks.json").read_text())["sampler"]
    assert saved["base"]["stage_name"] == "second" and saved["buffer"], (
        "the run should be past stage one, with failures"
    )

    # Resume without training further: the curriculum must stand exactly where the checkpoint left it.
    runner = CliRunner()
    result = runner.invoke(build_app(), ["train", "--resume", str(run_dir), "--set", f"total_steps={step}"])
    assert result.exit_code == 0, result.output
    curriculum = json.loads((run_dir / "summary.json").read_text())["curriculum"]
    assert curriculum["final_stage"] == saved["base"]["stage_name"]
    assert curriculum["episodes"] == saved["base"]["episodes"]
    assert curriculum["buffer_size"] == len(saved["buffer"])
    assert curriculum["replay_counts"] == saved["counts"]
    strip = lambda events: [(e["stage"], e["name"], e["episode"], e["kind"]) for e in events]  # noqa: E731
    assert strip(curriculum["events"]) == strip(saved["base"]["events"])

    # And on from there.
    result = runner.invoke(build_app(), ["train", "--resume", str(run_dir), "--set", f"total_steps={step + 128}"])
    assert result.exit_code == 0, result.output
    after = json.loads((run_dir / "summary.json").read_text())["curriculum"]
    assert after["episodes"] > curriculum["episodes"]
    assert after["replay_counts"]["replayed"] >= saved["counts"]["replayed"]
    assert strip(after["events"])[: len(curriculum["events"])] == strip(curriculum["events"])


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        ({"name": "b", "tasks": "5-20"}, "stage 'b': task range 5-20 overlaps stage 'a' (0-9); start it after 9"),
        ({"name": "b", "tasks": "20-10"}, "stage 'b': the task range 20-10 is empty"),
        (
            {"name": "b", "tasks": "10-20", "opponent": "mtcs"},
            "stage 'b': unknown opponent 'mtcs'; did you mean 'mcts'?",
        ),
        ({"name": "b", "tasks": "10-20", "threshold": 1.5}, "stage 'b': threshold 1.5 is outside [0, 1]"),
        ({"name": "b", "tasks": "10-20", "levle": 2}, "stage 'b': unknown key 'levle'; did you mean level?"),
    ],
)
def test_bad_stage_files_fail_in_one_line_before_a_run_exists(tmp_path: Path, stage: dict, message: str) -> None:
    stages_file = tmp_path / "stages.toml"
    lines = ["[[stages]]", 'name = "a"', 'tasks = "0-9"', "[[stages]]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in stage.items()]
    stages_file.write_text("\n".join(lines) + "\n")
    args = ["train", "--agent", "curriculum", "--env", ENV, "--config", str(stages_file)]
    result = CliRunner().invoke(build_app(), [*args, "--runs-root", str(tmp_path / "runs")])
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("key, value", [("seed", 3), ("total_steps", 500)])
def test_base_config_keys_the_curriculum_sets_are_refused_not_ignored(tmp_path: Path, key: str, value: int) -> None:
    # The curriculum hands its own seed and total_steps to the base learner, so these keys would silently do nothing.
    config_file = tmp_path / "curriculum.toml"
    config_file.write_text(f'base = "nanogpt_ppo"\n[base_config]\n{key} = {value}\n')
    expected = f"base_config.{key} would be ignored: the curriculum passes its own {key} to the base learner; "
    expected += f"set {key} on the curriculum instead (--set {key}={value})"
    for options in (["--set", f"base_config={json.dumps({key: value})}"], ["--config", str(config_file)]):
        args = ["train", "--agent", "curriculum", "--env", ENV, *options, "--runs-root", str(tmp_path / "runs")]
        result = CliRunner().invoke(build_app(), args)
        assert result.exit_code == 2, result.output
        assert expected in result.output and len(result.output.strip().splitlines()) == 1, result.output
        assert "Traceback" not in result.output
    assert not (tmp_path / "runs").exists()


def test_env_specific_checks_and_a_base_without_a_sampler(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="goes past OpenSpiel-v0's last task id"):
        train(tmp_path, "far", base="nanogpt_ppo", stages=({"name": "x", "tasks": "9999999999-9999999999"},))
    with pytest.raises(Exception, match="cannot train from a task sampler"):
        train(tmp_path, "random", base="random", stages=STAGES)


@pytest.mark.parametrize("name", ["curriculum-kuhn.toml", "curriculum-leduc.toml"])
def test_the_documented_stage_files_load(name: str) -> None:
    from llm_gym.agents.curriculum.train import base_agent
    from llm_gym.cli.common import ConfigSources, resolve_config

    path = Path(__file__).parents[2] / "docs" / "guides" / name
    config = resolve_config(CurriculumConfig, ConfigSources(config_file=path, seed=0))
    learner = base_agent(config)  # the learner's own keys are checked here, as `llm-gym train` does
    assert learner.config.num_envs * learner.config.num_steps >= 64 and len(config.stages) == 2
