"""Unscored actions (the coach never gave a parsable score: a fallback) stay out of the gradient, and a
fallback is never a final answer: a re-run, or `mappa rescore --fallbacks-only`, asks the coach again about
those actions alone. The coach here is scripted: the tests are about what is asked and what trains, not a
model."""

from __future__ import annotations

import asyncio

import pytest

from mappa.coach.cache import AnswerCache
from mappa.coach.local import LocalCoach
from mappa.coach.openai import OpenAICoach
from mappa.coach.prompt import CoachRequest
from mappa.config import load_config
from mappa.core.types import Action, ActionScore, Experience
from mappa.stages import execute, output_parts, write_manifest
from mappa.stages.advantages import compute_experiences, unscored_by_agent
from mappa.stages.rescore import check_rescore, create_rescore
from mappa.stages.update import training_samples
from mappa.storage.frames import read_scores, scores_to_frame, trajectories_to_frame
from mappa.storage.run import Run
from mappa.storage.store import ArtifactStore

# --- out of the gradient -----------------------------------------------------------------------------


def test_an_unscored_action_gets_no_advantage_and_stays_out_of_its_agents_statistics():
    config = load_config("configs/mathchat-cpu.yaml", ["algo.beta=0"])  # no KL: returns are 0.1 x score
    rows = [("solver", 1, 2.0, "ok"), ("solver", 2, 5.0, "fallback"), ("solver", 1, 8.0, "retried")]
    rows.append(("executor", 1, 6.0, "ok"))
    actions = [
        Action("t", "p", agent, i, 0, "o", "p", "r", (1,), (2,) * length, (0.0,) * length)
        for i, (agent, length, _, _) in enumerate(rows)
    ]
    scores = [
        ActionScore(action.id, "t", action.agent, score, "why", "coach", status)
        for action, (_, _, score, status) in zip(actions, rows, strict=True)
    ]
    logprobs = [list(action.logprobs) for action in actions]
    experiences = compute_experiences(actions, scores, logprobs, logprobs, config.algo)
    advantages = [e.advantages for e in experiences]
    # the solver's statistics are over its scored actions, returns 0.2 and 0.8: mean 0.5, std 0.3
    assert advantages[0] == pytest.approx((-1.0,)) and advantages[2] == pytest.approx((1.0,))
    assert advantages[1] == (0.0, 0.0)  # exactly
    assert experiences[1].returns == pytest.approx((0.5, 0.5))  # recorded all the same
    assert unscored_by_agent(scores, ["solver", "executor", "verifier"]) == {
        "solver": 1,
        "executor": 0,
        "verifier": 0,
    }


def _experience(advantages: tuple[float, ...]) -> Experience:
    zeros = (0.0,) * len(advantages)
    return Experience(
        "t/0", "solver", (1,), (2,) * len(advantages), zeros, zeros, zeros, zeros, zeros, advantages, 5
    )


def test_rows_with_all_zero_advantages_do_not_reach_the_trainer():
    rows = [_experience((0.0, 0.0)), _experience((0.5, -0.1)), _experience((0.0, 0.3))]
    assert [s.advantages for s in training_samples(rows)] == [(0.5, -0.1), (0.0, 0.3)]
    assert training_samples(rows[:1]) == []  # an agent with every action unscored is not trained


# --- a fallback is not final: asked again, alone ------------------------------------------------------


def _requests(n: int) -> list[CoachRequest]:
    return [
        CoachRequest(f"t/{i}", "t", "solver", [{"role": "user", "content": f"judge {i}"}], False, "v1")
        for i in range(n)
    ]


class Chat:
    """A scripted coach model: `PROCESS_SCORE: i` for action i; nothing parsable for those in `garbage`, nor
    for those in `garbage_first` when first asked (their re-ask parses)."""

    def __init__(self, garbage: set[int] = frozenset(), garbage_first: set[int] = frozenset()) -> None:
        self.garbage, self.garbage_first = garbage, garbage_first
        self.asked: list[int] = []

    async def __call__(self, chats: list[list[dict]]) -> list[str]:
        answers = []
        for chat in chats:
            i = int(chat[0]["content"].split()[1])
            self.asked.append(i)
            bad = i in self.garbage or (i in self.garbage_first and len(chat) == 1)
            answers.append("no idea" if bad else f"PROCESS_SCORE: {i}")
        return answers


def _score(chat: Chat, cache: AnswerCache, n: int = 3) -> tuple[list[ActionScore], LocalCoach]:
    coach = LocalCoach(chat, "coach-model", fallback_score=5.0)
    coach.cache = cache
    return asyncio.run(coach.score(_requests(n))), coach


def test_a_cached_fallback_is_asked_again_and_nothing_else(tmp_path):
    cache = AnswerCache(ArtifactStore(str(tmp_path)), "run", "coach-model", {"temperature": 0.0})
    first, coach = _score(Chat(garbage={1}), cache)
    assert [s.parse_status for s in first] == ["ok", "fallback", "ok"] and coach.asked_again == 0
    still_bad = Chat(garbage={1})
    again, coach = _score(still_bad, cache)
    assert still_bad.asked == [1, 1]  # the question and its re-ask, for action 1 alone
    assert again[1].parse_status == "fallback" and coach.asked_again == 1
    fixed = Chat()
    last, coach = _score(fixed, cache)
    assert fixed.asked == [1] and [s.score for s in last] == [0.0, 1.0, 2.0] and coach.asked_again == 1
    quiet = Chat()
    assert [s.parse_status for s in _score(quiet, cache)[0]] == ["ok"] * 3 and quiet.asked == []


def test_a_retried_action_is_final_once_its_reask_parsed(tmp_path):
    cache = AnswerCache(ArtifactStore(str(tmp_path)), "run", "coach-model", {"temperature": 0.0})

    _score(Chat(garbage_first={2}), cache)
    chat = Chat(garbage={2})
    scores, coach = _score(chat, cache)
    assert chat.asked == [] and scores[2].parse_status == "retried" and coach.asked_again == 0


# --- mappa rescore --fallbacks-only --------------------------------------------------------------------


@pytest.fixture
def scored_run(tmp_path, trajectory, monkeypatch):
    """A run whose iteration 0 was rolled out (the `trajectory` fixture: 4 actions) and scored by an
    endpoint coach that gave action t1/1 no parsable score; the endpoint is scripted here."""
    overrides = [f"storage.root={tmp_path}", "coach.type=openai", "coach.scoring=generate"]
    overrides.append("coach.base_url=http://127.0.0.1:9/v1")
    run = Run.create(load_config("configs/mathchat-cpu.yaml", overrides), "r")
    run.store.write_parquet(trajectories_to_frame([trajectory], 0), *output_parts(run, 0, "rollout"))
    write_manifest(run, 0, "rollout", 4, {"total_s": 1.0}, success_rate=1.0)
    statuses = ["ok", "fallback", "retried", "rule"]
    scores = [
        ActionScore(f"t1/{i}", "t1", a.agent, 5.0 if s == "fallback" else 7.0, "why", "judge", s)
        for i, (a, s) in enumerate(zip(trajectory.actions, statuses))
    ]
    run.store.write_parquet(scores_to_frame(scores), *output_parts(run, 0, "score"))
    write_manifest(run, 0, "score", 4, {"total_s": 1.0})
    asked: list[str] = []

    async def endpoint(self, chats, on_answer=None):
        asked.extend(chat[1]["content"] for chat in chats)
        return ["Fine.\nPROCESS_SCORE: 9" for _ in chats]

    monkeypatch.setattr(OpenAICoach, "_chat_batch", endpoint)
    return run, scores, asked


def test_rescore_fallbacks_only_asks_about_the_unscored_action_alone(scored_run):
    run, scores, asked = scored_run
    create_rescore(run, "again", [], only_fallbacks=True)
    manifest = execute(run, 0, "rescore/again")
    assert len(asked) == 1 and "print(4)" in asked[0]  # t1/1, the executor's action
    again = read_scores(run, 0, "rescore/again")
    assert again[1].score == 9.0 and again[1].parse_status == "ok"
    assert [again[i] for i in (0, 2, 3)] == [scores[i] for i in (0, 2, 3)]  # copied as they were
    assert (
        manifest["fallbacks_only"]
        and manifest["fallbacks_rescored"] == 1
        and manifest["parse_status_by_agent"]
        == {
            "executor": {"ok": 1, "retried": 1},
            "solver": {"ok": 1},
            "verifier": {"rule": 1},
        }
    )
    assert execute(run, 0, "rescore/again")["skipped"] and len(asked) == 1
    with pytest.raises(ValueError, match="made with --fallbacks-only"):
        check_rescore(run, "again", [])
