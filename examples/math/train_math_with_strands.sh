#!/usr/bin/env bash
# GRPO on math problems with the Strands math agent (calculator tool), through veRL's stock trainer
# (python -m verl.trainer.main_ppo; agentboost only supplies the agent loop and the data).
#
# Assumes: one node with 8 GPUs of 80 GB (A100/H100) for Qwen3-4B with FSDP and one vLLM
# replica per GPU; for more nodes set NNODES and start Ray across them first (veRL's docs).
# Install on the cluster:  pip install 'verl[vllm]==0.9.1' agentboost   (vllm 0.24.0, torch 2.11.0)
# Data first:              python examples/math/prepare_math_data.py --out "$DATA_DIR"
# Check the overrides without GPUs (what the CPU tests do):  DRY_RUN=1 bash <this script>
# Any extra argument is passed on to main_ppo as one more override (the last one wins).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

DATA_DIR=${DATA_DIR:-$HOME/data/math_strands}
CKPT_DIR=${CKPT_DIR:-$HOME/checkpoints/math_strands}
EXPERIMENT=math_strands_qwen3_4b
TRAIN_BATCH_SIZE=128            # tasks per step (x rollout.n episodes)
MAX_PROMPT_LENGTH=1024          # system prompt, tool spec, problem
MAX_RESPONSE_LENGTH=8192        # all turns, tool results included
PPO_MINI_BATCH_SIZE=32          # tasks per optimizer step
PPO_MAX_TOKEN_LEN_PER_GPU=18432 # >= prompt + response length
TEST_FREQ=20
SAVE_FREQ=40

source "$HERE/../verl_main_ppo.sh"
