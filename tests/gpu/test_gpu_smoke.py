"""On a CUDA machine: the GPU smoke check (two ~0.5B agents, HF generation, ZeRO-3 updates on mappa's
DeepSpeed backend) runs to the end and learns something measurable: figures are positive and finite."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

SMOKE = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_smoke.py"


def test_gpu_smoke_runs_two_agents_with_zero3(tmp_path):
    pytest.importorskip("deepspeed")
    out = tmp_path / "gpu_smoke.json"
    done = subprocess.run(
        [sys.executable, str(SMOKE), "--steps", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [a["parameters"] for a in result["agents"]] == [result["agents"][0]["parameters"]] * 2
    assert result["agents"][0]["parameters"] > 400e6
    for figure in ("median_generate_tokens_per_s", "median_train_tokens_per_s", "peak_gpu_memory_gb"):
        assert math.isfinite(result[figure]) and result[figure] > 0, figure
    for agent in result["agents"]:
        assert all(math.isfinite(step["grad_norm"]) and step["grad_norm"] > 0 for step in agent["steps"])
