"""The learning coach's head (`mappa.coach.head`): its readout, its version, and what pairs teach it, on
hand-made features; and the learned criteria coach at its start scoring as the criteria coach does."""

import asyncio
import json
import math

import pytest

from mappa.coach.head import AnswerHead, Pair, action_log_odds, pair_accuracy, train_head


def test_the_head_reads_log_odds_and_its_version_names_its_numbers():
    head = AnswerHead((1.0, -2.0), 0.5)
    assert head.log_odds([3.0, 1.0]) == 3.0 - 2.0 + 0.5
    assert head.p_yes([3.0, 1.0]) == pytest.approx(1 / (1 + math.exp(-1.5)))
    assert head.p_yes([-800.0, 0.0]) == pytest.approx(0.0)  # no overflow far out
    assert AnswerHead.from_record(head.to_record()) == head
    assert AnswerHead((1.0, -2.0), 0.5000001).version != head.version
    with pytest.raises(ValueError, match="rewritten"):
        AnswerHead.from_record({**head.to_record(), "bias": 0.6})
    with pytest.raises(ValueError, match="another coach model"):
        head.log_odds([1.0, 2.0, 3.0])


def test_an_actions_log_odds_negate_its_no_questions_and_average():
    head = AnswerHead((1.0, 0.0), 0.0)
    # two questions: a yes question at log-odds 2, a (no) question at log-odds 4 -> (2 - 4) / 2
    assert action_log_odds(head, [[2.0, 9.0], [4.0, 9.0]], [False, True]) == -1.0


def pairs_on_the_second_feature() -> list[Pair]:
    """Originals whose second feature is high, corruptions whose second feature is low; the first feature,
    which the start head reads, says the opposite half of the time."""
    pairs = []
    for k, first in enumerate((1.0, -1.0, 2.0, -2.0)):
        original = ((first, 1.0 + k / 10),)
        corrupted = ((-first, -1.0),)
        pairs.append(Pair("solver", original, corrupted, (False,), "wrong_number"))
    return pairs


def test_pairs_teach_the_head_what_tells_an_action_from_its_corruption():
    start = AnswerHead((1.0, 0.0), 0.0)
    pairs = pairs_on_the_second_feature()
    assert pair_accuracy(start, pairs) == 0.5  # the first feature: right in two pairs of four
    learned, losses = train_head(start, pairs, anchor=0.01)
    assert pair_accuracy(learned, pairs) == 1.0
    assert losses["loss_after"] < losses["loss_before"]
    assert learned.weight[1] > 0  # it reads the second feature now
    assert learned.bias == pytest.approx(start.bias, abs=1e-6)  # the bias cancels in every pair
    # the same pairs, the same head (a stage done again writes the same weights)
    assert train_head(start, pairs, anchor=0.01)[0].version == learned.version
    # a strong anchor keeps it near where it started
    held, _ = train_head(start, pairs, anchor=100.0)
    assert math.dist(held.weight, start.weight) < math.dist(learned.weight, start.weight) / 10
    assert train_head(start, [], anchor=1.0)[0] == start


def test_pair_accuracy_counts_ties_half():
    head = AnswerHead((0.0,), 0.0)
    assert pair_accuracy(head, [Pair("solver", ((1.0,),), ((2.0,),), (False,))]) == 0.5
    assert pair_accuracy(head, []) is None


def test_the_learned_coach_at_its_start_scores_as_the_criteria_coach(tiny_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mappa.coach.criteria import ANSWERS, CriteriaCoach
    from mappa.coach.learned import LearnedCriteriaCoach
    from mappa.coach.prompt import CoachRequest, load_template
    from mappa.inference.hf import HFEngine

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    engine = HFEngine(model, tokenizer, bf16_autocast=False)
    template = load_template("judge")

    def prompts(groups):
        return [
            [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in g]
            for g in groups
        ]

    async def logprobs(groups, candidates):
        return engine.grouped_next_token_logprobs(prompts(groups), candidates)

    async def features(groups):
        return engine.grouped_answer_features(prompts(groups))

    requests = [
        CoachRequest(
            f"t{k}:0",
            f"t{k}",
            seat,
            messages=[{"role": "system", "content": "judge"}, {"role": "user", "content": text}],
            used_ground_truth=False,
            context_messages=[{"role": "system", "content": "judge"}, {"role": "user", "content": text}],
        )
        for k, (seat, text) in enumerate([("solver", "The answer is 4."), ("executor", "print(2 + 2)\n4")])
    ]
    direction, bias = engine.answer_direction(ANSWERS)
    learned = LearnedCriteriaCoach(features, "tiny", template, AnswerHead(tuple(direction), bias))
    fixed = CriteriaCoach(logprobs, "tiny", template)
    got = asyncio.run(learned.score(requests))
    want = asyncio.run(fixed.score(requests))
    assert [s.score for s in got] == [pytest.approx(s.score, abs=1e-3) for s in want]
    assert got[0].coach_model == f"tiny:criteria+head@{learned.head.version}"
    (asked, seen), _ = asyncio.run(learned.question_features(requests))
    assert asked == template.criteria_for("solver") and len(seen[0]) == model.config.hidden_size


def test_a_learned_head_is_read_from_its_file_and_a_wrong_file_is_named(tmp_path):
    from mappa.stages.coach_update import read_head

    head = AnswerHead((0.5, -1.0), 0.25)
    path = tmp_path / "iter-0002" / "coach-update" / "head.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(head.to_record()))
    assert read_head(str(path)) == head

    with pytest.raises(FileNotFoundError, match=r"coach.learn.start=.*missing.json: no such file.*head.json"):
        read_head(str(tmp_path / "missing.json"))
    path.write_text(json.dumps({"weight": [1.0]}))  # no bias: not a head
    with pytest.raises(ValueError, match=r"is not a coach head .*give a head.json that a coach-update stage"):
        read_head(str(path))
    path.write_text(json.dumps({**head.to_record(), "bias": 3.0}))  # numbers edited after it was written
    with pytest.raises(ValueError, match="do not match its version"):
        read_head(str(path))


def test_a_start_head_needs_a_local_criteria_coach_and_the_error_names_the_setting():
    from mappa.config import ConfigError, load_config

    learn = [
        "coach.type=local",
        "coach.template=judge",
        "coach.learn.start=runs/r/iter-0002/coach-update/head.json",
    ]
    config = load_config("configs/mathchat-cpu-learn.yaml", [*learn, "coach.scoring=criteria"])
    assert config.coach.learn.reads_head and not config.coach.learn.enabled  # a learned coach, frozen
    with pytest.raises(ConfigError) as caught:
        load_config("configs/mathchat-cpu-learn.yaml", [*learn, "coach.scoring=expected"])
    message = str(caught.value)
    assert "coach.learn.start=runs/r/iter-0002/coach-update/head.json (from --set) reads" in message
    assert "needs coach.type=local and coach.scoring=criteria (now local and expected)" in message
