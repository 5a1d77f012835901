"""The artifact store: a run's files under a root that is a local folder or any fsspec URL (s3://...).

Every write is atomic for readers: locally the bytes go to a temporary name in the same folder and are
renamed into place; on object stores a single complete `put` is atomic by nature. Parent folders are
created for local paths (pandas/pyarrow do not). Parquet and JSON go through `fsspec.open`, never through
pandas' own URL handling (which fails for `file://` JSON, see docs/pitfalls.md). Listings are never cached
(s3fs caches them per process by default): a run is written by several processes (the flow, Ray workers)
and read by others (`mappa inspect`, a resumed run), and each must see the others' files at once.
Credentials for a remote root come from the environment (for s3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_ENDPOINT_URL), never from the config.

A remote root's endpoint may stop answering for a while (a restart, a network partition): every remote
call waits it out for up to `outage_budget_s` (`storage.outage_budget_s`) and then raises
`StoreOutageError`, naming the store and its endpoint (`mappa.storage.outage`). What a call cut short
leaves behind is never trusted: a single object appears whole or not at all, a stage's manifest is written
after its artifacts, and `put_folder` writes a checkpoint's marker files last.

Not covered: locking between two writers of the same run (`Run.lock` keeps one flow per run id).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import fsspec
import pandas as pd
from fsspec.implementations.local import LocalFileSystem

from mappa.config.storage import OUTAGE_BUDGET_S
from mappa.storage.outage import outage_of, ride_out

T = TypeVar("T")


class ArtifactStore:
    """Paths are joined with '/' under `root`; `root` may be relative (a local folder). A remote root's calls
    wait out an outage of its endpoint for up to `outage_budget_s` seconds (`Run` sets the run's)."""

    def __init__(self, root: str, outage_budget_s: float = OUTAGE_BUDGET_S) -> None:
        self.fs, self.root = _filesystem(root)
        self.is_local = isinstance(self.fs, LocalFileSystem)
        self.outage_budget_s = outage_budget_s

    @cached_property
    def endpoint(self) -> str:
        """The server a remote root talks to: an S3 root's endpoint URL (AWS's own unless AWS_ENDPOINT_URL
        or the fsspec config names one); the protocol for other backends."""
        if type(self.fs).__name__ == "S3FileSystem":
            if getattr(self.fs, "s3", None) is None:
                self.fs.connect()  # builds the client only: no request
            return str(self.fs.s3.meta.endpoint_url)
        protocol = self.fs.protocol
        return f"{protocol[0] if isinstance(protocol, tuple) else protocol}://"

    def given_up(self) -> bool:
        """Whether this process gave up on a remote root's endpoint (a budget ran out, and no call has
        succeeded since)."""
        return not self.is_local and outage_of(self.endpoint).given_up

    def _remote(self, doing: str, path: str, call: Callable[[], T], budget_s: float | None = None) -> T:
        """`call()` (one request of the file system about `path`), through an outage of a remote endpoint."""
        if self.is_local:
            return call()
        budget = self.outage_budget_s if budget_s is None else budget_s
        what = f"{doing} {self.fs.unstrip_protocol(path)}"
        return ride_out(call, outage_of(self.endpoint), budget, what, self.url())

    def check_writable(self) -> None:
        """Write and remove a probe object under the root; a ValueError names the root and what to check
        (run before any work, so an unreachable endpoint, a missing bucket or rejected credentials cost
        seconds, not a rollout)."""
        probe = f"_mappa-probe-{os.getpid()}-{os.urandom(4).hex()}"
        at_once = ArtifactStore(self.url(), outage_budget_s=0)  # a run not yet started waits for nothing
        try:
            at_once.write_bytes(b"probe", probe)
            at_once.remove(probe)
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
        path = self.path(*parts)
        return self._remote("looking for", path, lambda: self.fs.exists(path))

    def write_bytes(self, data: bytes, *parts: str) -> str:
        path = self.path(*parts)
        if self.is_local:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        else:
            self._remote("writing", path, lambda: self.fs.pipe_file(path, data))  # one PUT: whole or absent
        return path

    def remove(self, *parts: str) -> None:
        """Delete one file; a missing one is fine."""
        path = self.path(*parts)
        if self.exists(*parts):
            self._remote("deleting", path, lambda: self.fs.rm_file(path))

    def remove_tree(self, *parts: str) -> int:
        """Delete a file or a folder with everything under it; returns the bytes it held (0 if missing)."""
        path = self.path(*parts)
        if not self.exists(*parts):
            return 0
        size = self.size(*parts)
        self._remote("deleting", path, lambda: self.fs.rm(path, recursive=True))
        return size

    def size(self, *parts: str) -> int:
        """Bytes of a file, or of every file under a folder (0 if missing)."""
        path = self.path(*parts)
        if not self.exists(*parts):
            return 0
        return int(self._remote("measuring", path, lambda: self.fs.du(path, total=True)))

    def read_bytes(self, *parts: str) -> bytes:
        path = self.path(*parts)
        if not self.exists(*parts):
            raise FileNotFoundError(f"artifact {self.url(*parts)} does not exist")
        return self._remote("reading", path, lambda: self.fs.cat_file(path))

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

    def put_folder(self, local: Path, *parts: str, move: bool = False, last: tuple[str, ...] = ()) -> str:
        """Copy a local folder's files under `parts`, each file atomically and streamed (a checkpoint's
        optimizer state is gigabytes: it never passes through memory), the files named in `last` (relative
        paths) after the others and in that order: a copy cut short never holds a later one without the
        earlier ones. With `move` and a local root on the same file system, files are renamed into place
        instead of copied."""
        files = [p for p in Path(local).rglob("*") if p.is_file()]
        order = {name: i for i, name in enumerate(last)}
        for file in sorted(files, key=lambda p: (order.get(str(p.relative_to(local)), -1), str(p))):
            relative = str(file.relative_to(local))
            if not self.is_local:
                target = self.path(*parts, relative)  # an upload appears complete or not
                self._remote(
                    "writing", target, lambda file=file, target=target: self.fs.put_file(str(file), target)
                )
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
        for path in self._remote("listing", base, lambda: self.fs.find(base)):
            relative = Path(path).relative_to(Path(base))
            if relative.parts[0] in leave_out:
                continue
            target = Path(local) / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            # streamed, as in put_folder; a retry writes the local file anew
            self._remote(
                "reading", path, lambda path=path, target=target: self.fs.get_file(path, str(target))
            )
        return Path(local)

    def list(self, *parts: str) -> list[str]:
        path = self.path(*parts)
        if not self.exists(*parts):
            return []
        return sorted(
            Path(p).name for p in self._remote("listing", path, lambda: self.fs.ls(path, detail=False))
        )


def _filesystem(root: str) -> tuple[fsspec.AbstractFileSystem, str]:
    if "://" not in root:
        return fsspec.filesystem("file"), str(Path(root).expanduser().resolve())
    return fsspec.core.url_to_fs(root, use_listings_cache=False)
