"""Per-token logprobs of response tokens under a causal LM, for padded micro-batches.

Each sequence is prompt + response, right-padded; the logprob of response token t is read from the logits
at the position before it. Returned tensors are (B, T_response) with a left-aligned mask, the layout that
`mappa.core.advantages` and `mappa.core.losses` expect.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def batch_response_logprobs(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    pad_token_id: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(logprobs, mask), both (B, T_max_response); gradients flow when the caller enables them."""
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    full = [list(p) + list(r) for p, r in zip(prompts, responses)]
    width = max(len(s) for s in full)
    input_ids = torch.full((len(full), width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(full), width), dtype=torch.long)
    for i, seq in enumerate(full):
        input_ids[i, : len(seq)] = torch.tensor(seq)
        attention[i, : len(seq)] = 1
    logits = model(input_ids=input_ids, attention_mask=attention).logits  # (B, L, V)
    resp_width = max(len(r) for r in responses)
    out = torch.zeros((len(full), resp_width), dtype=torch.float32)
    mask = torch.zeros((len(full), resp_width), dtype=torch.float32)
    for i, (prompt, response) in enumerate(zip(prompts, responses)):
        start, n = len(prompt), len(response)
        row_logits = logits[i, start - 1 : start - 1 + n].float()  # (n, V)
        targets = input_ids[i, start : start + n]
        out[i, :n] = row_logits.log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        mask[i, :n] = 1.0
    return out, mask


@torch.no_grad()
def response_logprobs(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    pad_token_id: int,
    micro_batch_size: int = 4,
) -> list[list[float]]:
    """fp32 logprobs of each response's tokens, computed in micro-batches, as ragged lists."""
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token to condition the first response token on")
    was_training = model.training
    model.eval()
    result: list[list[float]] = []
    for start in range(0, len(prompts), micro_batch_size):
        end = start + micro_batch_size
        logprobs, mask = batch_response_logprobs(
            model, prompts[start:end], responses[start:end], pad_token_id
        )
        for row, row_mask in zip(logprobs, mask):
            result.append(row[row_mask.bool()].tolist())
    model.train(was_training)
    return result
