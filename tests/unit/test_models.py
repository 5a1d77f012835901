"""Model preparation and resolution (`mappa.inference.prepare`) and the tiny test model (`tiny_model`).

The fast tests use the tiny random model (its tokenizer is cached once under the default model cache);
only the `slow` test touches the real 135M SmolLM2. Nothing here downloads from the HF hub.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: never download in tests

import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from mappa.inference import prepare
from mappa.inference.prepare import (
    KNOWN_MODELS,
    MARKER_FILE,
    SMOLLM2_INSTALL_HINT,
    KnownModel,
    default_model_cache,
    find_smollm2_gguf,
    prepare_model,
    resolve_model,
)
from mappa.inference.tiny_model import build_tiny_model

CHATML_PROMPT = (
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nHi<|im_end|>\n"
    "<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def test_tiny_model_reloads_chats_and_runs(tiny_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    assert model.config.hidden_size == 64 and model.config.num_hidden_layers == 2
    assert model.config.vocab_size == len(tokenizer) == 49152
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert tokenizer.eos_token == tokenizer.pad_token == "<|im_end|>"
    messages = [{"role": "user", "content": "Hi"}]
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt == CHATML_PROMPT
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], len(tokenizer))
    assert torch.isfinite(logits).all()


def test_tiny_model_is_deterministic_by_seed(tiny_dir: Path, tmp_path: Path) -> None:
    state = torch.get_rng_state()
    same = load_file(build_tiny_model(tmp_path / "same", seed=0) / "model.safetensors")
    other = load_file(build_tiny_model(tmp_path / "other", seed=1) / "model.safetensors")
    assert torch.equal(torch.get_rng_state(), state), "building must not move the global RNG"
    first = load_file(tiny_dir / "model.safetensors")
    assert first.keys() == same.keys()
    assert all(torch.equal(first[k], same[k]) for k in first)
    assert not torch.equal(first["model.embed_tokens.weight"], other["model.embed_tokens.weight"])


def test_tiny_model_rejects_bad_hidden_size(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="hidden_size"):
        build_tiny_model(tmp_path / "bad", hidden_size=30)


def test_resolve_local_folder_as_is(tiny_dir: Path) -> None:
    assert resolve_model(str(tiny_dir)) == str(tiny_dir)


def test_resolve_missing_path(tmp_path: Path) -> None:
    missing = str(tmp_path / "no" / "such" / "model")
    with pytest.raises(ValueError, match="no such folder") as info:
        resolve_model(missing)
    assert missing in str(info.value)


def test_resolve_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no config.json"):
        resolve_model(str(tmp_path))


def test_resolve_unknown_hub_id_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="offline") as info:
        resolve_model("mappa-test-org/no-such-model")
    message = str(info.value)
    assert "mappa-test-org/no-such-model" in message
    assert "mappa models prepare smollm2" in message and "HF_HUB_OFFLINE=0" in message


def test_resolve_hub_id_online_passes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    assert resolve_model("mappa-test-org/no-such-model") == "mappa-test-org/no-such-model"


def test_default_model_cache_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MAPPA_MODEL_CACHE", str(tmp_path))
    assert default_model_cache() == tmp_path
    monkeypatch.delenv("MAPPA_MODEL_CACHE")
    assert default_model_cache() == Path.home() / ".cache" / "mappa" / "models"


def test_find_smollm2_gguf() -> None:
    path = find_smollm2_gguf()
    assert path.is_file() and path.suffix == ".gguf"


def test_find_smollm2_gguf_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prepare, "_package_dirs", lambda package: [])
    with pytest.raises(FileNotFoundError, match=SMOLLM2_INSTALL_HINT):
        find_smollm2_gguf()


def _fake_model(calls: list[str], fail: bool = False) -> KnownModel:
    def build_tokenizer(out: Path) -> dict[str, Any]:
        (out / "tokenizer.json").write_text("{}")
        return {"kind": "tokenizer"}

    def build_model(out: Path, tokenizer_dir: Path) -> dict[str, Any]:
        calls.append("model")
        (out / "config.json").write_text("{}")
        if fail:
            raise RuntimeError("interrupted")
        return {"kind": "model", "tokenizer": str(tokenizer_dir)}

    return KnownModel("fake", "a test double", "none", build_tokenizer, build_model)


def test_prepare_model_builds_once_atomically(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[str] = []
    monkeypatch.setitem(KNOWN_MODELS, "fake", _fake_model(calls, fail=True))
    with pytest.raises(RuntimeError, match="interrupted"):
        prepare_model("fake", tmp_path)
    assert not (tmp_path / "fake").exists()
    assert not list(tmp_path.glob(".fake.tmp-*")), "a failed build leaves no temp folder"

    monkeypatch.setitem(KNOWN_MODELS, "fake", _fake_model(calls))
    folder = prepare_model("fake", tmp_path)
    assert folder == (tmp_path / "fake").resolve() and (folder / "config.json").is_file()
    meta = json.loads((folder / MARKER_FILE).read_text())
    assert meta["kind"] == "model" and meta["name"] == "fake"
    assert resolve_model("fake", tmp_path) == str(folder)
    assert calls == ["model", "model"], "the second prepare and resolve reuse the folder"
    prepare_model("fake", tmp_path, force=True)
    assert calls == ["model"] * 3 and (folder / MARKER_FILE).is_file()


def test_prepare_unknown_name() -> None:
    with pytest.raises(ValueError, match="unknown model name"):
        prepare_model("no-such-model")


@pytest.mark.slow
def test_smollm2_prepares_and_answers(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cache = default_model_cache()
    if not (cache / "smollm2" / MARKER_FILE).is_file():
        cache = tmp_path
    folder = prepare_model("smollm2", cache)
    start = time.monotonic()
    assert prepare_model("smollm2", cache) == folder
    assert time.monotonic() - start < 1.0, "the second call reuses the prepared folder"
    assert resolve_model("smollm2", cache) == str(folder)

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    inputs = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    out = model.generate(**inputs, max_new_tokens=20, do_sample=False)
    answer = tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer
