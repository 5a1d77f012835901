"""CodePair's tasks: a function to write, a public example call, hidden unit tests, a reference solution.

`builtin:train` (32 tasks) and `builtin:eval` (16 other functions) ship with this package
(`data/*.jsonl`); any JSONL file of the same rows works too: `id`, `problem` (what the agents read: the
function's name, signature and docstring), `answer` (a reference solution, never shown to an agent) and
`meta` {`entry_point`, `example` (one call the Coder sees run), `tests` (boolean Python expressions, hidden)}.
A malformed row is a ValueError naming the file, the row and the field.
"""

from __future__ import annotations

import importlib.resources
import json
from pathlib import Path

from mappa.envs.api import Problem

BUILTIN = ("train", "eval")
REQUIRED_META = ("entry_point", "example", "tests")


def load_tasks(source: str) -> list[Problem]:
    if source.startswith("builtin:"):
        split = source.removeprefix("builtin:")
        if split not in BUILTIN:
            raise ValueError(f"codepair: unknown built-in split {split!r}; use builtin:train or builtin:eval")
        text = (importlib.resources.files("mappa_codepair") / "data" / f"{split}.jsonl").read_text()
    else:
        path = Path(source)
        if not path.is_file():
            raise ValueError(
                f"codepair: task file {source} does not exist; give a JSONL file or builtin:train"
            )
        text = path.read_text()
    return [_task(line, i, source) for i, line in enumerate(text.splitlines(), 1) if line.strip()]


def _task(line: str, number: int, source: str) -> Problem:
    where = f"codepair: {source} row {number}"
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} is not JSON ({exc})") from exc
    missing = [key for key in ("id", "problem", "answer", "meta") if key not in row]
    missing += [f"meta.{key}" for key in REQUIRED_META if key not in row.get("meta", {})]
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)}")
    if not isinstance(row["meta"]["tests"], list) or not row["meta"]["tests"]:
        raise ValueError(f"{where}: meta.tests must be a non-empty list of Python expressions")
    return Problem(str(row["id"]), row["problem"], row["answer"], dict(row["meta"]))
