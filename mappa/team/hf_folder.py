"""One agent as a standalone Hugging Face model folder that current and older transformers and vLLM read.

    config.json              the architecture, with the rope settings in both forms (below) and the dtype
    model.safetensors        the weights in the dtype asked (float32, bfloat16 or float16)
    generation_config.json   the model's own (its end-of-turn token among eos_token_id)
    tokenizer.json, tokenizer_config.json, chat_template.jinja   the tokenizer and its chat template

Compatibility, checked here on 2026-12-06 (transformers 5.19 writes the folders; 4.46.3 installed apart):
transformers 5 writes the rope settings only as `rope_parameters: {rope_type, rope_theta, ...}`, which
transformers 4.x ignores: 4.46.3 then loads SmolLM2 (rope_theta 100000) silently with its default 10000, and
every position is encoded wrongly. So config.json also gets the older form, `rope_theta` beside
`rope_scaling` (null for the default rope, else the scaling settings with `type` and `rope_type`);
transformers 5.19 reads a config with both forms to the same `rope_parameters`, 4.46.3 reads
`rope_theta` 100000. vLLM reads config.json through the transformers it is installed with, so the same
holds for it. `torch_dtype` (4.x) is written beside `dtype` (5.x). The tokenizer's class is written as
`PreTrainedTokenizerFast` (5.x writes `TokenizersBackend`, a name 4.x does not know; 5.19 loads either as
the same class) and the chat template goes into tokenizer_config.json too (4.x before 4.43 reads it only
there).

Not covered: models whose `rope_parameters` differ per layer type (Gemma 3): their config is kept as
transformers wrote it; quantised formats (GGUF, AWQ).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

DTYPES = ("float32", "bfloat16", "float16")
"""The dtypes a folder's weights may be written in."""
FORBIDDEN = ("trainer_state.pt", "optimizer.pt", "deepspeed", "adapter")
"""What a model folder must never hold: optimizer state, DeepSpeed shards, an unmerged adapter."""
LOAD_ARGUMENTS = ("is_local", "local_files_only")
"""Keys transformers 5 copies from `from_pretrained`'s arguments into a saved tokenizer_config.json: how
this machine loaded it, not part of the tokenizer."""


def portable_config(config: dict[str, Any], dtype: str) -> dict[str, Any]:
    """`config` (a config.json as transformers 5 writes it) with the rope settings also in the form older
    transformers read (`rope_theta`, `rope_scaling`) and the dtype under both its names."""
    out = {**config, "dtype": dtype, "torch_dtype": dtype}
    rope = config.get("rope_parameters")
    if isinstance(rope, dict) and "rope_theta" in rope:  # one rope for every layer
        kind = rope.get("rope_type", "default")
        scaling = {key: value for key, value in rope.items() if key != "rope_theta"}
        out["rope_theta"] = rope["rope_theta"]
        out["rope_scaling"] = None if kind == "default" else {**scaling, "type": kind, "rope_type": kind}
    return out


def portable_tokenizer_config(config: dict[str, Any], chat_template: str | None) -> dict[str, Any]:
    """tokenizer_config.json readable by transformers 4.x too: a class name it knows, the chat template
    inline."""
    out = {key: value for key, value in config.items() if key not in LOAD_ARGUMENTS}
    if out.get("tokenizer_class") in (None, "TokenizersBackend"):
        out["tokenizer_class"] = "PreTrainedTokenizerFast"
    if chat_template and "chat_template" not in out:
        out["chat_template"] = chat_template
    return out


def write_model_folder(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: Path, dtype: str
) -> list[str]:
    """Write `model` (cast to `dtype`) and `tokenizer` into `folder` (made here) as above; the file names."""
    import torch

    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    folder.mkdir(parents=True, exist_ok=False)
    model = model.to(getattr(torch, dtype))
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    _rewrite_json(folder / "config.json", lambda config: portable_config(config, dtype))
    template = getattr(tokenizer, "chat_template", None)
    _rewrite_json(
        folder / "tokenizer_config.json",
        lambda config: portable_tokenizer_config(config, template if isinstance(template, str) else None),
    )
    for path in folder.iterdir():
        path.chmod(0o644)  # some writers make files private; an export is meant to be shared
    found = [name for name in FORBIDDEN if (folder / name).exists()]
    if found:
        raise RuntimeError(f"model folder {folder} holds {found}: an export must hold weights only")
    return sorted(path.name for path in folder.iterdir())


def _rewrite_json(path: Path, change) -> None:
    if path.is_file():
        path.write_text(json.dumps(change(json.loads(path.read_text())), indent=2, sort_keys=True) + "\n")
