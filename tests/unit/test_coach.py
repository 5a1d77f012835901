"""The coach without a network: prompt rendering, score parsing, re-ask / fallback, rubric rules, building.

The LLM here is a scripted fake `chat_fn`: these tests are about the parsing and retry logic around the
model, not the model. The OpenAI backend over real HTTP is in test_coach_openai.py.
"""

from __future__ import annotations

import asyncio

import pytest

from mappa.coach.base import REASK_MESSAGE
from mappa.coach.build import build_coach
from mappa.coach.local import LocalCoach
from mappa.coach.parse import parse_score
from mappa.coach.prompt import CoachRequest, build_requests, load_template, parse_template, trim
from mappa.coach.rubric import RubricCoach
from mappa.coach.score import score_trajectories
from mappa.coach.score_agreement import coach_bias_report
from mappa.config import CoachConfig
from mappa.core.types import Action, ActionScore, Problem, ToolResult, Trajectory
from mappa.envs.dsbench import SPEC as DSBENCH
from mappa.envs.mathchat import SPEC as MATHCHAT

ROLES = {
    "solver": "Problem Solver: reasons step by step.",
    "executor": "Code Executor: writes one python block that runs in a sandbox.",
    "verifier": "Verifier: states the final answer in \\boxed{}.",
}


def _action(agent: str, index: int, response: str, tid: str = "t1", **fields: object) -> Action:
    base = {
        "trajectory_id": tid,
        "problem_id": "p1",
        "agent": agent,
        "index": index,
        "turn": 0,
        "observation": "input",
        "prompt": "input",
        "response": response,
        "prompt_token_ids": (1,),
        "response_token_ids": (),
        "logprobs": (),
    }
    return Action(**{**base, **fields})


def _ran(stdout: str, stderr: str = "", exit_code: int | None = 0, **fields: object) -> ToolResult:
    base = {"stdout": stdout, "stderr": stderr, "exit_code": exit_code, "timed_out": False, "duration_s": 0.1}
    return ToolResult(**{**base, **fields})


def _trajectory(
    solver: str = "3*4 = 12, and 2 + 12 = 14.",
    executor_out: str = "14\n",
    verifier: str = "The answer is \\boxed{14}.",
    final: str | None = "14",
    correct: bool = True,
    tid: str = "t1",
    executor_result: ToolResult | None = None,
) -> Trajectory:
    code = "print(2 + 3 * 4)"
    actions = (
        _action("solver", 0, solver, tid, observation="Problem: What is 2 + 3 * 4?"),
        _action(
            "executor",
            1,
            f"```python\n{code}\n```",
            tid,
            tool_call=code,
            tool_result=executor_result or _ran(executor_out),
        ),
        _action("verifier", 2, verifier, tid),
    )
    problem = Problem("p1", "What is 2 + 3 * 4?", "14")
    return Trajectory(id=tid, problem=problem, actions=actions, final_answer=final, correct=correct)


# --- prompt ------------------------------------------------------------------------------------------


def test_requests_render_role_other_roles_and_io():
    requests = build_requests(_trajectory(), "What is 2 + 3 * 4?", ROLES, "mathchat", use_ground_truth=False)
    assert [r.action_id for r in requests] == ["t1/0", "t1/1", "t1/2"]
    assert [r.agent for r in requests] == ["solver", "executor", "verifier"]
    user = requests[1].messages[1]["content"]
    assert requests[1].messages[0]["role"] == "system" and "upstream" in requests[1].messages[0]["content"]
    assert "AGENT TO JUDGE: executor" in user and ROLES["executor"] in user
    assert f"1. solver (upstream, acts before): {ROLES['solver']}" in user
    assert f"3. verifier (downstream, acts after): {ROLES['verifier']}" in user
    assert "What is 2 + 3 * 4?" in user and "print(2 + 3 * 4)" in user
    assert "exit status 0; timed out: no" in user and "stdout:\n14" in user and "stderr: (empty)" in user
    assert user.rstrip().endswith("PROCESS_SCORE: <integer 0-10>")
    assert "No tool call" in requests[0].messages[1]["content"]


def test_ground_truth_only_when_allowed():
    trajectory = _trajectory()
    trajectory = Trajectory(**{**trajectory.__dict__, "problem": Problem("p1", "What is 2 + 3 * 4?", "4817")})
    without = build_requests(trajectory, "task", ROLES, "mathchat", use_ground_truth=False)
    with_gt = build_requests(trajectory, "task", ROLES, "mathchat", use_ground_truth=True)
    assert all("4817" not in m["content"] for r in without for m in r.messages)
    assert all(not r.used_ground_truth for r in without)
    assert all("REFERENCE ANSWER (ground truth): 4817" in r.messages[1]["content"] for r in with_gt)
    assert all(r.used_ground_truth for r in with_gt)
    assert without[0].content_hash() != with_gt[0].content_hash()


def test_tool_output_trimming_is_stated():
    long_out = "".join(f"line {i}\n" for i in range(1000))  # 7890 characters
    trajectory = _trajectory(executor_result=_ran(long_out, stderr="Traceback: boom\n", exit_code=1))
    user = build_requests(trajectory, "task", ROLES, "mathchat", False, max_tool_chars=300)[1].messages[1][
        "content"
    ]
    stderr_len = len("Traceback: boom\n")
    out_budget = 300 - stderr_len
    head, tail = out_budget * 2 // 3, out_budget - out_budget * 2 // 3
    assert f"stdout (trimmed: first {head} and last {tail} of {len(long_out)} characters shown)" in user
    assert f"[... {len(long_out) - out_budget} characters cut ...]" in user
    assert "line 0\n" in user and "line 999" in user and "line 500\n" not in user
    assert "exit status 1" in user and "stderr:\nTraceback: boom" in user


def test_the_chain_template_shows_each_action_what_the_later_tools_answered():
    """`generic-chain`: the solver's prompt holds the executor's crash (the evidence that blames upstream),
    the executor's holds nothing later that ran a tool, the verifier's says it was last; no template
    without `${downstream}` changes, and the team's outcome is never shown."""
    crashed = ToolResult("", "FileNotFoundError: [Errno 2] No such file: 'X_train.pkl'", 1, False, 0.1, ())
    trajectory = _trajectory(executor_result=crashed, final=None, correct=False)
    chain = build_requests(trajectory, "task", ROLES, "generic-chain", use_ground_truth=False)
    solver, executor, verifier = (r.messages[1]["content"] for r in chain)
    later = solver.split("WHAT THE LATER AGENTS' TOOLS ANSWERED\n")[1]
    assert later.startswith("- executor (turn 1): exit status 1; timed out: no")
    assert "stderr:\nFileNotFoundError: [Errno 2] No such file: 'X_train.pkl'" in later
    assert "- verifier (turn 1): No tool call" in later
    assert "WHAT THE LATER AGENTS' TOOLS ANSWERED\n- verifier (turn 1): No tool call" in executor
    assert "FileNotFoundError" not in executor.split("WHAT THE LATER")[1]
    assert "WHAT THE LATER AGENTS' TOOLS ANSWERED\nNothing: this was the last action." in verifier
    succeeded = _trajectory(executor_result=crashed, final="14", correct=True)  # the same actions
    assert [r.messages for r in build_requests(succeeded, "task", ROLES, "generic-chain", False)] == [
        r.messages for r in chain
    ]
    plain = build_requests(trajectory, "task", ROLES, "generic", use_ground_truth=False)
    assert "LATER AGENTS" not in plain[0].messages[1]["content"]
    long = _trajectory(executor_result=ToolResult("9" * 5000, "", 0, False, 0.1, ()))
    shown = build_requests(long, "task", ROLES, "generic-chain", False, max_downstream_chars=600)
    assert "characters cut" in shown[0].messages[1]["content"] and len(shown[0].messages[1]["content"]) < 4000


def test_long_observation_and_response_are_cut_and_stated():
    text, note = trim("a" * 50 + "b" * 50, 30)
    assert text == "a" * 20 + "\n[... 70 characters cut ...]\n" + "b" * 10
    assert note == " (trimmed: first 20 and last 10 of 100 characters shown)"
    assert trim("short", 30) == ("short", "")
    trajectory = _trajectory(solver="x" * 5000)
    user = build_requests(trajectory, "task", ROLES, "mathchat", False, max_text_chars=600)[0].messages[1][
        "content"
    ]
    assert "ITS OUTPUT (trimmed: first 400 and last 200 of 5000 characters shown)" in user
    assert len(user) < 3000


def test_template_resolution_versions_and_errors(tmp_path):
    template = load_template("mathchat")
    assert template.name == "mathchat" and len(template.version) == 12
    assert load_template("generic").version != template.version
    available = (
        r"`nosuch` not found.*templates: dsbench, dsbench-reliability, generic, generic-chain, judge, "
    )
    with pytest.raises(ValueError, match=available):
        load_template("nosuch")
    custom = tmp_path / "mine.txt"
    custom.write_text("<<system>>\nJudge.\n<<user>>\n${agent} said ${response}\nPROCESS_SCORE: <0-10>\n")
    mine = load_template(str(custom))
    requests = build_requests(_trajectory(), "task", ROLES, mine, False)
    assert requests[2].messages[1]["content"].startswith("verifier said The answer is \\boxed{14}.")
    assert requests[0].template_version == mine.version
    with pytest.raises(ValueError, match=r"no \$\{reference\} placeholder"):
        build_requests(_trajectory(), "task", ROLES, mine, use_ground_truth=True)
    with pytest.raises(ValueError, match=r"unknown placeholders \['nope'\]"):
        parse_template("<<system>>\nx\n<<user>>\n${nope} PROCESS_SCORE:")
    with pytest.raises(ValueError, match="PROCESS_SCORE"):
        parse_template("<<system>>\nx\n<<user>>\n${agent}")


def test_agent_without_role_is_named():
    with pytest.raises(ValueError, match=r"agents \['verifier'\] have no role"):
        build_requests(
            _trajectory(), "task", {k: v for k, v in ROLES.items() if k != "verifier"}, "mathchat", False
        )


# --- parse -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Fine work.\nPROCESS_SCORE: 7", 7.0),
        ("process_score: 3", 3.0),
        ("**PROCESS_SCORE:** 7", 7.0),
        ("**PROCESS_SCORE: 8**", 8.0),
        ("PROCESS_SCORE: 7/10", 7.0),
        ("PROCESS_SCORE: 6 out of 10", 6.0),
        ("PROCESS_SCORE: 7.5", 7.5),
        ("PROCESS_SCORE = [9]", 9.0),
        ("PROCESS_SCORE: 2\nOn reflection...\nPROCESS_SCORE: 6.", 6.0),
        ("PROCESS_SCORE: 4\nformat was PROCESS_SCORE: <integer 0-10>", 4.0),
        ("PROCESS_SCORE: 0", 0.0),
        ("PROCESS_SCORE: 10", 10.0),
        ("PROCESS_SCORE: 11", None),
        ("PROCESS_SCORE: -1", None),
        ("PROCESS_SCORE: 7/100", None),
        ("I give it a 7.", None),
        ("PROCESS_SCORE: seven", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_score(text, expected):
    assert parse_score(text) == expected


# --- ask / re-ask / fallback -------------------------------------------------------------------------


def _request(i: int) -> CoachRequest:
    return CoachRequest(
        action_id=f"t1/{i}",
        trajectory_id="t1",
        agent="solver",
        messages=[{"role": "user", "content": f"judge action {i}"}],
        used_ground_truth=True,
    )


def test_reask_once_then_fallback():
    script = {
        "judge action 0": ["Good.\nPROCESS_SCORE: 8"],
        "judge action 1": ["Decent work overall.", "PROCESS_SCORE: 3"],
        "judge action 2": ["meh", "still no number"],
    }
    batches: list[list[list[dict]]] = []

    async def chat_fn(chats):
        batches.append(chats)
        return [script[chat[0]["content"]][(len(chat) - 1) // 2] for chat in chats]

    coach = LocalCoach(chat_fn, "fake-coach", fallback_score=4.0)
    scores = asyncio.run(coach.score([_request(0), _request(1), _request(2)]))
    assert [len(b) for b in batches] == [3, 2]
    assert batches[1][0][1:] == [
        {"role": "assistant", "content": "Decent work overall."},
        {"role": "user", "content": REASK_MESSAGE},
    ]
    assert [(s.score, s.parse_status) for s in scores] == [(8.0, "ok"), (3.0, "retried"), (4.0, "fallback")]
    assert scores[1].rationale.startswith("Decent work overall.")
    assert "meh" in scores[2].rationale and scores[2].rationale.startswith("unparsable")
    assert all(s.coach_model == "fake-coach" and s.used_ground_truth for s in scores)
    assert [s.action_id for s in scores] == ["t1/0", "t1/1", "t1/2"]


def test_wrong_answer_count_is_an_error():
    async def chat_fn(chats):
        return ["PROCESS_SCORE: 5"]

    with pytest.raises(RuntimeError, match="gave 1 answers for 2 chats"):
        asyncio.run(LocalCoach(chat_fn, "fake").score([_request(0), _request(1)]))


def test_long_rationale_is_trimmed():
    async def chat_fn(chats):
        return ["word " * 400 + "\nPROCESS_SCORE: 6"]

    (score,) = asyncio.run(LocalCoach(chat_fn, "fake", max_rationale_chars=100).score([_request(0)]))
    assert len(score.rationale) == 100 and score.rationale.endswith("...") and score.score == 6.0


# --- rubric ------------------------------------------------------------------------------------------


def _rubric(trajectory: Trajectory, use_ground_truth: bool) -> list[ActionScore]:
    requests = build_requests(trajectory, "task", ROLES, "mathchat", use_ground_truth)
    return asyncio.run(RubricCoach(use_ground_truth, MATHCHAT).score(requests))


def _rules(scores: list[ActionScore]) -> list[tuple[str, float]]:
    return [(s.rationale.split(":")[0].removeprefix("rule "), s.score) for s in scores]


def test_rubric_without_ground_truth_judges_actions_alone():
    good = _rubric(_trajectory(correct=False), use_ground_truth=False)  # outcome is not looked at
    assert _rules(good) == [("solver.reasoned", 6), ("executor.printed", 7), ("verifier.agrees", 8)]
    assert all(not s.used_ground_truth and s.coach_model == "rubric:mathchat" for s in good)
    disagree = _rubric(_trajectory(verifier="\\boxed{20}", final="20"), use_ground_truth=False)
    assert _rules(disagree)[2] == ("verifier.disagrees", 3)
    crashed = _rubric(_trajectory(executor_result=_ran("", "NameError", exit_code=1)), use_ground_truth=False)
    assert _rules(crashed)[1:] == [("executor.crashed", 2), ("verifier.unchecked", 5)]
    empty = _rubric(
        _trajectory(solver="  ", verifier="I think it is 14.", final=None), use_ground_truth=False
    )
    assert _rules(empty)[0] == ("solver.empty", 0) and _rules(empty)[2] == ("verifier.unboxed_agrees", 2)


@pytest.mark.parametrize(
    ("result", "rule"),
    [
        (_ran("", timed_out=True, exit_code=None), ("executor.timeout", 1)),
        (_ran("", error="memory limit exceeded", exit_code=None), ("executor.sandbox", 1)),
        (_ran("   \n"), ("executor.silent", 3)),
    ],
)
def test_rubric_executor_failures(result, rule):
    assert _rules(_rubric(_trajectory(executor_result=result), use_ground_truth=True))[1] == rule


def test_rubric_executor_without_code_block():
    trajectory = _trajectory()
    no_code = _action("executor", 1, "I would compute 2 + 12.")
    trajectory = Trajectory(
        **{**trajectory.__dict__, "actions": (trajectory.actions[0], no_code, trajectory.actions[2])}
    )
    assert _rules(_rubric(trajectory, use_ground_truth=False))[1] == ("executor.no_code", 1)


def test_rubric_with_ground_truth_follows_the_outcome():
    right = _rubric(_trajectory(), use_ground_truth=True)
    assert _rules(right) == [
        ("solver.gt_correct", 9),
        ("executor.gt_correct", 9),
        ("verifier.gt_correct", 10),
    ]
    assert all(s.used_ground_truth for s in right)
    # The solver said 20 and the code printed 20: both led to the wrong final answer.
    led = _rubric(
        _trajectory(
            solver="2 + 3 = 5, times 4 is 20.",
            executor_out="20\n",
            verifier="\\boxed{20}",
            final="20",
            correct=False,
        ),
        use_ground_truth=True,
    )
    assert _rules(led) == [
        ("solver.gt_led_wrong", 2),
        ("executor.gt_led_wrong", 2),
        ("verifier.gt_reported", 3),  # it reported what the program printed: the fault is upstream
    ]
    # The code printed the reference but the verifier boxed something else: upstream keeps its credit.
    upstream_right = _rubric(
        _trajectory(verifier="\\boxed{20}", final="20", correct=False), use_ground_truth=True
    )
    assert _rules(upstream_right) == [
        ("solver.gt_had_right", 7),
        ("executor.gt_had_right", 8),
        ("verifier.gt_wrong", 1),
    ]


def test_rubric_is_deterministic_and_needs_the_data():
    trajectory = _trajectory(correct=False, final="20", verifier="\\boxed{20}")
    assert _rubric(trajectory, True) == _rubric(trajectory, True)
    with pytest.raises(ValueError, match="needs the action and trajectory"):
        asyncio.run(RubricCoach(False, MATHCHAT).score([_request(0)]))
    odd = build_requests(trajectory, "task", {**ROLES, "critic": "extra"}, "mathchat", False)
    odd = [CoachRequest(**{**odd[0].__dict__, "agent": "critic"})]
    with pytest.raises(ValueError, match="no rule for agent `critic`"):
        asyncio.run(RubricCoach(False, MATHCHAT).score(odd))
    assert RubricCoach(False, DSBENCH).model_name == "rubric:dsbench"


# --- build, score, bias ------------------------------------------------------------------------------


def test_build_coach_by_type(monkeypatch):
    rubric = CoachConfig(type="rubric", use_ground_truth=True)
    assert isinstance(build_coach(rubric, env=MATHCHAT), RubricCoach)
    with pytest.raises(ValueError, match="pass build_coach the run's env spec"):
        build_coach(rubric)
    with pytest.raises(ValueError, match="needs a chat_fn"):
        build_coach(CoachConfig(type="local"))

    async def chat_fn(chats):
        return ["PROCESS_SCORE: 5"] * len(chats)

    local = build_coach(CoachConfig(type="local", model="tiny", fallback_score=2.0), chat_fn=chat_fn)
    assert isinstance(local, LocalCoach) and local.model_name == "tiny" and local.fallback_score == 2.0
    monkeypatch.delenv("MAPPA_TEST_COACH_KEY", raising=False)
    remote = CoachConfig(
        type="openai", base_url="https://api.example.com/v1", api_key_env="MAPPA_TEST_COACH_KEY"
    )
    with pytest.raises(ValueError, match=r"\$MAPPA_TEST_COACH_KEY"):
        build_coach(remote)
    loopback = CoachConfig(
        type="openai", base_url="http://127.0.0.1:8000/v1", api_key_env="MAPPA_TEST_COACH_KEY"
    )
    assert build_coach(loopback).model_name == "smollm2"
    monkeypatch.setenv("MAPPA_TEST_COACH_KEY", "sk-secret-123")
    assert "sk-secret-123" not in repr(build_coach(remote))


def test_score_trajectories_and_bias_report():
    trajectories = [
        _trajectory(tid="ok"),
        _trajectory(
            tid="bad",
            solver="2 + 3 = 5, times 4 is 20.",
            executor_out="20\n",
            verifier="\\boxed{20}",
            final="20",
            correct=False,
        ),
    ]
    config = CoachConfig(type="rubric", use_ground_truth=True)
    scores = asyncio.run(score_trajectories(build_coach(config, env=MATHCHAT), trajectories, ROLES, config))
    assert [s.action_id for s in scores] == ["ok/0", "ok/1", "ok/2", "bad/0", "bad/1", "bad/2"]
    report = coach_bias_report(scores, trajectories)
    assert report["mean_by_agent"] == {"executor": 5.5, "solver": 5.5, "verifier": 6.5}
    assert report["mean_correct"] == pytest.approx(28 / 3) and report["mean_incorrect"] == pytest.approx(
        7 / 3
    )
    assert report["gap"] == pytest.approx(21 / 3)
    assert report["mean_by_agent_and_outcome"]["verifier"] == {"correct": 10.0, "incorrect": 3.0}
    assert report["n_correct_trajectories"] == 1 and report["parse_status_counts"] == {"ok": 6}
    assert report["used_ground_truth_fraction"] == 1.0 and report["fallback_fraction"] == 0.0
    with pytest.raises(ValueError, match="trajectories not given"):
        coach_bias_report(scores, trajectories[:1])
    assert coach_bias_report([], [])["gap"] is None


def test_agreement_by_agent_is_pearson_per_agent():
    from mappa.coach.score_agreement import agreement_by_agent
    from mappa.core.types import ActionScore

    def scores(values):
        return [ActionScore(f"t/{i}", "t", agent, v, "", "m") for i, (agent, v) in enumerate(values)]

    llm = scores([("a", 1.0), ("a", 2.0), ("a", 3.0), ("b", 5.0), ("b", 5.0)])
    rubric = scores([("a", 3.0), ("a", 2.0), ("a", 1.0), ("b", 1.0), ("b", 9.0)])
    assert agreement_by_agent(llm, rubric) == {"a": -1.0, "b": None}


def test_outcome_coach_gives_every_action_the_trajectory_outcome():
    config = CoachConfig(type="outcome")
    coach = build_coach(config)
    won, lost = _trajectory(correct=True, tid="won"), _trajectory(correct=False, final="20", tid="lost")
    scores = asyncio.run(score_trajectories(coach, [won, lost], ROLES, config))
    assert [s.score for s in scores] == [10.0] * 3 + [0.0] * 3
    assert {s.coach_model for s in scores} == {"outcome"} and all(s.used_ground_truth for s in scores)
