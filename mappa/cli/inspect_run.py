"""What `mappa inspect` and `mappa runs` show: the runs under a root, one run's iterations, one iteration's
agents and extreme actions, one trajectory with what trained each action, the run's evaluations, its
coach's separation of success from failure (and re-scorings against it), and its curves.

Reads the run's files only (`mappa.reporting.run_view`, `run_list`, `coach_separation`); nothing starts.
Tables and text are `mappa.cli.render`'s. A relative --root is relative to the working directory: every
message names the absolute folder.
"""

from __future__ import annotations

import argparse
import os

from mappa.cli.render import (
    _frame_table,
    console,
    note,
    print_coach_separation,
    print_comparison,
    print_evaluations,
    print_plot,
    print_runs,
    print_trajectory,
)

RUN_OPTIONS = ("iteration", "trajectory", "evaluations", "plot", "coaches")


def cmd_runs(args: argparse.Namespace) -> int:
    """`mappa runs [--root ROOT]`: the runs under ROOT with where each stands, newest first."""
    from mappa.reporting.run_list import list_runs
    from mappa.storage.store import ArtifactStore

    print_runs(ArtifactStore(args.root).url(), list_runs(args.root))
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    """`mappa inspect [RUN_ID] [--iteration K | --trajectory ID | --evaluations | --coaches | --plot FILE]`;
    without a run id, the runs under --root (as `mappa runs`)."""
    from mappa.storage.run import Run

    if args.run_id is None:
        given = [f"--{name}" for name in RUN_OPTIONS if getattr(args, name) not in (None, False)]
        if given:
            raise ValueError(f"{' '.join(given)} needs a run id: mappa inspect RUN_ID {given[0]} ...")
        return cmd_runs(args)
    run = Run.open(args.root, args.run_id)
    if args.coaches:
        inspect_coaches(run, args.plot)
    elif args.evaluations:
        print_evaluations(run)
    elif args.plot:
        print_plot(run, args.plot)
    elif args.trajectory:
        inspect_trajectory(run, args.trajectory)
    elif args.iteration is not None:
        inspect_iteration(run, args.iteration)
    else:
        inspect_run(run)
    return 0


def inspect_run(run) -> None:
    """One row per rolled-out iteration, with what its success figures are."""
    import pandas as pd

    from mappa.reporting import run_view

    rows = run_view.iteration_rows(run)
    if not rows:
        console.print(f"run {run.run_id} has no rolled-out iteration yet", markup=False)
        return
    rollout = run.config.rollout
    caption = (
        f"{run_view.TRAINING_SUCCESS}: the share of the iteration's sampled rollouts "
        f"({rollout.problems_per_iteration} problems x {rollout.samples_per_problem} samples, temperature "
        f"{rollout.temperature}) the env graded right, with the weights before its update: exploration, "
        "not a held-out measure."
    )
    if run_view.HELD_OUT_SUCCESS in rows[0]:
        caption += (
            f" {run_view.HELD_OUT_SUCCESS}: the greedy evaluation of the iteration's checkpoint (after its "
            f"update); `mappa inspect {run.run_id} --evaluations` has the base model and the change."
        )
    console.print(_frame_table(f"run {run.run_id}", pd.DataFrame(rows), caption))


def inspect_iteration(run, iteration: int) -> None:
    """Per-agent coach-score stats, per task kind where there are kinds, and the extreme actions."""
    import pandas as pd

    from mappa.reporting import run_view
    from mappa.stages.report import kind_rows_of
    from mappa.storage.checkpoints import pruned_note

    frame = run_view.scored_actions(run, iteration)  # a ValueError names the run's iterations
    pruned = pruned_note(run, iteration)
    if pruned:
        note(pruned)
    stats = run_view.agent_stats(frame)
    console.print(_frame_table(f"iteration {iteration}: agents (coach scores, raw)", stats))
    kinds = kind_rows_of(run, iteration)
    if kinds:
        console.print(_frame_table(f"iteration {iteration}: by task kind", pd.DataFrame(kinds)))
    low, high = run_view.extreme_actions(frame)
    columns = ["action_id", "agent", "score", "rationale"]
    console.print(_frame_table("lowest scored actions", low[columns]))
    console.print(_frame_table("highest scored actions", high[columns]))
    console.print(f"one of them, in full: mappa inspect {run.run_id} --trajectory ACTION_ID", markup=False)


def inspect_trajectory(run, wanted: str) -> None:
    """A trajectory (or the one an action id belongs to), with what trained each of its actions."""
    from mappa.reporting import run_view

    frame, asked = run_view.find_trajectory(run, wanted)
    iteration = int(frame["iteration"].iloc[0])
    training = run_view.action_training(run, iteration)
    if training is None:
        missing = "no advantage yet (the iteration's advantages stage has not finished)"
    else:
        frame = frame.merge(training, left_on="action_id", right_index=True, how="left")
        missing = "no advantage (an empty response)"
    trained = {
        name: missing if agent.trainable else "frozen seat: not trained"
        for name, agent in run.config.agents.items()
    }
    print_trajectory(frame, asked, trained)


def inspect_coaches(run, plot: str | None) -> None:
    """The run's own coach against outcomes, per seat; then each re-scoring against the run's coach."""
    from mappa.reporting.coach_separation import coach_separation
    from mappa.stages.rescore import comparison_rows, rescore_names

    print_coach_separation(run.run_id, coach_separation(run))
    rows = [row for name in rescore_names(run) for row in comparison_rows(run, name)]
    print_comparison(rows)
    if plot and rows:
        from mappa.reporting.coach_plot import plot_coach_comparison

        plot_coach_comparison(rows, plot, title=f"run {run.run_id}: coaches")
        console.print(f"coach comparison: {os.path.abspath(plot)}", markup=False)
