"""DeepCoder with a Strands code agent on the rLLM path (rLLM 1fc3c4b + its veRL fork, patched).

Run through train_deepcoder_with_strands_rllm.sh, which sets every override. Before the first run,
in the environment where rLLM is installed:

    python apply_patches.py            # from the agentboost checkout; --status to check
    agentboost data prepare deepcoder --out data/deepcoder

The configuration is rLLM's own Hydra ``ppo_trainer`` config (``rllm/trainer/config/ppo_trainer.yaml``
at the pinned commit) plus an ``agentboost`` block, added with ``+agentboost.KEY=VALUE``:

- ``agentboost.tasks_dir``: where ``agentboost data prepare`` wrote train.parquet / test.parquet;
- ``agentboost.reward``: the reward registered in agentboost (default ``code``);
- ``agentboost.failed_reward``: what a timed-out, crashed or errored episode scores (default 0);
- ``agentboost.max_model_calls``, ``agentboost.timeout_s``: the agent's limits;
- ``agentboost.tools``, ``agentboost.system_prompt``, ``agentboost.agent_type``: another agent than
  the code agent (the CPU smoke run's calculator agent);
- ``agentboost.cpu``: run on a machine without a GPU (``CPU_SMOKE=1`` in the shell script sets it):
  Ray with logical GPUs and agentboost's CPU adjustments of the fork in every worker
  (``agentboost/integrations/rllm/cpu.py``; a test and development aid).
"""

import hydra
import pyarrow.parquet as pq
from omegaconf import OmegaConf

# rLLM's modules load only where rLLM is installed; agentboost's adapters need them too
from rllm.data.dataset import DatasetRegistry
from rllm.trainer.agent_trainer import AgentTrainer

from agentboost.integrations.rllm.agents import StrandsRLLMAgent, StrandsRLLMEnv
from agentboost.integrations.rllm.patcher import PATCHED, Patcher, find_roots

SYSTEM_PROMPT = (
    "You are an expert competitive programmer. Write a complete Python solution. Test it with the "
    "test_code tool, fix what fails, then give the final solution in one ```python code block."
)


def check_patched() -> None:
    """Training on an unpatched rLLM would silently run rLLM's own engine: refuse instead."""
    patcher = Patcher(find_roots(), out=lambda s: None)
    bad = [f"{st.path}: {st.state}" for st in patcher.status() if st.state != PATCHED]
    if bad:
        raise SystemExit("rLLM is not patched by this agentboost version; run `python apply_patches.py` "
                         "(docs/rllm.md):\n  " + "\n  ".join(bad))


def register(tasks_dir: str) -> None:
    # agentboost's task rows (question, tests, limits) become each row's extra_info, which rLLM
    # merges into the environment's arguments: StrandsRLLMEnv takes them as the task
    for split in ("train", "test"):
        rows = pq.read_table(f"{tasks_dir}/{split}.parquet").to_pylist()
        DatasetRegistry.register_dataset("agentboost_deepcoder", rows, split)


@hydra.main(config_path="pkg://rllm.trainer.config", config_name="ppo_trainer", version_base=None)
def main(config):
    check_patched()
    ab = OmegaConf.to_container(config.get("agentboost", {}), resolve=True) or {}
    register(ab.get("tasks_dir", "data/deepcoder"))
    agent_args = {
        "tools": list(ab.get("tools", ["agentboost.tools.strands_code_tool:test_code"])),
        "system_prompt": ab.get("system_prompt", SYSTEM_PROMPT),
        "max_model_calls": int(ab.get("max_model_calls", 4)),
        # the whole episode's sampled tokens; the engine also caps it at data.max_response_length
        "max_response_tokens": int(config.data.max_response_length),
        "timeout_s": float(ab.get("timeout_s", 900)),
        "agent_type": ab.get("agent_type", "code"),
    }
    env_args = {"strands_env": {"reward": ab.get("reward", "code"),
                                "failed_reward": float(ab.get("failed_reward", 0.0))}}
    if ab.get("cpu", False):
        from agentboost.integrations.rllm.cpu import init_ray

        init_ray(num_gpus=int(config.trainer.n_gpus_per_node) * int(config.trainer.nnodes))
    trainer = AgentTrainer(
        agent_class=StrandsRLLMAgent, env_class=StrandsRLLMEnv, agent_args=agent_args, env_args=env_args,
        config=config,
        train_dataset=DatasetRegistry.load_dataset("agentboost_deepcoder", "train"),
        val_dataset=DatasetRegistry.load_dataset("agentboost_deepcoder", "test"),
    )
    trainer.train()


if __name__ == "__main__":
    main()
