"""LoRA adapters (peft) for an agent (`agents.<seat>.lora`): attach, switch off for the reference, merge
for engines and checkpoints, save and load the adapter.

With an adapter the trainer updates only the adapter's weights (the optimizer holds nothing else), and the
reference policy is the base model with the adapter switched off: no frozen copy of the model is kept.
Engines get merged full weights (base + scaled B @ A), in the base model's parameter names. A checkpoint
holds the adapter alone (`adapter/`, peft's layout: `PeftModel.from_pretrained(base, folder / "adapter")`
gives the trained model), never a copy of the base model.

Not covered: adapters on the vLLM engine side (an engine gets merged weights).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from mappa.config import LoraConfig
from mappa.storage.checkpoints import ADAPTER, ADAPTER_WEIGHTS


def import_peft():
    try:
        import peft
    except ImportError as error:
        raise ImportError(
            "an agent has `lora:` set but peft is not installed: run `pip install peft` (the `lora` "
            "extra), or remove `lora:`"
        ) from error
    return peft


def attach_lora(model: torch.nn.Module, lora: LoraConfig) -> torch.nn.Module:
    """The model wrapped with a fresh adapter; only the adapter's weights require gradients."""
    peft = import_peft()
    config = peft.LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )
    return peft.get_peft_model(model, config)


def adapter_off(model: torch.nn.Module) -> contextlib.AbstractContextManager:
    """The base model: the reference policy of a LoRA agent."""
    return model.disable_adapter()


@torch.no_grad()
def merged_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Full weights with the adapter merged in, named as the base model's; the model is left unchanged."""
    model.merge_adapter()
    try:
        state = model.get_base_model().state_dict()
        return {
            key.replace(".base_layer.", "."): value.detach().clone()
            for key, value in state.items()
            if "lora_" not in key
        }
    finally:
        model.unmerge_adapter()


def save_adapter(model: torch.nn.Module, folder: Path) -> None:
    peft = import_peft()
    (folder / ADAPTER).mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().cpu().contiguous() for k, v in peft.get_peft_model_state_dict(model).items()}
    save_file(weights, str(folder / ADAPTER_WEIGHTS))
    model.peft_config["default"].save_pretrained(str(folder / ADAPTER))


def load_adapter(model: torch.nn.Module, folder: Path) -> None:
    path = folder / ADAPTER_WEIGHTS
    if not path.exists():
        raise FileNotFoundError(
            f"{folder} has no {ADAPTER_WEIGHTS}: it was written without LoRA; resume it with the "
            "agent's `lora:` removed, or start a new run"
        )
    import_peft().set_peft_model_state_dict(model, load_file(str(path)))
