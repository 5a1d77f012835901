"""How the benchmarks in this folder report an interleaved A/B comparison: machine facts, medians, ratios,
verdicts against a target, a rich table and a JSON file.

Why interleaved: timings on shared machines drift by up to 40% over minutes (docs/pitfalls.md), so a figure
measured an hour apart from its baseline says little. Each benchmark runs both sides inside one run,
alternating A, B, A, B, ... and compares medians, so a slow minute hits both sides alike.

Not covered: statistics beyond the median (no confidence intervals; with the default 3 repeats a reader
should look at the per-repeat rows as well).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console(width=None if sys.stdout.isatty() else 120)  # a log file gets untruncated tables


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info(threads: int) -> dict[str, Any]:
    """What a reader needs to compare a result with their own machine's."""
    import torch
    import transformers

    from mappa.inference.precision import cpu_has_native_bf16, resolve_bf16

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": threads,
        "bf16_native": cpu_has_native_bf16(),
        "bf16_autocast": resolve_bf16("auto"),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "platform": platform.platform(),
    }


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    table = Table(title=title, title_justify="left")
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*(_cell(value) for value in row))
    console.print(table)


def print_facts(title: str, facts: dict[str, Any]) -> None:
    print_table(title, ("what", "value"), [(key, value) for key, value in facts.items()])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def write_json(path: str | Path, data: dict[str, Any]) -> Path:
    """Write `data` to `path` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    return path


def default_out(name: str) -> str:
    return str(Path(__file__).resolve().parent / "results" / f"{name}.json")


def load_causal_lm(model: str, threads: int):
    """(tokenizer, fp32 model in eval mode) of `model` as mappa resolves it (`smollm2`: the shipped model),
    with torch on `threads` threads (set before torch's first import where it is imported here first)."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mappa.models.prepare import resolve_model

    torch.set_num_threads(threads)
    path = resolve_model(model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    return tokenizer, AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def benchmark_model(model: str, tiny: bool, scratch: Path) -> str:
    """The model folder a benchmark runs on: `model` as mappa resolves it (`smollm2`: the shipped model), or
    with `tiny` a tiny random model built under `scratch` (for smoke runs; its speed means nothing)."""
    if tiny:
        from mappa.models.tiny_model import build_tiny_model

        return str(build_tiny_model(scratch / "tiny-model"))
    from mappa.models.prepare import resolve_model

    return resolve_model(model)
