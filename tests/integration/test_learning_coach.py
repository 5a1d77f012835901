"""The learning coach (`coach.learn`) in a real two-iteration run on the tiny model: the coach-update stage
replays counterfactuals with the run's agents (Ray workers), learns a head from them, and the next score
stage reads with that head; the stage done again gives the same head, and a different head makes the next
score stage stale (no score is reused across coach versions); a learned head carried into another run
(`coach.learn.start`) reads its answers there, unchanged."""

import shutil
from pathlib import Path

from tiny_run import write_tiny_config

from mappa.coach.head import AnswerHead
from mappa.flows.train import train
from mappa.stages import coach_update, execute, output_parts, stage_complete
from mappa.storage.frames import read_scores
from mappa.storage.run import Run


def test_the_coach_learns_from_counterfactual_pairs_and_the_next_score_reads_its_head(
    tmp_path, tiny_model, prefect_harness, ray_local, monkeypatch
):
    # a random model never succeeds and never does its part: let every seat's action be a fair original
    monkeypatch.setattr(coach_update, "fair_originals", lambda spec, trajectory: set(spec.seats))
    root = tmp_path / "runs"
    coach = {
        "type": "local",
        "model": str(tiny_model),
        "scoring": "criteria",
        "template": "judge",
        "use_ground_truth": True,
        "learn": {"signal": "pairs", "replays": 2},
    }
    path = write_tiny_config(tmp_path / "config.yaml", tiny_model, root, iterations=2, coach=coach)
    train(config_path=str(path), run_id="learns")
    run = Run.open(str(root), "learns")

    first = run.read_manifest(0, "coach-update")
    assert first["rows"] >= 3 and first["left_out_ruled"] >= 0  # pairs from 2 trajectories x 3 seats
    assert first["head_after"] != first["head_before"] and first["moved"] > 0
    assert first["pair_accuracy_after"] >= first["pair_accuracy_before"]
    assert first["loss_after"] < first["loss_before"]
    assert set(first["outcome_auc"]) >= {"all"}
    # the head in force, out of sample, in the blame check's terms: one row per corrupted seat
    blame = {row["seat"]: row for row in first["blame_before"]}
    assert set(blame) <= {"solver", "executor", "verifier"} and blame
    assert all(0 <= row["blame_accuracy"] <= 1 and row["pairs"] >= 1 for row in blame.values())
    pairs = run.store.read_parquet(*run.parts(0, "coach-update", "pairs.parquet"))
    assert len(pairs) == first["rows"] and set(pairs["seat"]) <= {"solver", "executor", "verifier"}
    # each score stage read with the head in force: the readout at 0, iteration 0's update's at 1
    assert {s.coach_model for s in read_scores(run, 0)} == {
        f"{tiny_model}:criteria+head@{first['head_before']}"
    }
    assert {s.coach_model for s in read_scores(run, 1)} == {
        f"{tiny_model}:criteria+head@{first['head_after']}"
    }
    assert run.read_manifest(1, "coach-update")["head_before"] == first["head_after"]

    # done again (a retry after a kill): the same head, so iteration 1's scores stay complete
    head_file = output_parts(run, 0, "coach-update")
    learned = run.store.read_json(*head_file)
    shutil.rmtree(Path(run.store.path(*head_file)).parent)
    assert not stage_complete(run, 0, "coach-update")
    execute(run, 0, "coach-update")
    assert run.store.read_json(*head_file) == learned
    assert stage_complete(run, 1, "score")

    # another head (as if iteration 0 had learned otherwise): iteration 1's scores are stale
    other = AnswerHead.from_record(learned)
    other = AnswerHead(other.weight, other.bias + 1.0)
    run.store.write_json(other.to_record(), *head_file)
    assert not stage_complete(run, 1, "score")

    # that head, carried into a run whose coach does not learn: it reads every answer with it, no update
    frozen = {**coach, "learn": {"start": run.store.path(*head_file)}}
    path = write_tiny_config(tmp_path / "frozen.yaml", tiny_model, root, coach=frozen)
    train(config_path=str(path), run_id="frozen")
    run = Run.open(str(root), "frozen")
    assert {s.coach_model for s in read_scores(run, 0)} == {f"{tiny_model}:criteria+head@{other.version}"}
    assert not run.has_manifest(0, "coach-update")
