"""`cluster.placement`: validated against the run's seats, a worker's resources, and the check that refuses a
placement no alive node can give (Ray would leave the worker pending for ever). The nodes here are what
`ray.nodes()` answers, written out; the real cluster is in tests/integration/test_ray_cluster.py."""

import pytest

from mappa.cluster import placement
from mappa.cluster.lost_worker import _seat
from mappa.cluster.placement import PlacementError, check_placement
from mappa.config import ConfigError, validate_config

SEATS = {"solver": {}, "executor": {}, "verifier": {}}


def config(**placement_of):
    return validate_config({"agents": SEATS, "cluster": {"placement": placement_of}})


def node(address: str, alive: bool = True, **resources: float) -> dict:
    return {
        "NodeManagerAddress": address,
        "Alive": alive,
        "Resources": {"CPU": 2.0, f"node:{address}": 1.0, "memory": 1e9, **resources},
    }


def test_placement_names_seats_and_positive_amounts():
    with pytest.raises(ConfigError, match=r"cluster\.placement names \['planner'\].*agents"):
        config(planner={"node_b": 1})
    with pytest.raises(ConfigError, match=r"every amount must be > 0"):
        config(solver={"node_b": 0})
    assert config(solver={"node_b": 1}).config_hash() == config().config_hash()  # an execution setting


def test_resources_of_a_seat_and_of_the_coach():
    settings = config(solver={"node_b": 1}, coach={"gpu_box": 1})
    assert settings.cluster.resources_of("solver") == {"node_b": 1}
    assert settings.cluster.resources_of("executor") == {}
    assert settings.cluster.resources_of("coach-judge") == {"gpu_box": 1}  # a re-scoring's coach


def test_a_resource_no_alive_node_has_is_refused_naming_what_each_node_offers(monkeypatch):
    nodes = [node("10.0.0.1", node_a=1), node("10.0.0.2", alive=False, node_b=2)]
    monkeypatch.setattr(placement.ray, "nodes", lambda: nodes)
    settings = config(solver={"node_b": 1}, verifier={"node_a": 1})
    refused = r"solver's worker asks for \{'node_b': 1.0\}.*no alive node"
    with pytest.raises(PlacementError, match=refused) as e:
        check_placement(settings, ["solver", "executor", "verifier"])
    assert "10.0.0.1 {'CPU': 2.0, 'node_a': 1}" in str(e.value) and "10.0.0.2" not in str(e.value)
    assert "cluster.placement.<seat>={}" in str(e.value)
    check_placement(settings, ["verifier", "executor"])  # these fit


def test_workers_that_fit_alone_but_not_together_are_refused(monkeypatch):
    monkeypatch.setattr(placement.ray, "nodes", lambda: [node("10.0.0.1", node_b=1)])
    settings = config(solver={"node_b": 1}, executor={"node_b": 1})
    with pytest.raises(PlacementError, match=r"executor, solver together ask for 2 node_b.*have 1"):
        check_placement(settings, ["solver", "executor"])
    with pytest.raises(PlacementError, match=r"solver together ask for 2 node_b"):  # two ranks of one agent
        check_placement(settings, ["solver"], ranks={"solver": 2})


def test_a_dead_workers_seat_is_read_from_its_name():
    assert _seat("mappa-my-run-solver") == ("solver", None)
    assert _seat("mappa-my-run-solver-rank1") == ("solver", "1")
    assert _seat("mappa-run-coach") == ("coach", None)
