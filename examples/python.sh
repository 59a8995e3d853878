# Sourced by the launch scripts (examples/verl_main_ppo.sh, examples/*/train_*.sh) with the name of
# the environment `bash setup.sh` makes for their path (.venv, or .venv-rllm for the rLLM path):
# sets PYTHON, the interpreter they run, so that the documented commands work in a fresh shell.
#   1. $PYTHON, when set;
#   2. python3 from PATH when a virtual environment other than this checkout's is active (a
#      cluster's own install: `pip install agentboost` into the environment you activated);
#   3. this checkout's environment, when setup.sh made it;
#   4. python3 from PATH.
if [ -z "${PYTHON:-}" ]; then
  _checkout_env="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/$1"
  if [ -n "${VIRTUAL_ENV:-}" ] && [ "$VIRTUAL_ENV" != "$_checkout_env" ]; then
    PYTHON=python3
  elif [ -x "$_checkout_env/bin/python" ]; then
    PYTHON="$_checkout_env/bin/python"
  else
    PYTHON=python3
  fi
  unset _checkout_env
fi
