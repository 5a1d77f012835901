"""Generation engines (HF transformers, vLLM) with per-token logprobs, and precision choices.

Model preparation (short names to local HF folders, the tiny test model) is `mappa.models`.
"""
