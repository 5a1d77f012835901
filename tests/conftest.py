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
