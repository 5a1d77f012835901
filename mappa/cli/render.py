"""How the `mappa` commands show things on the console: tables of a run, its evaluations, a trajectory,
a coach comparison and a training summary. Reads plain data (frames, manifests, rows); computes nothing.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mappa.core.types import tool_result_from_record

console = Console(soft_wrap=True)


def note(text: str) -> None:
    """A note on the terminal (dim, no markup read from it): the pre-flight's, a pruned iteration's."""
    console.print(f"[dim]{escape(text)}[/dim]", highlight=False)


def print_evaluations(run) -> None:
    """Every evaluation of the run side by side (base first), one table per problem set (the run's held-out
    set, then each `mappa evaluate --eval-data` set), and what changed from the first to the last: success
    and, per seat, the share of problems where it did its part."""
    from mappa.stages.evaluate import STAGE_NAME
    from mappa.stages.evaluate_on import evaluation_set_names, stage_name

    sets = {"held-out": STAGE_NAME} | {name: stage_name(name) for name in evaluation_set_names(run)}
    printed = [print_evaluation_set(run, title, stage) for title, stage in sets.items()]
    if not any(printed):
        console.print(f"run {run.run_id} has no evaluation yet: `mappa evaluate {run.run_id} --iteration -1`")


def print_evaluation_set(run, title: str, stage: str) -> bool:
    """One problem set's evaluations (`print_evaluations`); False when it has none."""
    import pandas as pd

    from mappa.stages.evaluate import evaluation_summaries, finished_evaluations

    rows = evaluation_summaries(run, stage)
    if not rows:
        return False
    frame = pd.DataFrame(rows).rename(columns=SUCCESS_LABELS)
    caption = "; ".join(text for key, text in SUCCESS_NOTES.items() if SUCCESS_LABELS[key] in frame)
    console.print(_frame_table(f"run {run.run_id}: {title} evaluations", frame, caption))
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        seats = [key for key in first if key.endswith(" did its part") and key in last]
        changes = [
            f"{seat.removesuffix(' did its part')} {first[seat]:.0%} -> {last[seat]:.0%}" for seat in seats
        ]
        console.print(
            f"{title} success (env's grading) {first['evaluation']} -> {last['evaluation']}: "
            f"{first['success']:.1%} -> "
            f"{last['success']:.1%} ({100 * (last['success'] - first['success']):+.1f} points)"
            + (f"; per seat, problems where it did its part: {', '.join(changes)}" if changes else ""),
            highlight=False,
        )
        iterations = finished_evaluations(run, stage)
        print_change(
            run, iterations[0], iterations[-1], stage, f"{first['evaluation']} -> {last['evaluation']}"
        )
    return True


SUCCESS_LABELS = {
    "success": "success (env's grading)",
    "success_strict": "strict (\\boxed{})",
    "success_flexible": "flexible (last number)",
}
"""The evaluation tables' names for `evaluation_summaries`' success columns."""
SUCCESS_NOTES = {
    "success": "success: the env's own grading of the team's result (its `correct`)",
    "success_strict": "strict: only an answer in the last reply's \\boxed{} counts",
    "success_flexible": "flexible: the env's answer, else the reply's last number (lm-eval's flexible)",
}


def print_change(run, first: int, last: int, stage: str, title: str) -> None:
    """Right before and after, overall and per kind of problem, with each change's 95% interval over
    problems and the problems gained and lost; a kind significantly worse is marked WORSE."""
    from mappa.stages.evaluate import evaluation_change

    rows = evaluation_change(run, first, last, stage)
    width = max(len(row["kind"]) for row in rows)
    lines = [
        f"{title}, per kind of problem (right before -> after, env's grading; change in points [95% interval "
        "over problems])"
    ]
    for row in rows:
        low, high = (100 * bound for bound in row["ci95"])
        lines.append(
            f"  {row['kind']:<{width}}  {row['before']:>4} -> {row['after']:<4} of {row['problems']:<4} "
            f"{100 * row['change']:+6.1f} [{low:+.1f}, {high:+.1f}]  "
            f"gained {row['gained']}, lost {row['lost']}" + ("  WORSE" if row["worse"] else "")
        )
    console.print("\n".join(lines), markup=False, highlight=False)


def print_plot(run, path: str) -> None:
    """The training curves of every finished iteration as a PNG at `path` (a local file)."""
    from pathlib import Path

    from mappa.reporting.curves import plot_curves
    from mappa.storage.history import run_history

    frame = run_history(run)  # a ValueError names the run when no iteration has finished
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    plot_curves(frame, target, title=f"run {run.run_id}")
    console.print(f"curves of {frame['iteration'].nunique()} iteration(s): {target.resolve()}", markup=False)


def _frame_table(title: str, frame, caption: str | None = None) -> Table:
    """A data frame as a table: floats to 3 decimals, a missing value (None, NaN) as `-`."""
    table = Table(title=title, caption=caption, caption_justify="left")
    for column in frame.columns:
        table.add_column(escape(str(column)), overflow="fold")
    for row in frame.itertuples(index=False):
        table.add_row(*(escape(_cell(v)) for v in row))
    return table


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def print_trajectory(frame, asked: int | None, trained: dict[str, str]) -> None:
    """One trajectory, action by action (the action `asked` for marked): what each agent saw and wrote,
    its tool run, the coach's raw score and rationale, and what trained it (`training_note`'s columns:
    reward, return, mean advantage; `trained` says why an action without them has none, per agent)."""
    first = frame.iloc[0]
    final = first["final_answer"] if isinstance(first["final_answer"], str) else None
    console.print(
        f"[bold]{escape(str(first['trajectory_id']))}[/bold] (iteration {first['iteration']})  "
        f"problem: {escape(str(first['question']))}"
    )
    answer = f"final answer {final}" if final else "no final answer"
    verdict = "graded right" if first["correct"] else "graded wrong"
    console.print(f"reference {first['gold_answer']}; {answer} ({verdict} by the env)", markup=False)
    for row in frame.to_dict("records"):
        mark = ">> " if asked is not None and int(row["index"]) == asked else ""
        console.rule(
            escape(
                f"{mark}{row['agent']} turn {row['turn']} (action {row['action_id']}): coach score "
                f"{_cell(row['score'])} ({row['parse_status']}); {training_note(row, trained)}"
            )
        )
        console.print(f"input: {row['observation'][-600:]}", markup=False)
        console.print(f"output: {row['response']}", markup=False)
        tool = row.get("tool_result")
        if isinstance(tool, dict) and tool.get("duration_s") is not None:
            result = tool_result_from_record(tool)
            status = f"tool: exit {result.exit_code}, timed out {result.timed_out}"
            console.print(f"{status}\n{result.stdout}{result.stderr}", markup=False)
        console.print(f"coach: {row['rationale']}", markup=False)


def training_note(row: dict[str, Any], trained: dict[str, str]) -> str:
    """What trained one action: the reward its coach score became, the return at its first token and the
    mean advantage over its tokens; or why it has none (`trained[agent]`)."""
    advantage = row.get("mean_advantage")
    if advantage is None or advantage != advantage:
        return trained.get(row["agent"], "no advantage")
    unscored = " (unscored: no advantage)" if row["parse_status"] == "fallback" else ""
    return (
        f"reward {row['reward']:+.3f}, return {row['return']:+.3f}, advantage {advantage:+.3f} "
        f"(mean over {int(row['tokens'])} tokens){unscored}"
    )


SEPARATION_MEANING = (
    "AUC: does the run's coach rank the actions of successful teams above those of failed ones? The chance "
    "that an action of a team the env graded right scored above one of a team graded wrong (ties half); 0.5 "
    "is chance, 1 every one above. Unscored actions (parse status fallback) are left out."
)
SEPARATION_LIMIT = (
    "Its limit: agreement with the outcome is not blame accuracy. A seat whose good work ends in a failed "
    "team (a right solver before a wrong program) lowers it under a fair coach, a coach that saw the "
    "reference answer follows outcomes by construction, and a high AUC says nothing about which seat got "
    "the credit."
)


def print_coach_separation(run_id: str, rows: list[dict[str, Any]]) -> None:
    """Per seat, per iteration and pooled: how the run's own coach scores separate success from failure
    (`mappa.reporting.coach_separation`), with what it means and what it does not."""
    import pandas as pd

    if not rows:
        console.print(f"run {run_id} has no scored iteration yet: no coach scores to judge", markup=False)
        return
    frame = pd.DataFrame(rows).rename(
        columns={
            "auc": "AUC",
            "n_success": "actions of successful teams",
            "n_failed": "actions of failed teams",
            "n_unscored": "unscored, left out",
        }
    )
    title = f"run {run_id}: its coach's scores against the team's outcome, per seat (iteration all: pooled)"
    console.print(_frame_table(title, frame, SEPARATION_MEANING))
    console.print(SEPARATION_LIMIT, markup=False, highlight=False)


def print_comparison(rows: list[dict[str, Any]]) -> None:
    """The coach comparison table(s): per agent, then per agent and task kind where there are kinds."""
    import pandas as pd

    if not rows:
        console.print(
            "no re-scoring to compare with: `mappa rescore RUN_ID --as NAME --set coach.<field>=...` scores "
            "the same actions with another coach",
            markup=False,
        )
        return
    frame = pd.DataFrame(rows)
    per_agent = frame[frame["kind"].isna()] if "kind" in frame else frame
    console.print(
        _frame_table(
            "coaches against the run's coach, per agent", per_agent.drop(columns="kind", errors="ignore")
        )
    )
    if "kind" in frame and frame["kind"].notna().any():
        console.print(_frame_table("per agent and task kind", frame[frame["kind"].notna()]))


def print_evaluation(manifest: dict[str, Any], rows: list[dict[str, Any]]) -> None:

    table = Table(title=f"evaluation of {manifest['label']} on {manifest['eval_data']}")
    for column in ("problem", "gold", "answer", "correct"):
        table.add_column(column, overflow="fold")
    for row in rows:
        answer = row["final_answer"] if isinstance(row["final_answer"], str) else "-"
        cells = (row["question"], row["gold_answer"], answer, "yes" if row["correct"] else "no")
        table.add_row(*(escape(str(c)) for c in cells))
    console.print(table)
    other = [
        f"{name} {manifest[key]:.0%}"
        for name, key in (("strict \\boxed{}", "success_rate_boxed"), ("flexible", "success_rate_flexible"))
        if manifest.get(key) is not None
    ]
    console.print(
        f"success rate {manifest['success_rate']:.0%} ({manifest['correct']}/{manifest['problems']}, "
        f"the env's grading{'; ' + ', '.join(other) if other else ''})"
        f"{' (already evaluated)' if manifest.get('skipped') else ''}; results: {manifest['output']}",
        markup=False,
    )
    if manifest.get("dropped_for_overlap"):
        console.print(
            f"{manifest['dropped_for_overlap']} held-out problem(s) repeating training problems were left "
            f"out (env.overlap=drop; the list: ROOT/RUN_ID/data_overlap.json)"
        )


def print_runs(root_url: str, statuses: list) -> None:
    """The runs under a root (`mappa.reporting.run_list.RunStatus`), newest first."""
    if not statuses:
        console.print(f"no runs under {root_url} (no folder there holds a config.yaml)", markup=False)
        return
    table = Table(title=f"runs under {escape(root_url)}, newest first")
    for column in ("run", "config", "started (UTC)", "iterations", "last finished", "evaluations"):
        table.add_column(column, overflow="fold")
    for run in statuses:
        configured = "?" if run.configured_iterations is None else str(run.configured_iterations)
        last = run.last_finished or "-"
        if run.failed:
            last += f"; then failed in {run.failed}"
        iterations = f"{run.finished_iterations} / {configured}"
        cells = (
            run.run_id,
            run.config or "?",
            run.started or "-",
            iterations,
            last,
            run.evaluations or "none",
        )
        table.add_row(*(escape(str(c)) for c in cells))
    console.print(table)
    console.print("iterations: finished / configured; `mappa inspect RUN_ID --root ROOT` shows one run")


def print_summary(summary: dict[str, Any]) -> None:
    from mappa.stages import TRAINING

    agents = Table(title=f"run {summary['run_id']}: agents")
    for column in ("agent", "iteration", "mean coach score", "KL", "loss", "grad norm"):
        agents.add_column(column, justify="right" if column != "agent" else "left")
    for agent, rows in summary["agents"].items():
        for row in rows:
            agents.add_row(
                agent,
                str(row["iteration"]),
                f"{row['mean_score']:.2f}",
                f"{row['kl']:.5f}",
                f"{row['loss']:.4f}",
                f"{row['grad_norm']:.3f}",
            )
    iterations = Table(title="iterations")
    for column in ("iteration", "training success (sampled)", *(f"{stage} s" for stage in TRAINING)):
        iterations.add_column(column, justify="right")
    for row in summary["iterations"]:
        t = row["seconds"]
        iterations.add_row(
            str(row["iteration"]),
            f"{row['success_rate']:.0%}",
            *(f"{t[s]:.1f}" for s in TRAINING),
        )
    console.print(agents)
    console.print(iterations)
    console.print(f"artifacts: {summary['url']}")
