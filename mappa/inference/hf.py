"""The HF transformers engine: batched `generate` with sampling params, stop strings and per-token logprobs.

Prompts are sorted by length and generated in batches of `batch_size` with left padding, by mappa's own
sampling loop over the KV cache (`mappa.inference.decode`: about 3x `model.generate` per step here, finished
rows leave the batch, the batch's common prefix, an agent's system prompt, prefilled once:
`mappa.inference.prefix`); with bf16 on, the prefill runs under bf16 autocast and the one-token steps in
fp32 (faster than either throughout on a CPU with native bf16: `mappa.inference.decode`). Each row is cut
after its first EOS or stop string; the logprob of each kept token comes from the model's raw logits
(temperature 1), whatever the sampling temperature.

The engine may share its model object with a trainer in the same process (the CPU default): then
`update_weights` with the trainer's own state dict costs one in-place copy and nothing else.
Not covered: continuous batching, prefix caching across batches, tensor parallelism (that is vLLM's job).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from mappa.inference.decode import decode, enable_cpu_gqa
from mappa.inference.engine import Engine, Generation, SamplingParams
from mappa.inference.precision import cpu_autocast, resolve_bf16
from mappa.inference.prefix import common_prefix_length, forward_shared_prefix

SHARED_PREFIX = 64
"""Common prefix tokens from which a group of prompts runs its prefix once (`grouped_next_token_logprobs`)."""


class HFEngine(Engine):
    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        batch_size: int = 32,
        bf16_autocast: bool | str = "auto",
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.bf16_autocast = resolve_bf16(bf16_autocast)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        enable_cpu_gqa()

    def generate(self, prompts: list[str], params: SamplingParams) -> list[Generation]:
        if params.seed is not None:
            torch.manual_seed(params.seed)
        encoded = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))
        results: dict[int, Generation] = {}
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            for i, generation in zip(chunk, self._generate_batch([encoded[i] for i in chunk], params)):
                results[i] = generation
        return [results[i] for i in range(len(prompts))]

    def next_token_logprobs(
        self, prompts: list[str], candidates: list[str], positions: int = 1, batch_size: int = 4
    ) -> list[list[list[float]]]:
        """Log-probabilities of single-token candidates as the next token, at each of the last `positions`
        positions of each prompt: out[prompt][position][candidate], position 0 the earliest."""
        ids = [self._single_token(text) for text in candidates]
        rows = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        out = []
        was_training = self.model.training
        self.model.eval()
        for start in range(0, len(rows), batch_size):
            logits = self._last_logits(rows[start : start + batch_size], positions)  # (B, positions, V)
            out.extend(logits.log_softmax(-1)[:, :, ids].tolist())
        self.model.train(was_training)
        return out

    @torch.no_grad()
    def _last_logits(self, rows: list[list[int]], positions: int) -> torch.Tensor:
        """fp32 logits at the last `positions` positions of token rows: (B, positions, V); their common
        prefix (the coach's system prompt) runs once (`mappa.inference.prefix`)."""
        pad = self.tokenizer.pad_token_id
        # the prefix's logits are not computed: it must end before the first position read
        limit = min(len(r) for r in rows) - positions
        out, _ = forward_shared_prefix(
            self.model,
            rows,
            pad,
            logits_to_keep=positions,
            limit=limit,
            use_cache=False,
            context=self._autocast,
        )
        return out.logits.float()

    @torch.no_grad()
    def grouped_next_token_logprobs(
        self, groups: list[list[str]], candidates: list[str], batch_size: int = 16
    ) -> list[list[list[float]]]:
        """Log-probabilities of single-token candidates as the next token after each prompt, for groups of
        prompts that may share a long prefix (one action's context, then one question each):
        out[group][prompt][candidate]. A group whose common token prefix is long (`SHARED_PREFIX` tokens
        or more) runs as one batch, its prefix once (`mappa.inference.prefix`); the other prompts (short
        ones, each about its own piece of an action) run together in length-sorted, left-padded batches of
        `batch_size`, their common prefix (the system prompt) once per batch. Either way the result equals
        `next_token_logprobs` on the whole prompts. Measured on 48 actions of a run with `mathchat-facts`
        (Qwen2.5-Coder-0.5B, fp32, 2-core Intel): batches of 16 with the system prompt run once took 20-27
        s against 27-34 s for batches of 8 without (seven runs)."""
        ids = [self._single_token(text) for text in candidates]
        return self._grouped(groups, lambda rows: self._candidate_logprobs(rows, ids), batch_size)

    @torch.no_grad()
    def grouped_answer_features(
        self, groups: list[list[str]], batch_size: int = 16
    ) -> list[list[list[float]]]:
        """What the model reads its next token from, after each prompt of groups as in
        `grouped_next_token_logprobs`: the output layer's input at the last position (the final norm's
        output), fp32, out[group][prompt][feature]. A learning coach's head reads these
        (`mappa.coach.head`); `answer_direction` gives the readout that turns them into P(Yes)."""
        return self._grouped(groups, self._answer_features, batch_size)

    def answer_direction(self, candidates: list[str]) -> tuple[list[float], float]:
        """The output layer's row of the first single-token candidate less the second's, and the same of
        its bias (0 without one): with the features of `grouped_answer_features`, direction . h + bias is
        the log-odds of the first candidate against the second as the next token (P(Yes) / (P(Yes) +
        P(No)) = sigmoid of it)."""
        first, second = (self._single_token(text) for text in candidates)
        output = self.model.get_output_embeddings()
        direction = (output.weight[first].float() - output.weight[second].float()).tolist()
        bias = output.bias
        return direction, 0.0 if bias is None else float(bias[first] - bias[second])

    def _grouped(self, groups: list[list[str]], per_batch, batch_size: int) -> list[list[list[float]]]:
        """`per_batch(token rows) -> one value per row` over groups of prompts: a group with a long shared
        prefix as one batch, the other prompts in length-sorted batches (`grouped_next_token_logprobs`)."""
        was_training = self.model.training
        self.model.eval()
        rows = [[self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in group] for group in groups]
        out: list[list[list[float]]] = [[] for _ in groups]
        loose = []  # (group, prompt) of prompts without a long shared prefix
        for g, group in enumerate(rows):
            if len(group) > 1 and common_prefix_length(group) >= SHARED_PREFIX:
                out[g] = per_batch(group)
            else:
                out[g] = [[] for _ in group]
                loose += [(g, i) for i in range(len(group))]
        loose.sort(key=lambda gi: len(rows[gi[0]][gi[1]]))
        for start in range(0, len(loose), batch_size):
            chunk = loose[start : start + batch_size]
            for (g, i), values in zip(chunk, per_batch([rows[g][i] for g, i in chunk])):
                out[g][i] = values
        self.model.train(was_training)
        return out

    def _answer_features(self, rows: list[list[int]]) -> list[list[float]]:
        """The output layer's input at the last position of each row (`grouped_answer_features`)."""
        seen: dict[str, torch.Tensor] = {}

        def keep_input(module, args, output) -> None:  # the rows' call comes last (after a shared prefix's)
            seen["input"] = args[0]

        hook = self.model.get_output_embeddings().register_forward_hook(keep_input)
        try:
            self._last_logits(rows, 1)
        finally:
            hook.remove()
        return seen["input"][:, -1].float().tolist()

    def _candidate_logprobs(self, rows: list[list[int]], ids: list[int]) -> list[list[float]]:
        """Log-probabilities of the token `ids` as the next token after each of `rows`: out[row][id]."""
        return self._last_logits(rows, 1)[:, -1].log_softmax(-1)[:, ids].tolist()

    def _single_token(self, text: str) -> int:
        encoded = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(encoded) != 1:
            raise ValueError(
                f"candidate {text!r} is {len(encoded)} tokens for this tokenizer; give single tokens"
            )
        return encoded[0]

    def update_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        own = self.model.state_dict()
        if all(own[k].data_ptr() == v.data_ptr() for k, v in state_dict.items() if k in own):
            return  # the trainer's model is this engine's model: already serving the new weights
        missing, unexpected = self.model.load_state_dict(dict(state_dict), strict=False)
        if unexpected or [k for k in missing if "lm_head" not in k]:
            raise ValueError(
                f"weights do not fit the engine's model: missing {missing}, unexpected {unexpected}"
            )

    @torch.no_grad()
    def _generate_batch(self, rows: list[list[int]], params: SamplingParams) -> list[Generation]:
        stops = tuple(params.stop)
        window = 2 + max((len(s) for s in stops), default=0)  # tokens enough to hold a stop string

        def stopped(row: int, tokens: list[int]) -> bool:
            tail = self.tokenizer.decode(tokens[-window:], skip_special_tokens=True)
            return any(stop in tail for stop in stops)

        was_training = self.model.training
        self.model.eval()
        decoded = decode(
            self.model,
            rows,
            params.max_new_tokens,
            params.temperature,
            params.top_p,
            self.tokenizer.pad_token_id,
            self._eos_ids(),
            stopped if stops else None,
            prefill_context=self._autocast,
        )
        self.model.train(was_training)
        return [self._cut(row, tokens, logprobs, params) for row, (tokens, logprobs, _) in zip(rows, decoded)]

    def _cut(
        self, prompt: list[int], tokens: list[int], logprobs: list[float], params: SamplingParams
    ) -> Generation:
        end, reason = len(tokens), "length"
        eos_ids = self._eos_ids()
        for i, token in enumerate(tokens):
            if token in eos_ids:
                end, reason = i + 1, "stop"
                break
        if params.stop:
            stop_end = self._stop_string_end(tokens[:end], params.stop)
            if stop_end is not None:
                end, reason = stop_end, "stop"
        kept = tokens[:end]
        text = self.tokenizer.decode(kept, skip_special_tokens=True)
        return Generation(text, tuple(prompt), tuple(kept), tuple(logprobs[:end]), reason)

    def _stop_string_end(self, tokens: list[int], stops: tuple[str, ...]) -> int | None:
        """Index just past the token that completes the first stop string, if any."""
        text = ""
        for i, token in enumerate(tokens):
            text += self.tokenizer.decode([token], skip_special_tokens=True)
            if any(stop in text for stop in stops):
                return i + 1
        return None

    def _eos_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id
        ids = ids if isinstance(ids, list) else [ids]
        return {i for i in ids + [self.tokenizer.eos_token_id] if i is not None}

    def _autocast(self) -> contextlib.AbstractContextManager:
        return cpu_autocast(self.bf16_autocast)
