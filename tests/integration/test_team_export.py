"""`mappa export` and `mappa ask` on the session's finished tiny run (conftest.py): the exported folders load
with transformers alone, hold no optimizer state and answer the run's held-out problems as its own
evaluation of that checkpoint did; `mappa ask` shows each seat's action and gives the evaluation's actions.

The tiny model answers with blank lines, so equal text alone would prove little: the per-token logprobs of
each answer must equal the evaluation's too (measured: within 1e-6 in fp32; a LoRA seat's merged weights
within 4e-4 under bf16 autocast), where the base model's differ by 9e-3 and more.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from mappa.cli import main

pytestmark = pytest.mark.slow

RUN_ID = "it-run"
CHECKPOINT = 1  # the last finished iteration of the session's run, evaluated on 2 held-out problems
SAME_WEIGHTS = 2e-3  # logprob tolerance (see the module's docstring)
MODEL_FILES = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"}


@pytest.fixture(scope="module", autouse=True)
def _torch_threads():
    """`mappa ask` sets the run's torch thread count in this process, as a worker does: restore it."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def exported(mathchat_run, tmp_path_factory) -> Path:
    run, _, _ = mathchat_run
    out = tmp_path_factory.mktemp("exported") / "team"
    assert main(["export", RUN_ID, "--root", run.store.root, str(out)]) == 0  # the last finished: 1
    return out


def evaluation_actions(run):
    from mappa.stages.evaluate import evaluation_parts

    frame = run.store.read_parquet(*evaluation_parts(run, CHECKPOINT, "trajectories.parquet"))
    return frame.sort_values(["trajectory_id", "index"])


def test_each_agent_loads_with_transformers_alone_and_holds_no_optimizer_state(mathchat_run, exported):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    run, _, _ = mathchat_run
    assert sorted(p.name for p in exported.iterdir()) == [
        "TEAM.md",
        "executor",
        "solver",
        "team.json",
        "verifier",
    ]
    everything = {p.name for p in exported.rglob("*")}
    assert not everything & {
        "trainer_state.pt",
        "optimizer.pt",
        "deepspeed",
        "adapter",
        "adapter_model.safetensors",
    }
    prompt = evaluation_actions(run).iloc[0]
    for seat in ("solver", "executor", "verifier"):
        folder = exported / seat
        assert MODEL_FILES <= {p.name for p in folder.iterdir()}
        model = AutoModelForCausalLM.from_pretrained(folder)
        assert model.dtype.is_floating_point and sum(p.numel() for p in model.parameters()) > 0
        tokenizer = AutoTokenizer.from_pretrained(folder)
        chat = [
            {"role": "system", "content": role(run, "solver")},
            {"role": "user", "content": prompt.observation},
        ]
        assert (
            tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == prompt.prompt
        )
        tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
        assert (
            tokenizer_config["tokenizer_class"] == "PreTrainedTokenizerFast"
            and "is_local" not in tokenizer_config
        )
        config = json.loads((folder / "config.json").read_text())
        assert (
            config["rope_theta"] == config["rope_parameters"]["rope_theta"]
        )  # transformers 4 reads the first
        assert AutoConfig.from_pretrained(folder).rope_parameters["rope_theta"] == config["rope_theta"]


def role(run, seat: str) -> str:
    return run.config.env_spec.roles[seat]


def greedy(run, folder, seat: str, prompts: list[str]):
    """The seat's greedy answers to `prompts` from a model folder, generated as the evaluation generates."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mappa.inference.engine import SamplingParams
    from mappa.inference.hf import HFEngine
    from mappa.stages.rollout import seat_params

    config = run.config
    engine = HFEngine(
        AutoModelForCausalLM.from_pretrained(folder),
        AutoTokenizer.from_pretrained(folder),
        config.engine.batch_size,
        config.engine.bf16_autocast,
    )
    params = SamplingParams(temperature=0.0, max_new_tokens=config.rollout.max_new_tokens, seed=config.seed)
    return engine.generate(prompts, seat_params(run, config.env_spec, seat, params))


def largest_gap(generations, rows) -> float:
    return max(np.abs(np.array(g.logprobs) - np.array(r.logprobs)).max() for g, r in zip(generations, rows))


@pytest.mark.parametrize("seat", ["solver", "verifier"])  # full weights; a LoRA adapter, merged
def test_greedy_answers_equal_the_runs_evaluation_of_that_checkpoint(mathchat_run, exported, seat):
    run, _, _ = mathchat_run
    actions = evaluation_actions(run)
    rows = list(actions[actions["agent"] == seat].itertuples())
    answers = greedy(run, exported / seat, seat, [row.prompt for row in rows])
    assert [a.text for a in answers] == [row.response for row in rows]
    assert [list(a.token_ids) for a in answers] == [list(row.response_token_ids) for row in rows]
    assert largest_gap(answers, rows) < SAME_WEIGHTS
    base = greedy(run, run.config.agents[seat].model, seat, [row.prompt for row in rows])
    assert largest_gap(base, rows) > SAME_WEIGHTS  # the comparison tells trained weights from the base


def test_the_team_card_states_seats_coach_and_results(mathchat_run, exported):
    run, _, _ = mathchat_run
    team = json.loads((exported / "team.json").read_text())
    assert (team["run_id"], team["checkpoint"], team["iterations_trained"], team["dtype"]) == (
        RUN_ID,
        "iter-0001",
        2,
        "float32",
    )
    assert [s["seat"] for s in team["seats"]] == ["solver", "executor", "verifier"]  # acting order
    assert team["seats"][0]["role"] == role(run, "solver")
    assert team["seats"][2]["trained"].startswith("LoRA rank 4")
    assert team["coach"] == {
        "type": "rubric",
        "model": None,
        "template": None,
        "schedule": [],
        "scoring": None,
        "use_ground_truth": True,
    }
    manifest = run.read_manifest(CHECKPOINT, "evaluate")
    assert team["held_out"]["exported"]["success"] == manifest["success_rate"]
    assert team["held_out"]["change"] is None  # the session's run never evaluated its base team
    card = (exported / "TEAM.md").read_text()
    assert "the base team was not evaluated: mappa evaluate it-run --iteration -1" in card
    assert "it saw the ground truth" in card and role(run, "verifier") in card
    assert "license: other" in (exported / "solver" / "README.md").read_text()  # a model mappa does not know


def test_a_bfloat16_export_holds_bfloat16_weights(mathchat_run, tmp_path):
    import torch
    from safetensors import safe_open

    run, _, _ = mathchat_run
    out = tmp_path / "bf16"
    assert (
        main(
            ["export", RUN_ID, "--root", run.store.root, "--iteration", "0", "--dtype", "bfloat16", str(out)]
        )
        == 0
    )
    with safe_open(out / "executor" / "model.safetensors", "pt") as weights:
        assert {weights.get_tensor(name).dtype for name in weights.keys()} == {torch.bfloat16}
    assert json.loads((out / "team.json").read_text())["checkpoint"] == "iter-0000"
    assert main(["export", RUN_ID, "--root", run.store.root, str(out)]) == 2  # not empty now


def test_ask_shows_each_seat_and_gives_the_evaluations_actions(mathchat_run, capsys):
    from mappa.team.ask import ask_team

    run, _, _ = mathchat_run
    actions = evaluation_actions(run)
    first = actions[actions["trajectory_id"] == actions["trajectory_id"].iloc[0]]
    question, gold = first["question"].iloc[0], str(first["gold_answer"].iloc[0])
    args = ["ask", RUN_ID, "--root", run.store.root, question, "--answer", gold, "--coach"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "weights iter-0001 (the run's checkpoint)" in out and f"problem: {question}" in out
    for index, seat in enumerate(first["agent"], start=1):
        assert f"{index}. {seat} (turn" in out
    assert out.count("coach ") >= len(first) and "rule " in out  # the run's rubric coach, rule by rule
    assert "final answer:" in out and ("correct" in out or f"expected {gold}" in out)
    asked = ask_team(run, question, gold, CHECKPOINT)
    assert [a.response for a in asked.trajectory.actions] == list(first["response"])
    assert largest_gap(asked.trajectory.actions, list(first.itertuples())) < SAME_WEIGHTS


def test_ask_an_exported_team(mathchat_run, exported, capsys):
    run, _, _ = mathchat_run
    question = evaluation_actions(run)["question"].iloc[0]
    assert main(["ask", RUN_ID, "--root", run.store.root, "--exported", str(exported), question]) == 0
    out = capsys.readouterr().out
    assert f"weights iter-0001 (export {exported})" in out and "not graded (no --answer)" in out
