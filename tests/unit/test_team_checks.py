"""`mappa export` and `mappa ask` refuse bad inputs in one line before any model loads, and an exported
config.json carries the rope settings in the form older transformers read (hand-written configs)."""

import pandas as pd

from mappa.cli import main
from mappa.team.hf_folder import portable_config, portable_tokenizer_config

SMOLLM2_ROPE = {"rope_theta": 100000.0, "rope_type": "default"}


def test_the_default_rope_is_written_in_both_forms():
    config = portable_config({"model_type": "llama", "rope_parameters": SMOLLM2_ROPE}, "bfloat16")
    assert config["rope_parameters"] == SMOLLM2_ROPE  # transformers 5
    assert config["rope_theta"] == 100000.0 and config["rope_scaling"] is None  # transformers 4
    assert config["dtype"] == config["torch_dtype"] == "bfloat16"


def test_a_scaled_rope_keeps_its_scaling_settings_for_older_readers():
    rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0}
    config = portable_config({"rope_parameters": rope}, "float32")
    assert config["rope_theta"] == 500000.0
    assert config["rope_scaling"] == {
        "rope_type": "llama3",
        "type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
    }


def test_a_rope_per_layer_type_is_left_as_written():
    per_layer = {"full_attention": SMOLLM2_ROPE, "sliding_attention": {**SMOLLM2_ROPE, "rope_theta": 1e4}}
    config = portable_config({"rope_parameters": per_layer}, "float32")
    assert "rope_theta" not in config and "rope_scaling" not in config


def test_the_tokenizer_class_and_template_are_readable_by_transformers_4():
    config = portable_tokenizer_config(
        {"tokenizer_class": "TokenizersBackend", "eos_token": "<e>"}, "{{ x }}"
    )
    assert config == {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": "<e>",
        "chat_template": "{{ x }}",
    }
    assert portable_tokenizer_config({"tokenizer_class": "Qwen2Tokenizer"}, None) == {
        "tokenizer_class": "Qwen2Tokenizer"
    }


def export(run, out, *args: str) -> int:
    return main(["export", run.run_id, "--root", run.store.root, *args, str(out)])


def one_line(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


def test_an_unknown_run_names_the_absolute_root_searched(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert main(["export", "nope", "--root", "runs", str(tmp_path / "out")]) == 2
    assert f"no run nope under {tmp_path / 'runs'}" in one_line(capsys)
    assert main(["ask", "nope", "--root", "runs", "What is 6 times 7?"]) == 2
    assert f"no run nope under {tmp_path / 'runs'}" in one_line(capsys)
    assert not (tmp_path / "out").exists()


def test_an_unfinished_iteration_names_the_finished_ones(synthetic_run, tmp_path, capsys):
    assert export(synthetic_run, tmp_path / "out", "--iteration", "2") == 2
    out = one_line(capsys)
    assert "iteration 2 of run synthetic_run.1 has not finished" in out and "iterations 0-1 finished" in out
    assert (
        main(["ask", synthetic_run.run_id, "--root", synthetic_run.store.root, "--iteration", "5", "q"]) == 2
    )
    assert "iterations 0-1 finished" in one_line(capsys)
    assert not (tmp_path / "out").exists()


def test_a_checkpoint_retention_deleted_is_refused_with_what_the_run_keeps(synthetic_run, tmp_path, capsys):
    from mappa.storage.checkpoints import record_in_ledger

    record_in_ledger(
        synthetic_run,
        [{"agent": "solver", "iteration": 0, "holds": None, "bytes_freed": 10}],
        by="iter-0001/retention",
    )
    assert export(synthetic_run, tmp_path / "out", "--iteration", "0") == 2
    out = one_line(capsys)
    assert "exporting iteration 0 needs the weights of agent solver at iteration 0" in out
    assert "checkpoint retention deleted it" in out and "The run keeps no checkpoint of it" in out


def test_a_missing_checkpoint_is_named(synthetic_run, tmp_path, capsys):
    assert export(synthetic_run, tmp_path / "out") == 2  # the last finished: 1, never written here
    assert "there is no checkpoint at" in one_line(capsys)


def test_a_folder_that_is_not_empty_is_refused_before_any_model_loads(synthetic_run, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert export(synthetic_run, out, "--iteration", "-1") == 2
    assert f"export folder {out} is not empty" in one_line(capsys)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_asking_with_the_runs_coach_needs_the_answer_it_reads(synthetic_run, capsys):
    """The demo's coach sees the reference answer: --coach without --answer is refused first."""
    args = ["ask", synthetic_run.run_id, "--root", synthetic_run.store.root, "--iteration", "-1", "--coach"]
    assert main([*args, "What is 6 times 7?"]) == 2
    assert "coach.use_ground_truth: true" in one_line(capsys)


def test_asking_an_export_needs_its_team_json_and_the_same_run(synthetic_run, tmp_path, capsys):
    args = ["ask", synthetic_run.run_id, "--root", synthetic_run.store.root, "What is 6 times 7?"]
    assert main([*args, "--exported", str(tmp_path)]) == 2
    assert f"{tmp_path} holds no team.json" in one_line(capsys)
    (tmp_path / "team.json").write_text('{"run_id": "other", "iteration": 1}')
    assert main([*args, "--exported", str(tmp_path)]) == 2
    assert "was exported from run other, not synthetic_run.1" in one_line(capsys)


def test_the_card_states_the_change_over_the_base_with_its_interval(synthetic_run):
    """Base 1 of 4 right, iteration 1 3 of 4 (two gained, none lost): +50 points."""
    from mappa.stages.evaluate import write_evaluation_manifest
    from mappa.stages.stage import output_parts
    from mappa.team.card import held_out_facts, held_out_lines

    for iteration, right in ((-1, [1, 0, 0, 0]), (1, [1, 1, 1, 0])):
        results = pd.DataFrame({"problem_id": list("abcd"), "correct": [bool(r) for r in right]})
        synthetic_run.store.write_parquet(results, *output_parts(synthetic_run, iteration, "evaluate"))
        write_evaluation_manifest(synthetic_run, iteration, results, {"total_s": 1.0})
    facts = held_out_facts(synthetic_run, 1)
    assert facts["base"]["success"] == 0.25 and facts["exported"]["success"] == 0.75
    (change,) = facts["change"]
    assert (change["before"], change["after"], change["gained"], change["lost"]) == (1, 3, 2, 0)
    text = "\n".join(held_out_lines(facts))
    assert "| iter-0001 | 4 | 75.0% |" in text and "change +50.0 points [95% interval" in text
    assert not facts["missing"]
    unevaluated = held_out_facts(synthetic_run, 0)
    assert unevaluated["change"] is None and unevaluated["missing"] == [
        "checkpoint iter-0000 was not evaluated: mappa evaluate synthetic_run.1 --iteration 0"
    ]
