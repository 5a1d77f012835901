"""The vLLM engine's per-request seeds (GPU path) without vLLM: each request of a call gets its own seed, so
the copies of one prompt (the samples of a problem) are not sampled alike; without a seed, one parameter
set serves the call."""

from __future__ import annotations

from mappa.inference.engine import SamplingParams
from mappa.inference.vllm_engine import VLLMEngine


def engine_recording_params() -> VLLMEngine:
    engine = VLLMEngine.__new__(VLLMEngine)  # no model: only the sampling parameters are built
    engine._sampling = lambda **kwargs: kwargs
    return engine


def test_each_request_gets_its_own_seed_derived_from_the_calls():
    engine = engine_recording_params()
    params = SamplingParams(temperature=0.7, top_p=1.0, max_new_tokens=8, seed=3)
    built = engine._request_sampling(4, params, seed=3)
    seeds = [p["seed"] for p in built]
    assert len(set(seeds)) == 4
    assert seeds == [p["seed"] for p in engine._request_sampling(4, params, seed=3)]
    assert {p["temperature"] for p in built} == {0.7}
    assert engine._request_sampling(2, params, seed=4)[0]["seed"] not in seeds


def test_without_a_seed_one_parameter_set_serves_the_call():
    engine = engine_recording_params()
    built = engine._request_sampling(4, SamplingParams(temperature=0.7, max_new_tokens=8), seed=None)
    assert isinstance(built, dict) and built["seed"] is None
