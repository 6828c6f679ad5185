"""The echo agent: a third-party agent plugin's source, installed by the hook and preset tests the way pip would."""

from __future__ import annotations


def echo_plugin(*, learns: bool = True) -> str:
    """The source of module ``llm_gym_echo``: agent ``echo`` always takes ``--set always=N`` (0 by default)."""
    return f"""
    from dataclasses import dataclass
    import llm_gym
    from llm_gym import Agent, AgentConfig

    @dataclass(frozen=True, kw_only=True)
    class EchoConfig(AgentConfig):
        always: int = 0
        \"\"\"The action this agent always takes.\"\"\"

    class EchoPolicy:
        def __init__(self, action):
            self.action = action
        def act(self, observations, infos):
            return [self.action for _ in observations]

    class EchoAgent(Agent):
        name = "echo"
        description = "Always the same action."
        Config = EchoConfig
        learns = {learns}
        def train(self, env, run, callbacks=()):
            run.write_summary({{"env_steps": 0}})
            return {{"env_steps": 0}}
        def policy(self, env, checkpoint=None):
            return EchoPolicy(self.config.always)

    @llm_gym.hookimpl
    def register_agents(register):
        register(EchoAgent)
"""
