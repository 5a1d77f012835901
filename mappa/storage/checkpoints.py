"""An agent's checkpoints in a run: what each one holds, which ones retention keeps, and what a reader may
load from them.

    {root}/{run_id}/checkpoints/{agent}/iter-0003/model.safetensors        weights (full-weight agents)
    {root}/{run_id}/checkpoints/{agent}/iter-0003/adapter/...               the adapter (LoRA agents)
    {root}/{run_id}/checkpoints/{agent}/iter-0003/trainer_state.pt          optimizer, LR schedule, RNG, steps
    {root}/{run_id}/checkpoints/{agent}/iter-0003/deepspeed/...             DeepSpeed's optimizer shards
    {root}/{run_id}/checkpoints/retention.json                              what retention deleted, and when

A checkpoint is *full* (a resume can continue training from it) when it holds weights and `trainer_state.pt`;
*weights* when it holds the weights alone (evaluation and inspection); otherwise it is gone. A save writes the
weights and then `trainer_state.pt` after every other file (`WRITTEN_LAST`), so a save cut short never looks
more complete than it is; and nothing trusts a checkpoint before the update has kept that agent's metrics
(written after its checkpoint: a resumed update trains the agent again otherwise, over the partial one) or,
for readers, the update's manifest. Retention (`retention_plan`) keeps the full states of the last
`checkpoint.keep_last` iterations and the weights of every `keep_weights_every`-th; the retention stage
(`mappa.stages.retention`) deletes the rest, `trainer_state.pt` first, so a half-deleted checkpoint never
looks full. `require_checkpoint` is what every loader asks first: a checkpoint that retention took is refused
in one line that says what was kept and what to do.

Not covered: the bytes inside a checkpoint (the trainers write them: `mappa.trainer`).
"""

from __future__ import annotations

import time
from typing import Any, Literal

from mappa.storage.run import TIME_FORMAT, Run, iteration_name

TRAINER_STATE = "trainer_state.pt"
"""A checkpoint's optimizer, LR schedule, step count and RNG states: what makes it full."""
DEEPSPEED_STATE = "deepspeed"
"""A checkpoint's subfolder for DeepSpeed's optimizer shards (part of the full state)."""
ADAPTER = "adapter"
"""A LoRA agent's checkpoint subfolder: the adapter in peft's layout (its weights)."""
ADAPTER_WEIGHTS = f"{ADAPTER}/adapter_model.safetensors"
WEIGHTS = "model.safetensors"
OPTIMIZER_STATE = (TRAINER_STATE, DEEPSPEED_STATE)
"""What a full state holds beyond the weights, in the order retention deletes it."""
LEDGER = "retention.json"
WRITTEN_LAST = (WEIGHTS, ADAPTER_WEIGHTS, TRAINER_STATE)
"""A checkpoint's files written after all the others, in this order (`ArtifactStore.put_folder`'s `last`): a
save cut short (a killed worker, a store outage) leaves a checkpoint that looks at most as complete as it is
(weights: everything but the optimizer state; full: everything)."""

Holds = Literal["full", "weights"]


def checkpoint_holds(run: Run, agent: str, iteration: int) -> Holds | None:
    """What the checkpoint of `agent` at `iteration` holds: "full", "weights", or None (none there)."""
    parts = run.checkpoint_parts(agent, iteration)
    has_weights = run.store.exists(*parts, WEIGHTS) or run.store.exists(*parts, ADAPTER_WEIGHTS)
    if not has_weights:
        return None
    return "full" if run.store.exists(*parts, TRAINER_STATE) else "weights"


def checkpoint_iterations(run: Run, agent: str) -> list[int]:
    """The iterations that have a checkpoint folder for `agent`, in order (whatever each one holds)."""
    names = run.store.list(run.run_id, "checkpoints", agent)
    return sorted(int(name[5:]) for name in names if name.startswith("iter-") and name[5:].isdigit())


def retention_plan(
    iterations: list[int], latest: int, keep_last: int, keep_weights_every: int
) -> dict[int, Holds | None]:
    """What each of `iterations` (at most `latest`, the newest finished update) should hold: the full
    state for the last `keep_last` iterations up to `latest`, the weights of every `keep_weights_every`-th
    (iterations N-1, 2N-1, ...), nothing otherwise. Monotone: an iteration dropped for one `latest` is
    dropped for every later one, so a pass for an older iteration never keeps what a newer one deleted."""
    plan: dict[int, Holds | None] = {}
    for iteration in iterations:
        if iteration > latest:
            raise ValueError(f"iteration {iteration} is newer than the last finished update ({latest})")
        if iteration > latest - keep_last:
            plan[iteration] = "full"
        elif keep_weights_every and (iteration + 1) % keep_weights_every == 0:
            plan[iteration] = "weights"
        else:
            plan[iteration] = None
    return plan


def planned_changes(run: Run, agent: str, latest: int) -> list[dict[str, Any]]:
    """What retention must change in `agent`'s checkpoints once the update of `latest` is complete: one
    {agent, iteration, holds (what it keeps: "weights" or None), bytes_freed} per checkpoint that holds
    more than the plan keeps (a half-deleted one included)."""
    keep = run.config.checkpoint
    iterations = [i for i in checkpoint_iterations(run, agent) if i <= latest]
    changes = []
    for iteration, target in retention_plan(
        iterations, latest, keep.keep_last, keep.keep_weights_every
    ).items():
        if target == "full":
            continue
        parts = run.checkpoint_parts(agent, iteration)
        if target == "weights":
            freed = sum(run.store.size(*parts, name) for name in OPTIMIZER_STATE)
            if not freed:
                continue  # already stripped
        else:
            freed = run.store.size(*parts)
        changes.append({"agent": agent, "iteration": iteration, "holds": target, "bytes_freed": freed})
    return changes


def apply_change(run: Run, change: dict[str, Any]) -> None:
    """Delete what a planned change drops: the optimizer state first (`trainer_state.pt`, the full
    state's marker), then, for a checkpoint that keeps nothing, the folder. Idempotent: a pass killed
    halfway is finished by the next one."""
    parts = run.checkpoint_parts(change["agent"], change["iteration"])
    for name in OPTIMIZER_STATE:
        run.store.remove_tree(*parts, name)
    if change["holds"] is None:
        run.store.remove_tree(*parts)


def read_ledger(run: Run) -> dict[str, dict[str, dict[str, Any]]]:
    """{agent: {"iter-0003": {"holds": "weights" or None, "at": time, "by": "iter-0005/retention",
    "bytes_freed": n}}}: every checkpoint retention changed; {} for a run that never pruned."""
    if not run.store.exists(run.run_id, "checkpoints", LEDGER):
        return {}
    return run.store.read_json(run.run_id, "checkpoints", LEDGER)


def record_in_ledger(run: Run, changes: list[dict[str, Any]], by: str) -> None:
    """Add retention's `changes` ({agent, iteration, holds, bytes_freed}) to the run's ledger."""
    if not changes:
        return
    ledger = read_ledger(run)
    at = time.strftime(TIME_FORMAT, time.gmtime())
    for change in changes:
        entry = {"holds": change["holds"], "at": at, "by": by, "bytes_freed": change["bytes_freed"]}
        ledger.setdefault(change["agent"], {})[iteration_name(change["iteration"])] = entry
    run.store.write_json(ledger, run.run_id, "checkpoints", LEDGER)


class CheckpointPrunedError(ValueError):
    """A stage or command needs a checkpoint that retention deleted (or stripped to its weights)."""


def require_checkpoint(run: Run, agent: str, iteration: int, need: Holds, purpose: str) -> Holds:
    """What the checkpoint of `agent` at `iteration` holds, if it is at least `need` ("weights" <
    "full"); else a CheckpointPrunedError in one line: what `purpose` needed, what became of the
    checkpoint, what the run keeps, and what to do."""
    holds = checkpoint_holds(run, agent, iteration)
    if holds == "full" or holds == need:
        return holds
    missing = "the full state (weights and optimizer)" if need == "full" else "the weights"
    advice = (
        "This iteration cannot be recomputed from what the run keeps; start a new run (keep more full "
        "states with --set checkpoint.keep_last=N)"
        if need == "full"
        else "Evaluate a kept iteration, or keep weights in new runs (--set checkpoint.keep_weights_every=N)"
    )
    raise CheckpointPrunedError(
        f"{purpose} needs {missing} of agent {agent} at iteration {iteration}, but "
        f"{what_became_of(run, agent, iteration)}. The run keeps {kept_summary(run, agent)}. {advice}"
    )


def what_became_of(run: Run, agent: str, iteration: int) -> str:
    """`checkpoint retention deleted it at T (iter-0005/retention; checkpoint.keep_last=1, ...)`, or
    what is there when retention never touched it."""
    change = read_ledger(run).get(agent, {}).get(iteration_name(iteration))
    if change is not None:
        what = "stripped it to its weights" if change["holds"] == "weights" else "deleted it"
        keep = run.config.checkpoint
        return (
            f"checkpoint retention {what} at {change['at']} ({change['by']}; checkpoint.keep_last="
            f"{keep.keep_last}, keep_weights_every={keep.keep_weights_every})"
        )
    if checkpoint_holds(run, agent, iteration) == "weights":
        return "it holds the weights alone"
    return f"there is no checkpoint at {run.store.url(*run.checkpoint_parts(agent, iteration))}"


def pruned_note(run: Run, iteration: int) -> str | None:
    """One line for readers of an iteration (`mappa inspect`, `mappa rescore`) whose checkpoints retention
    deleted or stripped: what became of them, that the iteration's artifacts are kept, and what the run
    keeps; None when every trainable agent's checkpoint there is full (or the iteration never trained)."""
    trainable = [name for name, agent in run.config.agents.items() if agent.trainable]
    ledger = read_ledger(run)
    touched = [a for a in trainable if iteration_name(iteration) in ledger.get(a, {})]
    if not touched:
        return None
    agent = touched[0]
    return (
        f"checkpoints of iteration {iteration}: {what_became_of(run, agent, iteration)}; the iteration's "
        f"rollout, scores and experiences are kept. The run keeps {kept_summary(run, agent)} (agent {agent})"
    )


def kept_checkpoints(run: Run, agent: str) -> dict[str, list[int]]:
    """{"full": [iterations], "weights": [iterations]}: what `agent`'s checkpoints hold now."""
    kept: dict[str, list[int]] = {"full": [], "weights": []}
    for iteration in checkpoint_iterations(run, agent):
        holds = checkpoint_holds(run, agent, iteration)
        if holds is not None:
            kept[holds].append(iteration)
    return kept


def kept_summary(run: Run, agent: str) -> str:
    """`full states of iterations [9]; weights of [4, 8]` for `agent` (what its checkpoints hold now)."""
    kept = kept_checkpoints(run, agent)
    if not kept["full"] and not kept["weights"]:
        return "no checkpoint of it"
    text = f"full states of iterations {kept['full']}"
    return text + (f"; weights of {kept['weights']}" if kept["weights"] else "")
