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
)

if [ "${DRY_RUN:-0}" = "1" ]; then
  printf '%s\n' "${ARGS[@]}" "$@"
  exit 0
fi
exec python3 -m verl.trainer.main_ppo "${ARGS[@]}" "$@"
