"""Shared test setup: offline hubs, quiet Prefect, and a tiny random-init llama with the real tokenizer."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402 - the environment above must be set before any hub import

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A random-init LlamaForCausalLM (hidden 64, 2 layers) with SmolLM2's tokenizer and chat template."""
    from mappa.inference.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` run only where CUDA is available."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_sessionstart(session):
    """In CI (MAPPA_REQUIRE_BWRAP=1) the sandbox's isolation tests must run, not skip."""
    if os.environ.get("MAPPA_REQUIRE_BWRAP") == "1":
        from mappa.sandbox.runner import _probe_bwrap

        ok, reason = _probe_bwrap()
        if not ok:
            raise pytest.UsageError(f"MAPPA_REQUIRE_BWRAP=1 but bubblewrap cannot sandbox here: {reason}")


@pytest.fixture
def trajectory():
    """One MathChat trajectory with a successful and a crashed tool run, and an action without a tool."""
    from mappa.core.types import Action, Problem, ToolResult, Trajectory

    problem = Problem("p1", "What is 2+2?", "4", {"kind": "arithmetic"})
    tool = ToolResult("4\n", "", 0, False, 0.05, ("out.txt",))
    actions = (
        Action("t1", "p1", "solver", 0, 0, "obs", "prompt", "2+2=4", (1, 2), (3, 4), (-0.5, -0.25)),
        Action(
            "t1",
            "p1",
            "executor",
            1,
            0,
            "obs2",
            "prompt2",
            "```python\nprint(4)\n```",
            (1,),
            (5,),
            (-1.0,),
            tool_call="print(4)",
            tool_result=tool,
        ),
    )
    crashed = ToolResult("", "SyntaxError", 1, False, 0.2, ())
    actions += (
        Action(
            "t1",
            "p1",
            "executor",
            2,
            1,
            "o3",
            "p3",
            "```python\nx(\n```",
            (1,),
            (6,),
            (-2.0,),
            tool_call="x(",
            tool_result=crashed,
        ),
        Action("t1", "p1", "verifier", 3, 0, "o4", "p4", "no box", (1,), (7,), (-0.1,)),
    )
    return Trajectory("t1", problem, actions, "4", True)
