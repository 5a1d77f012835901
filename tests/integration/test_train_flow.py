"""The real `train` flow for two iterations on the tiny model (`mathchat_run`, conftest.py): Prefect (test
harness), Ray, sandbox, rubric coach; one agent trains a LoRA adapter."""

from pathlib import Path

import pandas as pd
import pytest
from safetensors.torch import load_file

from mappa.stages import TRAINING, get_stage, output_parts, stage_complete

SECRET = "sk-tracker-test-secret"  # conftest's mathchat_run puts it in the coach's key variable

pytestmark = pytest.mark.slow


def test_every_artifact_is_written(mathchat_run):
    run, summary, _ = mathchat_run
    assert [row["iteration"] for row in summary["iterations"]] == [0, 1]
    for iteration in (0, 1):
        for stage, name in ((s, get_stage(s).output) for s in TRAINING):
            assert run.store.exists(*run.parts(iteration, stage, name)), (iteration, stage)
            assert stage_complete(run, iteration, stage)
        actions = run.store.read_parquet(*output_parts(run, iteration, "rollout"))
        scores = run.store.read_parquet(*output_parts(run, iteration, "score"))
        experiences = run.store.read_parquet(*output_parts(run, iteration, "advantages"))
        assert set(actions["agent"]) == {"solver", "executor", "verifier"}
        assert actions["trajectory_id"].nunique() == 3
        assert len(scores) == len(actions)
        assert scores["score"].between(0, 10).all()
        assert len(experiences) == len(actions)
        for row in experiences.to_dict("records"):
            n = len(row["response_token_ids"])
            assert len(row["advantages"]) == len(row["old_logprobs"]) == len(row["kl"]) == n
        metrics = run.store.read_json(*output_parts(run, iteration, "update"))
        assert set(metrics) == {"solver", "executor", "verifier"}
        for agent in metrics:  # the LoRA verifier's checkpoint is its adapter, not a copy of the model
            folder = run.checkpoint_parts(agent, iteration)
            lora = agent == "verifier"
            assert run.store.exists(
                *folder, "adapter/adapter_model.safetensors" if lora else "model.safetensors"
            )
            assert run.store.exists(*folder, "model.safetensors") != lora
            assert run.store.exists(*folder, "trainer_state.pt")


def test_evaluates_every_k_iterations(mathchat_run):
    run, _, _ = mathchat_run
    assert not run.store.exists(*run.parts(0, "evaluate", "results.parquet"))
    results = run.store.read_parquet(*run.parts(1, "evaluate", "results.parquet"))
    assert len(results) == 2 and {"problem_id", "correct", "final_answer"} <= set(results.columns)


def test_executor_actions_record_the_sandbox(mathchat_run):
    run, _, _ = mathchat_run
    actions = run.store.read_parquet(*output_parts(run, 0, "rollout"))
    executor = actions[actions["agent"] == "executor"]
    assert executor["turn"].max() <= 1
    assert pd.api.types.is_bool_dtype(actions["correct"])


def test_weights_changed(mathchat_run, tiny_model):
    run, _, _ = mathchat_run
    base = load_file(str(tiny_model / "model.safetensors"))
    for agent in ("solver", "executor"):
        path = run.store.path(*run.checkpoint_parts(agent, 1), "model.safetensors")
        trained = load_file(path)
        changed = [k for k in base if k in trained and not (base[k] == trained[k]).all()]
        assert changed, f"{agent}'s weights did not change"
    adapter = load_file(
        run.store.path(*run.checkpoint_parts("verifier", 1), "adapter/adapter_model.safetensors")
    )
    assert any(k.endswith("lora_B.weight") and v.abs().sum() > 0 for k, v in adapter.items())  # B starts at 0


def test_second_run_with_same_id_skips_finished_stages(mathchat_run):
    from mappa.flows.train import train

    run, _, path = mathchat_run
    before = {(i, s): run.read_manifest(i, s)["finished_at"] for i in (0, 1) for s in TRAINING}
    started = sum(e["kind"] == "started" for e in run.events())
    train(config_path=str(path), run_id="it-run")
    after = {(i, s): run.read_manifest(i, s)["finished_at"] for i in (0, 1) for s in TRAINING}
    assert before == after
    assert sum(e["kind"] == "started" for e in run.events()) == started  # Prefect's cache answered


def test_long_stages_report_their_progress_to_prefect(mathchat_run):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterType

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(type=ArtifactFilterType(any_=["progress"]))
        )
    done = {a.description: a.data for a in found}
    assert done.get("rollout of iteration 1: 3/3 trajectories") == 100.0, done
    assert done.get("update of iteration 1: 3/3 agents trained") == 100.0, done


def check_tracked(steps: dict[str, list[int]], tracker: str) -> None:
    """The scalars a tracker holds (name -> the steps logged), for two iterations, each logged once."""
    for agent in ("solver", "executor", "verifier"):
        for name in (
            "critic/score/mean",
            "critic/score/std",
            "critic/advantages/mean",
            "critic/returns/mean",
            "actor/kl",
            "response_length/mean",
        ):
            assert sorted(steps[f"{name}/{agent}"]) == [0, 1], (tracker, name, agent, sorted(steps))
    for name in (
        "actor/pg_loss/solver",
        "actor/grad_norm/executor",
        "train/success_rate",
        "timing_s/rollout",
        "timing_s/update",
        "coach/parse/ok",
    ):
        assert sorted(steps[name]) == [0, 1], (tracker, name)
    assert steps["val/success_rate"] == [1], tracker  # evaluated after iteration 1 only (eval_every: 2)


def test_every_iteration_is_in_tensorboard_once_under_verl_like_names(mathchat_run):
    """Read back with TensorBoard's own reader, after the same run id ran again (it logged nothing twice)."""
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    run, _, _ = mathchat_run
    events = EventMultiplexer().AddRunsFromDirectory(run.store.path(run.run_id, "tensorboard")).Reload()
    steps: dict[str, list[int]] = {}
    for name in events.Runs():
        for tag in events.GetAccumulator(name).Tags()["scalars"]:
            steps.setdefault(tag, []).extend(e.step for e in events.Scalars(name, tag))
    check_tracked(steps, "tensorboard")


def test_wandb_offline_and_mlflow_hold_the_same_scalars_and_no_secret(mathchat_run):
    """The run enabled W&B (offline mode: files only) and MLflow (its default SQLite store in the run)."""
    from mlflow.tracking import MlflowClient
    from wandb_records import logged_history

    run, _, _ = mathchat_run
    folder = run.store.path(run.run_id, "wandb")
    steps: dict[str, list[int]] = {}
    for row in logged_history(folder):
        for name in row:
            if not name.startswith("_") and name != "iteration":
                steps.setdefault(name, []).append(row["iteration"])
    check_tracked(steps, "wandb")
    tables = [row for row in logged_history(folder) if row.get("coach/samples/_type") == "table-file"]
    assert sorted(row["iteration"] for row in tables) == [0, 1], tables  # the sampled actions, a table each
    assert all(row["coach/samples/nrows"] == 8 and row["coach/samples/ncols"] == 6 for row in tables)

    client = MlflowClient(f"sqlite:///{run.store.path(run.run_id, 'mlflow.db')}")
    experiment = client.get_experiment_by_name("mappa")
    (found,) = client.search_runs([experiment.experiment_id], filter_string="tags.`mappa.run_id` = 'it-run'")
    assert found.data.params["rollout.problems_per_iteration"] == "3", found.data.params
    metric_history = client.get_metric_history
    history = {name: [m.step for m in metric_history(found.info.run_id, name)] for name in found.data.metrics}
    check_tracked(history, "mlflow")
    samples = [a.path for a in client.list_artifacts(found.info.run_id, "coach/samples")]
    assert samples == ["coach/samples/iter-0000.json", "coach/samples/iter-0001.json"], samples
    stored = Path(run.store.path(run.run_id, "mlflow-artifacts"))  # in the run, not in ./mlruns
    assert len(list(stored.rglob("iter-*.json"))) == 2

    written = b"".join(p.read_bytes() for p in Path(folder).rglob("*") if p.is_file())
    written += Path(run.store.path(run.run_id, "mlflow.db")).read_bytes()
    assert SECRET.encode() not in written  # the coach's key was in the environment all along
