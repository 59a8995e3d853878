# Sourced by the launch scripts (examples/verl_main_ppo.sh, examples/*/train_*.sh) with the name of
# the environment `bash setup.sh` makes for their path (.venv; .venv-rllm for the rLLM path): sets
# PYTHON, the interpreter they run, so that the documented commands work as written in a fresh shell.
#   1. $PYTHON, when set;
#   2. python3 from PATH when an environment of your own is active (VIRTUAL_ENV outside this
#      checkout: a cluster's install, `pip install agentboost` into the environment you activated);
#   3. this checkout's environment for the path, when setup.sh made it (whichever of this
#      checkout's environments is active: .venv has no rLLM, .venv-rllm no veRL 0.9.1);
#   4. python3 from PATH.
if [ -z "${PYTHON:-}" ]; then
  _checkout="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  if [ -n "${VIRTUAL_ENV:-}" ] && [[ "$VIRTUAL_ENV" != "$_checkout"/.venv* ]]; then
    PYTHON=python3
  elif [ -x "$_checkout/$1/bin/python" ]; then
    PYTHON="$_checkout/$1/bin/python"
  else
    PYTHON=python3
  fi
  unset _checkout
fi
