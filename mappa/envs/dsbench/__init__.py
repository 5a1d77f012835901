"""DSBench-style data science, a built-in env written as a plug-in is: Data Engineer -> Modeler -> Analyst
over a shared workspace (MAPPA, section 4.2). mappa's pyproject registers `SPEC` in the entry-point group
`mappa.envs` as `dsbench`, as a user's package registers its env (docs/envs.md).

    team.py           the seats, their prompts, the rollout of a batch in workspaces, the `EnvSpec` (`SPEC`)
    task.py           what a tabular task is (`TabularTask`), its kinds, metrics and public file names
    task_sets.py      the task sets (offline: scikit-learn's data sets; DSBench), workspaces, what to hide
    published.py      DSBench's own tasks, read from the folder layout its authors publish
    grading.py        a submission.csv checked and scored against the hidden labels
    rubric.py         the rubric coach's rule per seat
    corruptions.py    the mistakes the blame check plants (a file never saved, a leaked target)
"""

from mappa.envs.dsbench.team import SPEC

__all__ = ["SPEC"]
