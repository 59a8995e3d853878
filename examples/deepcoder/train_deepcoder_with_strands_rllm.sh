#!/usr/bin/env bash
# DeepCoder with a Strands code agent on the rLLM path: rLLM 1fc3c4b + agentica's veRL fork,
# patched by `python apply_patches.py`. For new setups prefer the veRL agent-loop path
# (examples/deepcoder/train_deepcoder_with_strands.sh): stock veRL from PyPI, no patching.
#
# Assumes one node with 8 GPUs of 80 GB (the seed's runs: Qwen3-4B, 8 episodes per task).
# Every override below is a key of rLLM's ppo_trainer.yaml at the pinned commit, or (with +) a new
# key; the comment says why it is set.
set -euo pipefail
set -x

MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3-4B}          # a local path or a hub name in your cache
TASKS_DIR=${TASKS_DIR:-data/deepcoder}             # from `agentboost data prepare deepcoder --out data/deepcoder`
OUT_DIR=${OUT_DIR:-checkpoints/agentboost-rllm/deepcoder-qwen3-4b}

export VLLM_USE_V1=1                               # the fork's async server drives vLLM's V1 engine
export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1             # the fork raises max_model_len to at least 32k
export PYTORCH_CUDA_ALLOC_CONF="expandable_segments:False"  # vLLM sleep mode needs it off
ulimit -n 1048576 || true                          # many episodes, many sockets
source "$(dirname "$0")/../loggers.sh"             # TRAINER_LOGGER: W&B only with its credentials
source "$(dirname "$0")/../python.sh" .venv-rllm   # PYTHON: $PYTHON, an activated env's, else .venv-rllm's

launch() {  # DRY_RUN=1: print the Hydra overrides, one a line, then compose them with rLLM's config and
            # validate them as the run would (agentboost/integrations/rllm/config.py), instead of starting it
  if [ "${DRY_RUN:-0}" = "1" ]; then
    shift 2; printf '%s\n' "$@"
    exec "$PYTHON" -m agentboost.integrations.rllm.config "$@"
  fi
  exec "$@"
}

# CPU_SMOKE=1: the same rLLM AgentTrainer, end to end on a CPU machine in a few minutes: a test and
# development aid, not a way to train. The fork's CUDA-only calls are adjusted in every Ray worker and
# the rollout is agentboost's engine behind the fork's async-server interface, with the actor's
# weights pulled at every wake_up (agentboost/integrations/rllm/cpu.py; nothing of rLLM's or the
# fork's is edited); the policy is the embedded SmolLM2-135M; FSDP over gloo on 1 logical GPU; two
# steps of 2 tasks x 2 episodes, then rLLM's final validation (2 tasks); no checkpoint, console logging. The data and the
# agent are the quickstart's calculator agent on 6 of its tasks (SmolLM2 solves no code task);
# SMOKE_REWARD names another reward (a test uses a continuous one so that every GRPO group has a
# gradient). Episodes and chat logs land in $SMOKE_DIR/out/episodes/<step>.jsonl. rLLM must be
# patched first (`python apply_patches.py`). These overrides come last, so they win.
SMOKE=()
if [ "${CPU_SMOKE:-0}" = "1" ]; then
  # Ray's memory monitor counts the whole host's memory: off for the smoke, as in examples/verl_main_ppo.sh
  export RAY_memory_monitor_refresh_ms=${RAY_memory_monitor_refresh_ms:-0}
  SMOKE_DIR=${SMOKE_DIR:-$(mktemp -d)}
  QUICKSTART="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/quickstart/data"
  if [ "${DRY_RUN:-0}" != "1" ]; then
    "$PYTHON" - "$QUICKSTART" "$SMOKE_DIR" <<'PY'
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
src, out = sys.argv[1:]
for split, n in (("train", 6), ("test", 2)):  # 6 tasks = 3 batches of 2 (see total_training_steps)
    rows = [json.loads(line) for line in open(f"{src}/{split}.jsonl")][:n]
    pq.write_table(pa.Table.from_pylist([{k: r[k] for k in ("task_id", "question", "answer")} for r in rows]),
                   f"{out}/{split}.parquet")
PY
    # the embedded model, its tokenizer class named as the fork's transformers 4.x knows it
    SMOKE_MODEL=$("$PYTHON" -c "import sys; from agentboost.models.loading import resolve_model_path as r; from agentboost.integrations.rllm.cpu import transformers4_model_dir as d; print(d(r('smollm2-135m-instruct'), sys.argv[1]))" "$SMOKE_DIR/model")
  else
    SMOKE_MODEL=smollm2-135m-instruct  # what the run resolves to a path; DRY_RUN only prints
  fi
  export WANDB_MODE=disabled
  SMOKE=(
    agentboost.tasks_dir="$SMOKE_DIR" agentboost.reward="${SMOKE_REWARD:-exact_answer}"
    agentboost.max_model_calls=3 agentboost.timeout_s=300
    +agentboost.cpu=True +agentboost.agent_type=calculator
    '+agentboost.tools=["agentboost.tools.calculator:calculator"]'
    "+agentboost.system_prompt='You are a helpful assistant with a calculator tool. Use the calculator for the arithmetic, then give the final answer as a number.'"
    data.train_batch_size=2 data.val_batch_size=2 data.max_prompt_length=512 data.max_response_length=256
    +data.dataloader_num_workers=0                                   # 6 tasks: no loader processes (the fork starts 8)
    actor_rollout_ref.model.path="$SMOKE_MODEL"
    actor_rollout_ref.model.use_remove_padding=False                  # needs flash-attn's kernels
    actor_rollout_ref.model.enable_gradient_checkpointing=False
    +actor_rollout_ref.model.override_config._attn_implementation=sdpa # the fork asks for flash-attn; none on CPU
    actor_rollout_ref.actor.ppo_mini_batch_size=2 actor_rollout_ref.actor.use_dynamic_bsz=False
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 actor_rollout_ref.actor.ppo_max_token_len_per_gpu=1024
    actor_rollout_ref.actor.optim.lr=1e-5
    actor_rollout_ref.actor.fsdp_config.param_offload=False actor_rollout_ref.ref.fsdp_config.param_offload=False
    actor_rollout_ref.rollout.name=agentboost_cpu                     # agentboost's engine as the fork's async server
    actor_rollout_ref.rollout.tensor_model_parallel_size=1
    actor_rollout_ref.rollout.n=2
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2 actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2
    agent.trajectory_timeout=300
    agent.engine_args.agentboost_workers_per_server=1 agent.engine_args.agentboost_slots=4
    trainer.logger=[console] trainer.default_local_dir="$SMOKE_DIR/out"
    trainer.val_before_train=False trainer.test_freq=-1 trainer.save_freq=-1
    trainer.n_gpus_per_node=1 trainer.total_epochs=1
    trainer.total_training_steps=3  # rLLM's loop trains total-1 steps, then validates and stops: 2 steps
  )
fi

launch "$PYTHON" "$(dirname "$0")/train_deepcoder_with_strands_rllm.py" \
    +agentboost.tasks_dir="$TASKS_DIR" `# agentboost task files (train.parquet / test.parquet)` \
    +agentboost.reward=code `# hidden tests in agentboost's sandbox; pass-all = 1` \
    +agentboost.failed_reward=0.0 `# a timeout/crash/error scores this and stays in its group` \
    +agentboost.max_model_calls=4 `# write, test, fix, answer` \
    +agentboost.timeout_s=900 `# per episode` \
    algorithm.adv_estimator=grpo `# group-relative advantages over the 8 episodes of a task` \
    algorithm.mask_truncated_samples=False `# truncated episodes train with their (failed) reward` \
    algorithm.clip_advantages=False \
    data.train_batch_size=32 `# tasks per step (x rollout.n episodes)` \
    data.val_batch_size=256 \
    data.max_prompt_length=2048 `# the first prompt: system prompt, tool block, problem` \
    data.max_response_length=16384 `# everything after it: sampled turns and tool results` \
    actor_rollout_ref.model.path="$MODEL_PATH" \
    actor_rollout_ref.hybrid_engine=True `# FSDP and vLLM share the GPUs; wake_up() syncs weights` \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.model.enable_gradient_checkpointing=True \
    actor_rollout_ref.model.lora_rank=0 `# set e.g. 32 (and lora_alpha) for LoRA` \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size=16 `# tasks per optimizer step` \
    actor_rollout_ref.actor.use_dynamic_bsz=True \
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=24000 `# >= prompt + response length` \
    actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean `# the seed's setting` \
    actor_rollout_ref.actor.clip_ratio_low=0.2 \
    actor_rollout_ref.actor.clip_ratio_high=0.28 `# clip-higher, as DeepCoder` \
    actor_rollout_ref.actor.use_kl_loss=False \
    actor_rollout_ref.actor.entropy_coeff=0 \
    actor_rollout_ref.actor.ulysses_sequence_parallel_size=1 \
    actor_rollout_ref.actor.fsdp_config.param_offload=False \
    actor_rollout_ref.actor.fsdp_config.optimizer_offload=False \
    actor_rollout_ref.ref.fsdp_config.param_offload=True \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.mode=async `# required: episodes reach the fork's async vLLM servers over HTTP` \
    actor_rollout_ref.rollout.chat_scheduler=verl.schedulers.completions_scheduler.CompletionsScheduler `# as rLLM's async scripts` \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 `# a 4B model fits one GPU` \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.7 \
    actor_rollout_ref.rollout.enforce_eager=False \
    actor_rollout_ref.rollout.temperature=1.0 `# training sampling (the agent cannot change it)` \
    actor_rollout_ref.rollout.top_p=1.0 \
    actor_rollout_ref.rollout.n=8 `# episodes per task: one GRPO group` \
    actor_rollout_ref.rollout.val_kwargs.temperature=0.6 `# validation sampling (used for validation only)` \
    actor_rollout_ref.rollout.val_kwargs.top_p=0.95 \
    actor_rollout_ref.rollout.val_kwargs.n=1 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1 \
    agent.async_engine=True `# the trainer consumes episodes as they finish` \
    agent.use_stepwise_advantage=False `# one row per episode (Strands episodes are token rows)` \
    agent.trajectory_timeout=900 `# also caps each episode's timeout` \
    +agent.engine_args.agentboost_workers_per_server=4 `# agentboost worker processes per vLLM server` \
    +agent.engine_args.agentboost_slots=32 `# episodes per worker at once` \
    trainer.rejection_sample=False `# keep every group, even all-pass / all-fail ones` \
    trainer.critic_warmup=0 \
    trainer.logger="$TRAINER_LOGGER" `# console + W&B with credentials, else console + TensorBoard` \
    trainer.project_name=agentboost-rllm \
    trainer.experiment_name=deepcoder-qwen3-4b \
    trainer.default_local_dir="$OUT_DIR" `# checkpoints, chat logs, agentboost episode JSONL, the datasets` \
    'hydra.run.dir=${trainer.default_local_dir}/hydra/${now:%Y-%m-%d_%H-%M-%S}' `# Hydra's log, not ./outputs` \
    trainer.val_before_train=True \
    trainer.n_gpus_per_node=8 \
    trainer.nnodes=1 \
    trainer.save_freq=10 \
    trainer.test_freq=10 \
    trainer.total_epochs=1 \
    "${SMOKE[@]}" \
    "$@"
