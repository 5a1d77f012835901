"""A batch's common token prefix, run once: its keys and values serve every row of the batch.

An agent's prompts all start with the same system prompt and chat markup (MathChat: 54 tokens of prompts of
77-270), which a left-padded batch computes once per row, in generation and again in every training and
reference pass. Here the prefix runs once, on one row; its KV cache is repeated over the batch, and each
row's own tokens (left-padded) run on top of it:

    cache positions:  [ the prefix, P ][ padding ][ row i's own tokens ]
    position ids:       0 .. P-1                   P .. P + n_i - 1
    attention mask:     1 ...... 1     0 ..... 0   1 ............... 1

Each row's tokens then see exactly what they see in the plain left-padded batch, at the same positions: the
logits are equal up to float summation order (tested), and gradients flow through the repeat into the
prefix's one computation, so a training step on it gets the same gradient. Below `MIN_SHARED` tokens, or for
one row, it is the plain left-padded forward.

Not covered: a prefix shared by part of a batch only (a tree of prefixes), models whose cache is not
transformers' `DynamicCache`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

MIN_SHARED = 16
"""Common prefix tokens from which a batch runs its prefix once (below: one plain forward)."""


@dataclass
class PrefixedBatch:
    """What ran: each row's own tokens (left-padded) after the prefix tokens they share."""

    input_ids: torch.Tensor  # (B, S) the rows past the prefix, left-padded
    attention: torch.Tensor  # (B, shared + S) over every position the cache holds
    positions: torch.Tensor  # (B, S) position ids of the row tokens


def common_prefix_length(rows: Sequence[Sequence[int]], limit: int | None = None) -> int:
    """The longest token prefix all rows share, leaving every row at least one token of its own (and at
    most `limit` tokens)."""
    shortest = min(len(r) for r in rows) - 1
    if limit is not None:
        shortest = min(shortest, limit)
    first = rows[0]
    length = 0
    while length < shortest and all(r[length] == first[length] for r in rows):
        length += 1
    return length


def forward_shared_prefix(
    model: torch.nn.Module,
    rows: Sequence[Sequence[int]],
    pad_id: int,
    logits_to_keep: int,
    limit: int | None = None,
    use_cache: bool = True,
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
) -> tuple[Any, PrefixedBatch]:
    """The model's output (logits for the last `logits_to_keep` positions; its KV cache with `use_cache`)
    for token `rows`, with their common prefix (at most `limit` tokens) run once when it is `MIN_SHARED`
    tokens or longer; each model call runs in `context()`. Gradients flow where the caller enables them."""
    device = next(model.parameters()).device
    shared = common_prefix_length(rows, limit) if len(rows) > 1 else 0
    if shared < MIN_SHARED:
        shared = 0
    own = [list(r[shared:]) for r in rows]
    width = max(len(r) for r in own)
    input_ids = torch.tensor([[pad_id] * (width - len(r)) + r for r in own], device=device)  # (B, S)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in own], device=device)
    positions = shared + (mask.cumsum(-1) - 1).clamp(min=0)
    cache = None
    if shared:
        prefix = torch.tensor([list(rows[0][:shared])], device=device)  # (1, P)
        with context():
            # the prefix's logits are never read: project its last position only
            cache = model(input_ids=prefix, use_cache=True, logits_to_keep=1).past_key_values
        cache.batch_repeat_interleave(len(rows))
    attention = torch.cat([mask.new_ones(len(rows), shared), mask], dim=1)
    with context():
        out = model(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=positions,
            past_key_values=cache,
            use_cache=use_cache,
            logits_to_keep=logits_to_keep,
        )
    return out, PrefixedBatch(input_ids, attention, positions)
