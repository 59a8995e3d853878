# Sourced by examples/*/train_*_with_strands.sh: stock veRL (python -m verl.trainer.main_ppo) with the
# Strands agent loop; agentboost only supplies the agent loop and the data. One place for the
# overrides the examples share, so a fix reaches all of them.
#
# The caller sets HERE (its folder, holding agent_loop.yaml), DATA_DIR, CKPT_DIR, EXPERIMENT and the
# sizes TRAIN_BATCH_SIZE, MAX_PROMPT_LENGTH, MAX_RESPONSE_LENGTH, PPO_MINI_BATCH_SIZE,
# PPO_MAX_TOKEN_LEN_PER_GPU, TEST_FREQ, SAVE_FREQ, then sources this file with its own arguments
# ("$@": more main_ppo overrides; the last one wins). DRY_RUN=1 prints the overrides instead.
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3-4B}
N_GPUS=${N_GPUS:-8}
NNODES=${NNODES:-1}
LORA_RANK=${LORA_RANK:-0}   # 0: full fine-tuning; e.g. 32 trains LoRA adapters instead
source "$(dirname "${BASH_SOURCE[0]}")/loggers.sh"   # TRAINER_LOGGER: W&B only with its credentials
source "$(dirname "${BASH_SOURCE[0]}")/python.sh" .venv  # PYTHON: $PYTHON, an activated env's, else .venv's

ARGS=(
  # --- data: rows written by the example's prepare_*_data.py; agent_name selects the agent loop
  data.train_files="$DATA_DIR/verl_train.parquet"
  data.val_files="$DATA_DIR/verl_test.parquet"
  data.train_batch_size=$TRAIN_BATCH_SIZE          # tasks per step (x rollout.n episodes)
  data.max_prompt_length=$MAX_PROMPT_LENGTH        # first prompt: system prompt, tool specs, the task
  data.max_response_length=$MAX_RESPONSE_LENGTH    # everything after it: all turns, tool results included
  data.filter_overlong_prompts=True                # drop tasks whose first prompt alone is too long
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
  actor_rollout_ref.actor.ppo_mini_batch_size=$PPO_MINI_BATCH_SIZE                # tasks per optimizer step (x n episodes)
  actor_rollout_ref.actor.use_dynamic_bsz=True
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=$PPO_MAX_TOKEN_LEN_PER_GPU    # >= prompt + response length
  actor_rollout_ref.actor.fsdp_config.param_offload=False      # True: weights on CPU between uses (less GPU memory, slower)
  actor_rollout_ref.actor.fsdp_config.optimizer_offload=False  # True: optimizer state on CPU
  # --- trainer
  trainer.n_gpus_per_node=$N_GPUS
  trainer.nnodes=$NNODES
  trainer.logger="$TRAINER_LOGGER"
  trainer.project_name=agentboost
  trainer.experiment_name=$EXPERIMENT
  trainer.val_before_train=True
  trainer.test_freq=$TEST_FREQ
  trainer.save_freq=$SAVE_FREQ
  trainer.total_epochs=1
  trainer.default_local_dir="$CKPT_DIR"
  # Hydra's log and the composed config go with the run's checkpoints (never ./outputs)
  'hydra.run.dir=${trainer.default_local_dir}/hydra/${now:%Y-%m-%d_%H-%M-%S}'
)

# CPU_SMOKE=1: the same stock main_ppo, end to end on a CPU machine in a few minutes: a test and
# development aid, not a way to train. veRL's CPU platform and the agentboost_cpu rollout come from
# agentboost's veRL plugin (agentboost/integrations/verl/cpu_platform.py, selected by the two
# VERL_* variables; nothing of veRL's is edited); the policy is the embedded SmolLM2-135M; FSDP2
# over gloo; two steps of 2 tasks x 2 episodes; no validation, no checkpoint, console logging. The
# data and the agent are the quickstart's calculator agent on 16 of its tasks, not this script's
# (SmolLM2 solves no math or code task, and GRPO with all-zero rewards would not update anything);
# every episode is written to $SMOKE_DIR/episodes for `agentboost check`. SMOKE_REWARD names another
# reward (a test uses a continuous one, so that no GRPO group is all-equal and step 1 always updates). The overrides below come
# last, so they win over the script's.
if [ "${CPU_SMOKE:-0}" = "1" ]; then
  # Ray's memory monitor kills a worker when the whole host passes 95% of its memory, whoever holds it:
  # on a small machine shared with other jobs it killed this smoke's 0.4 GB reward worker. Off for the
  # smoke (the kernel's OOM killer still guards real exhaustion); a cluster keeps Ray's default.
  export RAY_memory_monitor_refresh_ms=${RAY_memory_monitor_refresh_ms:-0}
  SMOKE_DIR=${SMOKE_DIR:-$(mktemp -d)}
  QUICKSTART="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/quickstart/data"
  mkdir -p "$SMOKE_DIR/episodes"
  if [ "${DRY_RUN:-0}" != "1" ]; then
    head -n 16 "$QUICKSTART/train.jsonl" > "$SMOKE_DIR/train.jsonl"
    head -n 4 "$QUICKSTART/test.jsonl" > "$SMOKE_DIR/test.jsonl"
    "$PYTHON" -m agentboost.cli data verl "$SMOKE_DIR/train.jsonl" --out "$SMOKE_DIR/train.parquet" >/dev/null
    "$PYTHON" -m agentboost.cli data verl "$SMOKE_DIR/test.jsonl" --out "$SMOKE_DIR/test.parquet" >/dev/null
    SMOKE_MODEL=$("$PYTHON" -c "from agentboost.models.loading import resolve_model_path; print(resolve_model_path('smollm2-135m-instruct'))")
  else
    SMOKE_MODEL=smollm2-135m-instruct  # what the run resolves to a path; DRY_RUN only composes
  fi
  cat > "$SMOKE_DIR/agent_loop.yaml" <<YAML
- name: strands_agent
  _target_: agentboost.integrations.verl.agent_loop.StrandsAgentLoop
  agent:
    tools: ["agentboost.tools.calculator:calculator"]
    system_prompt: "You are a helpful assistant with a calculator tool. Use the calculator for the arithmetic, then give the final answer as a number."
    max_model_calls: 3
    max_response_tokens: 192
  env: {reward: ${SMOKE_REWARD:-exact_answer}}
  max_new_tokens: 48
  episodes_dir: $SMOKE_DIR/episodes
YAML
  export VERL_USE_EXTERNAL_MODULES=agentboost.integrations.verl.cpu_platform VERL_PLATFORM=cpu WANDB_MODE=disabled
  ARGS+=(
    data.train_files="$SMOKE_DIR/train.parquet" data.val_files="$SMOKE_DIR/test.parquet"
    data.train_batch_size=2 data.max_prompt_length=512 data.max_response_length=256 data.filter_overlong_prompts=False
    actor_rollout_ref.model.path="$SMOKE_MODEL"
    actor_rollout_ref.model.lora_rank=0
    actor_rollout_ref.model.use_remove_padding=False                  # needs flash-attn's kernels
    actor_rollout_ref.model.enable_gradient_checkpointing=False
    +actor_rollout_ref.model.override_config.attn_implementation=sdpa # no flash-attn on CPU
    actor_rollout_ref.rollout.name=agentboost_cpu                     # agentboost's engine as veRL's replica
    actor_rollout_ref.rollout.agent.agent_loop_config_path="$SMOKE_DIR/agent_loop.yaml"
    actor_rollout_ref.rollout.agent.num_workers=1
    actor_rollout_ref.rollout.n=2
    actor_rollout_ref.rollout.free_cache_engine=False
    actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=False
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2
    actor_rollout_ref.rollout.val_kwargs.n=1
    actor_rollout_ref.actor.strategy=fsdp2                            # FSDP1 wants a GPU to sync module states
    actor_rollout_ref.actor.fsdp_config.model_dtype=fp32
    actor_rollout_ref.actor.optim.lr=1e-5
    actor_rollout_ref.actor.ppo_mini_batch_size=2
    actor_rollout_ref.actor.use_dynamic_bsz=False
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2
    trainer.n_gpus_per_node=1 trainer.nnodes=1
    trainer.logger='["console"]'
    trainer.experiment_name="${EXPERIMENT}_cpu_smoke"
    trainer.val_before_train=False trainer.test_freq=-1 trainer.save_freq=-1
    trainer.total_training_steps=2
    trainer.default_local_dir="$SMOKE_DIR/checkpoints"
    +ray_kwargs.ray_init.num_gpus=1                                   # logical: Ray's GPU resource schedules the CPU workers
    ray_kwargs.ray_init.num_cpus=32                                   # logical too: veRL starts many small actors
    +ray_kwargs.ray_init.address=local                                # a cluster of its own, never another run's
    +ray_kwargs.ray_init.include_dashboard=False                      # no dashboard processes on 2 cores
    data.dataloader_num_workers=0                                     # 16 tasks: no loader processes
  )
fi

if [ "${DRY_RUN:-0}" = "1" ]; then  # the overrides, then veRL's own composition and validation of them
  printf '%s\n' "${ARGS[@]}" "$@"
  exec "$PYTHON" -m agentboost.integrations.verl.config "${ARGS[@]}" "$@"
fi
exec "$PYTHON" -m verl.trainer.main_ppo "${ARGS[@]}" "$@"
