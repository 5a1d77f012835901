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
    console.print(_frame_table(f"run {run.run_id}: {title} evaluations", pd.DataFrame(rows)))
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        seats = [key for key in first if key.endswith(" did its part") and key in last]
        changes = [
            f"{seat.removesuffix(' did its part')} {first[seat]:.0%} -> {last[seat]:.0%}" for seat in seats
        ]
        console.print(
            f"{title} success {first['evaluation']} -> {last['evaluation']}: {first['success']:.1%} -> "
            f"{last['success']:.1%} ({100 * (last['success'] - first['success']):+.1f} points)"
            + (f"; per seat, problems where it did its part: {', '.join(changes)}" if changes else ""),
            highlight=False,
        )
        iterations = finished_evaluations(run, stage)
        print_change(
            run, iterations[0], iterations[-1], stage, f"{first['evaluation']} -> {last['evaluation']}"
        )
    return True


def print_change(run, first: int, last: int, stage: str, title: str) -> None:
    """Right before and after, overall and per kind of problem, with each change's 95% interval over
    problems and the problems gained and lost; a kind significantly worse is marked WORSE."""
    from mappa.stages.evaluate import evaluation_change

    rows = evaluation_change(run, first, last, stage)
    width = max(len(row["kind"]) for row in rows)
    lines = [
        f"{title}, per kind of problem (right before -> after; change in points [95% interval over problems])"
    ]
    for row in rows:
        low, high = (100 * bound for bound in row["ci95"])
        lines.append(
            f"  {row['kind']:<{width}}  {row['before']:>4} -> {row['after']:<4} of {row['problems']:<4} "
            f"{100 * row['change']:+6.1f} [{low:+.1f}, {high:+.1f}]  "
            f"gained {row['gained']}, lost {row['lost']}"
            + ("  WORSE" if row["worse"] else "")
        )
    console.print("\n".join(lines), markup=False, highlight=False)


def print_plot(run, path: str) -> None:
    """The training curves of every finished iteration as a PNG at `path` (a local file)."""
    from pathlib import Path

    from mappa.storage.curves import plot_curves
    from mappa.storage.history import run_history

    frame = run_history(run)  # a ValueError names the run when no iteration has finished
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    plot_curves(frame, target, title=f"run {run.run_id}")
    console.print(f"curves of {frame['iteration'].nunique()} iteration(s): {target.resolve()}", markup=False)


def _frame_table(title: str, frame) -> Table:
    table = Table(title=title)
    for column in frame.columns:
        table.add_column(str(column), overflow="fold")
    for row in frame.itertuples(index=False):
        table.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row))
    return table


def print_trajectory(frame) -> None:
    first = frame.iloc[0]
    console.print(f"[bold]{first['trajectory_id']}[/bold]  problem: {first['question']}")
    console.print(
        f"reference {first['gold_answer']}, final answer {first['final_answer']}, correct {first['correct']}"
    )
    for row in frame.to_dict("records"):
        console.rule(
            f"{row['agent']} turn {row['turn']}: coach score {row['score']:.2f} ({row['parse_status']})"
        )
        console.print(f"input: {row['observation'][-600:]}", markup=False)
        console.print(f"output: {row['response']}", markup=False)
        tool = row.get("tool_result")
        if isinstance(tool, dict) and tool.get("duration_s") is not None:
            result = tool_result_from_record(tool)
            status = f"tool: exit {result.exit_code}, timed out {result.timed_out}"
            console.print(f"{status}\n{result.stdout}{result.stderr}", markup=False)
        console.print(f"coach: {row['rationale']}", markup=False)


def print_comparison(rows: list[dict[str, Any]]) -> None:
    """The coach comparison table(s): per agent, then per agent and task kind where there are kinds."""
    import pandas as pd

    if not rows:
        console.print("no re-scoring to compare yet: run `mappa rescore RUN_ID --as NAME --set coach...`")
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
    console.print(
        f"success rate {manifest['success_rate']:.0%} ({manifest['correct']}/{manifest['problems']})"
        f"{' (already evaluated)' if manifest.get('skipped') else ''}; results: {manifest['output']}"
    )
    if manifest.get("dropped_for_overlap"):
        console.print(
            f"{manifest['dropped_for_overlap']} held-out problem(s) repeating training problems were left "
            f"out (env.overlap=drop; the list: ROOT/RUN_ID/data_overlap.json)"
        )


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
    for column in ("iteration", "success rate", *(f"{stage} s" for stage in TRAINING)):
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
