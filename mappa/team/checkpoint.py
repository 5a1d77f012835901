"""Which checkpoint of a run a command uses, checked before any model loads, and one seat's model from it.

`chosen_iteration(run, K)` is K, or by default the last iteration whose update finished; `-1` stands for the
base team (the agents' initial models). `check_checkpoint` refuses, in one line, an iteration that never
finished (naming the ones that did) and a checkpoint that retention deleted or that is missing
(`require_checkpoint`: what the run keeps). `load_seat_model` reads a trainable seat's weights at that
checkpoint (its optimizer state is never copied or read) into a plain transformers model in float32: a
full-weight agent's `model.safetensors`, or a LoRA agent's adapter merged into its base model.

Not covered: DeepSpeed's own optimizer shards (never needed: every checkpoint holds full weights or an
adapter, `mappa.storage.checkpoints`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from mappa.config import AgentConfig
from mappa.stages.stage import completed_iterations
from mappa.storage.checkpoints import OPTIMIZER_STATE, kept_summary, require_checkpoint
from mappa.storage.run import Run, iteration_label

if TYPE_CHECKING:
    from transformers import PreTrainedModel

BASE = -1
"""The iteration number of the base team: every agent's initial model."""


def seats_in_order(run: Run) -> tuple[str, ...]:
    """The run's seats in the env's acting order (a stored config lists its agents sorted by name)."""
    return run.config.env_spec.seats


def trainable_seats(run: Run) -> list[str]:
    """The seats whose weights the run trains, in the env's acting order."""
    return [name for name in seats_in_order(run) if run.config.agents[name].trainable]


def chosen_iteration(run: Run, iteration: int | None) -> int:
    """`iteration`, or the last iteration whose update finished (a ValueError when none did yet)."""
    if iteration is not None:
        return iteration
    done = completed_iterations(run)
    if done == 0:
        raise ValueError(
            f"run {run.run_id} has no finished iteration yet (no trained checkpoint); use --iteration -1 for "
            "the base team, or train first"
        )
    return done - 1


def check_checkpoint(run: Run, iteration: int, purpose: str) -> None:
    """Raise a ValueError naming what exists when `iteration` (-1: the base team) cannot be loaded for
    `purpose`: an iteration whose update never finished, or a trainable seat's checkpoint that retention
    deleted or that is missing."""
    iteration_label(iteration)  # -2 and below: a ValueError naming -1 and 0, 1, ...
    if iteration == BASE:
        return
    done = completed_iterations(run)
    if iteration >= done:
        finished = f"iterations 0-{done - 1} finished" if done else "no iteration finished yet"
        seats = trainable_seats(run)
        kept = f"; the run keeps, for agent {seats[0]}, {kept_summary(run, seats[0])}" if seats else ""
        raise ValueError(
            f"iteration {iteration} of run {run.run_id} has not finished (no complete update): {finished}"
            f"{kept}. Pick one of those with --iteration K (-1: the base team)"
        )
    for seat in trainable_seats(run):
        require_checkpoint(run, seat, iteration, "weights", purpose)


def base_model_path(agent: AgentConfig) -> str:
    """The folder (or hub id) the agent's initial weights load from (`agents.NAME.model`, resolved)."""
    from mappa.models.prepare import resolve_model

    return resolve_model(agent.model)


def load_seat_model(run: Run, seat: str, iteration: int) -> PreTrainedModel:
    """Seat `seat`'s policy at checkpoint `iteration` (-1: its base model) as a transformers model in
    float32, in eval mode; a LoRA agent's adapter is merged into its base weights. Call
    `check_checkpoint` first."""
    import torch
    from transformers import AutoModelForCausalLM

    agent = run.config.agents[seat]
    base = base_model_path(agent)
    if iteration == BASE or not agent.trainable:
        return AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    with tempfile.TemporaryDirectory(prefix="mappa-export-") as tmp:
        parts = run.checkpoint_parts(seat, iteration)
        run.store.get_folder(Path(tmp), *parts, leave_out=OPTIMIZER_STATE)  # weights only
        if agent.lora is None:
            return AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32).eval()
        from mappa.trainer.lora import attach_lora, load_adapter

        model = attach_lora(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), agent.lora)
        load_adapter(model, Path(tmp))
        return model.merge_and_unload().eval()
