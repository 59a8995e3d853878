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

import os

import hydra
import pyarrow.parquet as pq
from omegaconf import OmegaConf

# rLLM's modules load only where rLLM is installed; agentboost's adapters need them too
from rllm.data.dataset import DatasetRegistry
from rllm.trainer.agent_trainer import AgentTrainer

from agentboost.integrations.rllm.agents import StrandsRLLMAgent, StrandsRLLMEnv
from agentboost.integrations.rllm.config import strands_args
from agentboost.integrations.rllm.patcher import PATCHED, Patcher, find_roots


def check_patched() -> None:
    """Training on an unpatched rLLM would silently run rLLM's own engine: refuse instead."""
    patcher = Patcher(find_roots(), out=lambda s: None)
    bad = [f"{st.path}: {st.state}" for st in patcher.status() if st.state != PATCHED]
    if bad:
        raise SystemExit("rLLM is not patched by this agentboost version; run `python apply_patches.py` "
                         "(docs/rllm.md):\n  " + "\n  ".join(bad))


def register(tasks_dir: str, out_dir: str) -> None:
    # agentboost's task rows (question, tests, limits) become each row's extra_info, which rLLM
    # merges into the environment's arguments: StrandsRLLMEnv takes them as the task.
    # rLLM's registry keeps its index and parquet files inside the installed rLLM (rllm/registry/,
    # rllm/data/datasets/); this run's go to its own output directory instead (OUT/datasets), so
    # the run writes nothing into rLLM's installation (tests/integrations/rllm/test_rllm_cpu_smoke.py)
    where = os.path.join(out_dir, "datasets")
    DatasetRegistry._REGISTRY_DIR = where
    DatasetRegistry._REGISTRY_FILE = os.path.join(where, "dataset_registry.json")
    DatasetRegistry._DATASET_DIR = where
    for split in ("train", "test"):
        rows = pq.read_table(f"{tasks_dir}/{split}.parquet").to_pylist()
        DatasetRegistry.register_dataset("agentboost_deepcoder", rows, split)


@hydra.main(config_path="pkg://rllm.trainer.config", config_name="ppo_trainer", version_base=None)
def main(config):
    check_patched()
    ab = OmegaConf.to_container(config.get("agentboost", {}), resolve=True) or {}
    register(ab.get("tasks_dir", "data/deepcoder"), str(config.trainer.default_local_dir))
    agent_args, env_args = strands_args(config)  # the agentboost block (the same that DRY_RUN=1 validates)
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
