"""DSBench-style data science: Data Engineer -> Modeler -> Analyst over a shared workspace (MAPPA, 4.2).

Each trajectory owns a workspace folder holding the task's public files (train.csv, test.csv,
sample_submission.csv). The Data Engineer cleans the data and saves X_train.pkl, y_train.pkl and X_test.pkl;
the Modeler trains on them and saves model.pkl; the Analyst predicts and writes submission.csv. Each agent
has up to `max_turns` turns; a turn is one Python program run in the sandbox inside the workspace, and the
agent sees its output and the files present (the code-writing seat, `run_code_seat`). An agent stops early
once its files exist and its last program succeeded. A downstream agent acts even when an upstream one
failed: it sees the missing files, and the coach must blame the upstream agent, not the one that reports it
(`templates/dsbench.txt`, `rubric_dsbench`).

The submission is graded against hidden test labels with the task's metric (`mappa.envs.dsbench.grading`);
success means a valid submission. Hidden labels never enter a workspace or a prompt, and the paths that hold
them are covered inside the sandbox (bubblewrap only; see `mappa.sandbox.runner`). The coach sees the
computed metrics for the Analyst's actions only, and only with `coach.use_ground_truth`.

`run_dsbench` runs a whole batch seat by seat (all engineers' turns, then all modelers', ...), so each
agent's engine sees one large batch at a time. Workspaces are removed once graded.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from mappa.envs.api import (
    Action,
    Agent,
    Attempt,
    EnvSection,
    EnvSpec,
    Episode,
    Problem,
    SandboxLimits,
    Trajectory,
    clip,
    describe_result,
    run_code_seat,
)
from mappa.envs.dsbench.corruptions import CORRUPTIONS
from mappa.envs.dsbench.grading import grade_submission
from mappa.envs.dsbench.reference_team import reference_responses
from mappa.envs.dsbench.rubric import RULES
from mappa.envs.dsbench.task import OUTPUTS
from mappa.envs.dsbench.task_sets import (
    load_task_problems,
    paths_to_hide,
    problem_to_task,
    write_workspace,
)

SEATS = ("data_engineer", "modeler", "analyst")


class DSBenchEnvConfig(EnvSection):
    """Data Engineer -> Modeler -> Analyst on tabular modelling tasks over a shared workspace
    (`env.type: dsbench`)."""

    type: str = "dsbench"
    train_data: str = "builtin:train"
    """Tasks to train on: `builtin:train` (the project's offline tasks built from data shipped with
    scikit-learn) or `dsbench:<path to DSBench's data_modeling folder>[#name1,name2]`."""
    eval_data: str = "builtin:eval"
    """Held-out tasks for `mappa evaluate` and the evaluate stage (no task is in both builtin splits)."""
    max_turns: int = Field(4, ge=1, le=8)
    """Programs each agent may run per trajectory (the paper: 4); an agent stops early once its files exist
    and its last program succeeded."""
    workspace_root: str | None = None
    """Local folder for the trajectories' workspaces (default: the system's temporary folder); each
    workspace is removed once its submission is graded."""


ROLES = {
    "data_engineer": (
        "You are the Data Engineer in a team of three. Load train.csv and test.csv from the current folder "
        "with pandas, handle missing values and encode text columns as numbers, and save X_train.pkl, "
        "y_train.pkl and X_test.pkl with `to_pickle` (X_train and X_test: the same numeric feature columns "
        "in the same order; y_train: the target column). A Modeler trains on your files next and an Analyst "
        "predicts with them. Write one Python program in a ```python block and print what you saved."
    ),
    "modeler": (
        "You are the Modeler in a team of three. Load X_train.pkl and y_train.pkl with pandas.read_pickle, "
        "train a scikit-learn model suited to the task and its metric, print a validation score, and save "
        "the fitted model to model.pkl with pickle. A Data Engineer prepared the files; an Analyst predicts "
        "with your model next. Write one Python program in a ```python block. If an input file is missing, "
        "say so: it is the Data Engineer's job to make it."
    ),
    "analyst": (
        "You are the Analyst in a team of three. Load model.pkl (pickle) and X_test.pkl (pandas), predict "
        "the test rows and write submission.csv with exactly the columns of sample_submission.csv and one "
        "row per row of test.csv, with its id. Print the first rows. Write one Python program in a "
        "```python block. If an input file is missing, say so: the upstream agents make them."
    ),
}


@dataclass(kw_only=True)
class _Episode(Episode):
    """One trajectory while the batch is rolled out: its workspace, its sandbox limits (the task's hidden
    labels covered), each seat's last attempt once the seat is done."""

    workspace: Path
    limits: SandboxLimits
    last: dict[str, Attempt] = field(default_factory=dict)  # seat -> its last program and result

    def missing(self, seat: str) -> list[str]:
        return [name for name in OUTPUTS[seat] if not (self.workspace / name).is_file()]


async def run_dsbench(
    problems: list[tuple[str, Problem]],
    agents: dict[str, Agent],
    limits: SandboxLimits,
    max_turns: int = 4,
    sandbox_concurrency: int = 4,
    workspace_root: str | None = None,
) -> list[Trajectory]:
    """Roll out one trajectory per (trajectory id, task problem); the pipeline reads top to bottom."""
    with tempfile.TemporaryDirectory(prefix="mappa-dsbench-", dir=workspace_root) as root:
        episodes = [_start(tid, problem, Path(root), limits) for tid, problem in problems]
        for seat in SEATS:
            await _take_turns(seat, episodes, agents[seat], max_turns, sandbox_concurrency)
        return [_finish(episode) for episode in episodes]


def _start(trajectory_id: str, problem: Problem, root: Path, limits: SandboxLimits) -> _Episode:
    task = problem_to_task(problem)
    workspace = root / re.sub(r"[^A-Za-z0-9_.-]", "_", trajectory_id)
    write_workspace(task, workspace)
    hidden = dataclasses.replace(limits, hidden_paths=(*limits.hidden_paths, *paths_to_hide(task)))
    return _Episode(trajectory_id, problem, workspace=workspace, limits=hidden)


async def _take_turns(seat: str, episodes: list[_Episode], agent: Agent, max_turns: int, gate: int) -> None:
    """Up to `max_turns` programs per episode for `seat`, each run in the episode's workspace; an episode
    leaves once it has handed over (its last program ran and its files exist)."""
    attempts = await run_code_seat(
        seat,
        agent,
        episodes,
        lambda episode, last: observation(episode, seat, last),
        max_turns=max_turns,
        limits=lambda episode: episode.limits,
        concurrency=gate,
        done=lambda episode, attempt: attempt.ran_ok and not episode.missing(seat),
        workdir=lambda episode: episode.workspace,
    )
    for episode, attempt in zip(episodes, attempts, strict=True):
        episode.last[seat] = attempt


def _finish(episode: _Episode) -> Trajectory:
    task = problem_to_task(episode.problem)
    grade = grade_submission(task, episode.workspace / "submission.csv")
    outcome = {"kind": task.kind, **grade.as_dict()}
    final = f"{grade.metric} {grade.value:.6g}" if grade.valid and grade.value is not None else None
    return Trajectory(episode.id, episode.problem, tuple(episode.actions), final, grade.valid, outcome)


def observation(episode: _Episode, seat: str, last: Attempt | None) -> str:
    """What `seat` reads before a turn: the task, the files present, upstream's report, its last attempt
    (None: this is its first turn)."""
    parts = [episode.problem.question, f"Files in the workspace now: {_listing(episode.workspace)}"]
    if seat == SEATS[0]:
        parts.append(f"train.csv begins:\n{_head(episode.workspace / 'train.csv')}")
    upstream = SEATS[: SEATS.index(seat)]
    if upstream:
        previous = upstream[-1]
        handed = episode.last.get(previous, Attempt(None, None))
        report = describe_result(handed.result) if handed.code is not None else "(it ran no program)"
        parts.append(f"What the {_title(previous)} reported (its last program's output):\n{report}")
    if last is not None:
        shown = f"```python\n{clip(last.code)}\n```" if last.code else "(no ```python block)"
        missing = episode.missing(seat)
        still = f"Still missing: {', '.join(missing)}." if missing else "The last program failed."
        parts.append(f"Your previous program:\n{shown}\nIts result:\n{describe_result(last.result)}\n{still}")
    parts.append(
        f"Your part: save {', '.join(OUTPUTS[seat])}. Write one Python program in a ```python block."
    )
    return "\n\n".join(parts)


def _listing(folder: Path) -> str:
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    return ", ".join(f"{p.name} ({_size(p.stat().st_size)})" for p in files) or "(none)"


def _head(path: Path, lines: int = 3, limit: int = 800) -> str:
    """The first lines of a public CSV (header and rows): the columns the agent writes code for."""
    if not path.is_file():
        return "(missing)"
    with path.open(encoding="utf-8", errors="replace") as handle:
        text = "".join(line for _, line in zip(range(lines), handle))
    return clip(text.rstrip("\n"), limit)


def _size(size: int) -> str:
    return (
        f"{size} B"
        if size < 1024
        else f"{size / 1024:.1f} kB"
        if size < 1024**2
        else f"{size / 1024**2:.1f} MB"
    )


def _title(seat: str) -> str:
    return seat.replace("_", " ").title()


def metrics_reference(trajectory: Trajectory, action: Action) -> str | None:
    """The coach's ground truth: the computed metrics, for the Analyst's actions only."""
    if action.agent != "analyst" or not trajectory.outcome:
        return None
    out = trajectory.outcome
    if not out.get("valid"):
        return f"COMPUTED RESULT (ground truth): the final submission.csv is invalid: {out.get('problem')}."
    better = "higher" if out.get("higher_is_better") else "lower"
    baseline, reference = _figure(out, "baseline"), _figure(out, "reference")
    return (
        f"COMPUTED RESULT (ground truth): the final submission.csv is valid; {out['metric']} on the hidden "
        f"test labels = {out['value']:.4g} ({better} is better; a trivial predictor gets {baseline}, "
        f"a reference model {reference}); relative score {out['fair_score']:.2f} "
        "(0 = trivial, 1 = reference)."
    )


def _figure(outcome: dict, key: str) -> str:
    value = outcome.get(key)
    return "unknown" if value is None else f"{value:.4g}"


async def _run(problems, agents, limits, env) -> list[Trajectory]:
    return await run_dsbench(problems, agents, limits, env.max_turns, workspace_root=env.workspace_root)


def graded_figures(trajectory: Trajectory) -> dict[str, Any]:
    """An evaluation's columns: the task's kind, metric, its value on the hidden labels, relative score."""
    out = trajectory.outcome
    if "kind" not in out:
        return {}
    value = out.get("value")
    return {
        "kind": out["kind"],
        "metric": out.get("metric"),
        "metric_value": float("nan") if value is None else float(value),
        "fair_score": float(out.get("fair_score") or 0.0),
    }


SPEC = EnvSpec(
    type="dsbench",
    seats=SEATS,
    roles=ROLES,
    run=_run,
    load_problems=load_task_problems,
    config=DSBenchEnvConfig,
    coach_reference=metrics_reference,
    coach_template="dsbench",
    rubric=lambda: RULES,
    result_columns=graded_figures,
    corruptions=lambda: CORRUPTIONS,
    reference_team=reference_responses,
)
