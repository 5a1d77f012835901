"""The generation engine interface: prompts in; text, token ids and per-token logprobs out; new weights in.

An engine generates for chat-formatted prompt texts (the chat template is applied by the caller, see
`mappa.inference.chat`) and returns, per prompt, the sampled token ids with the logprob of each sampled
token. Sampling logprobs are informational: the trainer recomputes old logprobs itself in fp32, since an
engine's precision (bf16, fused kernels) differs from the trainer's.

Implementations: `hf` (transformers `generate`, `mappa.inference.hf`); a vLLM engine is planned behind the
same interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0
    max_new_tokens: int = 128
    stop: tuple[str, ...] = ()  # generation ends after the first of these strings (kept in the output)
    seed: int | None = None

    def to_fields(self) -> dict[str, Any]:
        """Plain fields for a Ray call (the stop strings as a list)."""
        return {**self.__dict__, "stop": list(self.stop)}

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> SamplingParams:
        return cls(**{**fields, "stop": tuple(fields.get("stop") or ())})


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]  # sampled tokens, ending with EOS or the stop string's tokens when one was hit
    logprobs: tuple[
        float, ...
    ]  # log p(token) under the model's own distribution (temperature 1), one per token
    finish_reason: str  # "stop" (EOS or a stop string) or "length"

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> Generation:
        """From `dataclasses.asdict` output that crossed a Ray call (tuples came back as lists)."""
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})


class Engine(ABC):
    """Batched generation with per-token logprobs, and in-place weight updates."""

    @abstractmethod
    def generate(self, prompts: list[str], params: SamplingParams) -> list[Generation]:
        """One generation per prompt, in the order given."""

    @abstractmethod
    def update_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Serve these weights from the next `generate` call on."""
