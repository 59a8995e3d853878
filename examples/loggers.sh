# Sourced by the training scripts (examples/verl_main_ppo.sh, examples/*/train_*_rllm.sh): the
# trainer's loggers. W&B only when it can log: its credentials are there (WANDB_API_KEY, or the
# api.wandb.ai entry `wandb login` writes to ~/.netrc) or it runs offline (WANDB_MODE=offline needs
# none). Otherwise the console and TensorBoard (under $TENSORBOARD_DIR, veRL's default
# tensorboard_log/PROJECT/EXPERIMENT), and one line on stderr says so: a run must not die at its
# first step on a login prompt, nor lose its curves silently.
if [ -n "${WANDB_API_KEY:-}" ] || [ "${WANDB_MODE:-}" = "offline" ] \
   || grep -qs "api.wandb.ai" "${NETRC:-$HOME/.netrc}"; then
  TRAINER_LOGGER='["console","wandb"]'
else
  TRAINER_LOGGER='["console","tensorboard"]'
  echo "note: no W&B credentials (WANDB_API_KEY or wandb login): logging to the console and TensorBoard (${TENSORBOARD_DIR:-tensorboard_log/})" >&2
fi
