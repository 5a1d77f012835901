"""A sampling loop over a causal LM's KV cache, for the HF engine: prefill once, then one token per step.

The prefill runs the batch's common prefix (an agent's system prompt) once for all rows
(`mappa.inference.prefix`): measured on SmolLM2-135M, 32 greedy prompts of an evaluation, 2-core Intel fp32,
the same tokens in 10-20% less time (verifier, solver, executor).

Replaces `model.generate` on CPU, where it was measured slow here: SmolLM2-135M, 32 left-padded prompts of
about 300 tokens, 2 cores: `generate` took 1.0-1.3 s per decoding step, a plain forward over the cache
0.53 s, and 0.34 s with grouped-query attention left to SDPA (below). Rows that finish (EOS, a stop string,
their token budget) leave the batch at once (`DynamicCache.batch_select_indices`), so the batch no longer
pays for its longest sample.

After the prefill each layer's cache gets room for the tokens still to come (`ReservedLayer`), and each step
writes its key and value there: transformers' `DynamicLayer` concatenates, a copy of the layer's whole cache
at every step. Measured (`benchmarks/kv_cache.py`, bf16 EPYC, 32 prompts x 64 tokens): 1.08-1.09x at 163-263
prompt tokens, the same tokens.

Each step samples from softmax(logits / temperature) restricted to the top-p nucleus (greedy at
temperature 0) and records log p(token) under the raw logits (temperature 1), as `Generation.logprobs`
means. Sampling draws from torch's global generator (seed it before calling for reproducible samples).

`enable_cpu_gqa` makes transformers hand grouped-query attention to `torch.nn.functional.
scaled_dot_product_attention(enable_gqa=True)` on CPU also when a padding mask is present (it otherwise
repeats every key and value head at every layer and step: the KV cache copied 3x for SmolLM2's 9 query and
3 KV heads). Checked equal to the default path on the model's logits.

With `prefill_context` (the HF engine passes bf16 autocast where the CPU has native bf16) only the prefill
runs in it, and the steps run in the weights' own dtype (fp32 for the CPU default) over a cache cast to it:
measured on a 2-core EPYC with avx512_bf16, SmolLM2-135M, 32 verifier prompts of about 260 tokens x 64 new
tokens, the prefill took 20 s in fp32 and 9 s in bf16, while a one-token step took 0.13-0.17 s in fp32 and
0.20-0.28 s in bf16 (small matrix products gain nothing from bf16 there and pay for the casts), so prefill in
bf16 and steps in fp32 beat both (20.5 s against 27.7 fp32 and 22.6-33 bf16 throughout).

Not covered: beam search, repetition penalties, speculative decoding.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from transformers.cache_utils import DynamicLayer

from mappa.inference.prefix import forward_shared_prefix

StopCheck = Callable[[int, list[int]], bool]  # (row, its tokens so far) -> whether a stop string ended it


def enable_cpu_gqa() -> None:
    """Let transformers' SDPA attention use `enable_gqa` on CPU with a mask (idempotent)."""
    try:
        from transformers.integrations import sdpa_attention
    except ImportError:  # an older or newer layout: keep the library's own choice
        return
    original = sdpa_attention.use_gqa_in_sdpa
    if getattr(original, "_mappa_cpu", False):
        return

    def use_gqa_in_sdpa(attention_mask, key, value):
        if key.device.type == "cpu" and key.shape[-1] == value.shape[-1]:
            return True
        return original(attention_mask, key, value)

    use_gqa_in_sdpa._mappa_cpu = True
    sdpa_attention.use_gqa_in_sdpa = use_gqa_in_sdpa


def cache_in_dtype(cache, dtype: torch.dtype):
    """`cache` (a transformers `DynamicCache`) with its keys and values in `dtype`, in place; a cache of
    another layout is returned as it is."""
    for layer in getattr(cache, "layers", ()):
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        if isinstance(keys, torch.Tensor) and isinstance(values, torch.Tensor) and keys.dtype != dtype:
            layer.keys, layer.values = keys.to(dtype), values.to(dtype)
            if hasattr(layer, "dtype"):
                layer.dtype = dtype
    return cache


class ReservedLayer(DynamicLayer):
    """One layer's KV cache with room reserved for the tokens still to come: each step writes its key and
    value into the room, where `DynamicLayer` concatenates (a copy of the layer's whole cache at every
    step). `keys` and `values` are views of the filled part, so attention reads what it read before.
    Serves `decode` (appending and dropping rows) only: cropping and repeating rows are not supported."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, room: int) -> None:
        super().__init__()
        batch, heads, filled, width = keys.shape
        self._keys = keys.new_empty(batch, heads, filled + room, width)
        self._values = values.new_empty(batch, heads, filled + room, values.shape[-1])
        self._keys[:, :, :filled] = keys
        self._values[:, :, :filled] = values
        self.filled = filled
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
        self._expose()

    def _expose(self) -> None:
        self.keys, self.values = self._keys[:, :, : self.filled], self._values[:, :, : self.filled]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        end = self.filled + key_states.shape[-2]
        if end > self._keys.shape[-2]:
            raise ValueError(f"KV cache room exhausted: {end} positions, {self._keys.shape[-2]} reserved")
        self._keys[:, :, self.filled : end] = key_states
        self._values[:, :, self.filled : end] = value_states
        self.filled = end
        self._expose()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.filled

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._keys, self._values = self._keys[indices], self._values[indices]
        self._expose()


def reserve_room(cache, room: int):
    """`cache` (a transformers `DynamicCache` after the prefill) with each plain `DynamicLayer` replaced by
    a `ReservedLayer` holding `room` more positions, in place; other layouts are returned as they are."""
    layers = getattr(cache, "layers", None)
    if not isinstance(layers, list):
        return cache
    for i, layer in enumerate(layers):
        if type(layer) is DynamicLayer and layer.is_initialized and layer.keys.dim() == 4:
            layers[i] = ReservedLayer(layer.keys, layer.values, room)
    return cache


def sample_next(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """(B, V) raw logits -> (B,) token ids: greedy at temperature 0, else tempered nucleus sampling."""
    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        keep = sorted_probs.cumsum(-1) - sorted_probs < top_p  # the smallest set whose mass reaches top_p
        sorted_probs = sorted_probs * keep
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return torch.multinomial(probs, 1).squeeze(-1)


@torch.no_grad()
def decode(
    model: torch.nn.Module,
    rows: list[list[int]],
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    pad_id: int,
    eos_ids: set[int],
    stopped: StopCheck | None = None,
    prefill_context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
) -> list[tuple[list[int], list[float], str]]:
    """Per prompt row: (new tokens, their raw logprobs, finish reason "stop" or "length"); the prefill runs
    in `prefill_context()`, the steps without it."""
    weights = next(model.parameters())
    device = weights.device
    out, batch = forward_shared_prefix(model, rows, pad_id, logits_to_keep=1, context=prefill_context)
    attention, positions = batch.attention, batch.positions
    cache = cache_in_dtype(out.past_key_values, weights.dtype)  # the steps' dtype: bf16 weights stay bf16
    cache = reserve_room(cache, max_new_tokens)
    logits = out.logits[:, -1].float()  # (B, V)
    live = list(range(len(rows)))  # original row of each batch position
    tokens: list[list[int]] = [[] for _ in rows]
    logprobs: list[list[float]] = [[] for _ in rows]
    reasons = ["length"] * len(rows)
    next_position = positions[:, -1] + 1  # (B,)
    for step in range(max_new_tokens):
        chosen = sample_next(logits, temperature, top_p)  # (B,)
        chosen_logprobs = logits.gather(-1, chosen[:, None]).squeeze(-1) - torch.logsumexp(logits, -1)
        keep = []
        chosen_ids, chosen_values = chosen.tolist(), chosen_logprobs.tolist()  # one device sync per step
        for b, row in enumerate(live):
            token = chosen_ids[b]
            tokens[row].append(token)
            logprobs[row].append(chosen_values[b])
            if token in eos_ids or (stopped is not None and stopped(row, tokens[row])):
                reasons[row] = "stop"
            else:
                keep.append(b)
        if not keep or step == max_new_tokens - 1:
            break
        if len(keep) < len(live):  # finished rows leave the batch and its cache
            index = torch.tensor(keep, device=device)
            cache.batch_select_indices(index)
            attention, next_position, chosen = attention[index], next_position[index], chosen[index]
            live = [live[b] for b in keep]
        attention = torch.cat([attention, attention.new_ones(len(live), 1)], dim=1)
        out = model(
            input_ids=chosen[:, None],
            attention_mask=attention,
            position_ids=next_position[:, None],
            past_key_values=cache,
            use_cache=True,
        )
        cache, logits = out.past_key_values, out.logits[:, -1].float()
        next_position = next_position + 1
    return [(tokens[r], logprobs[r], reasons[r]) for r in range(len(rows))]
