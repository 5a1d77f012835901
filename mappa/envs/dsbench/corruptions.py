"""DSBench's corruptions for the blame check (`mappa.envs.corruption`): the failures the MAPPA paper blames
upstream. Each appends lines to the agent's program, so what it did stays and the damage is real: the
sandbox runs the corrupted program in the trajectory's workspace on replay.

    data_engineer  no-train-file  X_train.pkl is deleted at the end: the Modeler meets "file not found"
                   leaks-target   the target is written into X_train.pkl as a feature (X_test lacks it)
    modeler        no-model       model.pkl is deleted at the end: the Analyst has no model to load

Not covered: subtler data mistakes (a wrong join, a scaled target).
"""

from __future__ import annotations

from mappa.envs.api import Action, Corruption, Trajectory, replace_python_block


def _appended(action: Action, lines: str) -> str | None:
    """The response with `lines` appended to its program (None: it wrote none)."""

    def rewrite(code: str) -> str | None:
        return code.rstrip("\n") + "\n" + lines.strip("\n") + "\n" if code.strip() else None

    return replace_python_block(action.response, rewrite)


def _remove(path: str):
    def rewrite(action: Action, trajectory: Trajectory) -> str | None:
        return _appended(action, f"import os\nif os.path.exists({path!r}):\n    os.remove({path!r})")

    return rewrite


def _leak_target(action: Action, trajectory: Trajectory) -> str | None:
    return _appended(
        action,
        "import pandas as _pd\n"
        "_X = _pd.read_pickle('X_train.pkl')\n"
        "_X['target_leak'] = _pd.read_pickle('y_train.pkl').values\n"
        "_X.to_pickle('X_train.pkl')",
    )


CORRUPTIONS = (
    Corruption("no-train-file", "data_engineer", _remove("X_train.pkl"), "X_train.pkl is never saved"),
    Corruption("leaks-target", "data_engineer", _leak_target, "the target leaks into the features"),
    Corruption("no-model", "modeler", _remove("model.pkl"), "model.pkl is never saved"),
)
