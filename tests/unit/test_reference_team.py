"""An env's reference team played as agents (`mappa.envs.reference_team`): every turn gives the env's
response; a corrupted seat gives its corrupted one on every turn; an env without one is named."""

import asyncio

import pytest

from mappa.envs.dsbench import SPEC as DSBENCH
from mappa.envs.mathchat import SPEC as MATHCHAT
from mappa.envs.reference_team import erring, reference_agents


def test_each_seat_answers_every_turn_with_its_reference_program_and_an_erring_seat_keeps_its_mistake():
    problem = DSBENCH.load_problems("builtin:eval")[0]
    team = reference_agents(DSBENCH, problem)
    assert list(team) == list(DSBENCH.seats)
    engineer = asyncio.run(team["data_engineer"].act(["turn 1", "turn 2"]))
    assert all('to_pickle("X_train.pkl")' in reply.generation.text for reply in engineer)
    assert engineer[1].prompt == "turn 2"
    broken = erring(team, "data_engineer", "```python\nprint('no files')\n```")
    assert asyncio.run(broken["data_engineer"].act(["again"]))[0].generation.text.startswith(
        "```python\nprint("
    )
    assert broken["modeler"] is team["modeler"]


def test_an_env_without_a_reference_team_or_a_task_it_does_not_know_is_named():
    with pytest.raises(
        ValueError, match="env 'mathchat' declares no reference team.*without --team reference"
    ):
        reference_agents(MATHCHAT, MATHCHAT.load_problems("builtin:eval")[0])
    unknown = DSBENCH.load_problems("builtin:eval")[0]
    unknown = type(unknown)(unknown.id, unknown.question, unknown.answer, {**unknown.meta, "source": "x"})
    with pytest.raises(ValueError, match="builtin tasks only, not 'iris-petal-width' \\(source 'x'\\)"):
        reference_agents(DSBENCH, unknown)
