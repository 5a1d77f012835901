"""Convert a GGUF chat checkpoint into a plain float32 HF folder (weights, config, tokenizer, chat template).

`convert_gguf_tokenizer` saves the GGUF's tokenizer as HF files with the chat template (the GGUF's own, or
a given one where it carries none), eos/pad and context length set. `convert_gguf_model` reads the config
from the GGUF metadata, builds the model from it on the meta device (no memory), dequantizes every GGUF
tensor to float32 and assigns it in place (all parameters must be covered, a tied lm_head aside), and
saves it with a generation config. Both return metadata (source path, size, sha256) for the prepared
folder's marker file. Peak memory is about the float32 weights once plus the mapped GGUF: 4.1 GB for
Qwen2.5-Coder-0.5B (a model built in memory first and then filled took 6.6 GB), with identical weights.

Why not `from_pretrained(gguf_file=...)` and `save_pretrained`: transformers refuses to save a model loaded
that way ("quantized with gguf and is not serializable") and needs `accelerate` for it; building from the
config and loading the dequantized tensors needs neither. Checked with transformers 5.19 on llama
(SmolLM2) and qwen2 (Qwen2.5-Coder) GGUFs.

What this does not do: keep any quantization (the folder is float32), or handle architectures whose GGUF
tensors transformers cannot map (the load then fails naming the missing and unexpected keys).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TOKENIZER_CONFIG_NOISE = ("is_local", "local_files_only")


@dataclass(frozen=True)
class GGUFSource:
    """A GGUF checkpoint and the chat settings its HF folder should carry.

    `locate(cache_root)` returns the GGUF's path (assembling it under `cache_root` first where it comes in
    parts); `chat_template` is used only when the GGUF carries none (None: the GGUF must carry one).
    """

    locate: Callable[[Path], Path]
    chat_template: str | None
    eos_token: str
    max_length: int


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _source_meta(path: Path) -> dict[str, Any]:
    return {"source": str(path), "source_bytes": path.stat().st_size, "source_sha256": _file_sha256(path)}


def _clean_tokenizer_config(out_dir: Path) -> None:
    """Drop load-time flags that `save_pretrained` copies into tokenizer_config.json."""
    path = out_dir / "tokenizer_config.json"
    data = json.loads(path.read_text())
    for key in _TOKENIZER_CONFIG_NOISE:
        data.pop(key, None)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def convert_gguf_tokenizer(source: GGUFSource, out_dir: Path, cache_root: Path) -> dict[str, Any]:
    """Save the GGUF's tokenizer as HF files, with chat template, eos/pad and context length set."""
    from transformers import AutoTokenizer

    gguf = source.locate(cache_root)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if not tokenizer.chat_template:
        if source.chat_template is None:
            raise ValueError(f"{gguf} carries no chat template (tokenizer.chat_template) and none is given")
        tokenizer.chat_template = source.chat_template
    tokenizer.eos_token = source.eos_token
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.model_max_length = source.max_length
    tokenizer.save_pretrained(out_dir)
    _clean_tokenizer_config(out_dir)
    ids = {f"{role}_token_id": getattr(tokenizer, f"{role}_token_id") for role in ("bos", "eos", "pad")}
    return {"kind": "tokenizer", "vocab_size": len(tokenizer), **ids, **_source_meta(gguf)}


def _clean_gguf_config(config: Any) -> None:
    """Undo GGUF artefacts in a config read from GGUF metadata (float32-rounded eps, odd name)."""
    config.rms_norm_eps = float(f"{config.rms_norm_eps:.6g}")
    for attr in ("_model_name_or_path", "quantization_config"):  # GGUF's general.name; GGUF quantization
        if attr in vars(config):
            delattr(config, attr)


def _load_gguf_weights(model: Any, gguf: Path) -> None:
    """Dequantize the GGUF tensors into a meta-device `model`, in place; every parameter must be covered.

    A tied lm_head is the one parameter the GGUF may lack: it is tied to the embeddings afterwards.
    """
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict(tensors, strict=False, assign=True)
    del tensors
    tied = model.config.tie_word_embeddings
    if tied:
        model.tie_weights()
    allowed_missing = {"lm_head.weight"} if tied else set()
    left = [name for name, param in model.named_parameters() if param.is_meta]
    if set(missing) - allowed_missing or unexpected or left:
        raise RuntimeError(
            f"GGUF {gguf.name} does not fit: missing {missing}, unexpected {unexpected}, unfilled {left}"
        )


def convert_gguf_model(source: GGUFSource, out_dir: Path, cache_root: Path) -> dict[str, Any]:
    """Convert a GGUF checkpoint into float32 HF weights, config and generation config in `out_dir`."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    gguf = source.locate(cache_root)
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    _clean_gguf_config(config)
    with torch.device("meta"):  # no memory until the GGUF tensors are assigned
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    _load_gguf_weights(model, gguf)  # non-persistent buffers (rotary inv_freq) stay meta: never saved
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id
    )
    model.save_pretrained(out_dir)
    n_params = sum(p.numel() for p in model.parameters())
    meta = {"kind": "model", "parameters": n_params, "architecture": type(model).__name__}
    return meta | _source_meta(gguf)
