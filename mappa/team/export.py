"""`mappa export`: a run's trainable agents at one checkpoint as standalone Hugging Face model folders.

    DIR/<agent>/     config.json, model.safetensors, generation_config.json, tokenizer files, README.md
    DIR/team.json    the team card's facts (`mappa.team.card`)
    DIR/TEAM.md      the team card

Every check comes first, before a model loads: the run exists, the iteration finished and each trainable
agent's checkpoint is there (`mappa.team.checkpoint.check_checkpoint`), the dtype, every base model
resolves, DIR is new or empty. The folder is built beside DIR under a hidden name and renamed into place
at the end, so an interrupted export leaves no half team at DIR. A folder holds weights only: never the
optimizer state, the RNG or an unmerged adapter (`mappa.team.hf_folder`).

Not covered: frozen agents (their base model is the model: the card names it), pushing to a hub.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mappa.storage.run import Run
from mappa.team.card import render_agent_readme, render_team_card, team_facts
from mappa.team.checkpoint import base_model_path, check_checkpoint, load_seat_model, trainable_seats
from mappa.team.hf_folder import DTYPES, write_model_folder

TEAM_JSON = "team.json"
TEAM_CARD = "TEAM.md"


def check_export(run: Run, iteration: int, out: Path, dtype: str) -> None:
    """Every reason the export would fail, as one ValueError, before any model loads."""
    if dtype not in DTYPES:
        raise ValueError(f"--dtype {dtype}: choose one of {', '.join(DTYPES)}")
    if not trainable_seats(run):
        raise ValueError(
            f"run {run.run_id} trains no agent: nothing to export (its agents' models are theirs)"
        )
    check_checkpoint(run, iteration, f"exporting iteration {iteration}")
    check_target(out)
    for agent in run.config.agents.values():
        base_model_path(agent)  # a ValueError names a model that does not resolve


def check_target(out: Path) -> None:
    """DIR must be new or an empty folder: an export never mixes with other files."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"export folder {out.resolve()} is a file; give a new or empty folder")
    if out.is_dir() and any(out.iterdir()):
        raise ValueError(
            f"export folder {out.resolve()} is not empty; give a new or empty folder (or delete its contents)"
        )


def export_team(
    run: Run, iteration: int, out: Path, dtype: str = "float32", say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Export checkpoint `iteration` (-1: the base team) of `run` into `out` (see the module's docstring);
    `say` reports each agent written. Returns the team's facts (team.json)."""
    from transformers import AutoTokenizer

    out = Path(out)
    check_export(run, iteration, out, dtype)
    facts = team_facts(run, iteration, dtype)
    out.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        for seat in (entry for entry in facts["seats"] if entry["folder"]):
            name = seat["seat"]
            model = load_seat_model(run, name, iteration)
            tokenizer = AutoTokenizer.from_pretrained(seat["base_model_path"])
            write_model_folder(model, tokenizer, building / name, dtype)
            (building / name / "README.md").write_text(render_agent_readme(facts, seat))
            size = (building / name / "model.safetensors").stat().st_size
            say(f"{name}: {out.resolve() / name} ({size / 1e6:.1f} MB of weights, {seat['trained']})")
            del model
        (building / TEAM_JSON).write_text(json.dumps(facts, indent=2, default=str) + "\n")
        (building / TEAM_CARD).write_text(render_team_card(facts))
        building.chmod(0o755)  # mkdtemp makes it private
        if out.is_dir():
            out.rmdir()  # empty: checked above
        building.rename(out)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return facts


def read_team(folder: Path) -> dict[str, Any]:
    """The facts of an export (its team.json); a ValueError when `folder` holds none."""
    path = Path(folder) / TEAM_JSON
    if not path.is_file():
        raise ValueError(f"{Path(folder).resolve()} holds no {TEAM_JSON}: give a folder `mappa export` wrote")
    return json.loads(path.read_text())
