#!/usr/bin/env bash
# The CPU demo: set up .venv, prepare SmolLM2-135M-Instruct once, train three MathChat agents for two iterations.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/mappa models prepare smollm2
exec .venv/bin/mappa train configs/mathchat-cpu.yaml "$@"
