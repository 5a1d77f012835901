"""`mappa train CONFIG --dry-run`: the config validated and printed as the run would store it (its
`config.yaml`), then the pre-flight's verdict, with nothing started: no model loads (a model not prepared
yet is named, not prepared), no Ray, no Prefect (not even imported), no run folder, nothing written to a
local storage root. Exit 0 when the run could start; otherwise `main` prints the one `error:` line (2).

Not covered: what only running shows (memory at run time, an endpoint's answers to real prompts).
"""

from __future__ import annotations

import argparse

from mappa.cli.render import console
from mappa.config import RunConfig, dump_config, load_config


def train_config(args: argparse.Namespace) -> RunConfig:
    """The config `mappa train` runs with: the file, its `--set` overrides and `--iterations`, validated."""
    return load_config(args.config, train_overrides(args))


def train_overrides(args: argparse.Namespace) -> list[str]:
    overrides = list(args.set or [])
    if args.iterations is not None:
        overrides.append(f"iterations={args.iterations}")
    return overrides


def dry_run(config: RunConfig, run_id: str | None) -> int:
    """Print the resolved config and the pre-flight's notes and verdict; 0 when the run could start (a
    problem raises, for `main`'s `error:` line)."""
    from mappa.cli.render import note
    from mappa.preflight import check_before_run
    from mappa.storage.run import Run, validate_run_id

    console.print(f"# the resolved config, as the run's config.yaml (config hash {config.config_hash()})")
    console.print(dump_config(config), markup=False, highlight=False, end="")
    if run_id is not None:
        validate_run_id(run_id)
        stored = Run.existing(config, run_id)  # another config under this id is refused here
        if stored is not None:
            stored.check_unlocked()
            note(f"run {run_id}: exists under {config.storage.root} with this config; training continues it")
    check_before_run(config, run_id, say=note, dry_run=True)
    console.print("pre-flight: passed (dry run: no model loaded, nothing started, no run folder made)")
    return 0
