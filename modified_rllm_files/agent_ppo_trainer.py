# agentboost-override: rllm/trainer/verl/agent_ppo_trainer.py (rLLM 1fc3c4b), installed by apply_patches.py
"""rLLM's agent PPO trainer with agentboost's trajectory -> batch transform.

rLLM's original module is kept beside this one as ``agent_ppo_trainer_upstream.py``; every name it
defines is re-exported here. Only ``_transform_agent_trajectories`` changes (see
``agentboost.integrations.rllm.trainer``): one row per trajectory, attention mask from lengths,
failed episodes kept in their GRPO group with the failed reward and their status in the batch's
non-tensor fields. The upstream module already imports the engine from
``rllm.engine.agent_execution_engine``, i.e. agentboost's override of it.
"""

from rllm.trainer.verl import agent_ppo_trainer_upstream as _upstream
from rllm.trainer.verl.agent_ppo_trainer_upstream import *  # noqa: F401,F403 - the module's public names

from agentboost.integrations.rllm.trainer import transform_trajectories


class AgentPPOTrainer(_upstream.AgentPPOTrainer):
    __doc__ = _upstream.AgentPPOTrainer.__doc__

    def _transform_agent_trajectories(self, trajectories: list[dict]):
        return transform_trajectories(self, trajectories)
