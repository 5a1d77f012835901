"""The artifact store: a run's files under a root that is a local folder or any fsspec URL (s3://...).

Every write is atomic for readers: locally the bytes go to a temporary name in the same folder and are
renamed into place; on object stores a single complete `put` is atomic by nature. Parent folders are
created for local paths (pandas/pyarrow do not). Parquet and JSON go through `fsspec.open`, never through
pandas' own URL handling (which fails for `file://` JSON, see docs/pitfalls.md). Listings are never cached
(s3fs caches them per process by default): a run is written by several processes (the flow, Ray workers)
and read by others (`mappa inspect`, a resumed run), and each must see the others' files at once.
Credentials for a remote root come from the environment (for s3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_ENDPOINT_URL), never from the config.

Not covered: locking between two writers of the same run (`Run.lock` keeps one flow per run id).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import fsspec
import pandas as pd
from fsspec.implementations.local import LocalFileSystem


class ArtifactStore:
    """Paths are joined with '/' under `root`; `root` may be relative (a local folder)."""

    def __init__(self, root: str) -> None:
        self.fs, self.root = _filesystem(root)
        self.is_local = isinstance(self.fs, LocalFileSystem)

    def check_writable(self) -> None:
        """Write and remove a probe object under the root; a ValueError names the root and what to check
        (run before any work, so an unreachable endpoint, a missing bucket or rejected credentials cost
        seconds, not a rollout)."""
        probe = f"_mappa-probe-{os.getpid()}-{os.urandom(4).hex()}"
        try:
            self.write_bytes(b"probe", probe)
            self.fs.rm_file(self.path(probe))
        except Exception as exc:  # noqa: BLE001 (botocore's errors are no OSError): one line, no traceback
            hint = (
                "check the folder's permissions and free space"
                if self.is_local
                else "check the endpoint (AWS_ENDPOINT_URL), the bucket and the credentials (environment)"
            )
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ValueError(f"storage root {self.url()} is not writable ({reason}); {hint}") from None

    def check_writable_in_place(self) -> None:
        """`check_writable` that writes nothing locally (for a dry run): the root, or the nearest folder of
        it that exists, must be a folder this user may write in. A remote root gets the probe (one object,
        removed at once): only writing tells whether the endpoint, bucket and credentials work."""
        if not self.is_local:
            self.check_writable()
            return
        folder = Path(self.root)
        while not folder.exists():
            folder = folder.parent
        if not (folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)):
            raise ValueError(
                f"storage root {self.url()} is not writable ({folder} is not a folder this user may write "
                "in); check the folder's permissions"
            )

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *[p.strip("/") for p in parts if p]])

    def url(self, *parts: str) -> str:
        """A URL a user can paste (local: the absolute path)."""
        path = self.path(*parts)
        return path if self.is_local else self.fs.unstrip_protocol(path)

    def exists(self, *parts: str) -> bool:
        return self.fs.exists(self.path(*parts))

    def write_bytes(self, data: bytes, *parts: str) -> str:
        path = self.path(*parts)
        if self.is_local:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        else:
            self.fs.pipe_file(path, data)
        return path

    def remove(self, *parts: str) -> None:
        """Delete one file; a missing one is fine."""
        path = self.path(*parts)
        if self.fs.exists(path):
            self.fs.rm_file(path)

    def remove_tree(self, *parts: str) -> int:
        """Delete a file or a folder with everything under it; returns the bytes it held (0 if missing)."""
        path = self.path(*parts)
        if not self.fs.exists(path):
            return 0
        size = self.size(*parts)
        self.fs.rm(path, recursive=True)
        return size

    def size(self, *parts: str) -> int:
        """Bytes of a file, or of every file under a folder (0 if missing)."""
        path = self.path(*parts)
        if not self.fs.exists(path):
            return 0
        return int(self.fs.du(path, total=True))

    def read_bytes(self, *parts: str) -> bytes:
        path = self.path(*parts)
        if not self.fs.exists(path):
            raise FileNotFoundError(f"artifact {self.url(*parts)} does not exist")
        return self.fs.cat_file(path)

    def write_json(self, obj: Any, *parts: str) -> str:
        return self.write_bytes(json.dumps(obj, indent=2, sort_keys=True, default=str).encode(), *parts)

    def read_json(self, *parts: str) -> Any:
        return json.loads(self.read_bytes(*parts))

    def write_text(self, text: str, *parts: str) -> str:
        return self.write_bytes(text.encode(), *parts)

    def read_text(self, *parts: str) -> str:
        return self.read_bytes(*parts).decode()

    def write_parquet(self, frame: pd.DataFrame, *parts: str) -> str:
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return self.write_bytes(buffer.getvalue(), *parts)

    def read_parquet(self, *parts: str) -> pd.DataFrame:
        return pd.read_parquet(io.BytesIO(self.read_bytes(*parts)))

    def put_folder(self, local: Path, *parts: str, move: bool = False) -> str:
        """Copy a local folder's files under `parts`, each file atomically and streamed (a checkpoint's
        optimizer state is gigabytes: it never passes through memory). With `move` and a local root on the
        same file system, files are renamed into place instead of copied."""
        for file in sorted(p for p in Path(local).rglob("*") if p.is_file()):
            relative = str(file.relative_to(local))
            if not self.is_local:
                self.fs.put_file(str(file), self.path(*parts, relative))  # an upload appears complete or not
                continue
            target = Path(self.path(*parts, relative))
            target.parent.mkdir(parents=True, exist_ok=True)
            if move and os.stat(file).st_dev == os.stat(target.parent).st_dev:
                os.replace(file, target)
                continue
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            os.close(fd)
            shutil.copyfile(file, tmp)
            os.replace(tmp, target)
        return self.path(*parts)

    def get_folder(self, local: Path, *parts: str, leave_out: tuple[str, ...] = ()) -> Path:
        """Copy the files under `parts` into a local folder, but those under the entries named `leave_out`."""
        base = self.path(*parts)
        for path in self.fs.find(base):
            relative = Path(path).relative_to(Path(base))
            if relative.parts[0] in leave_out:
                continue
            target = Path(local) / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            self.fs.get_file(path, str(target))  # streamed, as in put_folder
        return Path(local)

    def list(self, *parts: str) -> list[str]:
        path = self.path(*parts)
        if not self.fs.exists(path):
            return []
        return sorted(Path(p).name for p in self.fs.ls(path, detail=False))


def _filesystem(root: str) -> tuple[fsspec.AbstractFileSystem, str]:
    if "://" not in root:
        return fsspec.filesystem("file"), str(Path(root).expanduser().resolve())
    return fsspec.core.url_to_fs(root, use_listings_cache=False)
