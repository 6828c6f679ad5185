"""Plugins are discovered through the ``llm_gym`` entry-point group; broken ones are reported and skipped."""

from __future__ import annotations

import inspect
from pathlib import Path

from echo_plugin import echo_plugin  # tests/plugins/echo_plugin.py
from typer.testing import CliRunner

from llm_gym import hookspecs
from llm_gym.cli import build_app
from llm_gym.plugins import agents, get_agent, get_backend, plugin_failures, plugins

AGENT_PLUGIN = echo_plugin(learns=False)


def test_register_agents_hook(install_plugin) -> None:
    install_plugin("llm_gym_echo", AGENT_PLUGIN)
    assert get_agent("echo").description == "Always the same action."
    assert {"random", "scripted", "echo"} <= set(agents())
    echo = [p for p in plugins() if p.name == "llm_gym_echo"][0]
    assert echo.loaded and echo.distribution == "llm-gym-echo"
    result = CliRunner().invoke(
        build_app(),
        [
            "play",
            "--agent",
            "echo",
            "--env",
            "LLMBreakout-text-v0",
            "--episodes",
            "1",
            "--max-steps",
            "20",
            "--set",
            "always=1",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert '"agent": "echo"' in result.output


def test_register_backends_hook(install_plugin) -> None:
    install_plugin(
        "llm_gym_backend",
        """
        import llm_gym

        def make(model, **options):
            return ("backend", model, options)

        @llm_gym.hookimpl
        def register_backends(register):
            register("fake-engine", make)
        """,
    )
    assert get_backend("fake-engine")("m", temperature=0) == ("backend", "m", {"temperature": 0})


def test_register_commands_hook(install_plugin) -> None:
    install_plugin(
        "llm_gym_hello",
        """
        import llm_gym

        @llm_gym.hookimpl
        def register_commands(app):
            @app.command("hello")
            def hello(name: str = "world") -> None:
                print(f"hello {name}")
        """,
    )
    result = CliRunner().invoke(build_app(), ["hello", "--name", "gym"])
    assert result.exit_code == 0 and "hello gym" in result.output


def test_broken_plugin_is_reported_and_skipped(install_plugin) -> None:
    install_plugin("llm_gym_broken", "raise ImportError('needs libfoo')\n")
    failures = plugin_failures()
    assert any("llm_gym_broken" in line and "needs libfoo" in line for line in failures)
    assert "scripted" in agents(), "the other plugins keep working"
    result = CliRunner().invoke(build_app(), ["plugins"])
    assert result.exit_code == 0 and "failed" in result.output and "needs libfoo" in result.output


def test_misspelled_hook_is_reported(install_plugin) -> None:
    install_plugin(
        "llm_gym_typo",
        """
        import llm_gym

        @llm_gym.hookimpl
        def register_agent(register):  # missing "s"
            pass
        """,
    )
    assert any("llm_gym_typo" in line and "register_agent" in line for line in plugin_failures())


def test_duplicate_agent_name_is_reported(install_plugin) -> None:
    install_plugin(
        "llm_gym_dupe",
        """
        import llm_gym
        from llm_gym.agents.baselines import RandomAgent

        class Impostor(RandomAgent):
            description = "another random"

        @llm_gym.hookimpl
        def register_agents(register):
            register(Impostor)
        """,
    )
    assert get_agent("random").description != "another random", "the first registration is kept"
    assert any("'random'" in line and "llm_gym_dupe" in line for line in plugin_failures())


def test_a_plugin_command_cannot_replace_a_builtin(install_plugin) -> None:
    install_plugin(
        "llm_gym_hijack",
        """
        import llm_gym

        @llm_gym.hookimpl
        def register_commands(app):
            @app.command("play")
            def play() -> None:
                print("hijacked")

            @app.command()
            def greet() -> None:
                print("greetings")
        """,
    )
    app = build_app()
    result = CliRunner().invoke(app, ["play", "--help"])
    assert result.exit_code == 0 and "hijacked" not in result.output and "--checkpoint" in result.output
    assert CliRunner().invoke(app, ["greet"]).output == "greetings\n", "its other commands still come in"
    clash = [line for line in plugin_failures() if "'play'" in line and "llm_gym_hijack" in line]
    assert len(clash) == 1 and "ignored" in clash[0]
    listing = CliRunner().invoke(app, ["plugins"])
    assert "llm_gym_hijack" in listing.output and "'play'" in listing.output


def test_every_hook_has_a_test() -> None:
    hooks = [name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("register_")]
    source = Path(__file__).read_text()
    assert hooks
    for hook in hooks:
        assert f"def test_{hook}_hook" in source, f"hook {hook} has no test"


def test_builtin_agents_come_through_entry_points() -> None:
    names = {p.name: p for p in plugins()}
    assert names["baselines"].distribution == "llm-gym" and names["baselines"].loaded


def test_a_plugin_exiting_at_import_is_reported_and_the_cli_still_answers(install_plugin, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    install_plugin("llm_gym_quitter", "import sys\nsys.exit(3)\n")
    assert any("llm_gym_quitter" in line and "SystemExit: 3" in line for line in plugin_failures())
    assert "scripted" in agents(), "the other plugins keep working"
    # the real script, with the plugin installed on its path
    script = Path(sys.executable).parent / "llm-gym"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "llm_gym_quitter")}
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("llm-gym "), (done.returncode, done.stderr)
    listing = subprocess.run([str(script), "plugins"], capture_output=True, text=True, env=env, timeout=120)
    assert listing.returncode == 0 and "SystemExit: 3" in listing.stdout


def test_base_exceptions_from_a_plugin_are_reported_not_obeyed(install_plugin) -> None:
    install_plugin(
        "llm_gym_rude",
        """
        import llm_gym

        class Stop(BaseException):
            pass

        @llm_gym.hookimpl
        def register_agents(register):
            raise KeyboardInterrupt

        @llm_gym.hookimpl
        def register_backends(register):
            raise Stop("no backends for you")

        @llm_gym.hookimpl
        def register_commands(app):
            raise SystemExit(130)
        """,
    )
    failures = plugin_failures()
    assert "scripted" in agents()
    app = build_app()  # neither exits nor raises
    failures = plugin_failures()
    for hook, said in [("register_agents", "KeyboardInterrupt"), ("register_backends", "Stop: no backends for you"),
                       ("register_commands", "SystemExit: 130")]:  # fmt: skip
        assert any(hook in line and "llm_gym_rude" in line and said in line for line in failures), (hook, failures)
    assert CliRunner().invoke(app, ["agents"]).exit_code == 0


def test_a_real_ctrl_c_while_a_plugin_loads_still_stops(install_plugin) -> None:
    import signal

    import pytest

    # A pytest started in the background (nohup, `&` without job control) inherits SIGINT ignored, and then rightly
    # nothing stops; a terminal's Ctrl-C reaches Python's own handler, which is the case this test stands for.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        install_plugin("llm_gym_slow", "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)\n")
        with pytest.raises(KeyboardInterrupt):
            plugins()
    finally:
        signal.signal(signal.SIGINT, inherited)


def test_a_plugin_that_removes_a_builtin_command_to_replace_it_is_reported(install_plugin) -> None:
    install_plugin(
        "llm_gym_swap",
        """
        import llm_gym

        @llm_gym.hookimpl
        def register_commands(app):
            app.registered_commands[:] = [c for c in app.registered_commands if c.name not in ("play", "envs")]

            @app.command("play")
            def play() -> None:
                print("swapped")

            @app.command("envs")
            def envs() -> None:
                print("swapped")
        """,
    )
    app = build_app()
    for command in ("play", "envs"):
        result = CliRunner().invoke(app, [command, "--help"])
        assert result.exit_code == 0 and "swapped" not in result.output, result.output
        assert any(f"{command!r}" in line and "llm_gym_swap" in line for line in plugin_failures())
    assert "--checkpoint" in CliRunner().invoke(app, ["play", "--help"]).output
