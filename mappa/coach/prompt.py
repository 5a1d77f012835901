"""What the coach is asked about one action: prompt templates and `CoachRequest`s.

A request renders one action of one trajectory through a template file: the system's task, the agent's
role and the other agents' roles in pipeline order (marked upstream/downstream, so blame can go upstream:
a downstream "file not found" is the upstream agent's fault), what the agent saw, what it wrote, what the
tool answered and, only when `use_ground_truth` is set, the reference answer; a template may also show what
the later agents' tools answered (`${downstream}`: the evidence that a failure which surfaced downstream,
a modeler's "file not found", started here; not the team's outcome). Long texts are cut in the
middle (head and tail kept) and every cut is stated in the prompt, so the coach knows it did not see all.
Reasoning blocks (`<think>...</think>`) are removed from the agent's output by default
(`coach.strip_reasoning`), and the prompt says so: the coach judges what the agent did, not its scratchpad.

Template files (`mappa/coach/templates/<name>.txt`, or any path to a .txt file) are plain text with two
sections, `<<system>>` and `<<user>>`, and `${name}` placeholders (`string.Template`) from
`PLACEHOLDERS`. A template's `version` is a hash of its text, for caching coach answers. Two optional
marks serve the yes/no criteria coach (`coach.scoring: criteria`, `mappa.coach.criteria`): a `<<scoring>>`
line inside the user part ends the context (what the action was) and starts the scoring instructions, and
a last `<<criteria>>` section holds one `seat: question` line per criterion, so each env keeps its own
(`*: question` asks every seat: the seat-agnostic `judge` template).

Not covered here: calling a coach (`mappa.coach.base` and the backends), parsing its answer
(`mappa.coach.parse`), the per-env role texts (the env supplies them).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mappa.core.types import Action, ActionScore, ToolResult, Trajectory
from mappa.envs.spec import answer_reference

TEMPLATE_DIR = Path(__file__).parent / "templates"
PLACEHOLDERS = frozenset(
    {
        "task",
        "agents",
        "agent",
        "role",
        "observation",
        "observation_note",
        "response",
        "response_note",
        "tool",
        "reference",
        "downstream",
    }
)
SYSTEM_MARK, USER_MARK = "<<system>>", "<<user>>"
SCORING_MARK, CRITERIA_MARK = "<<scoring>>", "<<criteria>>"  # optional: see the module docstring
EVERY_SEAT = "*"  # a criteria line `*: question` asks it of every seat
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_CLOSE_THINK = re.compile(r"</think>", re.IGNORECASE)
# The ground-truth block the coach sees for one action (None: none for this action)
ReferenceFn = Callable[[Trajectory, Action], str | None]


@dataclass(frozen=True)
class PromptTemplate:
    """A loaded template: its name, system and user text, and `version` (hash of the file's text)."""

    name: str
    system: str
    user: str
    version: str
    context: str = ""  # the user part before `<<scoring>>` (all of it where there is no mark)
    criteria: tuple[tuple[str, str], ...] = ()  # (seat, yes/no question), in file order

    def criteria_for(self, seat: str) -> list[str]:
        """The seat's questions: its own lines and the `*: question` lines every seat is asked."""
        return [question for who, question in self.criteria if who in (seat, EVERY_SEAT)]

    @property
    def placeholders(self) -> set[str]:
        parts = (string.Template(self.system), string.Template(self.user))
        return {name for part in parts for name in part.get_identifiers()}


@dataclass(frozen=True)
class CoachRequest:
    """One coach call about one action. `action` and `trajectory` ride along (not compared, not serialised)
    for coaches that judge the data itself (the rubric); LLM backends read only `messages`."""

    action_id: str
    trajectory_id: str
    agent: str
    messages: list[dict[str, str]]
    used_ground_truth: bool
    template_version: str = ""
    action: Action | None = field(default=None, compare=False, repr=False)
    trajectory: Trajectory | None = field(default=None, compare=False, repr=False)
    context_messages: list[dict[str, str]] | None = field(default=None, compare=False, repr=False)
    """The system message and the user part before `<<scoring>>`: what a criteria coach asks about."""

    def verdict(
        self,
        coach_model: str,
        score: float,
        rationale: str,
        parse_status: str = "ok",
        *,
        used_ground_truth: bool | None = None,
        criteria: dict[str, float] | None = None,
    ) -> ActionScore:
        """The coach's verdict on this request's action (the one way a coach builds an `ActionScore`).
        `used_ground_truth` defaults to whether the request showed it."""
        return ActionScore(
            action_id=self.action_id,
            trajectory_id=self.trajectory_id,
            agent=self.agent,
            score=score,
            rationale=rationale,
            coach_model=coach_model,
            parse_status=parse_status,
            used_ground_truth=self.used_ground_truth if used_ground_truth is None else used_ground_truth,
            criteria=criteria,
        )

    def content_hash(self) -> str:
        """Hash of what the coach sees (messages and template version): a cache key with the coach model."""
        blob = json.dumps([self.template_version, self.messages], sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()


def available_templates() -> list[str]:
    return sorted(p.stem for p in TEMPLATE_DIR.glob("*.txt"))


def load_template(name_or_path: str) -> PromptTemplate:
    """Resolve a shipped template's name (`dsbench`), a path to a .txt file, or `package:file.txt` (a file
    inside an installed package, as an env plug-in ships its template); not found raises `ValueError`."""
    path = Path(name_or_path)
    package, colon, inside = name_or_path.partition(":")
    if colon and inside.endswith(".txt") and not path.is_file():
        path = _package_file(package, inside)
    elif path.suffix != ".txt":
        path = TEMPLATE_DIR / f"{name_or_path}.txt"
    if not path.is_file():
        raise ValueError(
            f"coach template `{name_or_path}` not found (looked for {path}); available templates: "
            f"{', '.join(available_templates())}, or give a path to a .txt file in coach.template"
        )
    text = path.read_text(encoding="utf-8")
    return parse_template(text, name=path.stem, source=str(path))


def _package_file(package: str, name: str) -> Path:
    try:
        return Path(str(importlib.resources.files(package) / name))
    except ModuleNotFoundError as exc:
        raise ValueError(f"coach template `{package}:{name}`: package {package} is not installed") from exc


def parse_template(text: str, name: str = "custom", source: str = "template") -> PromptTemplate:
    """Split a template's text into system, user (with its context) and criteria parts; check placeholders."""
    if (
        text.count(SYSTEM_MARK) != 1
        or text.count(USER_MARK) != 1
        or text.index(SYSTEM_MARK) > text.index(USER_MARK)
    ):
        raise ValueError(f"{source}: a coach template needs one `{SYSTEM_MARK}` line, then one `{USER_MARK}`")
    body, _, criteria_text = text.partition(CRITERIA_MARK)
    system, user = body.split(USER_MARK)
    context, _, _ = user.partition(SCORING_MARK)
    template = PromptTemplate(
        name=name,
        system=system.replace(SYSTEM_MARK, "").strip(),
        user=user.replace(SCORING_MARK, "").strip(),
        version=hashlib.sha256(text.encode()).hexdigest()[:12],
        context=context.strip(),
        criteria=_parse_criteria(criteria_text, source),
    )
    unknown = template.placeholders - PLACEHOLDERS
    if unknown:
        raise ValueError(f"{source}: unknown placeholders {sorted(unknown)}; allowed: {sorted(PLACEHOLDERS)}")
    if "PROCESS_SCORE" not in template.system + template.user:
        raise ValueError(f"{source}: the template must ask for a final `PROCESS_SCORE: <0-10>` line")
    return template


def _parse_criteria(text: str, source: str) -> tuple[tuple[str, str], ...]:
    """`seat: question` lines, `*` for every seat (blank lines and `#` comments skipped)."""
    criteria = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        seat, colon, question = line.partition(":")
        seat_name = seat.strip()
        if not colon or not (seat_name.isidentifier() or seat_name == EVERY_SEAT) or not question.strip():
            raise ValueError(f"{source}: criteria line {number} is not `seat: question`: {line!r}")
        criteria.append((seat.strip(), question.strip()))
    return tuple(criteria)


def trim(text: str, limit: int) -> tuple[str, str]:
    """Cut `text` to `limit` characters, keeping head and tail; returns (text, a note stating the cut)."""
    if len(text) <= limit:
        return text, ""
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - limit
    body = f"{text[:head]}\n[... {cut} characters cut ...]\n{text[len(text) - tail :] if tail else ''}"
    return body, f" (trimmed: first {head} and last {tail} of {len(text)} characters shown)"


def strip_reasoning(text: str) -> tuple[str, int]:
    """`text` without its reasoning: `<think>...</think>` blocks, an unclosed `<think>` up to the end, and
    everything up to a `</think>` with no opening tag (chat templates that open the block in the prompt);
    returns the rest and how many characters were removed."""
    closing = _CLOSE_THINK.search(text)
    opening = text.lower().find("<think>")
    kept = text
    if closing and (opening < 0 or opening > closing.start()):
        kept = kept[closing.end() :]
    kept = _THINK.sub("", kept)
    removed = len(text) - len(kept)
    return (kept.strip(), removed) if removed else (text, 0)


def render_tool(action: Action, max_chars: int) -> str:
    """The tool's answer: exit status, timeout, sandbox error, stdout and stderr within `max_chars` in all."""
    if action.tool_call is None:
        return "No tool call: this output contained no code to run."
    result = action.tool_result
    if result is None:
        return "A tool call was made but no result was recorded."
    status = f"exit status {result.exit_code}" if result.exit_code is not None else "no exit status"
    lines = [f"{status}; timed out: {'yes' if result.timed_out else 'no'}"]
    if result.error:
        lines.append(f"sandbox error: {result.error}")
    out_budget, err_budget = _split_budget(result, max_chars)
    for label, text, budget in (("stdout", result.stdout, out_budget), ("stderr", result.stderr, err_budget)):
        if not text.strip():
            lines.append(f"{label}: (empty)")
            continue
        shown, note = trim(text, budget)
        lines.append(f"{label}{note}:\n{shown.rstrip()}")
    if result.files:  # a shared workspace: what the program left there matters to downstream agents
        lines.append(f"files in its folder afterwards: {', '.join(result.files[:30])}")
    return "\n".join(lines)


def render_downstream(trajectory: Trajectory, action: Action, max_chars: int) -> str:
    """What each later action's tool answered (`render_tool`, an equal share of `max_chars` each), in order:
    what this action's output met downstream. Later responses and the outcome are not shown."""
    later = [a for a in trajectory.actions if a.index > action.index]
    if not later:
        return "Nothing: this was the last action."
    share = max(max_chars // len(later), 200)
    return "\n".join(f"- {a.agent} (turn {a.turn + 1}): {render_tool(a, share)}" for a in later)


def _split_budget(result: ToolResult, max_chars: int) -> tuple[int, int]:
    """Half each to stdout and stderr; what one does not need goes to the other."""
    half = max_chars // 2
    err = min(len(result.stderr), half)
    out = min(len(result.stdout), max_chars - err)
    err = min(len(result.stderr), max_chars - out)
    return max(out, 1), max(err, 1)


def render_agents(agent: str, roles: dict[str, str]) -> str:
    """All agents in pipeline order (the order of `roles`), marked upstream, this agent, or downstream."""
    order = list(roles)
    here = order.index(agent)
    lines = []
    for i, name in enumerate(order):
        if i == here:
            where = "this agent"
        else:
            where = "upstream, acts before" if i < here else "downstream, acts after"
        lines.append(f"{i + 1}. {name} ({where}): {roles[name]}")
    return "\n".join(lines)


def build_requests(
    trajectory: Trajectory,
    task: str,
    roles: dict[str, str],
    template: str | PromptTemplate,
    use_ground_truth: bool,
    max_tool_chars: int = 1500,
    max_text_chars: int = 1200,
    max_task_chars: int = 1000,
    reference_fn: ReferenceFn | None = None,
    strip_reasoning: bool = True,
    max_downstream_chars: int = 1500,
) -> list[CoachRequest]:
    """One `CoachRequest` per action of `trajectory`, rendered through `template`.

    `task` is the system's task for this trajectory (usually the problem statement); `roles` maps every
    agent name to its role, in pipeline order. Ground truth is shown only if `use_ground_truth`, and then
    as `reference_fn(trajectory, action)` says (default: the reference answer, for every action; an env may
    show it for some actions only, or show computed metrics instead). Observation and response are cut to
    `max_text_chars` each, stdout + stderr to `max_tool_chars`, the later tools' answers to
    `max_downstream_chars` in all; with `strip_reasoning` the response's reasoning blocks are removed first
    (`strip_reasoning`), and the prompt says so.
    """
    tpl = load_template(template) if isinstance(template, str) else template
    _check_inputs(trajectory, roles, tpl, use_ground_truth)
    reference_fn = reference_fn or answer_reference
    task_text, task_note = trim(task, max_task_chars)
    task_text += f"\n[task{task_note}]" if task_note else ""
    shows_downstream = "downstream" in tpl.placeholders
    requests = []
    for action in trajectory.actions:
        reference = reference_fn(trajectory, action) if use_ground_truth else None
        downstream = render_downstream(trajectory, action, max_downstream_chars) if shows_downstream else ""
        values = {
            "task": task_text,
            "reference": f"\n{reference}\n" if reference is not None else "",
            "downstream": downstream,
            **_action_values(action, roles, max_text_chars, max_tool_chars, strip_reasoning),
        }
        system = {"role": "system", "content": string.Template(tpl.system).substitute(values)}
        messages = [system, {"role": "user", "content": string.Template(tpl.user).substitute(values)}]
        context = [system, {"role": "user", "content": string.Template(tpl.context).substitute(values)}]
        requests.append(
            CoachRequest(
                action_id=action.id,
                trajectory_id=trajectory.id,
                agent=action.agent,
                messages=messages,
                used_ground_truth=reference is not None,
                template_version=tpl.version,
                action=action,
                trajectory=trajectory,
                context_messages=context if tpl.criteria else None,
            )
        )
    return requests


def _action_values(
    action: Action, roles: dict[str, str], max_text_chars: int, max_tool_chars: int, strip: bool = True
) -> dict:
    observation, observation_note = trim(action.observation, max_text_chars)
    response, removed = strip_reasoning(action.response) if strip else (action.response, 0)
    response, response_note = trim(response, max_text_chars)
    if removed:
        response_note += f" (its reasoning, {removed} characters in <think> blocks, was removed)"
    return {
        "agents": render_agents(action.agent, roles),
        "agent": action.agent,
        "role": roles[action.agent],
        "observation": observation,
        "observation_note": observation_note,
        "response": response,
        "response_note": response_note,
        "tool": render_tool(action, max_tool_chars),
    }


def _check_inputs(trajectory: Trajectory, roles: dict[str, str], tpl: PromptTemplate, use_gt: bool) -> None:
    if use_gt and "reference" not in tpl.placeholders:
        raise ValueError(
            f"coach template `{tpl.name}` has no ${{reference}} placeholder, but coach.use_ground_truth is "
            f"set; add the placeholder or set coach.use_ground_truth=false"
        )
    missing = sorted({a.agent for a in trajectory.actions} - set(roles))
    if missing:
        raise ValueError(f"trajectory {trajectory.id}: agents {missing} have no role; roles: {list(roles)}")
