"""The stage registry: what it declares is consistent, and a new stage is one `Stage` registered.

A toy stage, registered for the test, runs through the same `execute` as the real ones: it computes once,
skips itself while its manifest matches, and runs again when an input changes.
"""

import pandas as pd
import pytest

from mappa.config import RetryConfig
from mappa.stages import (
    REGISTRY,
    TRAINING,
    Stage,
    describe_stage,
    execute,
    output_parts,
    stage_complete,
    write_manifest,
)
from mappa.stages.evaluate_on import PREFIX as EVALUATE_ON
from mappa.stages.rescore import PREFIX as RESCORE
from mappa.stages.stage import register


def test_the_registry_holds_every_stage_with_consistent_declarations():
    assert list(TRAINING) == ["rollout", "score", "advantages", "update"]
    assert {"report", "evaluate"} <= set(REGISTRY)
    for name, stage in REGISTRY.items():
        assert stage.name == name
        for source in (*stage.inputs, *stage.previous):
            assert REGISTRY[source].output, f"{name} reads {source}, which writes no artifact"
        # registered on use: a re-scoring retries as score, an evaluation on another file as evaluate
        if not name.startswith((RESCORE, EVALUATE_ON)):
            field = name.replace("-", "_")
            assert field in RetryConfig.model_fields, f"RetryConfig has no retry count for stage `{name}`"
    assert all(REGISTRY[name].output for name in TRAINING)
    assert REGISTRY["rollout"].previous == ("update",)  # the weights it rolls out with


def test_every_stage_describes_its_manifest_in_one_line(synthetic_run):
    for name in TRAINING:
        line = describe_stage(name, 0, synthetic_run.read_manifest(0, name) | _fields_of(name))
        assert line.startswith(f"iter 0 {name}") and "\n" not in line


def _fields_of(name: str) -> dict:
    """The manifest fields the hand-written synthetic run leaves out."""
    return {"rollout": {"tokens_per_s": 1.0}, "update": {"agents": {}}}.get(name, {})


@pytest.fixture
def toy_stage():
    calls = []

    def compute(run, iteration):
        calls.append(iteration)
        rows = run.store.read_parquet(*output_parts(run, iteration, "rollout"))
        run.store.write_json({"actions": len(rows)}, *output_parts(run, iteration, "toy"))
        return write_manifest(run, iteration, "toy", rows=1, timings={"total_s": 0.0}, actions=len(rows))

    stage = register(Stage("toy", "toy.json", compute, lambda m: f"{m['actions']} actions", ("rollout",)))
    yield stage, calls
    del REGISTRY["toy"]


def test_a_registered_stage_runs_once_and_reruns_when_an_input_changes(synthetic_run, toy_stage):
    _, calls = toy_stage
    first = execute(synthetic_run, 0, "toy")
    assert calls == [0] and first["inputs"].keys() == {"rollout"} and stage_complete(synthetic_run, 0, "toy")
    assert execute(synthetic_run, 0, "toy")["skipped"] and calls == [0]
    rollout = output_parts(synthetic_run, 0, "rollout")
    synthetic_run.store.write_parquet(pd.DataFrame({"agent": ["solver"]}), *rollout)
    assert not stage_complete(synthetic_run, 0, "toy")
    assert execute(synthetic_run, 0, "toy")["actions"] == 1 and calls == [0, 0]
    kinds = [e["kind"] for e in synthetic_run.events() if e["stage"] == "toy"]
    assert kinds == ["started", "finished", "skipped", "started", "finished"]


def test_two_stages_cannot_share_a_name(toy_stage):
    stage, _ = toy_stage
    with pytest.raises(ValueError, match="two stages are named `toy`"):
        register(stage)
