"""The checks a run passes before any work starts: one place for `mappa train`, `mappa resume` (and so
`mappa retry`), each failing in one line that names the thing at fault and the fix, in seconds.

In order: the env's problems load (and how many held-out problems repeat training ones), the sandbox can
isolate, the storage root is writable, the coach's templates exist and an endpoint coach answers, every
agent's model resolves, and the machine has the disk and memory the run needs (`mappa.resources`).
Nothing here starts Ray or Prefect or loads a model's weights, except that a known model not prepared yet
is prepared (converted once, which loads it) when a run resolves it; a dry run (`mappa train --dry-run`)
names such a model instead and leaves out the resource estimate that reads its folder, and it writes
nothing to a local storage root.

Not covered: the checks a re-scoring or an evaluation makes of its own (`check_rescore`,
`check_evaluable`).
"""

from __future__ import annotations

from collections.abc import Callable

from mappa.config import ConfigError, RunConfig


def check_before_run(
    config: RunConfig, run_id: str | None, say: Callable[[str], None] = print, dry_run: bool = False
) -> None:
    """Every pre-flight check of a training run (`run_id`: the run it continues, if any, whose checkpoints
    count as written); `say` prints the notes (overlap, which model each agent loads). With `dry_run`
    nothing is written or prepared (see the module's docstring); `say` names what was left out."""
    from mappa.coach.build import check_coach_ready
    from mappa.resources import check_resources
    from mappa.sandbox import check_isolation
    from mappa.storage.store import ArtifactStore

    env, spec = config.env, config.env_spec
    train, held_out = (spec.load_problems(source) for source in (env.train_data, env.eval_data))
    overlap_note(config, train, held_out, say)
    check_isolation(config.sandbox.isolation)  # every env runs model-written code
    store = ArtifactStore(config.storage.root)
    if dry_run:
        store.check_writable_in_place()
    else:
        store.check_writable()
    check_coach_ready(config.coach)
    if not note_models(config, say, dry_run):
        say("resources: disk and memory not estimated (they read the prepared models' folders)")
    elif iterations_done(store, config, run_id) >= config.iterations:
        say(f"resources: disk not estimated, run {run_id} has all {config.iterations} iteration(s) done")
        check_resources(config, check_disk=False)
    else:
        check_resources(config, written_bytes=store.size(run_id, "checkpoints") if run_id else 0.0)


def iterations_done(store, config: RunConfig, run_id: str | None) -> int:
    """How many leading iterations of the stored run `run_id` have an update manifest made under this
    config (0 for a new run): the iterations a continued run does not redo. Read from the manifests, not
    the stages' full check, so the pre-flight starts neither Prefect nor Ray."""
    from mappa.storage.run import Run

    if run_id is None or not store.exists(run_id, "config.yaml"):
        return 0
    run, done, config_hash = Run(store, run_id, config), 0, config.config_hash()
    while run.has_manifest(done, "update") and (
        run.read_manifest(done, "update").get("config_hash") == config_hash
    ):
        done += 1
    return done


def note_models(config: RunConfig, say: Callable[[str], None], dry_run: bool) -> bool:
    """Say which model each agent (and a local coach) loads, resolving it (a ValueError names one that
    cannot be found); in a dry run a model not prepared yet is named and skipped. True: all resolved."""
    from mappa.models.prepare import needs_preparing, resolve_model

    seats = {f"agent {name}": agent.model for name, agent in config.agents.items()}
    if config.coach.runs_local_model:  # a model that is not prepared is named with the command, here
        seats["coach"] = config.coach.model
    resolved = True
    for seat, spec in seats.items():
        if dry_run and needs_preparing(spec):
            say(
                f"{seat}: model {spec} is not prepared yet; a run prepares it first (loading it), a dry run "
                f"does not (`mappa models prepare {spec}` does it now)"
            )
            resolved = False
        else:
            say(f"{seat}: model {resolve_model(spec)}")
    return resolved


def overlap_note(config: RunConfig, train_problems, eval_problems, say: Callable[[str], None]) -> None:
    """Say how many held-out problems repeat training ones, and what `env.overlap` does about it."""
    from mappa.envs.overlap import overlap_report

    report = overlap_report(train_problems, eval_problems)
    if not report["overlapping"]:
        return
    examples = ", ".join(f"{e['eval']} ~ {e['train']} ({e['how']})" for e in report["examples"][:3])
    found = (
        f"{report['overlapping']} of {report['eval_problems']} held-out problems ({config.env.eval_data}) "
        f"repeat training problems ({config.env.train_data}), e.g. {examples}"
    )
    if config.env.overlap == "error":
        raise ConfigError(f"{found}; remove them, or set env.overlap=drop (or warn)")
    action = "left out of evaluations" if config.env.overlap == "drop" else "kept (env.overlap=warn)"
    say(f"overlap: {found}: {action}")
