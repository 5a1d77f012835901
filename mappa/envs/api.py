"""mappa's public API for env authors: everything an env plug-in imports from mappa, in one module.

An env (a multi-agent team and its task, docs/envs.md) imports mappa only from here: `from mappa.envs.api
import EnvSpec, EnvSection, run_code_seat, ...`. These names keep their meaning across mappa's internal
moves; a module not named here may change without notice. The built-in envs (`mappa.envs.mathchat`,
`mappa.envs.dsbench`) and the example plug-in under `examples/` import mappa through this module alone
(`tests/unit/test_public_api.py`).

The contract (`mappa.envs.spec`; each field in docs/architecture.md, "Envs are plug-ins")

    EnvSpec           what an env declares, once, as a module-level `SPEC`: `type` (its `env.type`),
                      `seats` (acting order), `roles` (seat -> system prompt), `run` (the rollout of a
                      batch), `load_problems` (a data source -> `Problem`s), `config` (its `EnvSection`);
                      optional `coach_reference`, `coach_template`, `rubric`, `result_columns`,
                      `seat_checks`, `stops` (seat -> strings that end a generation), `corruptions`,
                      `answers` (an `AnswerReader`), `reference_team` (problem -> seat -> a response)
    EnvSection        the base of the env's config section (a frozen pydantic model, unknown keys refused):
                      `type`, `train_data`, `eval_data` (what `load_problems` reads), `overlap` (`drop`,
                      `warn`, `error`: held-out problems that repeat training ones); the env adds its own
                      fields, each with a docstring, validated as `env.<field>`
    answer_reference  the default `coach_reference`: the problem's reference answer, for every action
    AnswerReader      how an action's final answer is read (`extract`: response -> answer or None) and
                      compared (`normalize`: text -> comparable form), for the coach-bias watch's answer
                      collapse; an env without one gets no answer shares
    Verdict           one rubric rule's verdict: (rule id, score 0-10, why)
    SeatRule          (action, its trajectory, whether ground truth may be used) -> `Verdict`: a seat's
                      rule in the rubric coach, one per seat in `rubric()`
    Corruption        a mistake the blame check plants in one seat's action: `name`, `seat` (None: any),
                      `rewrite(action, trajectory)` -> the corrupted response or None (does not apply),
                      `what` (one line for the report)
    corruptions_for   (declared, seat) -> the env's declared corruptions for that seat, then the generic
                      ones (empty, cut, echo) that every env gets: what the blame check plants
    get_env_spec      finds a spec by `env.type` as mappa does (an entry-point name or `package.module:NAME`):
                      a plug-in's tests check its registration with it

The records an env builds and reads (`mappa.core.types`; frozen dataclasses)

    Problem           `id`, `question` (what the agents read), `answer` (the reference, never shown to an
                      agent), `meta` (the env's own data: hidden tests, a task's files)
    Action            one generation of one seat: `trajectory_id`, `problem_id`, `agent` (the seat),
                      `index` (its place in the trajectory), `turn` (the seat's own turn), `observation`
                      (what it read), `prompt` (the chat-formatted text), `response`, token ids and sampling
                      `logprobs`, `finish_reason`, `tool_call` (the code it ran, None: none), `tool_result`,
                      `generation_s`. An env makes one with `Episode.record` (or `Reply.action`)
    ToolResult        what the sandbox answered: `stdout`, `stderr`, `exit_code` (None: killed by the
                      sandbox), `timed_out`, `duration_s`, `files` (left in its folder), `error` (why the
                      sandbox refused or killed it); `ok`: exit status 0, in time, no sandbox error
    Trajectory        the graded episode `run` returns: `id` (the one it was given), `problem`, `actions`,
                      `final_answer` (None: none), `correct` (the env's success), `outcome` (JSON-able
                      figures; a `kind` splits success and scores by kind)

The agent call (`mappa.agents.agent`)

    Agent             one seat's agent, handed to `run` by seat: `name`, `role` (its system prompt), `chat`
                      (the policy: an async function over chats, wherever the weights live), `params`;
                      `await agent.act(observations)` -> one `Reply` per observation, in order: one call per
                      seat and turn for the whole batch, so its engine generates in one batch
    Reply             `observation`, `prompt` (the exact text the model read), `generation`, `seconds`;
                      `reply.action(trajectory_id, problem_id, agent, index, turn, tool_call, tool_result)`
    Generation        a reply's text and tokens: `text`, `prompt_token_ids`, `token_ids`, `logprobs` (one
                      per token), `finish_reason` (`stop` or `length`)
    SamplingParams    `temperature`, `top_p`, `max_new_tokens`, `stop`, `seed`: what an `Agent` samples
                      with (mappa sets them from the config; an env's tests build agents with them)

The sandbox call (`mappa.sandbox`; what it protects against: `mappa.sandbox.runner`)

    SandboxLimits     per program: `timeout_s` (wall clock), `memory_mb` (address space), `cpu_s`,
                      `max_output_chars` (stdout and stderr each), `max_file_mb`, `isolation` (`auto`:
                      bubblewrap where it works; `bwrap`; `none`), `hidden_paths` (absolute paths the program
                      must not read: hidden labels). `run` receives the run's limits
    run_programs_async  `await run_programs_async([(code, workdir, limits), ...], concurrency)` -> results
                      in order; code None is not run (None); workdir None: a fresh folder, removed after
    run_python        one program, blocking (`run_python(code, workdir=None, limits=...)`): for tests and
                      graders outside a rollout

Code in replies, and what an agent reads of a result (`mappa.agents.tool_calls`, `mappa.envs.feedback`)

    extract_python_block   a reply's first fenced code block (```python, ```py or bare), stripped; None: none
    replace_python_block   (text, rewrite) -> the text with that block's code rewritten (corruptions)
    describe_result   a `ToolResult` as the next prompt shows it: status, trimmed stdout and stderr
    clip              (text, limit=1200) -> the text cut to `limit` characters, saying how much was cut

The rollout's building blocks (`mappa.envs.episode`, `mappa.envs.code_seat`)

    Episode           one trajectory while the batch is rolled out: `id`, `problem`, `actions`;
                      `record(agent, turn, reply, tool_call, tool_result)` appends the next action. Subclass
                      it for the state your prompts read
    run_code_seat     the code-writing seat: a program written, run in the sandbox, its result shown, tried
                      again up to `max_turns` turns, for a whole batch (`seat`, `agent`, `episodes`,
                      `observe(episode, last attempt or None)`, `max_turns`, `limits`, `concurrency`,
                      `done`, `program`, `workdir`); returns each episode's last `Attempt`
    Attempt           one turn of that seat: `code` (None: no block), `result` (None: nothing ran); `ran_ok`
"""

from mappa.agents.agent import Agent, Reply
from mappa.agents.tool_calls import extract_python_block, replace_python_block
from mappa.core.types import Action, Problem, ToolResult, Trajectory
from mappa.envs.code_seat import Attempt, run_code_seat
from mappa.envs.corruption import Corruption, corruptions_for
from mappa.envs.episode import Episode
from mappa.envs.feedback import clip, describe_result
from mappa.envs.registry import get_env_spec
from mappa.envs.spec import AnswerReader, EnvSection, EnvSpec, SeatRule, Verdict, answer_reference
from mappa.inference.engine import Generation, SamplingParams
from mappa.sandbox import SandboxLimits, run_programs_async, run_python

__all__ = [
    "Action",
    "Agent",
    "AnswerReader",
    "Attempt",
    "Corruption",
    "EnvSection",
    "EnvSpec",
    "Episode",
    "Generation",
    "Problem",
    "Reply",
    "SamplingParams",
    "SandboxLimits",
    "SeatRule",
    "ToolResult",
    "Trajectory",
    "Verdict",
    "answer_reference",
    "clip",
    "corruptions_for",
    "describe_result",
    "extract_python_block",
    "get_env_spec",
    "replace_python_block",
    "run_code_seat",
    "run_programs_async",
    "run_python",
]
