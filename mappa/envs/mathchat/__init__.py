"""MathChat, a built-in env written as a plug-in is: Problem Solver -> Code Executor -> Verifier on math
problems (MAPPA, section 4.1). mappa's pyproject registers `SPEC` in the entry-point group `mappa.envs` as
`mathchat`, as a user's package registers its env (docs/envs.md).

    team.py         the seats, their prompts, the rollout of a batch, the `EnvSpec` (`SPEC`)
    grading.py      final-answer extraction and grading (math-verify)
    kinds.py        a problem's kind, operation/form, to split results by
    rubric.py       the rubric coach's rule per seat
    corruptions.py  the mistakes the blame check plants, one per seat's role
    problems.py     the level-3 generator, the shipped files (data/) and the data-set file loaders
    levels.py       `builtin:<split>-level<N>`: the difficulty dial, and every `builtin:` source by name
    one_step.py     one-step problem families: number drawers, templates, drawing the families in turn
    heldout.py      `builtin:heldout-level1`: one-step problems phrased unlike training
    variety.py      `builtin:train-level1-mix` / `-wide`: more one-step training families
"""

from mappa.envs.mathchat.team import SPEC

__all__ = ["SPEC"]
