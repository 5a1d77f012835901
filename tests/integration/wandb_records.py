"""The scalars of W&B's offline run files (`run-<id>.wandb`), read without W&B's servers: the file is a
LevelDB-style log (32 KiB blocks; records of a 7-byte header, crc32 + length + type, then data, split across
blocks) of W&B's protobuf `Record`s, after a 7-byte `:W&B` file header."""

from __future__ import annotations

import json
import struct
from pathlib import Path

BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def _records(data: bytes):
    assert data[:4] == b":W&B", "not a W&B run file"
    position, pending = 7, b""
    while position + 7 <= len(data):
        left = BLOCK - position % BLOCK
        if left < 7:  # the block's padding
            position += left
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        chunk = data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind in (FULL, LAST):
            yield chunk if kind == FULL else pending + chunk
            pending = b""


def logged_history(folder: Path) -> list[dict]:
    """Every history row (`run.log(...)`) in the offline runs under `folder`, in file order."""
    from wandb.proto import wandb_internal_pb2

    rows = []
    for path in sorted(Path(folder).rglob("run-*.wandb")):
        for data in _records(path.read_bytes()):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(data)
            if record.WhichOneof("record_type") == "history":
                items = record.history.item
                rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items})
    return rows
