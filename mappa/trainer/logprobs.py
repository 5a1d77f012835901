"""Per-token logprobs of response tokens under a causal LM, for padded micro-batches.

Each sequence is prompt + response; the logprob of response token t is read from the logits at the
position before it. Returned tensors are (B, T_response) with a left-aligned mask, the layout that
`mappa.core.advantages` and `mappa.core.losses` expect.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mappa.inference.prefix import forward_shared_prefix


def batch_response_logprobs(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    pad_token_id: int,
    share_prefix: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(logprobs, mask), both (B, T_max_response); gradients flow when the caller enables them.

    Sequences are left-padded so every response ends at the last position; the model then computes the
    vocabulary projection for the last T_max_response + 1 positions only (`logits_to_keep`), not for the
    prompts, which is most of the memory and time for long prompts. Position ids follow the attention mask,
    as in generation. With `share_prefix` the prompts' common prefix (an agent's system prompt) runs once
    for the batch (`mappa.inference.prefix`): the same logprobs and gradients, fewer tokens computed.
    """
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    full = [list(p) + list(r) for p, r in zip(prompts, responses)]
    keep = max(len(r) for r in responses)
    # the logit before each response's first token comes from its prompt's last token: never shared
    limit = min(len(p) for p in prompts) - 1 if share_prefix else 0
    out, batch = forward_shared_prefix(
        model, full, pad_token_id, logits_to_keep=keep + 1, limit=limit, use_cache=False
    )
    logits = out.logits[:, :keep]  # (B, K, V): position k predicts token S - keep + k of the rows' own part
    device = logits.device
    targets = batch.input_ids[:, batch.input_ids.shape[1] - keep :]  # (B, K)
    token_logprobs = logits.float().log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, K)
    lengths = torch.tensor([len(r) for r in responses], device=device)
    columns = torch.arange(keep, device=device).unsqueeze(0)  # (1, K)
    mask = (columns < lengths.unsqueeze(1)).float()  # (B, K), left-aligned
    index = (keep - lengths.unsqueeze(1) + columns).clamp(max=keep - 1)  # right-aligned -> left-aligned
    return token_logprobs.gather(1, index) * mask, mask


@torch.no_grad()
def response_logprobs(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    pad_token_id: int,
    micro_batch_size: int = 4,
    share_prefix: bool = True,
) -> list[list[float]]:
    """fp32 logprobs of each response's tokens, computed in micro-batches, as ragged lists."""
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token to condition the first response token on")
    was_training = model.training
    model.eval()
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]) + len(responses[i]))  # less padding
    result: list[list[float]] = [[] for _ in prompts]
    for start in range(0, len(order), micro_batch_size):
        chunk = order[start : start + micro_batch_size]
        logprobs, mask = batch_response_logprobs(
            model, [prompts[i] for i in chunk], [responses[i] for i in chunk], pad_token_id, share_prefix
        )
        for i, row, row_mask in zip(chunk, logprobs, mask):
            result[i] = row[row_mask.bool()].tolist()
    model.train(was_training)
    return result
